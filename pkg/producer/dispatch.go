package producer

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/queues"
	"github.com/taskd/taskd/pkg/scheduler"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// Submit that dispatches at once. A task due now is inserted already
// claimed, as a scheduler's claim would leave it (dispatched, attempt 1,
// dispatched_at now), and pushed to its queue right after the commit: one
// durable commit between submit and start instead of two, and no wait for
// a scheduler's turn. Only a task that needs no rule applied at claim
// time goes this way; the others wait for a scheduler as before:
//
//   - a delayed or timed task, or one debounced (it is not due now);
//   - a task of a paused queue;
//   - a task with a group in a queue whose tasks are claimed group by
//     group (per-group limits, serial order);
//   - a task of a queue whose Redis lists hold a full window
//     (Options.Window, or Options.WindowBytes of payloads): the backlog
//     waits in the task center, as the schedulers keep it there.
//
// Queue-wide rates and max_running are enforced as workers take, so they
// hold either way. The queue state is the one schedulers follow (pkg/queues,
// read again when older than a second), so a pause reaches submitters as it
// reaches schedulers; a task dispatched into a queue paused a moment
// before waits in its list, as one claimed then would.
//
// A push that fails hands the task back to pending (the attempt stays
// spent, so a push that did land is rejected by the fence) and wakes the
// schedulers. A submitter that dies between its commit and the push, or
// whose hand-back fails too, leaves a dispatched task with no message:
// recovery re-dispatches it once it has been dispatched longer than
// recovery.dispatch_window, as it does for a scheduler that died between
// its claim and its push.
//
// What became of the tasks dispatched at once is counted per client
// (Client.Counts) and for the whole process (ProcessCounts), which a
// node's /metrics reports: a Go program that runs a taskd.Server and
// submits through taskd.NewClient has its submits counted there.

// WindowDefault is Options.Window when it is zero: the least window a
// scheduler gives a queue (two claim batches).
const WindowDefault = 2 * scheduler.BatchSizeDefault

// pushTimeout bounds the push after the commit. It does not follow the
// caller's context: a cancelled caller's task is committed and should not
// wait for recovery.
const pushTimeout = 10 * time.Second

// dispatcher is what a client knows to dispatch at once.
type dispatcher struct {
	queues *queues.Cache
	window int
	// windowBytes bounds the payloads a queue holds (Options.WindowBytes;
	// 0: none): a task is dispatched at once only while its queue's
	// messages, each counted at this task's size, stay within it, or the
	// queue is empty.
	windowBytes int64
	counts      counters // this client's; process has every client's
	// push is the broker's Push (tests inject failures).
	push func(ctx context.Context, msgs []*task.Message) ([]*task.Message, error)

	mu     sync.Mutex
	readAt time.Time
	// fullUntil: queues a Redis at maxmemory refused lately, left to the
	// schedulers until then (scheduler.FullRedisWait), so that a submit
	// does not insert claimed, fail to push and hand back every time; and
	// after, while Redis is still full (stillFull).
	fullUntil map[string]time.Time
	clock     clock.Clock
	routes    map[string]string // task code -> queue, for rows that name none
	// reading is closed when the read in flight ends (nil: none is).
	reading chan struct{}
}

func newDispatcher(c *Client) *dispatcher {
	if c.opts.Queues == nil || c.broker == nil {
		return nil
	}
	return &dispatcher{queues: c.opts.Queues, window: c.opts.Window, windowBytes: scheduler.WindowBytes(c.opts.WindowBytes),
		push: c.broker.Push, clock: clock.Or(c.opts.Clock)}
}

// refresh reads the queue state and the routes when they are older than
// the schedulers' own refresh. One submit reads; the others go on with
// what was read a second ago meanwhile (as the nodes do), and wait only
// when nothing was read yet.
func (d *dispatcher) refresh(ctx context.Context, s *store.Store) error {
	d.mu.Lock()
	if time.Since(d.readAt) < queues.RefreshDefault {
		d.mu.Unlock()
		return nil
	}
	if wait := d.reading; wait != nil {
		read := !d.readAt.IsZero()
		d.mu.Unlock()
		if read {
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
		return d.refresh(ctx, s)
	}
	done := make(chan struct{})
	d.reading = done
	d.mu.Unlock()

	routes, err := d.read(ctx, s)
	d.mu.Lock()
	if err == nil {
		d.routes, d.readAt = routes, time.Now()
	}
	d.reading = nil
	d.mu.Unlock()
	close(done)
	return err
}

// read reads the queue state into the cache, and the routes.
func (d *dispatcher) read(ctx context.Context, s *store.Store) (map[string]string, error) {
	if err := d.queues.Refresh(ctx); err != nil {
		return nil, err
	}
	rs, err := s.RouteList(ctx)
	if err != nil {
		return nil, err
	}
	routes := make(map[string]string, len(rs))
	for _, r := range rs {
		routes[r.Code] = r.Queue
	}
	return routes, nil
}

// queueOf is the queue a row of p is dispatched to (store's queueOf).
func (d *dispatcher) queueOf(p *store.TaskInsertParams) string {
	if p.Queue != "" {
		return p.Queue
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if q := d.routes[p.Code]; q != "" {
		return q
	}
	return p.Code
}

// claimNow sets Claim on the params of ps that are dispatched at once.
// Whatever it cannot tell (the task center or Redis unreachable) leaves
// the tasks to the schedulers.
func (c *Client) claimNow(ctx context.Context, subs []Submission, ps []store.TaskInsertParams) {
	d := c.disp
	if d == nil {
		return
	}
	var cands []int
	for i := range ps {
		if subs[i].Delay == 0 && subs[i].At.IsZero() && ps[i].Delay == 0 && ps[i].Type == task.OneOff {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		return
	}
	if err := d.refresh(ctx, c.store); err != nil {
		c.opts.Logger.Debug("read queue state; the schedulers dispatch", "err", err)
		return
	}
	grouped := d.queues.Grouped()
	var qs []string
	want := map[string]int{}
	eligible := cands[:0]
	for _, i := range cands {
		q := d.queueOf(&ps[i])
		if d.queues.Paused(q) || d.full(q) {
			continue
		}
		if _, ok := grouped[q]; ok && ps[i].Group != "" {
			continue
		}
		if want[q] == 0 {
			qs = append(qs, q)
		}
		want[q]++
		ps[i].DispatchQueue = q
		eligible = append(eligible, i)
	}
	if eligible = c.stillFull(ctx, eligible, ps); len(eligible) == 0 {
		return
	}
	var lens map[string]int64
	if ok, err := c.redisStep(ctx, func(ctx context.Context) (err error) {
		lens, err = c.broker.QueueLens(ctx, qs)
		return err
	}); !ok {
		c.opts.Logger.Debug("read queue lengths; the schedulers dispatch", "err", err)
		return
	}
	window := d.window
	if window <= 0 {
		window = WindowDefault
	}
	for _, i := range eligible {
		q := ps[i].DispatchQueue
		if n := lens[q]; n >= int64(window) || d.windowBytes > 0 && n > 0 && (n+1)*int64(len(ps[i].Payload)) > d.windowBytes {
			continue
		}
		lens[q]++
		ps[i].Claim = true
	}
}

// full reports whether a Redis at maxmemory refused a push to q lately.
func (d *dispatcher) full(q string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.clock.Now().Before(d.fullUntil[q])
}

// stillFull drops from eligible the tasks of queues whose wait after a
// refusal ran out while Redis is still past its maxmemory, and leaves
// those queues to the schedulers for another wait: a task inserted
// claimed into a Redis that refuses its push goes back with its attempt
// spent, once per queue and wait for as long as Redis stays full. Once
// Redis has room, the queues are forgotten. One INFO per such queue's
// wait, none otherwise.
func (c *Client) stillFull(ctx context.Context, eligible []int, ps []store.TaskInsertParams) []int {
	d := c.disp
	d.mu.Lock()
	var lapsed []string
	for _, i := range eligible {
		if q := ps[i].DispatchQueue; !d.fullUntil[q].IsZero() && !slices.Contains(lapsed, q) {
			lapsed = append(lapsed, q)
		}
	}
	d.mu.Unlock()
	if len(lapsed) == 0 {
		return eligible
	}
	var m broker.Memory
	if ok, _ := c.redisStep(ctx, func(ctx context.Context) (err error) {
		m, err = c.broker.Memory(ctx)
		return err
	}); !ok {
		return eligible // unknown: tried, as before this check
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !m.Full() {
		for _, q := range lapsed {
			delete(d.fullUntil, q)
		}
		return eligible
	}
	for _, q := range lapsed {
		d.fullUntil[q] = d.clock.Now().Add(scheduler.FullRedisWait)
	}
	kept := eligible[:0]
	for _, i := range eligible {
		if slices.Contains(lapsed, ps[i].DispatchQueue) {
			ps[i].DispatchQueue = ""
			continue
		}
		kept = append(kept, i)
	}
	return kept
}

// refused records that Redis refused pushes to the queues of msgs for
// lack of memory, and returns those it had not refused lately.
func (d *dispatcher) refused(msgs []*task.Message) (fresh []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fullUntil == nil {
		d.fullUntil = map[string]time.Time{}
	}
	now := d.clock.Now()
	for _, m := range msgs {
		if !now.Before(d.fullUntil[m.Queue]) {
			fresh = append(fresh, m.Queue)
		}
		d.fullUntil[m.Queue] = now.Add(scheduler.FullRedisWait)
	}
	slices.Sort(fresh)
	return slices.Compact(fresh)
}

// Counts say what became of the tasks that submits inserted dispatched.
// A task whose submitter died before its push is in none of them: the
// recovery that re-dispatches it counts it (taskd_tasks_recovered_total,
// kind redispatched).
type Counts struct {
	// Dispatched were pushed to their queue by their submit.
	Dispatched int64
	// HandedBack: their push failed and they went back to pending (the
	// attempt spent); a scheduler dispatches them again.
	HandedBack int64
	// LeftToRecovery: their push and their hand-back failed; recovery
	// re-dispatches them after recovery.dispatch_window.
	LeftToRecovery int64
}

type counters struct{ dispatched, handedBack, left atomic.Int64 }

func (k *counters) add(dispatched, handedBack, left int) {
	k.dispatched.Add(int64(dispatched))
	k.handedBack.Add(int64(handedBack))
	k.left.Add(int64(left))
}

func (k *counters) read() Counts {
	return Counts{Dispatched: k.dispatched.Load(), HandedBack: k.handedBack.Load(), LeftToRecovery: k.left.Load()}
}

// process counts the submits of every client of this process.
var process counters

// ProcessCounts returns the counts of every client of this process.
func ProcessCounts() Counts { return process.read() }

// Counts returns the counts of this client's submits (zero when it does
// not dispatch at once).
func (c *Client) Counts() Counts {
	if c.disp == nil {
		return Counts{}
	}
	return c.disp.counts.read()
}

// dispatch pushes the messages of tasks inserted dispatched, and hands
// back to pending those it could not push. It returns the ids of the
// tasks pushed, and whether any went back, for which the schedulers are
// woken.
func (c *Client) dispatch(ctx context.Context, msgs []*task.Message) (pushed map[int64]bool, handedBack bool) {
	if len(msgs) == 0 {
		return nil, false
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pushTimeout)
	defer cancel()
	failed, perr := c.disp.push(pctx, msgs)
	pushed = make(map[int64]bool, len(msgs))
	for _, m := range msgs {
		pushed[m.ID] = true
	}
	for _, m := range failed {
		delete(pushed, m.ID)
	}
	count := func(handedBack, left int) {
		c.disp.counts.add(len(pushed), handedBack, left)
		process.add(len(pushed), handedBack, left)
	}
	if len(failed) == 0 {
		count(0, 0)
		return pushed, false
	}
	ts := make([]store.Transition, len(failed))
	for i, m := range failed {
		ts[i] = store.HandBack(m.ID, m.Attempt)
	}
	if _, err := c.store.TaskTransition(pctx, ts); err != nil {
		// Still dispatched: recovery re-dispatches after its window.
		count(0, len(failed))
		c.opts.Logger.Error("hand back after failed push; recovery re-dispatches", "tasks", len(failed), "push_err", perr, "err", err)
		return pushed, false
	}
	count(len(failed), 0)
	switch {
	case !broker.IsOOM(perr):
		c.opts.Logger.Warn("push failed; tasks handed back to the schedulers", "tasks", len(failed), "err", perr)
	case len(c.disp.refused(failed)) > 0:
		// Once per queue while Redis stays full: meanwhile its submits
		// leave their tasks to the schedulers.
		c.opts.Logger.Warn("redis is at maxmemory: push refused, tasks handed back to the schedulers, which dispatch them as workers make room",
			"tasks", len(failed), "err", perr)
	default:
		c.opts.Logger.Debug("redis at maxmemory refused a push; tasks handed back to the schedulers", "tasks", len(failed))
	}
	return pushed, true
}
