package worker_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/metrics"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
	"github.com/taskd/taskd/pkg/worker"
)

// appliedStore is a task center that applies every running mark and
// result at once without a round trip, so that a benchmark of the worker
// measures the worker and Redis, not MySQL (the burn-down of `taskd bench`
// measures them together).
type appliedStore struct{ *store.Store }

func (appliedStore) TaskMarkRunning(_ context.Context, _ string, fences []store.Fence) ([]bool, error) {
	return allTrue(len(fences)), nil
}

func (appliedStore) TaskTransition(_ context.Context, ts []store.Transition) ([]bool, error) {
	return allTrue(len(ts)), nil
}

func allTrue(n int) []bool {
	ok := make([]bool, n)
	for i := range ok {
		ok[i] = true
	}
	return ok
}

// BenchmarkNoop runs b.N queued attempts of a no-op Go handler through
// one worker with 100 slots, as the burn-down's node runs them (metrics
// on, tracing off, logs at Info to nowhere), against real Redis and a task
// center that applies every write at once. cpu-µs/op is this process's
// CPU per attempt: the worker's share of taskd's CPU per task in the
// burn-down (fetch, decode, run, complete, ack), the scheduler's excluded;
// allocs/op counts every goroutine's allocations, the figure the machine's
// load does not move.
//
//	go test -run NONE -bench Noop -benchtime 50000x ./pkg/worker/
func BenchmarkNoop(b *testing.B) {
	env := testenv.New(b)
	ctx := context.Background()
	now := time.Now().UnixMilli()
	for from := 0; from < b.N; from += 1000 {
		msgs := make([]*task.Message, 0, 1000)
		for i := from; i < min(b.N, from+1000); i++ {
			msgs = append(msgs, &task.Message{ID: int64(i + 1), Attempt: 1, Code: "noop", Queue: "noop",
				Payload: []byte("null"), Timeout: 60, MaxRetry: 3, DueUnixMS: now, DispatchedUnixMS: now})
		}
		if failed, err := env.Broker.Push(ctx, msgs); err != nil || len(failed) > 0 {
			b.Fatalf("push: %v (%d failed)", err, len(failed))
		}
	}
	reg := handler.NewRegistry()
	reg.Register("noop", handler.Func(func(context.Context, *handler.Request) (string, error) { return "", nil }))
	m := metrics.New("bench", "bench")
	m.Prepare([]string{"noop"})
	w := worker.New(worker.Config{Node: "bench", Queues: map[string]int{"noop": 100}, Handlers: reg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: m}, appliedStore{env.Store}, env.Broker)
	b.ReportAllocs()
	b.ResetTimer()
	before := testenv.SelfCPU(b)
	if err := w.Start(ctx); err != nil {
		b.Fatal(err)
	}
	for w.Stats().Processed < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	w.Stop()
	b.StopTimer()
	b.ReportMetric(float64((testenv.SelfCPU(b)-before).Microseconds())/float64(b.N), "cpu-µs/op")
}
