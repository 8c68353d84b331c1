// Package task holds the vocabulary shared by every part of taskd: the task
// record of the task center, its states and types, the message carried
// through Redis, and the validation applied before anything is written.
package task

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/taskd/taskd/pkg/suggest"
)

// Status is the state of a task in the task center (column status).
type Status int8

// The states of DESIGN.md. The numbers are part of the contract: PHP
// producers and SQL written by users rely on them.
const (
	Pending    Status = 0 // waiting for plan_next_run_at
	Dispatched Status = 1 // claimed by a scheduler, pushed to Redis
	Running    Status = 2 // a worker holds it
	Succeeded  Status = 3 // one-off done
	Failed     Status = 4 // failed, retry due at plan_next_run_at
	Dead       Status = 5 // retries exhausted, waits for an operator
	Cancelled  Status = 6 // killed or cancelled by an operator
)

var statusNames = [...]string{"pending", "dispatched", "running", "succeeded", "failed", "dead", "cancelled"}

func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "unknown"
}

// Ended reports whether a task in s has ended: succeeded, dead or
// cancelled (an operator may still retry it).
func (s Status) Ended() bool { return s == Succeeded || s == Dead || s == Cancelled }

// Waiting reports whether a task in s waits for its due time
// (plan_next_run_at) to be claimed: pending, or failed and waiting for
// its retry. Only such a task has a next run to show.
func (s Status) Waiting() bool { return s == Pending || s == Failed }

// ParseStatus accepts a status name or its number, and "canceled", the
// American spelling (Go's own context.Canceled), for cancelled.
func ParseStatus(s string) (Status, error) {
	for i, n := range statusNames {
		if n == s || string(rune('0'+i)) == s {
			return Status(i), nil
		}
	}
	if s == "canceled" {
		return Cancelled, nil
	}
	if s == "disabled" {
		// What listings show for a disabled periodic task; its status is cancelled.
		return 0, Invalidf("disabled is not a status: a disabled periodic task is cancelled (--status cancelled, or taskd cron list)")
	}
	return 0, Invalidf("unknown status %q%s (want one of pending, dispatched, running, succeeded, failed, dead, cancelled)",
		s, suggest.DidYouMean(s, statusNames[:]))
}

// MarshalJSON writes the status by name so that scripts read "dead", not 5.
func (s Status) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON accepts a name or a number.
func (s *Status) UnmarshalJSON(b []byte) error {
	i, err := unmarshalEnum(b, statusNames[:])
	*s = Status(i)
	return err
}

// Type is the kind of task (column task_type).
type Type int8

const (
	OneOff   Type = 0 // runs once, as soon as it is due
	Periodic Type = 1 // cron: goes back to pending with its next time after each run
	Timed    Type = 2 // one-off at a given time
)

var typeNames = [...]string{"oneoff", "periodic", "timed"}

func (t Type) String() string {
	if t >= 0 && int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "unknown"
}

// MarshalJSON writes the type by name.
func (t Type) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

// UnmarshalJSON accepts a name or a number.
func (t *Type) UnmarshalJSON(b []byte) error {
	i, err := unmarshalEnum(b, typeNames[:])
	*t = Type(i)
	return err
}

func unmarshalEnum(b []byte, names []string) (int8, error) {
	var n int8
	if err := json.Unmarshal(b, &n); err == nil {
		if n < 0 || int(n) >= len(names) {
			return 0, fmt.Errorf("%d is out of range 0-%d", n, len(names)-1)
		}
		return n, nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return 0, fmt.Errorf("want a name or a number, got %s", b)
	}
	for i, name := range names {
		if name == s {
			return int8(i), nil
		}
	}
	return 0, fmt.Errorf("unknown name %q", s)
}

// Task is one row of task_center. Times are absolute instants: the store
// converts them from and to the database session's time zone.
type Task struct {
	ID          int64           `json:"id"`
	Code        string          `json:"task_code"`
	Type        Type            `json:"task_type"`
	Queue       string          `json:"queue"`
	Payload     json.RawMessage `json:"payload"`
	CronExpr    string          `json:"cron_expr,omitempty"`
	Timezone    string          `json:"timezone,omitempty"`
	Priority    int             `json:"priority"`
	Delay       int             `json:"delay"`
	Timeout     int             `json:"timeout"` // seconds
	MaxRetry    int             `json:"max_retry"`
	RetryCount  int             `json:"retry_count"`
	Status      Status          `json:"status"`
	UniqueKey   string          `json:"unique_key,omitempty"`
	Attempt     int             `json:"attempt"`
	CrashCount  int             `json:"crash_count"`
	WorkerID    string          `json:"worker_id,omitempty"`
	PlanNextRun time.Time       `json:"plan_next_run_at"`
	LastRunAt   *time.Time      `json:"last_run_at,omitempty"`
	Dispatched  *time.Time      `json:"dispatched_at,omitempty"`
	StartedAt   *time.Time      `json:"started_at,omitempty"`
	LastResult  string          `json:"last_result,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	// ParentID is the task whose success submitted this one (0: none).
	ParentID int64 `json:"parent_id,omitempty"`
	// Then are the tasks this one submits when it succeeds.
	Then []Child `json:"then,omitempty"`
	// BatchID is the batch the task is a member of (0: none).
	BatchID int64 `json:"batch_id,omitempty"`
	// Group is the task's group ("" none): per-group limits and serial
	// order apply to each group of a queue separately.
	Group string `json:"group,omitempty"`
	// ReleasedKey is the unique key this ended task gave up to a later
	// submit with --on-conflict until-done.
	ReleasedKey string `json:"released_key,omitempty"`
	// ScheduledAt is the time the occurrence of the task's next run was
	// planned for, while a retry or a recovery has moved PlanNextRun past
	// it (scheduled_at); nil: PlanNextRun is that time.
	ScheduledAt *time.Time `json:"scheduled_at,omitempty"`
}

// Disabled reports whether t is a periodic task an operator disabled (or
// killed while it waited): cancelled, it waits for `taskd enable`, which
// sets its next run from the time of the enable.
func (t *Task) Disabled() bool { return t.Type == Periodic && t.Status == Cancelled }

// StatusText is the status shown to people: "disabled" for a disabled
// periodic task, else the status. JSON keeps the status (cancelled).
func (t *Task) StatusText() string {
	if t.Disabled() {
		return "disabled"
	}
	return t.Status.String()
}

// QueueName is the queue the task travels through: its queue column, or its
// code when that is empty (the seed design had one queue per code).
func (t *Task) QueueName() string { return QueueOf(t.Queue, t.Code) }

// QueueOf resolves an empty queue to the task code.
func QueueOf(queue, code string) string {
	if queue != "" {
		return queue
	}
	return code
}

// Run is one attempt of a task (a row of task_run).
type Run struct {
	ID         int64     `json:"id"`
	TaskID     int64     `json:"task_id"`
	Attempt    int       `json:"attempt"`
	WorkerID   string    `json:"worker_id"`
	Node       string    `json:"node"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Outcome    Outcome   `json:"outcome"`
	Result     string    `json:"result,omitempty"`
	DurationMS int64     `json:"duration_ms"`
}

// Outcome is how an attempt ended (column task_run.outcome).
type Outcome string

const (
	OutcomeSucceeded   Outcome = "succeeded"
	OutcomeFailed      Outcome = "failed"      // handler error, retry scheduled
	OutcomeDead        Outcome = "dead"        // handler error, retries exhausted
	OutcomeTimeout     Outcome = "timeout"     // killed by its timeout, retry or dead follows
	OutcomeInterrupted Outcome = "interrupted" // handed back on shutdown, no retry counted
	OutcomeCancelled   Outcome = "cancelled"   // killed by an operator
	OutcomeCrashed     Outcome = "crashed"     // its worker died; found by recovery
)

// RunNode is the node of worker id as the runs record it ("" when no run
// of that worker names one).
func RunNode(id string, runs []*Run) string {
	for _, r := range runs {
		if id != "" && r.WorkerID == id && r.Node != "" {
			return r.Node
		}
	}
	return ""
}

// WithNode is a worker id with its node: "web-1-4242-7b2c (node web-1)";
// "-" without a worker.
func WithNode(worker, node string) string {
	if worker == "" {
		return "-"
	}
	if node == "" {
		return worker
	}
	return worker + " (node " + node + ")"
}

// SeenAttempts are the attempts an operator saw of some tasks (tasktop
// shows them): an action confirmed on them is about those runs, not about
// a run that started, or a retry that happened, since.
type SeenAttempts map[int64]int

// Current reports whether attempt is the attempt of task id that was
// seen (true when none was).
func (s SeenAttempts) Current(id int64, attempt int) bool {
	want, ok := s[id]
	return !ok || want == attempt
}
