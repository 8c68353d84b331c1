package scheduler_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/scheduler"
)

// drain runs s until a round claims nothing.
func drain(t *testing.T, s *scheduler.Scheduler, b *testBundle) int {
	t.Helper()
	total := 0
	for range 100 {
		n, err := s.RunOnce(b.ctx)
		require.NoError(t, err)
		if n == 0 {
			return total
		}
		total += n
	}
	t.Fatal("the scheduler kept claiming")
	return 0
}

// Redis holds a bounded window of a queue: two batches while no worker
// consumes it, four messages per slot of its live consumers beyond that.
// The rest of the backlog stays pending in the task center, and is
// dispatched as workers take from the queue.
func TestWindowBoundsRedis(t *testing.T) {
	t.Parallel()
	s, b := setup(t, scheduler.Config{BatchSize: 50})
	submit(t, b, 1000)

	require.Equal(t, 100, drain(t, s, b))
	ql, err := b.env.Broker.QueueLen(b.ctx, "hello")
	require.NoError(t, err)
	require.EqualValues(t, 100, ql)
	require.Equal(t, 900, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 0`))

	// A worker with 60 slots on the queue: the window grows to 240, and
	// what it takes makes room.
	hb := &broker.Heartbeat{ID: "w1", Queues: []string{"hello"}, QueueSlots: map[string]int{"hello": 60}, Capacity: 60}
	require.NoError(t, b.env.Broker.Beat(b.ctx, hb, time.Minute))
	s2 := scheduler.New(scheduler.Config{BatchSize: 50, Logger: quiet}, b.env.Store, b.env.Broker)
	require.Equal(t, 140, drain(t, s2, b))
	taken, err := b.env.Broker.Take(b.ctx, "hello", "w1", 90, 0)
	require.NoError(t, err)
	require.Len(t, taken, 90)
	require.Equal(t, 90, drain(t, s2, b))
	ql, err = b.env.Broker.QueueLen(b.ctx, "hello")
	require.NoError(t, err)
	require.EqualValues(t, 240, ql)
	require.Equal(t, 1000-240-90, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 0`))
}

// A window also bounds the payloads a queue holds in Redis: at 100 KB
// each, a 1 MB window holds about ten messages, not two batches, and
// never fewer than one per slot of its consumers. Small payloads after
// large ones widen it again.
func TestWindowBoundsPayloadBytes(t *testing.T) {
	t.Parallel()
	s, b := setup(t, scheduler.Config{BatchSize: 50, WindowBytes: 1 << 20})
	big := make([]producer.Submission, 200)
	for i := range big {
		big[i] = producer.Submission{Code: "hello", Payload: []byte(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", 100_000)))}
	}
	_, err := b.producer.SubmitBatch(b.ctx, big)
	require.NoError(t, err)
	qlen := func() int64 {
		t.Helper()
		n, err := b.env.Broker.QueueLen(b.ctx, "hello")
		require.NoError(t, err)
		return n
	}

	// The first claim knows no sizes: it takes a batch; then the window
	// is 1 MB over 100 KB.
	require.Equal(t, 50, drain(t, s, b))
	require.EqualValues(t, 50, qlen())
	taken, err := b.env.Broker.Take(b.ctx, "hello", "w0", 45, 0)
	require.NoError(t, err)
	require.Len(t, taken, 45)
	require.Equal(t, 5, drain(t, s, b), "ten messages of 100 KB fill 1 MB")
	require.EqualValues(t, 10, qlen())

	// 30 slots on the queue: one message each, whatever their size.
	hb := &broker.Heartbeat{ID: "w1", Queues: []string{"hello"}, QueueSlots: map[string]int{"hello": 30}, Capacity: 30}
	require.NoError(t, b.env.Broker.Beat(b.ctx, hb, time.Minute))
	s2 := scheduler.New(scheduler.Config{BatchSize: 50, WindowBytes: 1 << 20, Logger: quiet}, b.env.Store, b.env.Broker)
	t.Cleanup(s2.Stop)
	require.Equal(t, 50, drain(t, s2, b), "a new scheduler knows no sizes either")
	taken, err = b.env.Broker.Take(b.ctx, "hello", "w1", 60, 0)
	require.NoError(t, err)
	require.Len(t, taken, 60)
	require.Equal(t, 30, drain(t, s2, b))
	require.EqualValues(t, 30, qlen())

	// Small payloads behind the large ones: the mean falls and the window
	// opens to its count, four per slot.
	submit(t, b, 2000)
	for range 30 {
		_, err = b.env.Broker.Take(b.ctx, "hello", "w1", 1000, 0)
		require.NoError(t, err)
		drain(t, s2, b)
		if qlen() == 120 {
			return
		}
		require.Less(t, qlen(), int64(120))
	}
	t.Fatalf("the window stayed at %d messages after the payloads got small", qlen())
}

// backlogAndOthers submits n tasks of code and queue hello, then five of
// code and queue other, due after them.
func backlogAndOthers(t *testing.T, b *testBundle, n int) {
	t.Helper()
	submit(t, b, n)
	subs := make([]producer.Submission, 5)
	for i := range subs {
		subs[i] = producer.Submission{Code: "other", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))}
	}
	_, err := b.producer.SubmitBatch(b.ctx, subs)
	require.NoError(t, err)
}

// A full queue whose backlog is due first does not hold back the tasks of
// other queues due after it.
func TestFullQueueDoesNotStarveOthers(t *testing.T) {
	t.Parallel()
	s, b := setup(t, scheduler.Config{BatchSize: 10, Window: 20})
	backlogAndOthers(t, b, 300)

	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := s.RunOnce(b.ctx)
		require.NoError(t, err)
		if b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'other' AND status = 1`) == 5 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the other queue's tasks were not dispatched")
	}
	ql, err := b.env.Broker.QueueLen(b.ctx, "hello")
	require.NoError(t, err)
	require.EqualValues(t, 20, ql)
}

// Nor does a full queue that workers drain between claims: each round it
// regains a little room and fills up again, and the tasks of other queues
// due behind its backlog are still found (the seed-style INSERT of one
// task behind a slow queue's 20,000 waited for the whole backlog).
func TestDrainedFullQueueDoesNotStarveOthers(t *testing.T) {
	t.Parallel()
	s, b := setup(t, scheduler.Config{BatchSize: 10, Window: 20})
	backlogAndOthers(t, b, 600)
	// Workers consume both queues.
	hb := &broker.Heartbeat{ID: "w1", Queues: []string{"hello", "other"}, QueueSlots: map[string]int{"hello": 2, "other": 2}, Capacity: 4}
	require.NoError(t, b.env.Broker.Beat(b.ctx, hb, time.Minute))

	for round := 0; ; round++ {
		_, err := s.RunOnce(b.ctx)
		require.NoError(t, err)
		if b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'other' AND status = 1`) == 5 {
			break
		}
		// Fewer rounds than the backlog takes to drain at this pace (the
		// walk reads 10 rows every other round).
		require.Less(t, round, 150, "the other queue's tasks were not dispatched")
		taken, err := b.env.Broker.Take(b.ctx, "hello", "w1", 3, 0)
		require.NoError(t, err)
		require.NotEmpty(t, taken)
	}
	require.Greater(t, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'hello' AND status = 0`), 100)
}

// A queue that filled its window is claimed for again once a quarter of
// it is free, or a moment after it was last seen full: a slow queue that
// frees a slot at a time gets its tasks in steps, not a claim (a read of
// the due rows and a transaction) per completion.
func TestFullQueueRefillsInSteps(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual(time.Now())
	s, b := setup(t, scheduler.Config{BatchSize: 10, Window: 20, Clock: clk})
	submit(t, b, 100)
	require.Equal(t, 20, drain(t, s, b))
	take := func(n int) {
		taken, err := b.env.Broker.Take(b.ctx, "hello", "w1", n, 0)
		require.NoError(t, err)
		require.Len(t, taken, n)
	}

	take(3)
	require.Equal(t, 0, drain(t, s, b), "3 free of 20: less than a quarter")
	take(2)
	require.Equal(t, 5, drain(t, s, b), "a quarter free: filled up again")
	take(1)
	require.Equal(t, 0, drain(t, s, b))
	clk.Advance(300 * time.Millisecond)
	require.Equal(t, 1, drain(t, s, b), "the wait is over")
}

// Once the walk passed every due row and the full queue has no room, the
// claims stop reading the due rows at each look (about a millisecond of
// the server's each, even when they find nothing) and read again after
// a short rest: a row INSERTed meanwhile for another queue waits that
// long.
func TestPassedWalkRests(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual(time.Now())
	s, b := setup(t, scheduler.Config{BatchSize: 10, Window: 20, Clock: clk})
	submit(t, b, 100)
	for range 12 { // fill the window, then walk past the other 80
		_, err := s.RunOnce(b.ctx)
		require.NoError(t, err)
		clk.Advance(300 * time.Millisecond)
	}
	_, err := s.RunOnce(b.ctx) // reads once more after the rest
	require.NoError(t, err)
	b.env.Exec(t, `INSERT INTO task_center (task_code, payload, plan_next_run_at) VALUES ('other', '{}', NOW(3))`)
	n, err := s.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "resting")
	clk.Advance(300 * time.Millisecond)
	n, err = s.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the rest is over")
}
