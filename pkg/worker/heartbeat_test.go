package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/task"
)

// The heartbeat says what each slot runs, and the per-minute counters add
// up to the attempts the worker finished.
func TestHeartbeatSlotsAndThroughput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := make(chan struct{})
	b.reg.Register("ok", handler.Func(func(context.Context, *handler.Request) (string, error) { return "", nil }))
	b.reg.Register("bad", handler.Func(func(context.Context, *handler.Request) (string, error) { return "", errors.New("no") }))
	b.reg.Register("slow", handler.Func(func(ctx context.Context, _ *handler.Request) (string, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "", nil
	}))
	w := b.startWorker(t, nil)
	defer close(release)
	var ids []int64
	for range 3 {
		ids = append(ids, b.submit(t, producer.Submission{Code: "ok"}))
	}
	for range 2 {
		ids = append(ids, b.submit(t, producer.Submission{Code: "bad", MaxRetry: intp(0)}))
	}
	slow := b.submit(t, producer.Submission{Code: "slow"})
	b.dispatchUntil(t, "five finished, one running", func() bool {
		for _, id := range ids {
			if s := b.task(t, id).Status; s != task.Succeeded && s != task.Dead {
				return false
			}
		}
		return b.task(t, slow).Status == task.Running
	})

	var me broker.WorkerStatus
	require.Eventually(t, func() bool {
		ws, err := b.env.Broker.Workers(context.Background(), 60)
		require.NoError(t, err)
		require.Len(t, ws, 1)
		me = ws[0]
		return me.Alive() && me.Heartbeat.Processed == 5 && len(me.Heartbeat.Slots) == 1 && sum(me.Series, false) == 5
	}, 10*time.Second, 20*time.Millisecond)
	hb := me.Heartbeat
	require.Equal(t, w.ID(), me.ID)
	require.Equal(t, "test", hb.Node)
	require.Equal(t, []string{"q"}, hb.Queues)
	require.Equal(t, int64(2), hb.Failed)
	require.Equal(t, 4, hb.Capacity)
	require.Equal(t, 1, hb.Busy)
	s := hb.Slots[0]
	require.Equal(t, slow, s.TaskID)
	require.Equal(t, "slow", s.Code)
	require.Equal(t, 1, s.Attempt)
	require.False(t, s.Since.IsZero())
	require.Len(t, me.Series, 60)
	require.Equal(t, int64(2), sum(me.Series, true))
	require.WithinDuration(t, time.Now().Truncate(time.Minute), me.Series[59].At, time.Minute)
}

func sum(ms []broker.Minute, failed bool) int64 {
	var n int64
	for _, m := range ms {
		if failed {
			n += m.Failed
		} else {
			n += m.Processed
		}
	}
	return n
}
