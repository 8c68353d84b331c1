// Package ops is the one implementation of operator actions, shared by the
// taskd subcommands and tasktop. Every action is safe under load (each
// change is a compare-and-set), is written to the audit log with who made
// it, and reports exactly what it changed.
package ops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/cronspec"
	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// Ops performs operator actions.
type Ops struct {
	store  *store.Store
	broker *broker.Broker
	actor  store.Actor
	// KillWait is how long Kill waits for the worker running a task to
	// cancel it before taking the task from it (a dead or hung worker).
	KillWait time.Duration
	// Configured returns a queue's configured shard count (0: none), in
	// force until the queue is resharded.
	Configured func(queue string) int
	// Timezone is the zone of periodic tasks that name none (cron.timezone).
	Timezone string
	// Changed, when set, is called after an action that changed something
	// (tasktop serve's shared loader then reads afresh).
	Changed func()
	// Known reports whether the configuration names a queue (a handler's
	// queue or a queues: entry); see QueueKnown.
	Known func(queue string) bool
	// Handled reports whether the configuration has a handler for a task
	// code; see CheckCode.
	Handled func(code string) bool
	// ConfiguredLimit returns a queue's configured limit, which Limit
	// with Reset restores.
	ConfiguredLimit func(queue string) limit.Limit
	// QueueNames and CodeNames are the queues and task codes the
	// configuration names: an unknown one's error suggests the nearest.
	QueueNames, CodeNames []string
}

// killWaitDefault is KillWait when no configuration raises it.
const killWaitDefault = 3 * time.Second

// New returns the operator actions, attributed to the current OS user and
// SSH client.
func New(s *store.Store, b *broker.Broker) *Ops {
	return &Ops{store: s, broker: b, actor: CurrentActor(), KillWait: killWaitDefault,
		Configured: func(string) int { return 0 }}
}

// CurrentActor identifies the operator: OS user, and the SSH client's
// address when there is one, else the host.
func CurrentActor() store.Actor {
	a := store.Actor{User: "unknown"}
	if u, err := user.Current(); err == nil {
		a.User = u.Username
	}
	if f := strings.Fields(os.Getenv("SSH_CONNECTION")); len(f) > 0 {
		a.Origin = "ssh " + f[0]
	} else if h, err := os.Hostname(); err == nil {
		a.Origin = h
	}
	return a
}

// As returns the same actions attributed to a: one tasktop serve
// session's SSH key and client.
func (o *Ops) As(a store.Actor) *Ops {
	c := *o
	c.actor = a
	return &c
}

// Actor is who the actions are attributed to.
func (o *Ops) Actor() store.Actor { return o.actor }

// changed tells Changed that an action changed something.
func (o *Ops) changed(n int) {
	if n > 0 && o.Changed != nil {
		o.Changed()
	}
}

// Filter selects tasks for a bulk action.
type Filter struct {
	Status *task.Status
	Queue  string
	Code   string
	// Search is a substring of the code, queue, unique key or last result.
	Search string
	// Group is a group key (exact).
	Group string
	// ChangedSince and ChangedBefore bound the time the task's row last
	// changed (store.TaskListParams); zero: no bound.
	ChangedSince, ChangedBefore time.Time
}

// params is the store listing of f.
func (f Filter) params() store.TaskListParams {
	return store.TaskListParams{Status: f.Status, Queue: f.Queue, Code: f.Code, Search: f.Search, Group: f.Group,
		ChangedSince: f.ChangedSince, ChangedBefore: f.ChangedBefore}
}

// Target is what a task action applies to: the tasks IDs, or when Filter
// is set every task matching it (IDs, when also set, are the tasks the
// filter was resolved to, and the audit log names the filter).
type Target struct {
	IDs    []int64
	Filter *Filter
	// Lenient: ids that no longer exist are reported unchanged ("not
	// found") instead of failing the action. tasktop's selections may
	// hold tasks deleted since they were shown; a script's ids are
	// checked.
	Lenient bool
	// Attempts are the attempts the operator saw of some of IDs (tasktop
	// shows them): a task that ran again or was retried meanwhile is left
	// alone and reported so, instead of acting on a run nobody saw.
	Attempts task.SeenAttempts
}

// String names the target for the audit log.
func (t Target) String() string {
	if t.Filter == nil {
		return ""
	}
	var parts []string
	if t.Filter.Status != nil {
		parts = append(parts, "status="+t.Filter.Status.String())
	}
	if t.Filter.Queue != "" {
		parts = append(parts, "queue="+t.Filter.Queue)
	}
	if t.Filter.Code != "" {
		parts = append(parts, "code="+t.Filter.Code)
	}
	if t.Filter.Group != "" {
		parts = append(parts, "group="+strconv.Quote(t.Filter.Group))
	}
	if t.Filter.Search != "" {
		parts = append(parts, "search="+strconv.Quote(t.Filter.Search))
	}
	if !t.Filter.ChangedSince.IsZero() {
		parts = append(parts, "since="+t.Filter.ChangedSince.UTC().Format(time.RFC3339))
	}
	if !t.Filter.ChangedBefore.IsZero() {
		parts = append(parts, "until="+t.Filter.ChangedBefore.UTC().Format(time.RFC3339))
	}
	if len(parts) == 0 {
		parts = append(parts, "all")
	}
	return "filter " + strings.Join(parts, " ")
}

// IDs resolves a target to task ids.
func (o *Ops) IDs(ctx context.Context, t Target) ([]int64, error) {
	if t.Filter == nil || t.IDs != nil {
		return t.IDs, nil
	}
	return o.Select(ctx, *t.Filter)
}

// Count counts the tasks matching f, at most store.TaskCountMax: what a
// bulk action on f would be asked for.
func (o *Ops) Count(ctx context.Context, f Filter) (int, error) {
	return o.store.TaskCount(ctx, f.params())
}

// Select returns the ids of tasks matching f (all pages).
func (o *Ops) Select(ctx context.Context, f Filter) ([]int64, error) {
	var ids []int64
	params := f.params()
	p := &params
	// Ids only: a page of 10,000 whole rows could be gigabytes of payloads.
	p.Limit, p.Brief = 10000, true
	for {
		ts, err := o.store.TaskList(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			ids = append(ids, t.ID)
		}
		if len(ts) < p.Limit {
			return ids, nil
		}
		p.BeforeID = ts[len(ts)-1].ID
	}
}

func (o *Ops) action(name string, t Target) store.TaskAction {
	return store.TaskAction{Actor: o.actor, Action: name, Target: t.String(), Attempts: t.Attempts}
}

// taskAction resolves t and applies one store action to it.
func (o *Ops) taskAction(ctx context.Context, name string, t Target, wake bool,
	apply func(context.Context, store.TaskAction, []int64) ([]int64, error)) (Change, error) {
	ids, err := o.resolve(ctx, t)
	if err != nil {
		return failed(name), err
	}
	done, err := apply(ctx, o.action(name, t), ids)
	o.changed(len(done))
	if err != nil {
		c := failed(name)
		c.Requested, c.Changed, c.IDs = len(ids), len(done), nonNil(done)
		return c, err
	}
	if wake && len(done) > 0 && o.broker != nil {
		o.broker.Wake(ctx, 0) // best effort: the next poll finds them anyway
	}
	return o.newChange(ctx, name, t, ids, done)
}

// Retry moves dead, failed or cancelled tasks back to pending, due now,
// with their retry counts reset.
func (o *Ops) Retry(ctx context.Context, t Target) (Change, error) {
	return o.taskAction(ctx, "retry", t, true, o.store.TaskRetry)
}

// RunNow makes pending or failed tasks due now ("run once"); a periodic
// task then goes on with its schedule.
func (o *Ops) RunNow(ctx context.Context, t Target) (Change, error) {
	return o.taskAction(ctx, "run", t, true, o.store.TaskRunNow)
}

// Delete deletes tasks no worker holds: pending and failed ones (a
// backlog), dead and cancelled ones (given up on: dead ones are otherwise
// kept for good). Dispatched, running and succeeded tasks are left alone
// (kill ends a run; retention deletes what succeeded), and so are periodic
// tasks a filter matched: a cron definition is not part of a backlog
// (cron remove, or its id, deletes one).
//
// A cancelled task's message may still be queued (a kill that could not
// reach Redis, or a release before kills took them out): the delete takes
// it out, or it would stay counted in a queue no worker takes from.
func (o *Ops) Delete(ctx context.Context, t Target) (Change, error) {
	var warning string
	c, err := o.taskAction(ctx, "delete", t, false, func(ctx context.Context, a store.TaskAction, ids []int64) ([]int64, error) {
		if o.broker != nil {
			// First: a cancelled attempt's message is dead whatever the
			// delete then finds, and once the row is gone no kill finds it.
			states, err := o.store.TaskStates(ctx, ids)
			if err != nil {
				return nil, err
			}
			stale := map[string]map[int64]int{}
			for id, st := range states {
				if st.Status == task.Cancelled {
					addAttempt(stale, st.Queue, id, st.Attempt)
				}
			}
			warning = o.unqueue(ctx, stale)
		}
		return o.store.TaskDeleteUnheld(ctx, a, ids, t.Filter != nil)
	})
	c.Warning = cmp.Or(c.Warning, warning)
	return c, err
}

// Disable stops periodic tasks from running (they wait in cancelled until
// Enable). A periodic task that is running now is left alone: kill it, or
// disable it once it ended.
func (o *Ops) Disable(ctx context.Context, t Target) (Change, error) {
	return o.taskAction(ctx, "disable", t, false, o.store.TaskDisable)
}

// Enable puts disabled periodic tasks back on their schedules: each runs
// next at its first occurrence after now (by the database clock).
func (o *Ops) Enable(ctx context.Context, t Target) (Change, error) {
	return o.taskAction(ctx, "enable", t, true, func(ctx context.Context, a store.TaskAction, ids []int64) ([]int64, error) {
		now, err := o.store.Now(ctx)
		if err != nil {
			return nil, err
		}
		next := map[int64]time.Time{}
		for _, id := range ids {
			tk, err := o.store.TaskGet(ctx, id)
			if task.ErrorCode(err) == task.CodeNotFound {
				continue
			}
			if err != nil {
				return nil, err
			}
			if tk.Type != task.Periodic || tk.Status != task.Cancelled {
				continue
			}
			at, err := cronspec.NextRun(tk.CronExpr, cmp.Or(tk.Timezone, o.Timezone), now, now)
			if err != nil {
				return nil, fmt.Errorf("enable task %d: %w", id, err)
			}
			next[id] = at
		}
		return o.store.TaskEnable(ctx, a, ids, next)
	})
}

// Kill cancels tasks. A running task is cancelled wherever it runs (an
// exec handler's process group is terminated) and becomes cancelled; if its
// worker does not answer within KillWait, the task is taken from it with a
// fenced write, so a late result is rejected. Pending, dispatched and
// failed tasks are cancelled directly. One audit row records it all,
// written with the cancellation of the idle ones.
func (o *Ops) Kill(ctx context.Context, t Target) (Change, error) {
	ids, err := o.resolve(ctx, t)
	if err != nil {
		return failed("kill"), err
	}
	// One read of every state, then the whole row of the running ones
	// only: a filter can match a hundred thousand tasks.
	states, err := o.store.TaskStates(ctx, ids)
	if err != nil {
		return failed("kill"), err
	}
	var idle []int64
	running := map[int64]*task.Task{}
	dispatched := map[int64]store.TaskState{}
	// Messages left queued by kills before they were taken out: a kill
	// of a cancelled task changes nothing, and takes them out too.
	stale := map[string]map[int64]int{}
	for _, id := range ids {
		st, ok := states[id]
		if !ok || !t.Attempts.Current(id, st.Attempt) {
			continue
		}
		if st.Status == task.Cancelled {
			addAttempt(stale, st.Queue, id, st.Attempt)
		}
		if st.Status != task.Running {
			idle = append(idle, id)
			if st.Status == task.Dispatched {
				dispatched[id] = st
			}
			continue
		}
		tk, err := o.store.TaskGet(ctx, id)
		if task.ErrorCode(err) == task.CodeNotFound {
			continue
		}
		if err != nil {
			return failed("kill"), err
		}
		if tk.Status == task.Running && t.Attempts.Current(id, tk.Attempt) {
			running[id] = tk
		} else {
			idle = append(idle, id)
		}
	}
	var killed []int64
	var killErr error
	if len(running) > 0 {
		killed, killErr = o.killRunning(ctx, running)
	}
	a := o.action("kill", t)
	// The running tasks were cancelled through their workers: the audit
	// row counts them as requested, and running before.
	a.Also, a.Requested = killed, len(ids)
	if len(killed) > 0 {
		a.AlsoBefore = map[string]int{task.Running.String(): len(killed)}
	}
	if t.Filter == nil {
		a.Target = store.IDsTarget(ids) // idle is only part of them
	}
	done, err := o.store.TaskCancel(ctx, a, idle)
	for _, id := range done {
		if st, ok := dispatched[id]; ok {
			addAttempt(stale, st.Queue, id, st.Attempt)
		}
	}
	warning := o.killDispatched(ctx, done, dispatched)
	if w := o.unqueue(ctx, stale); w != "" {
		warning = cmp.Or(warning, w+"; the same kill, once Redis answers, takes them out")
	}
	o.changed(len(done) + len(killed))
	if err = cmp.Or(killErr, err); err != nil {
		c := failed("kill")
		c.Requested, c.Changed, c.IDs, c.Warning = len(ids), len(done), nonNil(done), warning
		return c, err
	}
	c, err := o.newChange(ctx, "kill", t, ids, done)
	c.Warning = warning
	return c, err
}

// killDispatched tells the workers about the cancelled tasks that were
// dispatched: their messages are queued (or held by a claim ahead), and a
// worker that takes one drops it instead of running it. The notice is
// kept in Redis for a day, for workers that start later or did not
// listen. It returns a warning for the operator when the notice could
// not be sent, or not kept ("" when it was, or when no cancelled task was
// dispatched): a worker that misses it runs the attempt once, and the
// fence rejects its result.
func (o *Ops) killDispatched(ctx context.Context, done []int64, dispatched map[int64]store.TaskState) string {
	var rs []broker.KillRequest
	var held []int64
	for _, id := range done {
		if st, ok := dispatched[id]; ok {
			rs = append(rs, broker.KillRequest{ID: id, Attempt: st.Attempt})
			held = append(held, id)
		}
	}
	if len(rs) == 0 {
		return ""
	}
	why := "no connection to Redis"
	if o.broker != nil {
		err := o.broker.Kill(ctx, rs...)
		if err == nil {
			return ""
		}
		if errors.Is(err, broker.ErrKillNotKept) {
			return fmt.Sprintf("workers running now were told of %s killed while dispatched (%s), but it was not kept for workers that start later (%v): such a worker that takes one runs it once, and its result is rejected",
				Plural(len(held), "task"), joinIDs(held, 10), err)
		}
		why = err.Error()
	}
	return fmt.Sprintf("workers were not told of %s killed while dispatched (%s): %s; a worker that takes one runs it once, and its result is rejected",
		Plural(len(held), "task"), joinIDs(held, 10), why)
}

// unqueue takes the messages of cancelled attempts (by queue, task id ->
// attempt) out of their queues: in a queue no worker takes from they
// stayed for good, counted in its backlog and by the no-consumer alert.
// Where it cannot, they stay until a worker takes and drops them
// (killDispatched's notice), as before, and it returns a warning that
// says so ("" when they left): nothing is lost either way.
func (o *Ops) unqueue(ctx context.Context, byQueue map[string]map[int64]int) string {
	if o.broker == nil || len(byQueue) == 0 {
		return ""
	}
	// Every shard that may hold messages, as the workers consume them.
	span := map[string]int{}
	qs, err := o.store.QueueList(ctx)
	for _, q := range qs {
		span[q.Name] = max(q.Shards, q.Span)
	}
	for _, q := range slices.Sorted(maps.Keys(byQueue)) {
		if err == nil {
			_, err = o.broker.Unqueue(ctx, q, max(span[q], 1), byQueue[q])
		}
		if err != nil {
			return fmt.Sprintf("the messages of %s cancelled while dispatched stay queued (%v): a worker that takes one drops it, and the queue's backlog counts them until then",
				Plural(len(byQueue[q]), "task"), err)
		}
	}
	return ""
}

// addAttempt adds task id's attempt to the queue q's of m.
func addAttempt(m map[string]map[int64]int, q string, id int64, attempt int) {
	if m[q] == nil {
		m[q] = map[int64]int{}
	}
	m[q][id] = attempt
}

// runCancelled reports whether attempt of task id ended cancelled.
func (o *Ops) runCancelled(ctx context.Context, id int64, attempt int) bool {
	runs, err := o.store.RunList(ctx, id, 5)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(runs, func(r *task.Run) bool { return r.Attempt == attempt && r.Outcome == task.OutcomeCancelled })
}

// killRunning asks the workers of running tasks to cancel them, and takes
// those whose worker does not answer. It returns the tasks it cancelled.
func (o *Ops) killRunning(ctx context.Context, running map[int64]*task.Task) ([]int64, error) {
	if o.broker == nil {
		// Cancelling in the task center alone would leave the handler
		// running: only Redis reaches its worker.
		ids := slices.Sorted(maps.Keys(running))
		return nil, fmt.Errorf("kill running %s (%s): no connection to Redis, through which workers are told to stop",
			Plural(len(ids), "task"), joinIDs(ids, 10))
	}
	rs := make([]broker.KillRequest, 0, len(running))
	for id, t := range running {
		rs = append(rs, broker.KillRequest{ID: id, Attempt: t.Attempt})
	}
	// Their workers listen now: a request not kept for later ones is
	// still heard.
	if err := o.broker.Kill(ctx, rs...); err != nil && !errors.Is(err, broker.ErrKillNotKept) {
		return nil, err
	}
	var done []int64
	deadline := time.Now().Add(o.KillWait)
	for len(running) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		for id, was := range running {
			t, err := o.store.TaskGet(ctx, id)
			if err != nil {
				return done, err
			}
			if t.Status != task.Running || t.Attempt != was.Attempt {
				// A periodic task goes on to its next occurrence: its
				// cancelled run is what the kill changed.
				if t.Status == task.Cancelled || (was.Type == task.Periodic && o.runCancelled(ctx, id, was.Attempt)) {
					done = append(done, id)
				}
				delete(running, id)
			}
		}
	}
	// Workers that did not answer are dead or hung: take the tasks.
	var ts []store.Transition
	var forced []int64
	const why = "killed by operator (its worker did not answer)"
	var now time.Time
	for id, t := range running {
		tr := store.Transition{ID: id, Attempt: t.Attempt, From: task.Running, To: task.Cancelled,
			SetResult: true, Result: why, Batch: t.BatchID,
			Run: &store.RunRecord{Code: t.Code, Queue: t.QueueName(), WorkerID: t.WorkerID, Outcome: task.OutcomeCancelled, Result: why}}
		if t.Type == task.Periodic {
			// Its run is cancelled and the task moves on, as its worker
			// would have done: a cancelled periodic task is a disabled
			// one, which retention deletes once it is old.
			if now.IsZero() {
				var err error
				if now, err = o.store.Now(ctx); err != nil {
					return done, err
				}
			}
			next, err := cronspec.NextRun(t.CronExpr, cmp.Or(t.Timezone, o.Timezone), t.PlanNextRun, now)
			if err != nil {
				// As its worker would: dead (kept), with why.
				tr.To, tr.Result = task.Dead, why+"; cannot schedule the next run: "+err.Error()
			} else {
				tr.To, tr.Retry, tr.NextAt = task.Pending, store.RetryReset, next
			}
		}
		forced = append(forced, id)
		ts = append(ts, tr)
	}
	if len(ts) > 0 {
		applied, err := o.store.TaskTransition(ctx, ts)
		if err != nil {
			return done, err
		}
		for i, ok := range applied {
			if ok {
				done = append(done, forced[i])
			}
		}
	}
	return done, nil
}

// queueAction changes one queue's state, audited, and announces it so
// every node follows at once. An unknown queue is not found, and nothing
// is written.
func (o *Ops) queueAction(ctx context.Context, action, q string, fn func(*store.Queue) error) (Change, error) {
	if err := o.CheckQueue(ctx, q); err != nil {
		return failed(action), err
	}
	def := store.QueueDefaults{Shards: o.Configured(q)}
	if o.ConfiguredLimit != nil {
		def.Limit = o.ConfiguredLimit(q)
	}
	c, changed, err := o.store.QueueUpdate(ctx, o.actor, action, q, def, fn)
	if err != nil {
		return failed(action), err
	}
	res := failed(action)
	res.Requested = 1
	res.Queue = &QueueChange{Name: q, Before: queueState(c.Before), After: queueState(c.After)}
	if changed {
		res.Changed = 1
		o.changed(1)
		if o.broker != nil {
			// Best effort: nodes re-read the state within a second anyway.
			o.broker.NudgeQueues(ctx)
			if !c.After.Paused {
				o.broker.Wake(ctx, 0)
			}
		}
	}
	return res, nil
}

// Pause stops dispatching and starting tasks of queue q. Running tasks
// finish; queued messages wait in Redis and pending tasks in the task
// center until Resume.
func (o *Ops) Pause(ctx context.Context, q string) (Change, error) {
	return o.queueAction(ctx, "pause", q, func(s *store.Queue) error { s.Paused = true; return nil })
}

// Resume lets queue q run again.
func (o *Ops) Resume(ctx context.Context, q string) (Change, error) {
	return o.queueAction(ctx, "resume", q, func(s *store.Queue) error { s.Paused = false; return nil })
}

// MaxShards bounds a queue's shards.
const MaxShards = 256

// Reshard changes the number of shards of queue q online. New messages go
// to the new shards at once; workers keep consuming every shard that may
// still hold messages (the span) until recovery has moved what is left in
// retired shards and retires them, so nothing queued is lost or taken
// twice.
func (o *Ops) Reshard(ctx context.Context, q string, n int) (Change, error) {
	if n < 1 || n > MaxShards {
		return failed("reshard"), task.Invalidf("shards must be between 1 and %d, not %d", MaxShards, n)
	}
	return o.queueAction(ctx, "reshard", q, func(s *store.Queue) error {
		s.Span = max(s.Span, s.Shards, n)
		s.Shards = n
		return nil
	})
}

// LimitChange is a change of a queue's limit: the fields set replace the
// limit's, the others stay.
type LimitChange struct {
	Rate       *limit.Rate
	Burst      *int
	MaxRunning *int
	Per        *string
	Serial     *int
	// Reset returns the queue to its configured limit (ConfiguredLimit),
	// which nodes' configurations then set again as they start.
	Reset bool
}

// IsZero reports whether ch changes nothing.
func (ch LimitChange) IsZero() bool {
	return ch == LimitChange{}
}

// applyTo returns l with the fields ch sets; a rate removed takes its
// burst with it.
func (ch LimitChange) applyTo(l limit.Limit) limit.Limit {
	if ch.Rate != nil {
		l.Rate = *ch.Rate
		if l.Rate.IsZero() {
			l.Burst = 0
		}
	}
	if ch.Burst != nil {
		l.Burst = *ch.Burst
	}
	if ch.MaxRunning != nil {
		l.MaxRunning = *ch.MaxRunning
	}
	if ch.Per != nil {
		l.Per = *ch.Per
	}
	if ch.Serial != nil {
		l.Serial = *ch.Serial
	}
	return l
}

// Limit changes queue q's flow control online: every node follows within
// a second (at once when Redis carries the announcement). A limit an
// operator set stays until Reset, whatever the nodes' configurations say.
func (o *Ops) Limit(ctx context.Context, q string, ch LimitChange) (Change, error) {
	if ch.IsZero() {
		return failed("limit"), task.Invalidf("nothing to change: give --rate, --burst, --max-running, --per, --serial or --reset")
	}
	// Bad values are refused before the queue is looked up; how they fit
	// the queue's limit is checked in the transaction.
	if err := ch.applyTo(limit.Limit{}).ValidateValues(); err != nil {
		return failed("limit"), err
	}
	base := func(cur limit.Limit) limit.Limit {
		if ch.Reset && o.ConfiguredLimit != nil {
			return o.ConfiguredLimit(q)
		}
		if ch.Reset {
			return limit.Limit{}
		}
		return cur
	}
	return o.queueAction(ctx, "limit", q, func(s *store.Queue) error {
		nl := ch.applyTo(base(s.Limit))
		if err := nl.Validate(); err != nil {
			return err
		}
		s.Limit = nl
		switch {
		case ch.Reset && nl.IsZero():
			s.LimitSource = ""
		case ch.Reset:
			s.LimitSource = store.LimitFromConfig
		default:
			s.LimitSource = store.LimitFromOperator
		}
		return nil
	})
}

// Store is the task center the actions change (tasktop and stats read it).
func (o *Ops) Store() *store.Store { return o.store }

// Broker is the Redis the actions use.
func (o *Ops) Broker() *broker.Broker { return o.broker }

// Queues returns the state of every queue that has a row.
func (o *Ops) Queues(ctx context.Context) ([]store.Queue, error) { return o.store.QueueList(ctx) }

// Audit returns audit rows newest first, before id beforeID (0: newest).
func (o *Ops) Audit(ctx context.Context, beforeID int64, limit int) ([]store.AuditEntry, error) {
	return o.store.AuditList(ctx, beforeID, limit)
}

func nonNil(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}
