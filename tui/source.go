package tui

import (
	"context"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/stats"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// SeriesMinutes is the length of a queue's throughput sparkline.
const SeriesMinutes = 30

// Source is where the model reads everything it shows. The production
// one (Loader) reads MySQL and Redis; tests give fixed data.
type Source interface {
	// Overview is what the header and the queue, worker and event views
	// show.
	Overview(ctx context.Context) (*Overview, error)
	// Tasks returns one page of tasks, newest first.
	Tasks(ctx context.Context, q TaskQuery) ([]*task.Task, error)
	// Count counts the tasks matching q's filter (at most
	// store.TaskCountMax): what an action on all of them would ask for.
	Count(ctx context.Context, q TaskQuery) (int, error)
	// Task returns one task with its newest runs.
	Task(ctx context.Context, id int64) (*task.Task, []*task.Run, error)
	// Audit returns audit rows newest first, before id beforeID (0: newest).
	Audit(ctx context.Context, beforeID int64, limit int) ([]store.AuditEntry, error)
	// Tail returns the latest output the worker running task id
	// published (nil: none).
	Tail(ctx context.Context, id int64) (*broker.TaskTail, error)
}

// Actions are the operator actions: *ops.Ops, the same code as the taskd
// subcommands.
type Actions interface {
	Retry(ctx context.Context, t ops.Target) (ops.Change, error)
	Kill(ctx context.Context, t ops.Target) (ops.Change, error)
	RunNow(ctx context.Context, t ops.Target) (ops.Change, error)
	Delete(ctx context.Context, t ops.Target) (ops.Change, error)
	Enable(ctx context.Context, t ops.Target) (ops.Change, error)
	Disable(ctx context.Context, t ops.Target) (ops.Change, error)
	Pause(ctx context.Context, q string) (ops.Change, error)
	Resume(ctx context.Context, q string) (ops.Change, error)
	Reshard(ctx context.Context, q string, n int) (ops.Change, error)
	// IDs resolves a filter target to the ids of the tasks it matches now.
	IDs(ctx context.Context, t ops.Target) ([]int64, error)
}

var _ Actions = (*ops.Ops)(nil)

// TaskQuery selects a page of tasks.
type TaskQuery struct {
	Status *task.Status
	Queue  string
	Code   string
	// Search is a substring of the code, queue, unique key or last result.
	Search   string
	BeforeID int64 // keyset paging: tasks with smaller ids
	Limit    int
}

// filter is the query as the ops layer's filter: what an action on every
// task it matches applies to.
func (q TaskQuery) filter() ops.Filter {
	return ops.Filter{Status: q.Status, Queue: q.Queue, Code: q.Code, Search: q.Search}
}

// Overview is one snapshot of the cluster.
type Overview struct {
	// Stats are the per-queue and per-worker figures of `taskd stats`
	// (nil when the task center did not answer).
	Stats *stats.Stats
	// Series is each queue's ended attempts per minute, oldest first,
	// SeriesMinutes long; the last is the current minute.
	Series map[string][]int64
	// Workers are the registered workers, dead ones included, with their
	// per-minute counters.
	Workers []broker.WorkerStatus
	// NodesUp counts `taskd run` processes with a live heartbeat.
	NodesUp int
	Events  []broker.Event
	Alerts  []Alert
	// RedisErr is set when Redis did not answer: Stats and Series are
	// the task center's figures alone (each queue's backlog, per-minute
	// counts and live workers unknown), and Workers, NodesUp, Events and
	// Alerts, which only Redis holds, are empty. An operator opening
	// tasktop because Redis is down still sees what waits in MySQL.
	RedisErr error
	// MySQLErr is set when the task center did not answer: Stats holds
	// Redis's figures alone (each queue's counts of tasks by state, due
	// tasks and oldest wait unknown), and Series and Alerts, which the
	// task center holds, are empty. The workers' heartbeats say whether
	// they still run and how long their results wait to be written.
	MySQLErr error
}

// Alert is one alert rule's state.
type Alert struct {
	Name string
	// Queue is the queue the alert is about ("" when none).
	Queue   string
	Firing  bool
	Pending bool // its condition holds, not yet for long enough
	Since   time.Time
	Summary string
}
