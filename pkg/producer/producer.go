// Package producer is the Go API for submitting tasks: one-off, delayed,
// timed and periodic. It validates everything before anything is written,
// inserts into the task center, and either dispatches a task due now
// itself (dispatch.go) or wakes the schedulers so that it starts without
// waiting for a scan.
package producer

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/cronspec"
	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/queues"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/tracing"
)

// Submission describes one task.
type Submission struct {
	Code    string
	Payload json.RawMessage // nil means {}
	// Queue overrides the queue (default: the code's configured queue, else
	// the code).
	Queue string
	// Delay or At make the task due later (at most one of them).
	Delay time.Duration
	At    time.Time
	// Priority 0 (highest) to 9; nil means 5.
	Priority *int
	// Timeout per attempt; zero means 300s.
	Timeout time.Duration
	// MaxRetry; nil means 3.
	MaxRetry *int
	// UniqueKey deduplicates: a second submission with the same code and
	// key returns the first task, or does what OnConflict says. Keys
	// compare exactly (case and every character count); one that starts
	// or ends with whitespace is refused.
	UniqueKey string
	// OnConflict is what a submission does when a task of its code holds
	// its unique key (default: reject, return that task). Debounce moves
	// the due time of the first submission out by Debounce too.
	OnConflict store.Conflict
	// Group puts the task in a group of its queue (a tenant, a customer):
	// per-group limits and serial order apply to each group separately.
	Group string
	// Children are submitted when the task succeeds (a periodic task: each
	// time it succeeds), in the transaction that writes the success: once
	// even if the task ran twice, never if it failed. Each gets the task's
	// result as its payload.
	Children []Child
}

// Child is a task its parent submits when it succeeds (a step of a chain).
// Its payload is the parent's result: that result when it is a JSON value,
// {} when it is empty, else the result as a JSON string.
type Child struct {
	Code string
	// Queue, Priority, Timeout and MaxRetry default as in a Submission.
	Queue    string
	Priority *int
	Timeout  time.Duration
	MaxRetry *int
	// Delay after the parent's success.
	Delay time.Duration
	// Children are submitted when this child succeeds.
	Children []Child
}

// Result is the outcome of one submission.
type Result struct {
	ID int64 `json:"id"`
	// Existing is true when a task with the same unique key was already
	// there; nothing new was created.
	Existing bool `json:"existing"`
	// Changed: that task took this submission's payload and due time
	// (replace, debounce).
	Changed bool `json:"changed,omitempty"`
	// Status and Reason say, when another mode than reject left that task
	// unchanged, what it was and why.
	Status task.Status `json:"-"`
	Reason string      `json:"reason,omitempty"`
	// Dispatched: the submit pushed the task to its queue itself (due now,
	// no rule applied at claim time concerned it); otherwise a scheduler
	// dispatches it (dispatch.go).
	Dispatched bool `json:"dispatched,omitempty"`
}

// Options configure a Client.
type Options struct {
	// MaxPayload in bytes (default 1 MiB).
	MaxPayload int
	// QueueFor maps a code to its default queue ("" = the code).
	QueueFor func(code string) string
	// Timezone for cron tasks that name none.
	Timezone string
	Logger   *slog.Logger
	// TracerProvider records a span per submission, whose trace context
	// the task keeps so that each attempt's span links to it (default:
	// OpenTelemetry's global provider; when it records nothing, the span of
	// the caller's context, if any, is the one kept).
	TracerProvider trace.TracerProvider
	// Queues is the queue state the schedulers follow (pkg/queues; the
	// broker should follow it too, for its shards). With it and a broker,
	// a task due now is dispatched by the submit itself when no rule
	// applied at claim time concerns it (dispatch.go); without, every task
	// waits for a scheduler.
	Queues *queues.Cache
	// Window: a queue whose Redis lists hold this many messages gets no
	// more dispatched at once (default WindowDefault).
	Window int
	// WindowBytes: nor one whose messages, at the size of the task's
	// payload, would hold more than this many bytes, unless it is empty
	// (default scheduler.WindowBytesDefault; negative: no bound).
	WindowBytes int64
	// Clock is the local clock a queue refused by a full Redis is left to
	// the schedulers by (tests drive it; default the system's).
	Clock clock.Clock
}

// Client submits tasks.
type Client struct {
	store  *store.Store
	broker *broker.Broker // optional: without it schedulers find tasks by polling
	opts   Options
	tracer trace.Tracer
	disp   *dispatcher // nil: no dispatch at once
	join   joiner
	gate   redisGate // rests the optional Redis steps while Redis fails
}

// New returns a client. b may be nil.
func New(s *store.Store, b *broker.Broker, o Options) *Client {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.TracerProvider == nil {
		o.TracerProvider = otel.GetTracerProvider()
	}
	c := &Client{store: s, broker: b, opts: o, tracer: o.TracerProvider.Tracer(tracing.Name)}
	c.disp = newDispatcher(c)
	return c
}

// Submit submits one task. Concurrent calls share an INSERT (join.go).
func (c *Client) Submit(ctx context.Context, s Submission) (_ Result, err error) {
	ctx, span := c.startSend(ctx, []Submission{s})
	defer func() { endSend(span, err) }()
	p, err := c.params(&s)
	if err != nil {
		return Result{}, err
	}
	p.TraceParent = tracing.TraceParent(ctx)
	return c.submitJoined(ctx, &joined{sub: s, p: p})
}

// SubmitBatch validates every submission, then inserts them all in one
// statement. If any is invalid, nothing is written. Written one by one
// (see store.TaskInsert), a failure after some were written returns
// their results with a *PartialError.
func (c *Client) SubmitBatch(ctx context.Context, subs []Submission) (_ []Result, err error) {
	ctx, span := c.startSend(ctx, subs)
	defer func() { endSend(span, err) }()
	traceParent := tracing.TraceParent(ctx)
	ps := make([]store.TaskInsertParams, len(subs))
	for i := range subs {
		p, err := c.params(&subs[i])
		if err != nil {
			if len(subs) > 1 {
				return nil, task.Invalidf("submission %d: %v", i, err)
			}
			return nil, err
		}
		p.TraceParent = traceParent
		ps[i] = p
	}
	return c.write(ctx, subs, ps)
}

// write inserts the valid submissions subs, whose params are ps, in one
// statement, dispatches those due now that it can, and wakes the
// schedulers for the others.
func (c *Client) write(ctx context.Context, subs []Submission, ps []store.TaskInsertParams) ([]Result, error) {
	c.claimNow(ctx, subs, ps)
	res, err := c.store.TaskInsert(ctx, ps)
	if err != nil {
		return nil, err
	}
	out := make([]Result, len(res))
	wake := time.Duration(-1)
	var msgs []*task.Message
	var partial *PartialError
	for i, r := range res {
		if r.Err != nil {
			if partial == nil {
				partial = &PartialError{Errs: make([]error, len(res))}
			}
			partial.Errs[i] = r.Err
			continue
		}
		out[i] = Result{ID: r.ID, Existing: r.Existing, Changed: r.Changed, Status: r.Status, Reason: r.Reason}
		if r.Message != nil {
			msgs = append(msgs, r.Message)
			continue
		}
		if !r.Existing || r.Changed {
			d := dueIn(&subs[i])
			if wake < 0 || d < wake {
				wake = d
			}
		}
	}
	pushed, handedBack := c.dispatch(ctx, msgs)
	if handedBack {
		wake = 0
	}
	for i := range out {
		out[i].Dispatched = res[i].Message != nil && pushed[out[i].ID]
	}
	if wake >= 0 {
		c.wake(ctx, wake)
	}
	if partial != nil {
		return out, partial
	}
	return out, nil
}

// PartialError is the error of submissions written in part: a unique key
// taken by another client at the same moment made them go one by one, and
// some failed after others were written. Errs[i] is why submission i was
// not written (nil: it was, and its Result says how). It does not unwrap
// to them: the call as a whole did write.
type PartialError struct {
	Errs []error
}

func (e *PartialError) Error() string {
	n, first := 0, -1
	for i, err := range e.Errs {
		if err != nil {
			n++
			if first < 0 {
				first = i
			}
		}
	}
	return fmt.Sprintf("%d of %d submissions not written, the others were (submission %d: %v)", n, len(e.Errs), first, e.Errs[first])
}

func dueIn(s *Submission) time.Duration {
	if !s.At.IsZero() {
		return max(0, time.Until(s.At))
	}
	return s.Delay
}

// wake tells the schedulers; failure only delays pickup to the next poll.
func (c *Client) wake(ctx context.Context, d time.Duration) {
	if c.broker == nil {
		return
	}
	ok, err := c.redisStep(ctx, func(ctx context.Context) error { return c.broker.Wake(ctx, d) })
	if !ok && err != nil {
		c.opts.Logger.Warn("wake schedulers failed; tasks are picked up at the next poll", "err", err)
	}
}

func (c *Client) params(s *Submission) (store.TaskInsertParams, error) {
	var p store.TaskInsertParams
	if err := task.ValidateName("task code", s.Code); err != nil {
		return p, err
	}
	queue := s.Queue
	if queue == "" && c.opts.QueueFor != nil {
		queue = c.opts.QueueFor(s.Code)
	}
	if queue != "" {
		if err := task.ValidateName("queue", queue); err != nil {
			return p, err
		}
	}
	payload := s.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("{}")
	}
	if err := task.ValidatePayload(payload, c.opts.MaxPayload); err != nil {
		return p, err
	}
	if err := c.store.CheckValueSize("payload", len(payload)); err != nil {
		return p, err
	}
	prio := task.DefaultPriority
	if s.Priority != nil {
		prio = *s.Priority
	}
	if err := task.ValidatePriority(prio); err != nil {
		return p, err
	}
	timeout := s.Timeout
	if timeout == 0 {
		timeout = task.DefaultTimeout * time.Second
	}
	if err := task.ValidateTimeout(timeout); err != nil {
		return p, err
	}
	maxRetry := task.DefaultMaxRetry
	if s.MaxRetry != nil {
		maxRetry = *s.MaxRetry
	}
	if err := task.ValidateMaxRetry(maxRetry); err != nil {
		return p, err
	}
	if s.Delay < 0 {
		return p, task.Invalidf("delay %s is negative", s.Delay)
	}
	if s.Delay > 0 && !s.At.IsZero() {
		return p, task.Invalidf("give either a delay or a time, not both")
	}
	// Characters, as the column counts them: a key of 100 Chinese
	// characters was refused as longer than 191; bytes that are not
	// UTF-8 came back as the server's "Incorrect string value".
	if !utf8.ValidString(s.UniqueKey) {
		return p, task.Invalidf("unique key %q is not valid UTF-8", s.UniqueKey)
	}
	if utf8.RuneCountInString(s.UniqueKey) > task.MaxUniqueKeyLen {
		return p, task.Invalidf("unique key is longer than %d characters", task.MaxUniqueKeyLen)
	}
	// The column compares exactly but pads with spaces (utf8mb4_bin):
	// "k " would be the key of "k"'s task, and a key that only looks
	// like another one is better refused than silently shared.
	if strings.TrimSpace(s.UniqueKey) != s.UniqueKey {
		return p, task.Invalidf("unique key %q starts or ends with whitespace", s.UniqueKey)
	}
	if err := checkConflict(s); err != nil {
		return p, err
	}
	if err := limit.ValidateGroup(s.Group); err != nil {
		return p, err
	}
	delay := s.Delay
	if c := s.OnConflict; c.Mode == store.Debounce && s.At.IsZero() {
		delay = max(delay, c.Debounce)
	}
	typ := task.OneOff
	if !s.At.IsZero() {
		typ = task.Timed
	}
	then, err := c.children(s.Children)
	if err != nil {
		return p, err
	}
	return store.TaskInsertParams{
		Code: s.Code, Type: typ, Queue: queue, Payload: payload, Priority: prio,
		Timeout: int(timeout / time.Second), MaxRetry: maxRetry, UniqueKey: s.UniqueKey,
		RunAt: s.At, Delay: delay, Then: then, Group: s.Group, OnConflict: s.OnConflict,
	}, nil
}

// DebounceMaxFactor is the longest a debounced task waits when the
// submission names no maximum: this many times the debounce.
const DebounceMaxFactor = 10

// DebounceMaxWait is the longest wait of a debounce d whose submission
// names max (0: none).
func DebounceMaxWait(d, max time.Duration) time.Duration {
	if max > 0 {
		return max
	}
	return DebounceMaxFactor * d
}

// checkConflict checks a submission's conflict mode, and fills the
// debounce's default maximum wait.
func checkConflict(s *Submission) error {
	c := &s.OnConflict
	if c.Mode != store.Reject && s.UniqueKey == "" {
		return task.Invalidf("--on-conflict %s needs a unique key", c.Mode)
	}
	if c.Mode != store.Debounce {
		if c.Debounce != 0 || c.MaxWait != 0 {
			return task.Invalidf("a debounce time needs --on-conflict debounce")
		}
		return nil
	}
	if c.Debounce <= 0 {
		return task.Invalidf("debounce %s must be positive", c.Debounce)
	}
	c.MaxWait = DebounceMaxWait(c.Debounce, c.MaxWait)
	if c.MaxWait < c.Debounce {
		return task.Invalidf("the longest debounce wait %s is shorter than the debounce %s", c.MaxWait, c.Debounce)
	}
	return nil
}

// ParseConflict reads an --on-conflict mode: reject, replace,
// debounce=DURATION (or "debounce DURATION") or until-done.
func ParseConflict(s string) (store.Conflict, error) {
	mode, arg, _ := strings.Cut(strings.TrimSpace(s), "=")
	if m, a, ok := strings.Cut(mode, " "); ok && arg == "" {
		mode, arg = m, strings.TrimSpace(a)
	}
	mode = strings.TrimSpace(mode)
	var c store.Conflict
	switch mode {
	case "", "reject":
		c.Mode = store.Reject
	case "replace":
		c.Mode = store.Replace
	case "until-done":
		c.Mode = store.UntilDone
	case "debounce":
		c.Mode = store.Debounce
		if arg == "" {
			return c, task.Invalidf("--on-conflict debounce needs a time: debounce=30s")
		}
		d, err := time.ParseDuration(arg)
		if err != nil || d <= 0 {
			return c, task.Invalidf("--on-conflict %q: %q is not a positive duration like 30s", s, arg)
		}
		c.Debounce = d
		return c, nil
	default:
		return c, task.Invalidf("unknown --on-conflict mode %q (want reject, replace, debounce=DURATION or until-done)", s)
	}
	if arg != "" {
		return c, task.Invalidf("--on-conflict %s takes no value (only debounce does: debounce=30s)", mode)
	}
	return c, nil
}

// children validates cs and encodes them for then_spec, with defaults and
// queues resolved now, as for a submission.
func (c *Client) children(cs []Child) (json.RawMessage, error) {
	var conv func(cs []Child) ([]task.Child, error)
	conv = func(cs []Child) ([]task.Child, error) {
		out := make([]task.Child, len(cs))
		for i, ch := range cs {
			// The same defaults and checks as a submission of the child.
			p, err := c.params(&Submission{Code: ch.Code, Queue: ch.Queue, Priority: ch.Priority,
				Timeout: ch.Timeout, MaxRetry: ch.MaxRetry, Delay: ch.Delay})
			if err != nil {
				return nil, fmt.Errorf("child %s: %w", ch.Code, err)
			}
			then, err := conv(ch.Children)
			if err != nil {
				return nil, err
			}
			out[i] = task.Child{Code: p.Code, Queue: p.Queue, Priority: p.Priority, Timeout: p.Timeout,
				MaxRetry: p.MaxRetry, DelayMS: ch.Delay.Milliseconds(), Then: then}
		}
		return out, nil
	}
	tc, err := conv(cs)
	if err != nil {
		return nil, err
	}
	if err := task.ValidateChildren(tc); err != nil {
		return nil, err
	}
	return task.EncodeChildren(tc)
}

// Batch is N tasks plus a callback task submitted together. The callback
// is created once, when the last member has ended (succeeded, dead or
// cancelled), whatever happened on the way: retries, kills, crashes and
// recovery. Its payload is Callback.Payload (an object, {} by default)
// with a "batch" key: {"id", "total", "succeeded", "dead", "cancelled"}.
type Batch struct {
	Members  []Submission
	Callback Callback
}

// Callback is the task a batch creates when its last member ends.
type Callback struct {
	Code    string
	Payload json.RawMessage // a JSON object; nil means {}
	// Queue, Priority, Timeout and MaxRetry default as in a Submission.
	Queue    string
	Priority *int
	Timeout  time.Duration
	MaxRetry *int
}

// BatchResult is a submitted batch.
type BatchResult = store.BatchInsertResult

// Batch submits a batch: the members and the batch in one
// transaction, all or nothing. Members may not have a unique key (a member
// that already existed would not be the batch's).
func (c *Client) Batch(ctx context.Context, b Batch) (BatchResult, error) {
	if len(b.Members) == 0 {
		return BatchResult{}, task.Invalidf("a batch needs at least one task")
	}
	if len(b.Members) > store.BatchMembersMax {
		return BatchResult{}, task.Invalidf("a batch has at most %d tasks, not %d", store.BatchMembersMax, len(b.Members))
	}
	cb, err := c.params(&Submission{Code: b.Callback.Code, Payload: b.Callback.Payload, Queue: b.Callback.Queue,
		Priority: b.Callback.Priority, Timeout: b.Callback.Timeout, MaxRetry: b.Callback.MaxRetry})
	if err != nil {
		return BatchResult{}, fmt.Errorf("callback: %w", err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(cb.Payload, &obj); err != nil || obj == nil {
		return BatchResult{}, task.Invalidf("callback payload must be a JSON object")
	}
	if _, ok := obj["batch"]; ok {
		return BatchResult{}, task.Invalidf(`callback payload must not have a "batch" key: the counts go there`)
	}
	ps := make([]store.TaskInsertParams, len(b.Members))
	wake := time.Duration(-1)
	for i := range b.Members {
		m := &b.Members[i]
		if m.UniqueKey != "" {
			return BatchResult{}, task.Invalidf("task %d of the batch: a batch member cannot have a unique key", i+1)
		}
		if ps[i], err = c.params(m); err != nil {
			return BatchResult{}, task.Invalidf("task %d of the batch: %v", i+1, err)
		}
	}
	c.claimNow(ctx, b.Members, ps)
	for i := range ps {
		if d := dueIn(&b.Members[i]); !ps[i].Claim && (wake < 0 || d < wake) {
			wake = d
		}
	}
	res, err := c.store.BatchInsert(ctx, store.BatchInsertParams{Members: ps, Callback: store.BatchCallback{
		Code: cb.Code, Queue: cb.Queue, Priority: cb.Priority, Timeout: cb.Timeout, MaxRetry: cb.MaxRetry,
		Payload: cb.Payload}})
	if err != nil {
		return BatchResult{}, err
	}
	if _, handedBack := c.dispatch(ctx, res.Dispatched); handedBack {
		wake = 0
	}
	if wake >= 0 {
		c.wake(ctx, wake)
	}
	return res, nil
}

// Cron describes a periodic task.
type Cron struct {
	Code string
	// Name identifies the periodic task among those of its code (default:
	// the code); it is stored as the unique key.
	Name     string
	Expr     string
	Timezone string
	Payload  json.RawMessage
	Queue    string
	Priority *int
	Timeout  time.Duration
	MaxRetry *int
	// Children are submitted each time a run succeeds.
	Children []Child
}

// CronResult says what CronAdd did.
type CronResult struct {
	ID int64 `json:"id"`
	// Updated is true when the periodic task existed and was changed.
	Updated bool      `json:"updated"`
	Next    time.Time `json:"next_run_at"`
	// Then are the two occurrences after Next (fewer when there are
	// none within five years): a mistyped expression shows in them, as
	// "0 3 * * * *" (six fields, seconds first) runs hourly, not at 03:00.
	Then []time.Time `json:"then"`
}

// CronAdd adds a periodic task, or updates the one with the same code and
// name (deploy scripts run it on every release). Its first run is the first
// occurrence after now, by the database clock. The task records its zone
// (cr.Timezone, else a CRON_TZ= prefix, else Options.Timezone, else this
// host's zone), so that every node computes its runs in that zone.
func (c *Client) CronAdd(ctx context.Context, cr Cron) (CronResult, error) {
	tz := cr.Timezone
	if ez := cronspec.ExprZone(cr.Expr); ez != "" {
		if tz != "" && tz != ez {
			return CronResult{}, task.Invalidf("the expression names time zone %s and the task %s: give one", ez, tz)
		}
		tz = ez
	}
	tz, err := cronspec.EffectiveZone(tz, c.opts.Timezone)
	if err != nil {
		return CronResult{}, err
	}
	spec, err := cronspec.Parse(cr.Expr, tz)
	if err != nil {
		return CronResult{}, err
	}
	name := cr.Name
	if name == "" {
		name = cr.Code
	} else if err := task.ValidateName("periodic task name", name); err != nil {
		return CronResult{}, err // as a code: it is listed and typed in scripts
	}
	p, err := c.params(&Submission{Code: cr.Code, Payload: cr.Payload, Queue: cr.Queue,
		Priority: cr.Priority, Timeout: cr.Timeout, MaxRetry: cr.MaxRetry, UniqueKey: cronKey(name),
		Children: cr.Children})
	if err != nil {
		return CronResult{}, err
	}
	now, err := c.store.Now(ctx)
	if err != nil {
		return CronResult{}, err
	}
	next := spec.Next(now)
	p.Type, p.CronExpr, p.Timezone, p.RunAt = task.Periodic, strings.TrimSpace(cr.Expr), tz, next
	res, err := c.store.TaskInsert(ctx, []store.TaskInsertParams{p})
	if err != nil {
		return CronResult{}, err
	}
	out := CronResult{ID: res[0].ID, Next: next}
	for t := next; len(out.Then) < 2; {
		if t = spec.Next(t); t.IsZero() {
			break
		}
		out.Then = append(out.Then, t)
	}
	if res[0].Existing {
		if err := c.store.CronUpdate(ctx, res[0].ID, &p); err != nil {
			return CronResult{}, err
		}
		out.Updated = true
	}
	c.wake(ctx, time.Until(next))
	return out, nil
}

// cronKey is the unique key of a named periodic task; the prefix keeps it
// apart from one-off submissions' keys.
func cronKey(name string) string { return "cron:" + name }

// CronName returns the name of a periodic task from its unique key.
func CronName(uniqueKey string) string { return strings.TrimPrefix(uniqueKey, "cron:") }

// CronList lists periodic tasks.
func (c *Client) CronList(ctx context.Context) ([]*task.Task, error) {
	typ := task.Periodic
	var all []*task.Task
	// Every periodic task, a page at a time: one page of 10,000 left the
	// oldest out of a longer list, unsaid, and `taskd cron list CODE`
	// (which filters this) showed none of a code whose tasks were among them.
	for before := int64(0); ; {
		ts, err := c.store.TaskList(ctx, &store.TaskListParams{Type: &typ, Limit: cronPage, BeforeID: before})
		if err != nil {
			return nil, err
		}
		all = append(all, ts...)
		if len(ts) < cronPage {
			return all, nil
		}
		before = ts[len(ts)-1].ID
	}
}

// cronPage is the number of periodic tasks CronList reads per statement.
const cronPage = 10000

// CronGet returns the periodic task of code named name ("": the code).
func (c *Client) CronGet(ctx context.Context, code, name string) (*task.Task, error) {
	if name == "" {
		name = code
	}
	t, err := c.store.TaskGetByUnique(ctx, code, cronKey(name))
	if task.ErrorCode(err) == task.CodeNotFound {
		return nil, task.NotFoundf("no periodic task of code %s named %q%s", code, name, c.cronNames(ctx, code))
	}
	return t, err
}

// cronNames names the periodic tasks code has, for a lookup by a name it
// has not: `taskd cron remove hello` of a task added with --name demo.
// Rows INSERTed the seed's way have no name (no unique key), which no
// --name picks: they are named by id, with the command that removes one.
func (c *Client) cronNames(ctx context.Context, code string) string {
	const shown = 5
	typ := task.Periodic
	ts, err := c.store.TaskList(ctx, &store.TaskListParams{Code: code, Type: &typ, Limit: 100, Brief: true})
	if err != nil || len(ts) == 0 {
		return ""
	}
	var named []string
	var unnamed []int64
	for _, t := range ts {
		if n := CronName(t.UniqueKey); n != "" {
			named = append(named, n)
		} else {
			unnamed = append(unnamed, t.ID)
		}
	}
	list := func(items []string) string {
		if len(items) > shown {
			items = append(items[:shown:shown], "...")
		}
		return strings.Join(items, ", ")
	}
	quoted := make([]string, len(named))
	for i, n := range named {
		quoted[i] = strconv.Quote(n)
	}
	switch {
	case len(unnamed) == 0 && len(named) == 1:
		return fmt.Sprintf(": its periodic task is named %s (--name %s)", quoted[0], named[0])
	case len(unnamed) == 0:
		return fmt.Sprintf(": its periodic tasks are named %s (pick one with --name)", list(quoted))
	}
	slices.Sort(unnamed)
	ids := make([]string, len(unnamed))
	for i, id := range unnamed {
		ids[i] = strconv.FormatInt(id, 10)
	}
	have, remove := "have", "taskd delete ID removes one"
	if len(unnamed) == 1 {
		have, remove = "has", fmt.Sprintf("taskd delete %d removes it", unnamed[0])
	}
	hint := fmt.Sprintf("%s %s no name (INSERTed without a unique key): %s", list(ids), have, remove)
	switch {
	case len(named) == 0 && len(unnamed) == 1:
		return ": its periodic task " + hint
	case len(named) == 0:
		return ": its periodic tasks " + hint
	case len(named) == 1:
		return fmt.Sprintf(": its periodic task named %s is picked with --name %s, and %s", quoted[0], named[0], hint)
	}
	return fmt.Sprintf(": its periodic tasks named %s are picked with --name, and %s", list(quoted), hint)
}

// CronRemove deletes the periodic task of code with name (default: the
// code), and records who did in the audit log; a failed audit write is
// returned as auditErr beside the removal. A run in flight finishes; its
// result write is rejected by the fence.
func (c *Client) CronRemove(ctx context.Context, code, name string, who store.Actor) (id int64, auditErr, err error) {
	t, err := c.CronGet(ctx, code, name)
	if err != nil {
		return 0, nil, err
	}
	if err := c.store.TaskDelete(ctx, t.ID); err != nil {
		return 0, nil, err
	}
	auditErr = c.store.Audit(ctx, who, "cron remove", fmt.Sprintf("task %d", t.ID), 1,
		map[string]any{"code": t.Code, "name": CronName(t.UniqueKey), "cron": t.CronExpr})
	return t.ID, auditErr, nil
}
