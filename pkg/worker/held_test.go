package worker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/worker"
)

// lostReply takes for real, and the first time a take moved messages
// reports an error instead of them: its reply lost, as on a connection
// reset or a failover after the script ran.
type lostReply struct {
	worker.Broker
	lost atomic.Bool
}

func (l *lostReply) TakeMany(ctx context.Context, w string, reqs []broker.TakeRequest) ([]broker.Taken, error) {
	got, err := l.Broker.TakeMany(ctx, w, reqs)
	if err != nil || l.lost.Load() {
		return got, err
	}
	for _, t := range got {
		if len(t.Msgs) > 0 {
			l.lost.Store(true)
			return make([]broker.Taken, len(reqs)), errors.New("read tcp 127.0.0.1:6379: connection reset by peer")
		}
	}
	return got, nil
}

// A message moved by a take whose reply was lost waits in the worker's
// processing list, its task dispatched; recovery leaves a live worker's
// lists alone. The worker hands it back, and the task runs once.
func TestTakeWhoseReplyWasLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var runs atomic.Int64
	b.reg.Register("ok", handler.Func(func(context.Context, *handler.Request) (string, error) {
		runs.Add(1)
		return "", nil
	}))
	lb := &lostReply{Broker: b.env.Broker}
	w := worker.New(worker.Config{Node: "test", Queues: map[string]int{"q": 4}, Handlers: b.reg,
		HeartbeatInterval: 50 * time.Millisecond}, b.env.Store, lb)
	require.NoError(t, w.Start(context.Background()))
	defer w.Stop()

	id := b.submit(t, producer.Submission{Code: "ok"})
	b.dispatchUntil(t, "the task's success after the lost reply", func() bool { return b.task(t, id).Status == task.Succeeded })
	require.True(t, lb.lost.Load(), "the first take's reply was lost")
	require.Equal(t, 2, b.task(t, id).Attempt, "the lost take's attempt was handed back, the next ran")
	require.EqualValues(t, 1, runs.Load())
	require.Equal(t, []string{"succeeded"}, b.outcomes(t, id))
}
