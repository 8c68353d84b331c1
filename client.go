package taskd

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// Args is a typed payload: Kind is the task code, the value itself is
// encoded as JSON (encoding/json rules and tags apply).
type Args interface {
	Kind() string
}

// Client submits tasks to the task center. Safe for concurrent use.
type Client struct {
	store  *store.Store
	broker *broker.Broker
	p      *producer.Client
	ops    *ops.Ops
}

// NewClient connects to the task center and Redis of cfg. The task
// center must answer; Redis need not: a task is submitted once it is in
// the task center, and Redis only makes it start sooner (it dispatches a
// task due now, and wakes the schedulers). While Redis does not answer,
// submits leave their tasks to the schedulers' polls, and the client
// uses Redis again once it answers.
func NewClient(ctx context.Context, cfg *Config) (*Client, error) {
	c := *cfg
	if err := checked(&c); err != nil {
		return nil, err
	}
	cfg = &c
	s, err := node.OpenStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// As Start does: an unmigrated task center says so here, not as the
	// first Submit's "table doesn't exist".
	if err := s.CheckSchema(ctx); err != nil {
		s.Close()
		return nil, err
	}
	b, err := node.OpenBroker(ctx, cfg)
	if err != nil && task.ErrorCode(err) != task.CodeConfig && ctx.Err() == nil {
		// Down, not misconfigured (a wrong password stays an error).
		slog.Warn("Redis does not answer; submits go to the task center, and the schedulers' polls find them", "err", err)
		b, err = node.DialBroker(ctx, cfg)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return &Client{store: s, broker: b, p: node.NewProducer(cfg, s, b, nil), ops: ops.NewFromConfig(s, b, cfg)}, nil
}

// As returns a client whose Kill, Retry and CronRemove are written to the
// audit log as made by user from origin (an admin page's signed-in user
// and the request's address), instead of the process's OS user and host.
// It shares c's connections: Close c once, not each copy.
func (c *Client) As(user, origin string) *Client {
	cc := *c
	cc.ops = c.ops.As(store.Actor{User: user, Origin: origin})
	return &cc
}

// Close closes the connections.
func (c *Client) Close() error {
	c.broker.Close()
	return c.store.Close()
}

// Result says what a submission did.
type Result struct {
	ID int64
	// Existing is true when a task with the same code and unique key was
	// there already: nothing new was created, ID is that task's.
	Existing bool
	// Changed: that task took this submission's payload and due time
	// (Replace, Debounce).
	Changed bool
	// Dispatched: the submit pushed the task to its queue itself (a task
	// due now that no rule applied at claim time concerns); otherwise a
	// scheduler dispatches it.
	Dispatched bool
}

// Option tunes a submission: Queue, Delay, At, Priority, Timeout,
// MaxRetry, UniqueKey (with Replace, Debounce or UntilDone), Group, Then (a
// chain) and ForCallback (a batch's callback). An option given where it does not apply is an error (a
// periodic task has no delay, a chain's child no unique key).
type Option struct {
	name  string
	apply func(*settings) error
}

// settings is what options set: a submission, and the options of a batch's
// callback.
type settings struct {
	producer.Submission
	callback []Option
}

// Where each option applies.
var (
	submitOpts   = []string{"Queue", "Delay", "At", "Priority", "Timeout", "MaxRetry", "UniqueKey", "Replace", "Debounce", "UntilDone", "Group", "Then"}
	batchOpts    = append(slices.Clip(submitOpts), "ForCallback")
	cronOpts     = []string{"Queue", "Priority", "Timeout", "MaxRetry", "Then"}
	childOpts    = []string{"Queue", "Delay", "Priority", "Timeout", "MaxRetry", "Then"}
	callbackOpts = []string{"Queue", "Priority", "Timeout", "MaxRetry"}
)

func option(name string, f func(*settings)) Option {
	return Option{name: name, apply: func(s *settings) error { f(s); return nil }}
}

// Queue overrides the queue (default: the code's configured queue, else
// the code).
func Queue(q string) Option { return option("Queue", func(s *settings) { s.Queue = q }) }

// Delay makes the task due after d (a chain's child: after its parent's
// success).
func Delay(d time.Duration) Option { return option("Delay", func(s *settings) { s.Delay = d }) }

// At makes the task due at t.
func At(t time.Time) Option { return option("At", func(s *settings) { s.At = t }) }

// Priority from 0 (highest) to 9; 5 by default.
func Priority(p int) Option { return option("Priority", func(s *settings) { s.Priority = &p }) }

// Timeout of each attempt; 300 s by default.
func Timeout(d time.Duration) Option { return option("Timeout", func(s *settings) { s.Timeout = d }) }

// MaxRetry is the number of retries after a failed attempt; 3 by default.
func MaxRetry(n int) Option { return option("MaxRetry", func(s *settings) { s.MaxRetry = &n }) }

// UniqueKey deduplicates: at most one task per code and key. A second
// submission returns the first task (Result.Existing), unless Replace,
// Debounce or UntilDone say otherwise.
func UniqueKey(k string) Option { return option("UniqueKey", func(s *settings) { s.UniqueKey = k }) }

// Replace makes a second submission with the same unique key give the
// first task its payload and due time while that task waits (pending, or
// failed waiting for its retry); a task already dispatched or running is
// never changed.
func Replace() Option {
	return option("Replace", func(s *settings) { s.OnConflict = store.Conflict{Mode: store.Replace} })
}

// Debounce makes the task due d after its submission, and a second
// submission with the same unique key give the waiting task its payload
// and move its due time out to d after that submission, but never later
// than max after the first (0: 10 times d).
func Debounce(d, max time.Duration) Option {
	return option("Debounce", func(s *settings) {
		s.OnConflict = store.Conflict{Mode: store.Debounce, Debounce: d, MaxWait: max}
	})
}

// UntilDone holds the unique key only until the task ends (succeeded,
// dead or cancelled): a later submission with the key creates a new task.
func UntilDone() Option {
	return option("UntilDone", func(s *settings) { s.OnConflict = store.Conflict{Mode: store.UntilDone} })
}

// Group puts the task in a group of its queue (a tenant, a customer):
// per-group limits and serial order apply to each group separately.
func Group(g string) Option { return option("Group", func(s *settings) { s.Group = g }) }

// Then makes a chain: a task of A's code (the zero A's Kind) is submitted
// when the task succeeds, in the transaction that writes the success, so
// once even if the task ran twice, and never if it failed. Its payload is
// the parent's result (Job.SetResultJSON), decoded into A by its handler:
// the result itself when it is a JSON value, {} when it is empty, else the
// result as a JSON string. opts tune the child: Queue, Delay, Priority,
// Timeout, MaxRetry, and Then for the step after it. Several Then options
// on one task are siblings, all submitted when it succeeds; nest them for a
// sequence: Then[B](Then[C]()). On a periodic task (Client.Cron), the
// children follow each run that succeeds.
func Then[A Args](opts ...Option) Option {
	var zero A
	code := zero.Kind()
	return Option{name: "Then", apply: func(s *settings) error {
		c, err := options(opts, "a chain's child", childOpts)
		if err != nil {
			return fmt.Errorf("then %s: %w", code, err)
		}
		s.Children = append(s.Children, producer.Child{Code: code, Queue: c.Queue, Priority: c.Priority,
			Timeout: c.Timeout, MaxRetry: c.MaxRetry, Delay: c.Delay, Children: c.Children})
		return nil
	}}
}

// ForCallback tunes a batch's callback (Client.Batch): Queue, Priority,
// Timeout and MaxRetry. Without it the callback takes its code's defaults.
func ForCallback(opts ...Option) Option {
	return option("ForCallback", func(s *settings) { s.callback = append(s.callback, opts...) })
}

// options applies opts, each of which must be one of allowed.
func options(opts []Option, where string, allowed []string) (settings, error) {
	var s settings
	for _, o := range opts {
		if o.apply == nil {
			return s, task.Invalidf("a zero taskd.Option")
		}
		if !slices.Contains(allowed, o.name) {
			return s, task.Invalidf("taskd.%s does not apply to %s", o.name, where)
		}
		if err := o.apply(&s); err != nil {
			return s, err
		}
	}
	return s, nil
}

// submission is the submission of args tuned by s.
func (s settings) submission(args Args) (producer.Submission, error) {
	if args == nil {
		return producer.Submission{}, task.Invalidf("no task arguments")
	}
	payload, err := json.Marshal(args)
	if err != nil {
		return producer.Submission{}, task.Invalidf("encode the payload of %s: %v", args.Kind(), err)
	}
	sub := s.Submission
	sub.Code, sub.Payload = args.Kind(), payload
	return sub, nil
}

// Submit submits one task with args as its payload.
func (c *Client) Submit(ctx context.Context, args Args, opts ...Option) (Result, error) {
	o, err := options(opts, "a submission", submitOpts)
	if err != nil {
		return Result{}, err
	}
	s, err := o.submission(args)
	if err != nil {
		return Result{}, err
	}
	r, err := c.p.Submit(ctx, s)
	return Result{ID: r.ID, Existing: r.Existing, Changed: r.Changed, Dispatched: r.Dispatched}, err
}

// SubmitMany submits every task in one statement: all or none. When two
// of them share a unique key, or another client takes one of their keys
// at the same moment, they are written one by one instead; a failure
// after some were written returns their Results with a *PartialError
// that says which were not (retry those alone).
func (c *Client) SubmitMany(ctx context.Context, args []Args, opts ...Option) ([]Result, error) {
	o, err := options(opts, "a submission", submitOpts)
	if err != nil {
		return nil, err
	}
	subs := make([]producer.Submission, len(args))
	for i, a := range args {
		s, err := o.submission(a)
		if err != nil {
			return nil, fmt.Errorf("task %d: %w", i, err)
		}
		subs[i] = s
	}
	rs, err := c.p.SubmitBatch(ctx, subs)
	out := make([]Result, len(rs))
	for i, r := range rs {
		out[i] = Result{ID: r.ID, Existing: r.Existing, Changed: r.Changed, Dispatched: r.Dispatched}
	}
	return out, err
}

// SubmitJSON submits a task of code with a payload already encoded.
func (c *Client) SubmitJSON(ctx context.Context, code string, payload json.RawMessage, opts ...Option) (Result, error) {
	o, err := options(opts, "a submission", submitOpts)
	if err != nil {
		return Result{}, err
	}
	s := o.Submission
	s.Code, s.Payload = code, payload
	r, err := c.p.Submit(ctx, s)
	return Result{ID: r.ID, Existing: r.Existing, Changed: r.Changed, Dispatched: r.Dispatched}, err
}

// PartialError is SubmitMany's error when it wrote some of its tasks:
// Errs[i] is why task i was not written (nil: it was).
type PartialError = producer.PartialError

// CronResult says what Cron did.
type CronResult struct {
	ID int64
	// Updated is true when the periodic task existed and was changed.
	Updated bool
	// Next is its next run.
	Next time.Time
}

// Cron adds the periodic task name of args's code, or updates it (a deploy
// can run it every time): expr has five fields, or six with seconds, or a
// descriptor (@hourly, @every 5m), in time zone tz ("" is cron.timezone).
// Of the options, Queue, Priority, Timeout, MaxRetry and Then apply.
func (c *Client) Cron(ctx context.Context, name, expr, tz string, args Args, opts ...Option) (CronResult, error) {
	o, err := options(opts, "a periodic task", cronOpts)
	if err != nil {
		return CronResult{}, err
	}
	s, err := o.submission(args)
	if err != nil {
		return CronResult{}, err
	}
	r, err := c.p.CronAdd(ctx, producer.Cron{Code: s.Code, Name: name, Expr: expr, Timezone: tz, Payload: s.Payload,
		Queue: s.Queue, Priority: s.Priority, Timeout: s.Timeout, MaxRetry: s.MaxRetry, Children: s.Children})
	return CronResult{ID: r.ID, Updated: r.Updated, Next: r.Next}, err
}

// CronTask is a periodic task as CronList returns it.
type CronTask struct {
	ID   int64
	Code string
	// Name tells periodic tasks of one code apart (Cron's name).
	Name     string
	Expr     string
	Timezone string
	// Disabled: an operator disabled it (`taskd enable` resumes it).
	Disabled bool
	// Next is its next run (meaningless while Disabled).
	Next time.Time
}

// CronList returns every periodic task, by id.
func (c *Client) CronList(ctx context.Context) ([]CronTask, error) {
	ts, err := c.p.CronList(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]CronTask, 0, len(ts))
	for _, t := range ts {
		out = append(out, CronTask{ID: t.ID, Code: t.Code, Name: producer.CronName(t.UniqueKey), Expr: t.CronExpr,
			Timezone: t.Timezone, Disabled: t.Disabled(), Next: t.PlanNextRun})
	}
	slices.SortFunc(out, func(a, b CronTask) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// CronRemove removes the periodic task of code named name ("": the code),
// as `taskd cron remove` does, audit row included, and returns its id. A
// run in flight finishes; its result is rejected.
func (c *Client) CronRemove(ctx context.Context, code, name string) (int64, error) {
	id, auditErr, err := c.p.CronRemove(ctx, code, name, c.ops.Actor())
	if err != nil {
		return 0, err
	}
	if auditErr != nil {
		return id, fmt.Errorf("removed periodic task %d, but the audit log was not written: %w", id, auditErr)
	}
	return id, nil
}

// BatchResult is a submitted batch: its id (`taskd show --batch ID`) and
// its members' task ids, in the order given.
type BatchResult struct {
	ID        int64
	MemberIDs []int64
}

// BatchCounts is how a batch's members ended, given to its callback under
// the "batch" key of its payload (the task center's own shape). A
// callback's Args receive them with a field such as
//
//	Batch taskd.BatchCounts `json:"batch"`
//
// which Batch leaves out when submitting (it is zero until the batch ends).
type BatchCounts = store.BatchCounts

// Batch submits members and a callback in one transaction, all or none.
// The callback is created once, when the last member has ended (succeeded,
// dead or cancelled) whatever happened on the way (retries, kills, crashes,
// recovery), with callback's fields and the counts under "batch"
// (BatchCounts). opts tune every member (all options but UniqueKey: a
// member that already existed would not be the batch's); ForCallback
// tunes the callback.
func (c *Client) Batch(ctx context.Context, members []Args, callback Args, opts ...Option) (BatchResult, error) {
	o, err := options(opts, "a batch's members", batchOpts)
	if err != nil {
		return BatchResult{}, err
	}
	cbo, err := options(o.callback, "a batch's callback", callbackOpts)
	if err != nil {
		return BatchResult{}, err
	}
	cb, err := cbo.submission(callback)
	if err != nil {
		return BatchResult{}, fmt.Errorf("callback: %w", err)
	}
	if cb.Payload, err = withoutCounts(cb.Payload); err != nil {
		return BatchResult{}, err
	}
	subs := make([]producer.Submission, len(members))
	for i, a := range members {
		if subs[i], err = o.submission(a); err != nil {
			return BatchResult{}, fmt.Errorf("task %d of the batch: %w", i+1, err)
		}
	}
	r, err := c.p.Batch(ctx, producer.Batch{Members: subs, Callback: producer.Callback{Code: cb.Code,
		Payload: cb.Payload, Queue: cb.Queue, Priority: cb.Priority, Timeout: cb.Timeout, MaxRetry: cb.MaxRetry}})
	return BatchResult{ID: r.ID, MemberIDs: r.MemberIDs}, err
}

// withoutCounts drops a callback payload's "batch" key when it holds no
// counts (a BatchCounts field before the batch ends): the counts go there.
// Any other value is left for the producer to refuse.
func withoutCounts(payload json.RawMessage) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(payload, &obj) != nil || obj["batch"] == nil {
		return payload, nil
	}
	var n *BatchCounts
	if err := json.Unmarshal(obj["batch"], &n); err != nil || (n != nil && *n != BatchCounts{}) {
		return payload, nil
	}
	delete(obj, "batch")
	return json.Marshal(obj)
}

// Task is a task as the task center holds it, as `taskd show` prints it:
// its status, attempt, last result (a handler's output or error) and
// times.
type Task = task.Task

// Status is a task's state; Status.Ended says whether it has ended (an
// operator may still retry it).
type Status = task.Status

// The states of a task (DESIGN.md; PHP producers and SQL rely on the
// numbers).
const (
	StatusPending    = task.Pending    // waiting for its due time
	StatusDispatched = task.Dispatched // claimed and queued for a worker
	StatusRunning    = task.Running    // a worker runs it
	StatusSucceeded  = task.Succeeded  // done (a periodic task goes back to pending)
	StatusFailed     = task.Failed     // failed; a retry is due
	StatusDead       = task.Dead       // its retries ran out: it waits for an operator
	StatusCancelled  = task.Cancelled  // killed, or a disabled periodic task
)

// Get returns task id as the task center holds it now. An id that names
// no task is CodeNotFound (retention deletes succeeded and cancelled
// tasks retention.task_age after they ended).
func (c *Client) Get(ctx context.Context, id int64) (*Task, error) {
	return c.store.TaskGet(ctx, id)
}

// Change says what Kill or Retry did, as `taskd kill -o json` prints it:
// the tasks changed (IDs), and each one left alone with its status and
// why (Unchanged: a retry of a task that succeeded, a kill of one that
// ended).
type Change = ops.Change

// Kill cancels tasks as `taskd kill` does, audit row included: a waiting
// or failed task becomes cancelled, a running one is cancelled where it
// runs (its handler's context is done, an exec handler's processes are
// terminated) and its result is rejected. Ids that name no task are
// CodeNotFound, and nothing is changed.
func (c *Client) Kill(ctx context.Context, ids ...int64) (Change, error) {
	return c.ops.Kill(ctx, ops.Target{IDs: ids})
}

// Retry puts dead, failed or cancelled tasks back to pending, due now,
// with their retry budget afresh, as `taskd retry` does, audit row
// included. Ids that name no task are CodeNotFound, and nothing is
// changed.
func (c *Client) Retry(ctx context.Context, ids ...int64) (Change, error) {
	return c.ops.Retry(ctx, ops.Target{IDs: ids})
}
