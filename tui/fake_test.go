package tui

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/recovery"
	"github.com/taskd/taskd/pkg/stats"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/watchdog"
)

func TestMain(m *testing.M) {
	time.Local = time.UTC // golden files show times of day
	os.Exit(m.Run())
}

// now is the fixed clock of the tests.
var now = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// fakeSource serves fixed data; err, when set, fails every read.
type fakeSource struct {
	mu    sync.Mutex
	tails map[int64]*broker.TaskTail
	ov    *Overview
	tasks []*task.Task // newest first
	runs  map[int64][]*task.Run
	audit []store.AuditEntry
	err   error
	// taskErr, when set, fails the reads of tasks and the audit log
	// alone (the task center down, the overview read from Redis).
	taskErr error
	queries []TaskQuery
}

func (f *fakeSource) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeSource) Overview(context.Context) (*Overview, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ov, f.err
}

func (f *fakeSource) Tasks(_ context.Context, q TaskQuery) ([]*task.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, q)
	if err := cmp.Or(f.err, f.taskErr); err != nil {
		return nil, err
	}
	var out []*task.Task
	for _, t := range f.tasks {
		if matches(q, t) && (q.BeforeID == 0 || t.ID < q.BeforeID) && len(out) < q.Limit {
			out = append(out, t)
		}
	}
	return out, nil
}

func matches(q TaskQuery, t *task.Task) bool {
	return (q.Status == nil || *q.Status == t.Status) && (q.Queue == "" || q.Queue == t.QueueName()) &&
		(q.Code == "" || q.Code == t.Code) && (q.Search == "" ||
		strings.Contains(strings.Join([]string{t.Code, t.QueueName(), t.UniqueKey, t.LastResult}, "\n"), q.Search))
}

func (f *fakeSource) Count(_ context.Context, q TaskQuery) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, t := range f.tasks {
		if matches(q, t) {
			n++
		}
	}
	return n, f.err
}

func (f *fakeSource) Task(_ context.Context, id int64) (*task.Task, []*task.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := cmp.Or(f.err, f.taskErr); err != nil {
		return nil, nil, err
	}
	for _, t := range f.tasks {
		if t.ID == id {
			return t, f.runs[id], nil
		}
	}
	return nil, nil, task.NotFoundf("task %d not found", id)
}

func (f *fakeSource) Tail(_ context.Context, id int64) (*broker.TaskTail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tails[id], f.err
}

func (f *fakeSource) Audit(_ context.Context, before int64, limit int) ([]store.AuditEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := cmp.Or(f.err, f.taskErr); err != nil {
		return nil, err
	}
	return f.audit, nil
}

// fakeActions records the actions asked for.
type fakeActions struct {
	mu    sync.Mutex
	calls []string
	src   *fakeSource // resolves filter targets (IDs); nil: none match
	// partial: a task action changes only the first id, then fails with
	// this error (a kill whose worker Redis cannot reach).
	partial  error
	lenient  []bool          // each id target's Lenient, in order
	attempts []map[int64]int // and its Attempts
	// stall: a pause gets no answer (MySQL frozen) until its context ends.
	stall bool
	// unreached: the stall is the connection's (the primary hangs), as
	// the backend's actions report it.
	unreached bool
}

func (a *fakeActions) IDs(_ context.Context, t ops.Target) ([]int64, error) {
	if t.Filter == nil || a.src == nil {
		return t.IDs, nil
	}
	a.src.mu.Lock()
	defer a.src.mu.Unlock()
	q := TaskQuery{Status: t.Filter.Status, Queue: t.Filter.Queue, Code: t.Filter.Code, Search: t.Filter.Search}
	var ids []int64
	for _, tk := range a.src.tasks {
		if matches(q, tk) {
			ids = append(ids, tk.ID)
		}
	}
	return ids, nil
}

func (a *fakeActions) record(name string, arg any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, fmt.Sprint(name, " ", arg))
}

func (a *fakeActions) Calls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls...)
}

func (a *fakeActions) task(name string, t ops.Target) (ops.Change, error) {
	if t.Filter != nil {
		a.record(name, t.String())
		return ops.Change{Action: name, Requested: 7, Changed: 7}, nil
	}
	a.record(name, t.IDs)
	a.mu.Lock()
	a.lenient = append(a.lenient, t.Lenient)
	a.attempts = append(a.attempts, t.Attempts)
	partial := a.partial
	a.mu.Unlock()
	if partial != nil {
		return ops.Change{Action: name, Requested: len(t.IDs), Changed: 1, IDs: t.IDs[:1]}, partial
	}
	return ops.Change{Action: name, Requested: len(t.IDs), Changed: len(t.IDs), IDs: t.IDs}, nil
}

func (a *fakeActions) Retry(_ context.Context, t ops.Target) (ops.Change, error) {
	return a.task("retry", t)
}
func (a *fakeActions) Kill(_ context.Context, t ops.Target) (ops.Change, error) {
	return a.task("kill", t)
}
func (a *fakeActions) RunNow(_ context.Context, t ops.Target) (ops.Change, error) {
	return a.task("run", t)
}
func (a *fakeActions) Delete(_ context.Context, t ops.Target) (ops.Change, error) {
	return a.task("delete", t)
}
func (a *fakeActions) Enable(_ context.Context, t ops.Target) (ops.Change, error) {
	return a.task("enable", t)
}
func (a *fakeActions) Disable(_ context.Context, t ops.Target) (ops.Change, error) {
	return a.task("disable", t)
}

func (a *fakeActions) queue(name, q string, before, after ops.QueueState) (ops.Change, error) {
	if name != "reshard" {
		a.record(name, q)
	}
	c := ops.Change{Action: name, Requested: 1, IDs: []int64{}, Unchanged: []ops.Skipped{},
		Queue: &ops.QueueChange{Name: q, Before: before, After: after}}
	if before != after {
		c.Changed = 1
	}
	return c, nil
}
func (a *fakeActions) Pause(ctx context.Context, q string) (ops.Change, error) {
	if a.stall {
		<-ctx.Done()
		if a.unreached {
			return ops.Change{}, notSent{fmt.Errorf("MySQL: connect to mysql db:3306: %w", ctx.Err())}
		}
		return ops.Change{Action: "pause"}, fmt.Errorf("pause queue %s: %w", q, ctx.Err())
	}
	return a.queue("pause", q, ops.QueueState{Shards: 1}, ops.QueueState{Shards: 1, Paused: true})
}
func (a *fakeActions) Resume(_ context.Context, q string) (ops.Change, error) {
	return a.queue("resume", q, ops.QueueState{Shards: 1, Paused: true}, ops.QueueState{Shards: 1})
}
func (a *fakeActions) Reshard(_ context.Context, q string, n int) (ops.Change, error) {
	a.record(fmt.Sprintf("reshard %d", n), q)
	return a.queue("reshard", q, ops.QueueState{Shards: 1}, ops.QueueState{Shards: n})
}

func rate(r float64) *float64 { return &r }

// fixture is a small cluster: three queues (one without a consumer and
// lagging, one paused), three workers (one busy, one idle, one dead),
// tasks in every state, runs, alerts, events and audit rows.
func fixture() *fakeSource {
	series := func(base int64) []int64 {
		s := make([]int64, SeriesMinutes)
		for i := range s {
			s[i] = base + int64(i%7)*base/3
		}
		return s
	}
	ov := &Overview{
		Stats: &stats.Stats{At: now, Queues: []stats.Queue{
			{Name: "build_report", Pending: 120, Backlog: []int64{40}, Dead: 2, OldestDueSeconds: 240, Shards: 1},
			{Name: "reports_low", Pending: 3, Backlog: []int64{0}, Paused: true, Shards: 1, LiveWorkers: 1},
			{Name: "send_email", Pending: 12, Running: 3, Failed: 1, Dead: 1, Backlog: []int64{5, 4, 6, 5},
				ProcessedPerMin: 420, FailedPerMin: 3, SuccessRate10m: rate(0.993), Ended10m: 4200, OldestDueSeconds: 1.5, Shards: 4, LiveWorkers: 2},
		}, Workers: []stats.Worker{
			{ID: "node-a-w1", ProcessedPerMin: 250},
			{ID: "node-b-w1", ProcessedPerMin: 0},
		}},
		Series: map[string][]int64{"send_email": series(400), "build_report": series(6)},
		Workers: []broker.WorkerStatus{
			{ID: "node-a-w1", Node: "node-a", LastBeat: now.Add(-2 * time.Second), Heartbeat: &broker.Heartbeat{
				ID: "node-a-w1", Node: "node-a", Host: "web-1", PID: 4242, Queues: []string{"send_email"}, Busy: 2,
				Slots: []broker.Slot{
					{Queue: "send_email", TaskID: 1003, Code: "send_email", Attempt: 1, Since: now.Add(-75 * time.Second)},
					{Queue: "send_email", TaskID: 1004, Code: "send_email", Attempt: 2, Since: now.Add(-3 * time.Second)},
				}}, Series: []broker.Minute{{Processed: 240}, {Processed: 250}, {Processed: 100}}},
			{ID: "node-b-w1", Node: "node-b", LastBeat: now.Add(-4 * time.Second), Heartbeat: &broker.Heartbeat{
				ID: "node-b-w1", Node: "node-b", Host: "web-2", PID: 777, Queues: []string{"reports_low", "send_email"}},
				Series: make([]broker.Minute, 10)},
			{ID: "node-c-w1", Node: "node-c", LastBeat: now.Add(-95 * time.Second)},
		},
		NodesUp: 2,
		Events: []broker.Event{
			{At: now.Add(-5 * time.Minute), Kind: watchdog.KindAbandoned, Node: "node-a", WorkerID: "node-a-w1", Queue: "send_email",
				TaskID: 990, Code: "send_email", Detail: "handler ignored cancellation for 30s"},
			{At: now.Add(-7 * time.Minute), Kind: recovery.KindRedispatched, Node: "node-b", Queue: "send_email", TaskID: 985,
				Code: "send_email", Detail: "message lost: dispatched 2m ago, in no list"},
			{At: now.Add(-9 * time.Minute), Kind: watchdog.KindIdle, Node: "node-b", WorkerID: "node-b-w1", Queue: "reports_low",
				Detail: "backlog 3, free slot, nothing started for 2m"},
		},
		Alerts: []Alert{
			{Name: "no_consumer build_report", Queue: "build_report", Firing: true, Since: now.Add(-2 * time.Minute), Summary: "40 queued, no live worker"},
			{Name: "success_rate send_email", Queue: "send_email", Since: now.Add(-40 * time.Minute), Summary: "back to 99.3%"},
			{Name: "dead_tasks reports_low", Queue: "reports_low", Summary: "never fired"},
		},
	}
	f := &fakeSource{ov: ov, runs: map[int64][]*task.Run{}, tails: map[int64]*broker.TaskTail{
		1009: {ID: 1009, Attempt: 2, Worker: "node-a-w1", At: now.Add(-800 * time.Millisecond),
			Output: "building report for 2026-11\nreading 12000 orders\n  page 1 of 4\n  page 2 of 4\n"},
	}}
	statuses := []task.Status{task.Running, task.Running, task.Dead, task.Pending, task.Failed, task.Succeeded, task.Cancelled}
	for i := range 40 {
		id := int64(1010 - i)
		st := statuses[i%len(statuses)]
		code := []string{"send_email", "build_report"}[i%2]
		t := &task.Task{ID: id, Code: code, Status: st, Attempt: 1 + i%3, MaxRetry: 3, RetryCount: i % 3,
			Priority: 5, Timeout: 300, Payload: json.RawMessage(fmt.Sprintf(`{"to":"user%d@example.com","tags":["a","b"]}`, id)),
			PlanNextRun: now.Add(time.Duration(i-20) * time.Minute), CreatedAt: now.Add(-time.Hour), UpdatedAt: now.Add(-time.Duration(i) * time.Minute)}
		if st == task.Dead {
			t.LastResult = "exit status 1: SMTP 550 mailbox unavailable\nstack trace line"
			t.LastRunAt = &t.UpdatedAt
		}
		if st == task.Running {
			t.WorkerID = "node-a-w1"
			t.StartedAt = &t.UpdatedAt
		}
		f.tasks = append(f.tasks, t)
	}
	f.runs[1008] = []*task.Run{
		{TaskID: 1008, Attempt: 3, WorkerID: "node-a-w1", Node: "node-a", StartedAt: now.Add(-3 * time.Minute),
			FinishedAt: now.Add(-3*time.Minute + 1200*time.Millisecond), Outcome: task.OutcomeDead, Result: "exit status 1: SMTP 550 mailbox unavailable", DurationMS: 1200},
		{TaskID: 1008, Attempt: 2, WorkerID: "node-b-w1", Node: "node-b", StartedAt: now.Add(-5 * time.Minute),
			FinishedAt: now.Add(-5*time.Minute + 900*time.Millisecond), Outcome: task.OutcomeFailed, Result: "exit status 1: SMTP 451 try later", DurationMS: 900},
		{TaskID: 1008, Attempt: 1, WorkerID: "node-a-w1", Node: "node-a", StartedAt: now.Add(-6 * time.Minute),
			FinishedAt: now.Add(-6*time.Minute + 30*time.Second), Outcome: task.OutcomeTimeout, Result: "timeout after 30s", DurationMS: 30000},
	}
	f.audit = []store.AuditEntry{
		{ID: 4, CreatedAt: now.Add(-30 * time.Second), Actor: "alice", Origin: "ssh 10.0.0.7", Action: "cron timezone", Target: "Asia/Shanghai", Affected: 1},
		{ID: 3, CreatedAt: now.Add(-time.Minute), Actor: "alice", Origin: "ssh 10.0.0.7", Action: "retry", Target: "tasks 1008", Affected: 1},
		{ID: 2, CreatedAt: now.Add(-30 * time.Minute), Actor: "bob", Origin: "ops-1", Action: "pause", Target: "queue reports_low", Affected: 1},
		{ID: 1, CreatedAt: now.Add(-2 * time.Hour), Actor: "bob", Origin: "ops-1", Action: "reshard", Target: "queue send_email", Affected: 1},
	}
	return f
}

// plain is the screen without escape sequences, trailing blanks trimmed.
func plain(s string) string {
	lines := strings.Split(ansi.Strip(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}
