package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/startstop"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// takeBatchMax bounds the messages taken of one queue per Redis round
// trip.
const takeBatchMax = 256

// sweepInterval is how often the fetcher tries every queue with free slots
// whether or not a wake token came: a token lost with a failed take, or
// pushed by a peer that names the wake lists differently, costs at most
// this much delay.
const sweepInterval = 30 * time.Second

// reconcileEvery spaces the fetcher's tries to reconcile its processing
// lists (held.go) while they fail.
const reconcileEvery = time.Second

// pool is the fetch and run pool: one fetcher takes, for every queue, as
// many messages as it has free slots, marks them running and runs each in
// its slot; a finished attempt goes to the completer. A waker blocks on
// the wake tokens of all the queues with free slots on one connection, so
// an idle worker costs one blocked connection and one command a second
// however many queues it consumes.
type pool struct {
	w      *Worker
	policy policy

	fetch startstop.Runner // the fetcher and the waker; Stop stops taking work
	// runCtx is the parent of every attempt; stopRuns cancels them all
	// (hand back).
	runCtx   context.Context
	stopRuns context.CancelFunc
	runs     sync.WaitGroup
	// next hands an attempt to a runner parked between attempts, so that
	// a steady stream of short tasks reuses goroutines (and their grown
	// stacks) instead of starting one per attempt; idle counts the
	// parked runners, runners all of them.
	next    chan *job
	idle    atomic.Int32
	runners sync.WaitGroup
	// untraced: attempts get no span (tracing is off).
	untraced bool

	// freed receives the queue of every slot given back (buffered for all
	// slots: a release never blocks); woken the queues whose token the
	// waker took.
	freed chan string
	woken chan string
	// waitOn is the set of queues the waker is to wait on, waiting the set
	// it waits on now; interrupted is set once the waker was told to wait
	// again.
	waitOn      atomic.Pointer[[]string]
	waiting     atomic.Pointer[[]string]
	interrupted atomic.Bool
}

// queueState is the fetcher's view of one queue.
type queueState struct {
	name     string
	capacity int
	used     int
	// hungry: the queue may have messages (its last take got all it asked
	// for, a token came, or the sweep is due).
	hungry bool
	// A queue whose limit held messages back: until notBefore (a rate's
	// next token) it is neither taken from nor waited on; at retryAt (a
	// lease's expiry, when a release wakes it sooner) it is hungry again.
	notBefore, retryAt time.Time
}

// limited notes a take that the queue's limit held back, and reports
// whether it did.
func (qs *queueState) limited(t broker.Taken, now time.Time) bool {
	switch t.By {
	case "rate":
		qs.notBefore, qs.hungry = now.Add(max(t.Retry, limitRetryMin)), false
	case "max_running":
		qs.retryAt, qs.hungry = now.Add(max(t.Retry, limitRetryMin)), false
	default:
		return false
	}
	return true
}

// waitsOnLimit reports whether the queue waits for its rate at now.
func (qs *queueState) waitsOnLimit(now time.Time) bool { return now.Before(qs.notBefore) }

// limitRetryMin bounds how often a worker asks a limited queue again: a
// rate's tokens gather meanwhile (up to its burst) and come in one take.
const limitRetryMin = 10 * time.Millisecond

// stallPoll is how often a fetcher that stopped taking while results
// wait to be written looks whether they were.
const stallPoll = 50 * time.Millisecond

// Start runs the fetcher and the waker.
func (p *pool) Start(ctx context.Context) error {
	runCtx, cancel := context.WithCancelCause(ctx)
	p.runCtx, p.stopRuns = runCtx, func() { cancel(ErrShutdown) }
	p.untraced = untraced(p.runCtx, p.w.cfg.Tracer)
	p.freed = make(chan string, max(1, p.w.slots.capacity()))
	p.woken = make(chan string)
	p.next = make(chan *job)
	return p.fetch.Start(ctx, func(ctx context.Context) {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.wake(ctx)
		}()
		p.fetchAll(ctx)
		wg.Wait()
	})
}

// stop stops taking work and drains: running attempts get grace to finish,
// then are cancelled and get handBack to return; a handler that ignores its
// context is handed back by force (its late result is rejected by the
// fence) when handBackForce is set.
func (p *pool) stop(grace, handBack time.Duration, handBackForce bool) {
	p.fetch.Stop()
	if p.stopRuns == nil { // never started
		return
	}
	if grace > 0 && waitTimeout(&p.runs, grace) {
		p.stopRuns()
		p.runnersLeave()
		return
	}
	if grace > 0 {
		p.w.log.Warn("shutdown grace over; handing back running tasks", "running", p.w.slots.busy.Load())
	}
	// Exec handlers get their kill grace; Go handlers should return on
	// cancel.
	p.stopRuns()
	if waitTimeout(&p.runs, handBack) {
		p.runnersLeave()
	} else if handBackForce {
		p.forceHandBack()
	}
}

// runnersLeaveMax bounds the wait for the runners once every slot is
// free: parked ones leave at once on the cancelled runCtx, but one can
// still be in a handler the watchdog abandoned (its slot freed early),
// and is left behind as its attempt was.
const runnersLeaveMax = time.Second

func (p *pool) runnersLeave() { waitTimeout(&p.runners, runnersLeaveMax) }

func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// release gives one slot of queue q back to the fetcher.
func (p *pool) release(q string) { p.freed <- q }

// fetchAll is the fetcher: take from every hungry queue with free slots in
// one round trip, then wait for a slot to free, a token, a change of queue
// state or the sweep.
func (p *pool) fetchAll(ctx context.Context) {
	w := p.w
	var begins sync.WaitGroup
	defer begins.Wait()
	var queues []*queueState
	byName := map[string]*queueState{}
	for _, q := range w.Queues() {
		qs := &queueState{name: q, capacity: w.slots.queueCapacity(q), hungry: true}
		queues = append(queues, qs)
		byName[q] = qs
	}
	sweep := time.NewTicker(sweepInterval)
	defer sweep.Stop()
	layout := w.broker.Layout()
	changed := layout.Changed()
	errDelay := retryFirst
	start := 0
	limitTimer := time.NewTimer(time.Hour)
	limitTimer.Stop()
	defer limitTimer.Stop()
	backedUp := false
	var reconcileAt time.Time
	// A Redis that is down or refuses this node fails every take and
	// reconcile: a line when it starts, one a minute, one when it ends.
	takeFails := startstop.FailLog{Log: w.log, Level: slog.LevelError, Failed: "take failed; retrying", Again: "taking work again"}
	reconcileFails := startstop.FailLog{Log: w.log, Level: slog.LevelWarn,
		Failed: "reconcile processing lists failed; trying again", Again: "processing lists reconciled again"}
	for {
		// Results wait for the writers: a full batch of them (a slow
		// link), or any while a write fails (a task center down, or one
		// whose disk is full). Take nothing until they catch up: what is
		// taken meanwhile would run without its result being stored, and
		// run again after recovery if the node stops before it is.
		if w.comp.backedUp() {
			if !backedUp {
				backedUp = true
				w.log.Warn("results wait to be written; taking no new work until they are",
					"queued", len(w.comp.in), "oldest_waiting", w.comp.waiting().Round(time.Millisecond).String())
			}
			if !startstop.Sleep(ctx, stallPoll) {
				return
			}
			continue
		} else if backedUp {
			backedUp = false
			w.log.Info("results written again; taking work")
		}
		if w.held.suspect.Load() && !w.clock.Now().Before(reconcileAt) {
			reconcileAt = w.clock.Now().Add(reconcileEvery)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), takeTimeout)
			err := w.reconcile(rctx)
			cancel()
			reconcileFails.Pass(ctx, err)
			if err == nil {
				w.held.suspect.Store(false)
			}
		}
		now := w.clock.Now()
		reqs, states := p.takeRound(queues, start, layout, now)
		start++
		if len(reqs) > 0 {
			// The take is not cancelled mid-flight: a message moved by
			// Redis must reach us.
			tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), takeTimeout)
			got, err := w.broker.TakeMany(tctx, w.cfg.ID, reqs)
			cancel()
			if err != nil {
				// Its reply may be what was lost: the messages it moved
				// would wait in this worker's lists.
				w.held.suspect.Store(true)
			}
			for i, qs := range states {
				taken := got[i]
				w.held.add(taken.Msgs)
				qs.used += len(taken.Msgs)
				if len(taken.Msgs) < reqs[i].Max && !qs.limited(taken, now) {
					qs.hungry = err != nil && taken.Msgs == nil // a failed take tries again
				}
				if len(taken.Msgs) > 0 {
					begins.Add(1)
					go func() {
						defer begins.Done()
						p.begin(ctx, qs.name, taken.Msgs, taken.Leases)
					}()
				}
			}
			takeFails.Pass(ctx, err)
			if err == nil {
				errDelay = retryFirst
				continue
			}
			if !startstop.Sleep(ctx, errDelay) {
				return
			}
			errDelay = min(errDelay*2, retryMax)
			continue
		}
		p.waitFor(ctx, queues, layout, now)
		if at, ok := nextLimitCheck(queues); ok {
			limitTimer.Reset(max(0, at.Sub(w.clock.Now())))
		}
		select {
		case <-ctx.Done():
			return
		case <-limitTimer.C:
			now := w.clock.Now()
			for _, qs := range queues {
				if !qs.notBefore.IsZero() && !now.Before(qs.notBefore) {
					qs.notBefore, qs.hungry = time.Time{}, true
				}
				if !qs.retryAt.IsZero() && !now.Before(qs.retryAt) {
					qs.retryAt, qs.hungry = time.Time{}, true
				}
			}
		case q := <-p.freed:
			byName[q].used--
		case q := <-p.woken:
			byName[q].hungry, byName[q].retryAt = true, time.Time{}
		case <-changed:
			layout = w.broker.Layout()
			changed = layout.Changed()
			for _, qs := range queues {
				qs.hungry = true
			}
		case <-sweep.C:
			for _, qs := range queues {
				qs.hungry = true
			}
		}
		// Everything that happened meanwhile goes into the next round.
		for drained := false; !drained; {
			select {
			case q := <-p.freed:
				byName[q].used--
			case q := <-p.woken:
				byName[q].hungry, byName[q].retryAt = true, time.Time{}
			default:
				drained = true
			}
		}
	}
}

// takeRound lists the takes due now: every hungry, unpaused queue with free
// slots that is not waiting for its rate, from a rotating start so that no
// queue always goes first.
func (p *pool) takeRound(queues []*queueState, start int, l broker.Layout, now time.Time) ([]broker.TakeRequest, []*queueState) {
	var reqs []broker.TakeRequest
	var states []*queueState
	for i := range queues {
		qs := queues[(start+i)%len(queues)]
		if free := qs.capacity - qs.used; qs.hungry && free > 0 && !l.Paused(qs.name) && !qs.waitsOnLimit(now) {
			reqs = append(reqs, broker.TakeRequest{Queue: qs.name, Max: min(free, takeBatchMax), LeaseTTL: p.w.cfg.HeartbeatTTL})
			states = append(states, qs)
		}
	}
	return reqs, states
}

// nextLimitCheck is the earliest time a limited queue is to be asked
// again, if one is.
func nextLimitCheck(queues []*queueState) (time.Time, bool) {
	var at time.Time
	for _, qs := range queues {
		for _, t := range []time.Time{qs.notBefore, qs.retryAt} {
			if !t.IsZero() && (at.IsZero() || t.Before(at)) {
				at = t
			}
		}
	}
	return at, !at.IsZero()
}

// waitFor tells the waker which queues to wait on: those with free slots
// that are not paused nor waiting for their rate. A queue that gains a free
// slot while the waker waits without it interrupts that wait. Queues with
// no free slot are left out, so that their tokens wake a worker that can
// take.
func (p *pool) waitFor(ctx context.Context, queues []*queueState, l broker.Layout, now time.Time) {
	var set []string
	for _, qs := range queues {
		if qs.used < qs.capacity && !l.Paused(qs.name) && !qs.waitsOnLimit(now) {
			set = append(set, qs.name)
		}
	}
	if old := p.waitOn.Load(); old != nil && slices.Equal(*old, set) {
		return
	}
	p.waitOn.Store(&set)
	cur := p.waiting.Load()
	if cur == nil || isSubset(set, *cur) || !p.interrupted.CompareAndSwap(false, true) {
		return
	}
	ictx, cancel := context.WithTimeout(ctx, beatTimeout)
	defer cancel()
	if err := p.w.broker.Interrupt(ictx, p.w.cfg.ID); err != nil && ctx.Err() == nil {
		p.w.log.Warn("wake the waker", "err", err)
	}
}

// isSubset reports whether every element of a (sorted) is in b (sorted).
func isSubset(a, b []string) bool {
	for _, s := range a {
		if _, ok := slices.BinarySearch(b, s); !ok {
			return false
		}
	}
	return true
}

// wake is the waker: it blocks on the wake tokens of the queues the
// fetcher asks for and hands the fetcher each queue whose token it took.
func (p *pool) wake(ctx context.Context) {
	w := p.w
	errDelay := retryFirst
	fails := startstop.FailLog{Log: w.log, Level: slog.LevelError, Failed: "wait for work failed; retrying", Again: "waiting for work again"}
	for ctx.Err() == nil {
		set := p.waitOn.Load()
		if set == nil {
			set = &[]string{}
		}
		p.waiting.Store(set)
		p.interrupted.Store(false)
		q, err := w.broker.WaitNotify(ctx, w.cfg.ID, *set, takeWait)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			fails.Fail(err)
			if !startstop.Sleep(ctx, errDelay) {
				return
			}
			errDelay = min(errDelay*2, retryMax)
			continue
		}
		errDelay = retryFirst
		fails.OK()
		if q == "" {
			continue
		}
		select {
		case p.woken <- q:
		case <-ctx.Done():
			return
		}
	}
}

// begin decodes taken messages and starts them at once: the running mark
// comes later, from the marker, for the attempts still running then. A
// second copy of an attempt this worker runs already (a retried push) is
// dropped. Each message holds one slot of q until it is released.
func (p *pool) begin(ctx context.Context, q string, raws, leases []string) {
	w := p.w
	var stale, staleLeases []string
	for i, raw := range raws {
		lease := ""
		if i < len(leases) {
			lease = leases[i]
		}
		m, err := task.DecodeMessage([]byte(raw))
		if err != nil {
			w.count.poison.Add(1)
			w.log.Error("poison message moved aside", "queue", q, "err", err, "message", handler.Truncate(raw, 512))
			if qerr := w.broker.Quarantine(context.WithoutCancel(ctx), q, w.cfg.ID, raw); qerr != nil {
				w.log.Error("quarantine", "err", qerr)
			} else {
				w.held.drop(raw)
			}
			staleLeases = append(staleLeases, lease)
			p.release(q)
			continue
		}
		if !p.launch(&job{msg: m, raw: raw, queue: q, lease: lease}) {
			w.count.stale.Add(1)
			w.log.Warn("duplicate message dropped", "task_id", m.ID, "task_code", m.Code, "attempt", m.Attempt)
			stale, staleLeases = append(stale, raw), append(staleLeases, lease)
			p.release(q)
		}
	}
	if stale != nil {
		if err := w.broker.Ack(context.WithoutCancel(ctx), w.cfg.ID, map[string][]string{q: stale}); err != nil {
			w.log.Warn("drop stale messages", "err", err)
		} else {
			w.held.drop(stale...)
		}
	}
	if err := w.releaseLeases(context.WithoutCancel(ctx), q, staleLeases...); err != nil {
		w.log.Warn("release the leases of dropped messages", "err", err)
	}
}

// launch runs j in the slot it holds, unless the worker runs that attempt
// already.
func (p *pool) launch(j *job) bool {
	w := p.w
	j.ctx, j.kill = context.WithCancelCause(p.runCtx)
	// The upper bound: the start is recorded as started_at when the result
	// comes before the running mark, and must not precede the dispatched_at
	// the database stamped at the claim.
	j.started, j.startedDB = w.clock.Now(), w.db.Latest()
	j.returned = make(chan struct{})
	p.runs.Add(1)
	if !w.slots.add(j) {
		j.kill(nil)
		p.runs.Done()
		return false
	}
	if j.msg.DueUnixMS > 0 {
		w.cfg.Metrics.Started(j.queue, j.startedDB.Sub(time.UnixMilli(j.msg.DueUnixMS)))
	}
	select {
	case p.next <- j: // a parked runner took it
	default:
		p.runners.Add(1)
		go p.runner(j)
	}
	return true
}

// runnersIdleMax bounds the runners parked between attempts; a runner
// beyond it exits after its attempt.
const runnersIdleMax = 256

// runner runs j, then parks for the next attempt until the pool stops or
// enough runners are parked already.
func (p *pool) runner(j *job) {
	defer p.runners.Done()
	for {
		p.attempt(j)
		if p.idle.Add(1) > runnersIdleMax {
			p.idle.Add(-1)
			return
		}
		select {
		case j = <-p.next:
			p.idle.Add(-1)
		case <-p.runCtx.Done():
			p.idle.Add(-1)
			return
		}
	}
}

// attempt runs j in its slot and gives the slot back when it returns.
func (p *pool) attempt(j *job) {
	defer p.free(j)
	defer close(j.returned)
	p.run(j)
}

// free gives j's slot back, once: when its handler returns, or earlier
// when the watchdog abandons it.
func (p *pool) free(j *job) {
	if j.freed.CompareAndSwap(false, true) {
		p.w.slots.remove(j)
		p.release(j.queue)
		p.runs.Done()
	}
}

// run executes one attempt and hands its result to the completer.
func (p *pool) run(j *job) {
	w := p.w
	m := j.msg
	// Killed while its message waited, or between its take and now: the
	// task center has it cancelled already, and the handler is not run.
	if w.kills.early.take(m.ID, m.Attempt) || errors.Is(context.Cause(j.ctx), errKilled) {
		w.log.Warn("task killed before it started; not run", taskAttrs(m.ID, m.Code, m.Attempt)...)
		p.complete(j, &attemptEnd{killed: true, err: errKilled})
		j.kill(nil)
		return
	}
	if m.DispatchedUnixMS > 0 && j.startedDB.Sub(time.UnixMilli(m.DispatchedUnixMS)) > confirmAfter && w.mark.confirm(j.ctx, j) {
		p.complete(j, &attemptEnd{interrupted: true}) // dropped, unrun
		return
	}
	h, ok := w.cfg.Handlers.Lookup(m.Code)
	timeout := task.EffectiveTimeout(m.Timeout)
	if ok {
		timeout = handler.AttemptTimeout(h, timeout)
	}
	ctx, cancel := context.WithTimeout(w.startAttempt(j, p.untraced), timeout)
	defer cancel()
	defer j.kill(nil)

	e := &attemptEnd{}
	if !ok {
		e.err = fmt.Errorf("no handler for task code %q on worker %s", m.Code, w.cfg.ID)
	} else {
		// The latest output is published while the attempt runs, for
		// operators watching it.
		tail := handler.StartTail(func(ctx context.Context, out string, done bool) error {
			return w.broker.PublishTail(ctx, &broker.TaskTail{ID: m.ID, Attempt: m.Attempt, Worker: w.cfg.ID,
				At: w.clock.Now(), Done: done, Output: out})
		}, 0, 0)
		r := &handler.Request{
			ID: m.ID, Code: m.Code, Queue: m.Queue, Attempt: m.Attempt, Retry: m.RetryCount, MaxRetry: m.MaxRetry,
			UniqueKey: m.UniqueKey, Group: m.Group, ScheduledAt: m.Scheduled(), Payload: m.Payload, Tail: tail,
		}
		if len(m.Then) > 0 {
			r.Value = func(v string) { e.value = &v }
		}
		e.output, e.err = handler.Safe(ctx, h, r)
		tail.Close()
	}
	e.duration = w.clock.Now().Sub(j.started)
	if e.err != nil {
		switch {
		case errors.Is(context.Cause(j.ctx), errKilled):
			e.killed = true
		case errors.Is(context.Cause(j.ctx), errMarkLost):
			e.interrupted = true // nothing is written: complete drops it
		case p.runCtx.Err() != nil:
			e.interrupted = true
		case errors.Is(e.err, handler.ErrNotStarted):
			e.interrupted = true // handed back, with why in its run row
		case errors.Is(e.err, handler.ErrPermanent):
			// The handler's own verdict, even at its timeout: a pool
			// process answers in the time its wait was credited.
			e.permanent = true
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			e.timedOut = true
			e.err = timedOut{after: timeout, err: e.err}
		default:
			e.retryAfter = handler.RetryAfter(e.err)
		}
	}
	if !e.interrupted {
		w.count.processed.Add(1)
		// The task's fields are boxed only for a line that is written.
		if e.killed {
			// An operator's doing, not the handler's failure.
			w.log.Info("task attempt killed by operator", taskAttrs(m.ID, m.Code, m.Attempt, "duration", e.duration)...)
		} else if e.err != nil {
			w.count.failed.Add(1)
			w.log.Warn("task attempt failed", taskAttrs(m.ID, m.Code, m.Attempt, "err", e.err, "duration", e.duration)...)
		} else if w.log.Enabled(context.Background(), slog.LevelDebug) {
			w.log.Debug("task succeeded", taskAttrs(m.ID, m.Code, m.Attempt, "duration", e.duration)...)
		}
	}
	p.complete(j, e)
}

// complete hands the end of j's attempt to the completer, once. The
// result is fenced on the status the attempt has: dispatched when it ended
// before its running mark, running after. An attempt whose mark the fence
// rejected (recovered or cancelled meanwhile) writes nothing.
func (p *pool) complete(j *job, e *attemptEnd) {
	if !j.done.CompareAndSwap(false, true) {
		return
	}
	w := p.w
	from, ok := j.endMark()
	if !ok {
		w.count.stale.Add(1)
		w.log.Warn("attempt taken from this worker (recovered or cancelled): nothing written", "task_id", j.msg.ID, "task_code", j.msg.Code, "attempt", j.msg.Attempt)
		endAttempt(j, task.OutcomeCrashed, errTakenAway)
		ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
		defer cancel()
		if err := w.broker.Ack(ctx, w.cfg.ID, map[string][]string{j.queue: {j.raw}}); err != nil {
			w.log.Warn("drop stale message", "err", err)
		} else {
			w.held.drop(j.raw)
		}
		if err := w.releaseLeases(ctx, j.queue, j.lease); err != nil {
			w.log.Warn("release the lease of a dropped attempt", "err", err)
		}
		return
	}
	run := &store.RunRecord{Code: j.msg.Code, Queue: j.queue, WorkerID: w.cfg.ID, Node: w.cfg.Node}
	tr := p.policy.transition(j.msg, e, run)
	tr.From = from
	if from == task.Dispatched {
		tr.StartedAt = j.startedDB
	}
	endAttempt(j, run.Outcome, e.err)
	w.comp.add(completion{tr: tr, code: j.msg.Code, queue: j.queue, raw: j.raw, lease: j.lease, grouped: j.msg.Grouped})
}

// forceHandBack hands back tasks whose handlers ignored cancellation.
func (p *pool) forceHandBack() {
	for _, j := range p.w.slots.running() {
		if j.done.Load() {
			continue
		}
		p.w.log.Error("handler ignored cancellation; task handed back", "task_id", j.msg.ID, "task_code", j.msg.Code, "attempt", j.msg.Attempt)
		p.complete(j, &attemptEnd{interrupted: true, duration: p.w.clock.Now().Sub(j.started)})
	}
}
