// Package bench holds end-to-end benchmarks of the hot paths on the real
// services: submit, claim, push, take, run, result write.
//
//	go test -run NONE -bench . -benchtime 20000x ./bench/
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/scheduler"
	"github.com/taskd/taskd/pkg/testenv"
	"github.com/taskd/taskd/pkg/worker"
)

func noop(context.Context, *handler.Request) (string, error) { return "", nil }

// quiet keeps the components' logs out of the benchmark output.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func subs(n int) []producer.Submission {
	s := make([]producer.Submission, n)
	for i := range s {
		s[i] = producer.Submission{Code: "noop", Payload: []byte(`{"n":1}`)}
	}
	return s
}

// BenchmarkSubmitBatch: one client, batches of 500.
func BenchmarkSubmitBatch(b *testing.B) {
	env := testenv.New(b)
	p := producer.New(env.Store, nil, producer.Options{})
	ctx := context.Background()
	batch := subs(500)
	b.ResetTimer()
	for done := 0; done < b.N; done += len(batch) {
		if _, err := p.SubmitBatch(ctx, batch[:min(len(batch), b.N-done)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkSubmitSingle: 8 clients, one row per statement.
func BenchmarkSubmitSingle(b *testing.B) {
	env := testenv.New(b)
	p := producer.New(env.Store, env.Broker, producer.Options{})
	ctx := context.Background()
	b.SetParallelism(8 / max(1, runtimeProcs()))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := p.Submit(ctx, producer.Submission{Code: "noop"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkBurnDown: b.N tasks already due in the task center; one
// scheduler and one worker (no-op Go handler, 100 slots) run them all.
// Reports throughput and the due-to-start latency percentiles.
func BenchmarkBurnDown(b *testing.B) {
	env := testenv.New(b)
	ctx := context.Background()
	p := producer.New(env.Store, nil, producer.Options{})
	for done := 0; done < b.N; done += 1000 {
		if _, err := p.SubmitBatch(ctx, subs(min(1000, b.N-done))); err != nil {
			b.Fatal(err)
		}
	}
	reg := handler.NewRegistry()
	reg.Register("noop", handler.Func(noop))
	w := worker.New(worker.Config{Node: "bench", Queues: map[string]int{"noop": 100}, Handlers: reg, Logger: quiet}, env.Store, env.Broker)
	s := scheduler.New(scheduler.Config{Node: "bench", BatchSize: 1000, PollInterval: 10 * time.Millisecond, Logger: quiet}, env.Store, env.Broker)
	b.ResetTimer()
	if err := w.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		b.Fatal(err)
	}
	waitDone(b, env, b.N)
	b.StopTimer()
	s.Stop()
	w.Stop()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkSteadyLatency submits tasks at a steady rate of 1,000/s, one
// per call as a web request would, with a scheduler and worker running,
// and reports submit-to-start latency percentiles (database clock: task
// created_at to started_at).
func BenchmarkSteadyLatency(b *testing.B) {
	env := testenv.New(b)
	ctx := context.Background()
	p := producer.New(env.Store, env.Broker, producer.Options{})
	reg := handler.NewRegistry()
	reg.Register("noop", handler.Func(noop))
	w := worker.New(worker.Config{Node: "bench", Queues: map[string]int{"noop": 100}, Handlers: reg, Logger: quiet}, env.Store, env.Broker)
	s := scheduler.New(scheduler.Config{Node: "bench", BatchSize: 1000, Logger: quiet}, env.Store, env.Broker)
	if err := w.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	defer s.Stop()
	b.ResetTimer()
	const rate = 1000
	tick := time.NewTicker(time.Second / rate)
	var wg sync.WaitGroup
	for i := 0; i < b.N; i++ {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := p.Submit(ctx, producer.Submission{Code: "noop"}); err != nil {
				b.Error(err)
			}
		}()
	}
	tick.Stop()
	wg.Wait()
	waitDone(b, env, b.N)
	b.StopTimer()
	lat := latencies(b, env, "created_at", "started_at")
	b.ReportMetric(pct(lat, 50), "p50-ms")
	b.ReportMetric(pct(lat, 99), "p99-ms")
	// Where the time goes: submit to dispatch, dispatch to start.
	disp := latencies(b, env, "created_at", "dispatched_at")
	b.ReportMetric(pct(disp, 50), "dispatch-p50-ms")
	b.ReportMetric(pct(disp, 99), "dispatch-p99-ms")
}

func runtimeProcs() int { return 2 }

func waitDone(b *testing.B, env *testenv.Env, n int) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var done int
		if err := env.Store.DB().QueryRow(`SELECT COUNT(*) FROM task_center WHERE status = 3`).Scan(&done); err != nil {
			b.Fatal(err)
		}
		if done >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d tasks done", done, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// latencies returns to - from for every finished task, in milliseconds.
func latencies(b *testing.B, env *testenv.Env, from, to string) []float64 {
	rows, err := env.Store.DB().Query(fmt.Sprintf(
		`SELECT TIMESTAMPDIFF(MICROSECOND, %s, %s) / 1000 FROM task_center WHERE status = 3`, from, to))
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var out []float64
	for rows.Next() {
		var ms float64
		if err := rows.Scan(&ms); err != nil {
			b.Fatal(err)
		}
		out = append(out, ms)
	}
	sort.Float64s(out)
	return out
}

func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}
