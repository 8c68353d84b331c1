package ops

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// Change is what an action did: every action of the CLI and tasktop
// reports one, and `taskd -o json` prints it as is, so scripts read one
// shape whatever the action.
type Change struct {
	// Action names it: retry, run, delete, enable, disable, kill, pause,
	// resume, reshard, submit, batch, cron add, cron update, cron remove.
	Action string `json:"action"`
	// Requested counts the tasks (or queues) the action was asked to
	// change, Changed those it changed.
	Requested int `json:"requested"`
	Changed   int `json:"changed"`
	// IDs are the tasks it changed or created.
	IDs []int64 `json:"ids"`
	// Unchanged are the requested tasks it did not change, each with why.
	Unchanged []Skipped `json:"unchanged"`
	// Queue is the queue a pause, resume or reshard acted on.
	Queue *QueueChange `json:"queue,omitempty"`
	// NextRun is when a submitted or periodic task runs next.
	NextRun *time.Time `json:"next_run,omitempty"`
	// Dispatched says of a submit whether it pushed the task to its queue
	// itself (false: a scheduler dispatches it).
	Dispatched *bool `json:"dispatched,omitempty"`
	// BatchID is the batch a batch submission created (IDs are its
	// members).
	BatchID int64 `json:"batch_id,omitempty"`
	// Warning is what the action could not do beside its change (a kill
	// whose notice to the workers failed).
	Warning string `json:"warning,omitempty"`
}

// Skipped is a requested task an action left alone, and why.
type Skipped struct {
	ID int64 `json:"id"`
	// Status is the task's status ("" when it is gone).
	Status string `json:"status,omitempty"`
	Reason string `json:"reason"`
}

// QueueChange is a queue's state before and after an action.
type QueueChange struct {
	Name   string     `json:"name"`
	Before QueueState `json:"before"`
	After  QueueState `json:"after"`
}

// QueueState is what an operator sets on a queue.
type QueueState struct {
	Paused bool `json:"paused"`
	// Shards new messages are spread over; Span the shards workers consume
	// (more than Shards until a reshard down has drained the retired ones).
	Shards int `json:"shards"`
	Span   int `json:"span"`
	// Limit is the queue's flow control; LimitSource says who set it:
	// "config", "operator" (taskd limit) or "" (none).
	Limit       limit.Limit `json:"limit"`
	LimitSource string      `json:"limit_source,omitempty"`
}

func queueState(q store.Queue) QueueState {
	return QueueState{Paused: q.Paused, Shards: q.Shards, Span: q.Span, Limit: q.Limit, LimitSource: q.LimitSource}
}

// doneWords say what each task action did to a task, for its sentence;
// an action not named here "changed" them.
var doneWords = map[string]string{"retry": "retried", "run": "made due now", "delete": "deleted",
	"enable": "enabled", "disable": "disabled", "kill": "killed"}

// Sentence says in one line what c did, for the CLI and tasktop:
// "retry: 1 of 2 tasks retried (42); 43 not changed, succeeded: retry
// applies to dead, failed and cancelled tasks".
func (c Change) Sentence() string {
	if c.Queue != nil {
		return c.queueSentence()
	}
	s := fmt.Sprintf("%s: %d of %s %s", c.Action, c.Changed, Plural(c.Requested, "task"), cmp.Or(doneWords[c.Action], "changed"))
	if len(c.IDs) > 0 {
		// Smallest first: a filter's ids come a batch at a time, newest
		// batch first, and "99001, 99002, ... and 99990 more" read as if
		// the action had started in the middle.
		s += " (" + joinIDs(slices.Sorted(slices.Values(c.IDs)), 10) + ")"
	}
	// Group the unchanged by reason: a filter over thousands of tasks
	// yields a few reasons, not thousands.
	var reasons []string
	byReason := map[string][]int64{}
	for _, u := range c.Unchanged {
		why := u.Reason
		if u.Status != "" {
			why = u.Status + ": " + why
		}
		if byReason[why] == nil {
			reasons = append(reasons, why)
		}
		byReason[why] = append(byReason[why], u.ID)
	}
	for _, why := range reasons {
		s += fmt.Sprintf("; %s not changed, %s", joinIDs(byReason[why], 5), why)
	}
	if c.Warning != "" {
		s += "; warning: " + c.Warning
	}
	return s
}

func (c Change) queueSentence() string {
	q := c.Queue
	if c.Changed == 0 {
		return fmt.Sprintf("%s: queue %s unchanged (%s)", c.Action, q.Name, q.After)
	}
	var parts []string
	if q.Before.Paused != q.After.Paused {
		parts = append(parts, map[bool]string{true: "paused", false: "running"}[q.After.Paused])
	}
	if q.Before.Shards != q.After.Shards {
		parts = append(parts, fmt.Sprintf("shards %d -> %d", q.Before.Shards, q.After.Shards))
	}
	if q.Before.Span != q.After.Span && q.After.Span > q.After.Shards {
		parts = append(parts, fmt.Sprintf("%d retired shards drain", q.After.Span-q.After.Shards))
	}
	if q.Before.Limit != q.After.Limit {
		parts = append(parts, fmt.Sprintf("limit %s -> %s", q.Before.Limit, q.After.Limit))
	}
	return fmt.Sprintf("%s: queue %s %s", c.Action, q.Name, strings.Join(parts, ", "))
}

// String is the state in words: "paused, 4 shards".
func (s QueueState) String() string {
	state := "running"
	if s.Paused {
		state = "paused"
	}
	state += ", " + Plural(s.Shards, "shard")
	if !s.Limit.IsZero() {
		state += ", limit " + s.Limit.String()
	}
	return state
}

// Plural is n and noun, in the plural unless n is 1: "1 task", "2 tasks",
// "2 processes".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	for _, end := range []string{"s", "sh", "ch", "x"} {
		if strings.HasSuffix(noun, end) {
			return fmt.Sprintf("%d %ses", n, noun)
		}
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// joinIDs lists ids, at most n of them: "4, 5, 6 and 12 more".
func joinIDs(ids []int64, n int) string {
	var parts []string
	for i, id := range ids {
		if i == n {
			return strings.Join(parts, ", ") + fmt.Sprintf(" and %d more", len(ids)-n)
		}
		parts = append(parts, fmt.Sprint(id))
	}
	return strings.Join(parts, ", ")
}

// applies says which tasks each task action changes, so a task it left
// alone gets a reason.
var applies = map[string]struct {
	statuses []task.Status
	periodic bool // periodic tasks only
}{
	"retry":   {[]task.Status{task.Dead, task.Failed, task.Cancelled}, false},
	"run":     {[]task.Status{task.Pending, task.Failed}, false},
	"delete":  {[]task.Status{task.Pending, task.Failed, task.Dead, task.Cancelled}, false},
	"disable": {[]task.Status{task.Pending, task.Failed, task.Dead}, true},
	"enable":  {[]task.Status{task.Cancelled}, true},
	"kill":    {[]task.Status{task.Pending, task.Dispatched, task.Running, task.Failed}, false},
}

// reason says why action left a task in state st alone.
func reason(action string, st store.TaskState) string {
	a := applies[action]
	var names []string
	for _, s := range a.statuses {
		names = append(names, s.String())
	}
	list := strings.Join(names, ", ")
	if i := strings.LastIndex(list, ", "); i >= 0 {
		list = list[:i] + " and " + list[i+2:]
	}
	kind := "tasks"
	if a.periodic {
		if st.Type != task.Periodic {
			return fmt.Sprintf("not periodic; %s applies to periodic tasks only", action)
		}
		kind = "periodic tasks"
	}
	if action == "retry" && st.Type == task.Periodic && st.Status == task.Cancelled {
		return "disabled; retry leaves a disabled periodic task alone (taskd enable puts it back on its schedule)"
	}
	if action == "delete" && st.Type == task.Periodic && slices.Contains(a.statuses, st.Status) {
		return "periodic; a delete by filter keeps periodic tasks (taskd cron remove, or delete it by id)"
	}
	if slices.Contains(a.statuses, st.Status) {
		return "changed by someone else meanwhile"
	}
	if action == "enable" {
		return "not disabled; enable applies to disabled periodic tasks"
	}
	if action == "disable" && (st.Status == task.Running || st.Status == task.Dispatched) {
		// Between runs it waits, and then it can be disabled.
		return fmt.Sprintf("a run is under way; disable applies to %s %s: kill ends this run, then disable", list, kind)
	}
	return fmt.Sprintf("%s applies to %s %s", action, list, kind)
}

// newChange is the Change of a task action asked for requested that
// changed changed; the others get their reason from their state now.
func (o *Ops) newChange(ctx context.Context, action string, t Target, requested, changed []int64) (Change, error) {
	done := make(map[int64]bool, len(changed))
	for _, id := range changed {
		done[id] = true
	}
	c := Change{Action: action, Requested: len(requested), Changed: len(changed), IDs: nonNil(changed), Unchanged: []Skipped{}}
	var left []int64
	for _, id := range requested {
		if !done[id] {
			left = append(left, id)
		}
	}
	skipped, err := o.skipped(ctx, left, func(id int64, st store.TaskState) string {
		if !t.Attempts.Current(id, st.Attempt) {
			return fmt.Sprintf("attempt %d now, not the attempt %d shown: it ran or was retried meanwhile", st.Attempt, t.Attempts[id])
		}
		return reason(action, st)
	})
	c.Unchanged = append(c.Unchanged, skipped...)
	return c, err
}

// skipped reads the state of tasks ids now and says why each was left
// alone: why of its state, or that it is gone.
func (o *Ops) skipped(ctx context.Context, ids []int64, why func(id int64, st store.TaskState) string) ([]Skipped, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	states, err := o.store.TaskStates(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]Skipped, len(ids))
	for i, id := range ids {
		out[i] = Skipped{ID: id, Reason: "not found (deleted meanwhile)"}
		if st, ok := states[id]; ok {
			out[i] = Skipped{ID: id, Status: st.Status.String(), Reason: why(id, st)}
		}
	}
	return out, nil
}

// failed is the Change of an action that failed before changing anything.
func failed(action string) Change {
	return Change{Action: action, IDs: []int64{}, Unchanged: []Skipped{}}
}
