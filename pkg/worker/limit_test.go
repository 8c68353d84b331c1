package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/worker"
)

// limits is a one-shard layout with fixed limits.
type limits map[string]limit.Limit

func (limits) Shards(string) (int, int)     { return 1, 1 }
func (limits) Paused(string) bool           { return false }
func (limits) Changed() <-chan struct{}     { return nil }
func (l limits) Limit(q string) limit.Limit { return l[q] }

// countingBroker counts the takes that asked for a queue.
type countingBroker struct {
	*broker.Broker
	q     string
	takes atomic.Int64
}

func (c *countingBroker) TakeMany(ctx context.Context, w string, reqs []broker.TakeRequest) ([]broker.Taken, error) {
	for _, r := range reqs {
		if r.Queue == c.q {
			c.takes.Add(1)
		}
	}
	return c.Broker.TakeMany(ctx, w, reqs)
}

// A worker waiting for a queue's rate asks again when the next token is
// due, not before: a limited queue costs no polling, and the queue beside
// it runs meanwhile. Nothing of the limited queue is failed or retried.
func TestRateLimitedQueueDoesNotSpin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.env.Broker.SetLayout(limits{"slow": {Rate: limit.Rate{N: 1, Period: time.Minute}, Burst: 1}})
	var ran atomic.Int64
	b.reg.Register("work", handler.Func(func(context.Context, *handler.Request) (string, error) {
		ran.Add(1)
		return "", nil
	}))
	cb := &countingBroker{Broker: b.env.Broker, q: "slow"}
	w := worker.New(worker.Config{Node: "test", Queues: map[string]int{"slow": 4, "fast": 4}, Handlers: b.reg,
		HeartbeatInterval: 50 * time.Millisecond}, b.env.Store, cb)
	require.NoError(t, w.Start(context.Background()))
	defer w.Stop()
	for range 5 {
		b.prodSubmit(t, producer.Submission{Code: "work", Queue: "slow"})
	}
	b.dispatchUntil(t, "the slow queue's first task", func() bool { return ran.Load() == 1 })
	before := cb.takes.Load()
	for range 20 {
		b.prodSubmit(t, producer.Submission{Code: "work", Queue: "fast"})
	}
	b.dispatchUntil(t, "the fast queue's tasks", func() bool { return ran.Load() == 21 })
	time.Sleep(time.Second) // an absence: a second in which the waiting queue may not poll
	require.LessOrEqual(t, cb.takes.Load()-before, int64(3), "takes of the limited queue while it waits a minute for its next token")
	require.EqualValues(t, 21, ran.Load())
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status IN (4, 5) OR retry_count > 0`))
	require.Equal(t, 4, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE queue = 'slow' AND status = 1`), "they wait, dispatched")
}

func (b *testBundle) prodSubmit(t *testing.T, s producer.Submission) {
	t.Helper()
	_, err := b.prod.Submit(context.Background(), s)
	require.NoError(t, err)
}
