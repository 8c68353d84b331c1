// Package bench runs the scenarios of `taskd bench` (pkg/benchmark) under
// go test, each in a test's private database and prefix, for benchstat:
//
//	go test -run NONE -bench . -benchtime 20000x ./bench/
//
// b.N is the number of tasks; the scenario's figures are reported as
// metrics.
package bench

import (
	"context"
	"testing"
	"time"

	"github.com/taskd/taskd/pkg/benchmark"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/testenv"
)

func env(b *testing.B) *benchmark.Env {
	t := testenv.New(b)
	cfg, err := config.Load(config.NewViper(), "")
	if err != nil {
		b.Fatal(err)
	}
	cfg.MySQL.DSN = t.DSN
	cfg.Redis.Addr = t.RedisAddr
	cfg.Redis.Prefix = t.Prefix
	e, err := benchmark.Borrow(context.Background(), cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := e.Close(); err != nil {
			b.Error(err)
		}
	})
	return e
}

func report(b *testing.B, f benchmark.Figures, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
	for k, v := range f {
		b.ReportMetric(v, k)
	}
}

// BenchmarkSubmitBatch: one client, batches of 1,000.
func BenchmarkSubmitBatch(b *testing.B) {
	e := env(b)
	b.ResetTimer()
	f, err := benchmark.SubmitBatch(context.Background(), e, b.N)
	report(b, f, err)
}

// BenchmarkSubmitSingle: 8 clients, one row per statement.
func BenchmarkSubmitSingle(b *testing.B) {
	e := env(b)
	b.ResetTimer()
	f, err := benchmark.SubmitSingle(context.Background(), e, b.N, 8)
	report(b, f, err)
}

// BenchmarkBurnDown: b.N due tasks, one node with 100 slots.
func BenchmarkBurnDown(b *testing.B) {
	e := env(b)
	b.ResetTimer()
	f, err := benchmark.BurnDown(context.Background(), e, b.N, 100)
	report(b, f, err)
}

// BenchmarkSteadyLatency: b.N tasks submitted at 1,000/s, one per call.
func BenchmarkSteadyLatency(b *testing.B) {
	e := env(b)
	b.ResetTimer()
	f, err := benchmark.Steady(context.Background(), e, 1000, time.Duration(b.N)*time.Millisecond)
	report(b, f, err)
}

// BenchmarkLateness: b.N tasks due within 10 s.
func BenchmarkLateness(b *testing.B) {
	e := env(b)
	b.ResetTimer()
	f, err := benchmark.Lateness(context.Background(), e, b.N, 10*time.Second)
	report(b, f, err)
}

// BenchmarkExec: b.N runs of /bin/true through the exec handler.
func BenchmarkExec(b *testing.B) {
	e := env(b)
	b.ResetTimer()
	f, err := benchmark.Exec(context.Background(), e, b.N, 32)
	report(b, f, err)
}

// BenchmarkPHPPool: PHP handlers (needs php): b.N no-op tasks on a pool of
// 8 processes, b.N/10 on a pool and b.N/100 on exec with a 50 ms boot, b.N
// on a pool recycled every 100 tasks.
func BenchmarkPHPPool(b *testing.B) {
	e := env(b)
	b.ResetTimer()
	f, err := benchmark.Pool(context.Background(), e, benchmark.PoolOptions{
		Size: 8, NoopTasks: b.N, BootTasks: max(1, b.N/10), ExecTasks: max(1, b.N/100), RecycleTasks: b.N, MaxJobs: 100,
	})
	report(b, f, err)
}
