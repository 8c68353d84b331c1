package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskd/taskd/pkg/benchmark"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// The hot-path statements of the task center, for benchstat:
//
//	go test -run NONE -bench . ./pkg/store/

func benchEnv(b *testing.B, due int) *testenv.Env {
	env := testenv.New(b)
	// Finished history and future tasks the scans must not pay for.
	env.Exec(b, `INSERT INTO task_center (task_code, payload, status, finished_at)
		SELECT 'x', '{}', 3, NOW(3) FROM seq_1_to_20000`)
	env.Exec(b, `INSERT INTO task_center (task_code, payload, plan_next_run_at)
		SELECT 'x', '{}', NOW(3) + INTERVAL 1 DAY FROM seq_1_to_20000`)
	if due > 0 {
		env.Exec(b, `INSERT INTO task_center (task_code, payload) SELECT 'x', '{}' FROM seq_1_to_`+itoa(due))
	}
	return env
}

func itoa(n int) string {
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}

// BenchmarkClaimNothingDue is the cost of a scheduler pass that finds
// nothing.
func BenchmarkClaimNothingDue(b *testing.B) {
	env := benchEnv(b, 0)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := env.Store.TaskClaimDue(ctx, 500); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNextDue is the scheduler's sleep-until-due query.
func BenchmarkNextDue(b *testing.B) {
	env := benchEnv(b, 0)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, _, err := env.Store.NextDue(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimBatch claims batches of 500 due tasks; ns/op is per batch.
func BenchmarkClaimBatch(b *testing.B) {
	env := benchEnv(b, 500*b.N)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		msgs, err := env.Store.TaskClaimDue(ctx, 500)
		if err != nil || len(msgs) != 500 {
			b.Fatal(len(msgs), err)
		}
	}
	b.ReportMetric(float64(500*b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkMarkRunningAndComplete moves batches of 100 claimed tasks to
// running, then to succeeded with a run row each; ns/op is per batch.
func BenchmarkMarkRunningAndComplete(b *testing.B) {
	env := benchEnv(b, 100*b.N)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		msgs, err := env.Store.TaskClaimDue(ctx, 100)
		if err != nil {
			b.Fatal(err)
		}
		fences := make([]store.Fence, len(msgs))
		ts := make([]store.Transition, len(msgs))
		for i, m := range msgs {
			fences[i] = store.Fence{ID: m.ID, Attempt: m.Attempt}
			ts[i] = store.Transition{ID: m.ID, Attempt: m.Attempt, From: 2, To: 3, SetResult: true, Result: "ok",
				Run: &store.RunRecord{Code: m.Code, Queue: m.Queue, Outcome: "succeeded"}}
		}
		b.StartTimer()
		if _, err := env.Store.TaskMarkRunning(ctx, "w", fences); err != nil {
			b.Fatal(err)
		}
		if _, err := env.Store.TaskTransition(ctx, ts); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(100*b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkQueueNamed is what `taskd pause` of a queue the configuration
// does not name pays to tell whether the task center knows it: the worst
// case, a queue nothing names, behind 100,000 waiting tasks of another.
func BenchmarkQueueNamed(b *testing.B) {
	env := benchEnv(b, 100000)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		named, err := env.Store.QueueNamed(ctx, "nosuch")
		if err != nil || named {
			b.Fatal(named, err)
		}
	}
}

// BenchmarkResultBatch writes the results of batches of 500 claimed tasks
// as the completer does (dispatched to succeeded, the start and duration
// of each, a run row each); ns/op is per batch and cpu-µs/task is this
// process's CPU per result, the server's excluded.
func BenchmarkResultBatch(b *testing.B) {
	const batch = 500
	env := benchEnv(b, batch*b.N)
	ctx := context.Background()
	batches := make([][]store.Transition, b.N)
	for k := range batches {
		msgs, err := env.Store.TaskClaimDue(ctx, batch)
		if err != nil || len(msgs) != batch {
			b.Fatal(len(msgs), err)
		}
		for i, m := range msgs {
			d := time.Duration(20+i%50) * time.Microsecond
			batches[k] = append(batches[k], store.Transition{ID: m.ID, Attempt: m.Attempt, From: task.Dispatched, To: task.Succeeded,
				StartedAt: time.Now().Add(-d),
				Run:       &store.RunRecord{Code: m.Code, Queue: m.Queue, WorkerID: "vm-1234-2a5636fe", Node: "vm", Outcome: task.OutcomeSucceeded, Duration: d}})
		}
	}
	server, onHost := benchmark.ServerCPU(ctx, env.Store.DB())
	b.ReportAllocs()
	b.ResetTimer()
	before := testenv.SelfCPU(b)
	var srv0 time.Duration
	if onHost {
		srv0 = server()
	}
	for _, ts := range batches {
		if _, err := env.Store.TaskTransition(ctx, ts); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	perTask := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(batch*b.N) }
	b.ReportMetric(perTask(testenv.SelfCPU(b)-before), "cpu-µs/task")
	if onHost {
		// The server's background work (purge, page flushes) of these
		// writes runs partly after them: enough batches (-benchtime 200x)
		// make that share small.
		b.ReportMetric(perTask(server()-srv0), "server-µs/task")
	}
}
