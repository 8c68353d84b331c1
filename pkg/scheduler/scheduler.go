// Package scheduler dispatches due tasks: it claims them from the task
// center with a compare-and-set (attempt + 1), pushes them to their Redis
// queues in one pipeline, and hands back any it could not push. Any number
// of schedulers may run at once; the compare-and-set makes each dispatch
// happen exactly once.
package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/startstop"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// Defaults of Config.
const (
	BatchSizeDefault     = 500
	PollIntervalDefault  = time.Second
	ProbeIntervalDefault = 100 * time.Millisecond
)

// Config configures a Scheduler.
type Config struct {
	// BatchSize is the number of tasks claimed per round trip. A full
	// batch triggers the next claim at once.
	BatchSize int
	// PollInterval is the longest sleep between scans when nothing wakes
	// the scheduler: it bounds pickup of rows inserted without a wakeup.
	PollInterval time.Duration
	// ProbeInterval is how often a scheduler waiting for its next poll
	// reads the newest task id, to find rows inserted without a wakeup
	// sooner than the poll would: when it changed, the scheduler reads
	// the next due time and claims as at a wakeup. 0:
	// ProbeIntervalDefault; negative: no probe.
	ProbeInterval time.Duration
	// Window is the most messages one queue may hold in Redis; beyond it
	// due tasks wait in the task center. 0: WindowPerSlotDefault per slot
	// of the queue's live consumers, at least two batches (window.go).
	Window int
	// WindowBytes bounds the window further by its payloads: a queue
	// holds about this many bytes of them, at least a message per
	// consumer slot. 0: WindowBytesDefault; negative: no bound.
	WindowBytes int64
	// ClaimAhead is how long before its due time a task is claimed; its
	// message is held and pushed when the database clock reaches the due
	// time (hold.go). 0: ClaimAheadDefault; negative: claim when due.
	// Claims that leave out paused, full or grouped queues claim when due.
	ClaimAhead time.Duration
	// Clock is the local clock the held messages and the queues' windows
	// are timed by (tests drive it); nil: the system clock.
	Clock  clock.Clock
	Logger *slog.Logger
}

// Scheduler is the dispatch loop.
type Scheduler struct {
	cfg    Config
	store  *store.Store
	broker *broker.Broker
	log    *slog.Logger

	dispatched atomic.Int64
	runner     startstop.Runner
	win        *windows
	hold       *held
	db         *store.Clock // the database clock the held messages are released by
	clock      clock.Clock

	// filter leaves paused, full and grouped queues out of claims and
	// walks past their rows (store.ClaimFilter); it keeps its cursors
	// between the claims that need it.
	filterMu  sync.Mutex
	filter    *store.ClaimFilter
	filterSet map[string]bool // the paused queues it leaves out
	// filterGrouped are the grouped queues it leaves to claimGroups.
	filterGrouped map[string]bool
	filterSince   time.Time
	walkedAt      time.Time   // the last filtered read
	woken         atomic.Bool // a wakeup came since the last claim
	newest        int64       // the newest task id the last probe read
	probed        bool        // newest was read
	stuck         int         // claims in a row that left an overdue task (untilNextDue)
	groups        groupSet
}

// roundTimeout bounds one claim and push: several round trips to MySQL
// and Redis, on links that may be slow.
const roundTimeout = time.Minute

// filterReset is how often a filtered claim starts its windows over, for
// rows inserted with a due time behind a window's cursor.
const filterReset = 10 * time.Second

// walkRest: once the filtered claim's walk passed every due row and no
// queue it left rows of has room, it reads again at most this often, or
// at a wakeup. Each read costs the server about a millisecond even when
// it finds nothing, and a full queue's scheduler looks every fullRecheck;
// rows that fall due meanwhile for other queues wait at most this long.
const walkRest = refillWait

// New returns a scheduler.
func New(cfg Config, s *store.Store, b *broker.Broker) *Scheduler {
	cfg.BatchSize = cmp.Or(cfg.BatchSize, BatchSizeDefault)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, PollIntervalDefault)
	cfg.ProbeInterval = cmp.Or(cfg.ProbeInterval, ProbeIntervalDefault)
	cfg.ClaimAhead = max(0, cmp.Or(cfg.ClaimAhead, ClaimAheadDefault))
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	clk := clock.Or(cfg.Clock)
	return &Scheduler{cfg: cfg, store: s, broker: b, log: cfg.Logger.With("component", "scheduler"),
		win: newWindows(cfg.Window, cfg.WindowBytes, cfg.BatchSize, clk), hold: newHeld(), clock: clk, db: store.NewClock(s, clk)}
}

// Dispatched returns the number of tasks this scheduler has dispatched.
func (s *Scheduler) Dispatched() int64 { return s.dispatched.Load() }

// Start runs the dispatch loop and the releaser of held messages until
// Stop or ctx is done. At the stop, held messages that are due are pushed
// and the others handed back.
func (s *Scheduler) Start(ctx context.Context) error {
	return s.runner.Start(ctx, func(ctx context.Context) {
		wake, closeSub := s.broker.Wakeups(ctx)
		defer closeSub()
		var wg sync.WaitGroup
		wg.Go(func() { s.release(ctx) })
		s.loop(ctx, wake)
		wg.Wait()
		// The loop's last claim may have held messages after the
		// releaser stopped.
		s.unhold(context.WithoutCancel(ctx))
	})
}

// Stop stops the loop and waits for it. Safe to call twice or without
// Start.
func (s *Scheduler) Stop() { s.runner.Stop() }

func (s *Scheduler) loop(ctx context.Context, wake <-chan time.Duration) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	var prober *time.Ticker // ticks while the loop waits for a poll
	if s.cfg.ProbeInterval > 0 {
		prober = time.NewTicker(s.cfg.ProbeInterval)
		defer prober.Stop()
		// The first claim takes what is there now; the probes find
		// what comes after.
		s.probe(ctx)
	}
	errDelay := 100 * time.Millisecond
	// A task center or Redis that is down fails every claim: the first
	// failure is logged, then a line a minute, and the claim that works.
	fails := startstop.FailLog{Log: s.log, Level: slog.LevelError, Failed: "dispatch failed; retrying", Again: "dispatch works again"}
	for {
		n, more, filtered, err := s.runOnce(ctx, s.cfg.ClaimAhead)
		if ctx.Err() != nil {
			return
		}
		if broker.IsOOM(err) {
			// Handled: the tasks went back to pending, the warning named
			// the queues, and their windows hold claims until Redis has
			// room. As a failure it was an error and, a pass later, a
			// "works again" while Redis was still full.
			err = nil
		}
		if err == nil {
			fails.OK()
		}
		wait, dueWake := s.cfg.PollInterval, false
		full := s.win.full()
		switch {
		case err == nil && more:
			// A window was read whole: look further at once. A walk
			// past a full queue's backlog ends (its windows grow, and
			// then it rests), so this does not spin.
			continue
		case err == nil && full && n == 0:
			// Due rows may all be of full queues: workers drain them
			// soon. Look again shortly.
			wait = min(fullRecheck, s.cfg.PollInterval)
		case err == nil && filtered && n == 0:
			// Due rows may all be paused: wait for a wakeup, a poll or
			// the next row to fall due (a retry, a periodic task's next
			// run) instead of spinning on them.
			wait, dueWake = s.untilFutureDue(ctx, 0)
		case err != nil:
			fails.Fail(err)
			wait = errDelay
			errDelay = min(errDelay*2, 5*time.Second)
		case n >= s.cfg.BatchSize:
			errDelay = 100 * time.Millisecond
			continue // more are due
		default:
			errDelay = 100 * time.Millisecond
			ahead := s.cfg.ClaimAhead
			if filtered {
				ahead = 0
			}
			wait = s.untilNextDue(ctx, n, ahead)
		}
		timer.Reset(wait)
		deadline := time.Now().Add(wait)
		// soon moves the next claim to d from now, if that is sooner.
		soon := func(d time.Duration) {
			s.woken.Store(true)
			// A task due within half the claim-ahead is claimed at
			// once, as the loop claims them (untilNextDue).
			d = max(0, d-s.cfg.ClaimAhead/2)
			if time.Now().Add(d).Before(deadline) {
				// Reset drops a pending expiry (Go 1.23 timers): a
				// Stop-then-drain here could block forever.
				deadline = time.Now().Add(d)
				timer.Reset(d)
			}
		}
		var probe <-chan time.Time
		if prober != nil && wait > s.cfg.ProbeInterval {
			probe = prober.C
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
				waiting = false
				if dueWake {
					s.woken.Store(true) // a filtered claim that rests reads again
				}
			case d, ok := <-wake:
				if !ok {
					wake = nil // subscription closed; poll
					continue
				}
				soon(d)
			case <-probe:
				if d, ok := s.probe(ctx); ok {
					soon(d)
				}
			}
		}
	}
}

// probe reads the newest task id and, when it changed since the last
// probe, how soon the next task is due: rows INSERTed without a wakeup
// (PHP code writing SQL) are found within a probe interval instead of a
// poll interval. The first probe only records the id (the loop's first
// claim follows it); a failed read waits for the poll.
func (s *Scheduler) probe(ctx context.Context) (time.Duration, bool) {
	// A server that hangs holds the loop at most until its poll.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.PollInterval)
	defer cancel()
	id, err := s.store.NewestID(ctx)
	if err != nil || (s.probed && id == s.newest) {
		return 0, false
	}
	first := !s.probed
	s.newest, s.probed = id, true
	if first {
		return 0, false
	}
	d, ok, err := s.store.NextDue(ctx)
	return d, err == nil && ok
}

// untilNextDue is how long to sleep after a claim that took tasks due
// within ahead: until the next task is due within half of ahead (so each
// claim takes about ahead/2 of them, with ahead/2 to spare before the
// first is due), at most the poll interval. When something within ahead
// is still unclaimed but this scan claimed less than a batch (another
// scheduler won it, or it is being claimed), it sleeps a little rather
// than spin.
func (s *Scheduler) untilNextDue(ctx context.Context, claimed int, ahead time.Duration) time.Duration {
	d, ok, err := s.store.NextDue(ctx)
	if err != nil || !ok {
		return s.cfg.PollInterval
	}
	if claimed > 0 || d >= -stuckDue {
		s.stuck = 0
	} else if s.stuck++; s.stuck >= stuckRounds {
		// The earliest due task waits long past its time and claim after
		// claim did not take it: another transaction holds its row (a
		// claim leaves such a row out for a while). Claiming every 10 ms
		// would only read it again: wait for the next task to fall due.
		wait, _ := s.untilFutureDue(ctx, ahead)
		return wait
	}
	return nextClaimIn(d, ahead, claimed, s.cfg.PollInterval)
}

// A task stuckDue past its due time that stuckRounds claims in a row did
// not take is held elsewhere, not one other schedulers were claiming at
// the same moment (the next claim reads past those).
const (
	stuckDue    = time.Second
	stuckRounds = 3
)

// untilFutureDue is how long to sleep until the next task not due yet
// falls due within half of ahead, at most the poll interval; ok says it
// is that, not the poll.
func (s *Scheduler) untilFutureDue(ctx context.Context, ahead time.Duration) (wait time.Duration, ok bool) {
	d, ok, err := s.store.NextFutureDue(ctx)
	if err != nil || !ok || d-ahead/2 >= s.cfg.PollInterval {
		return s.cfg.PollInterval, false
	}
	return max(0, d-ahead/2), true
}

// nextClaimIn is untilNextDue for a next task due in d.
func nextClaimIn(d, ahead time.Duration, claimed int, poll time.Duration) time.Duration {
	if d <= ahead {
		if claimed > 0 {
			return 0
		}
		return min(10*time.Millisecond, poll)
	}
	return min(d-ahead/2, poll)
}

// RunOnce claims one batch of due tasks and pushes it. It returns the
// number of tasks claimed. (The loop also claims tasks due soon, and holds
// them: see Config.ClaimAhead.)
func (s *Scheduler) RunOnce(ctx context.Context) (int, error) {
	n, _, _, err := s.runOnce(ctx, 0)
	return n, err
}

// runOnce is RunOnce for the tasks due within ahead, also reporting
// whether paused queues were filtered out and whether a filtered claim's
// window was full. The messages of tasks not due yet are held for the
// releaser.
func (s *Scheduler) runOnce(ctx context.Context, ahead time.Duration) (n int, more, filtered bool, err error) {
	// A claim is not abandoned half way by a shutdown: the server finishes
	// a statement whose client went away, so a cancelled claim could leave
	// tasks dispatched with no message. Claim and push run to their end
	// (bounded), or the tasks are handed back.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), roundTimeout)
	defer cancel()
	if err := s.win.refresh(pctx, s.broker); err != nil {
		return 0, false, false, fmt.Errorf("read queue lengths: %w", err)
	}
	grouped := s.grouped()
	var msgs []*task.Message
	if f := s.claimFilter(grouped); f != nil {
		filtered = true
		if !s.walkRests(f) {
			msgs, more, err = s.store.TaskClaimDueFiltered(pctx, s.cfg.BatchSize, f)
			s.walkedAt = s.clock.Now()
			s.groups.add(f.Groups)
			f.Groups = nil
		}
		s.filterMu.Unlock()
	} else {
		msgs, err = s.store.TaskClaimDueIn(pctx, s.cfg.BatchSize, ahead, s.room)
	}
	if err != nil {
		return 0, false, filtered, err
	}
	if len(grouped) > 0 {
		gm, gerr := s.claimGroups(pctx, grouped)
		msgs = append(msgs, gm...)
		if gerr != nil && len(msgs) == 0 {
			return 0, more, filtered, gerr
		}
		if gerr != nil {
			s.log.Error("claim grouped tasks", "err", gerr)
		}
	}
	if len(msgs) == 0 {
		return 0, more, filtered, nil
	}
	due := msgs
	if ahead > 0 {
		due = s.holdLater(msgs)
	}
	if len(due) == 0 {
		return len(msgs), more, filtered, nil
	}
	if err := s.push(pctx, due); err != nil {
		return len(msgs), more, filtered, err
	}
	return len(msgs), more, filtered, nil
}

// walkRests reports whether the filtered claim f skips its read this
// time (walkRest), with s.filterMu held.
func (s *Scheduler) walkRests(f *store.ClaimFilter) bool {
	woken := s.woken.Swap(false)
	return f.Passed() && !f.RoomLeft() && !woken && s.clock.Now().Sub(s.walkedAt) < walkRest
}

// room is the room a queue's window has left for a claim: what its lists
// have left, less the messages held for it.
func (s *Scheduler) room(q string) int { return max(0, s.win.room(q)-s.hold.in(q)) }

// holdLater holds the messages of msgs whose task may not be due yet and
// returns the others. The claim read the database clock (DispatchedUnixMS)
// before it committed: a task due by then is due now.
func (s *Scheduler) holdLater(msgs []*task.Message) []*task.Message {
	var due, later []*task.Message
	for _, m := range msgs {
		if m.DueUnixMS <= m.DispatchedUnixMS {
			due = append(due, m)
		} else {
			later = append(later, m)
		}
	}
	s.hold.add(later)
	return due
}

// push pushes claimed messages and hands back those it certainly could
// not push; the error says that none is known to be pushed.
func (s *Scheduler) push(ctx context.Context, msgs []*task.Message) error {
	msgs = s.dropUnrunnable(ctx, msgs)
	if len(msgs) == 0 {
		return nil
	}
	failed, perr := s.broker.Push(ctx, msgs)
	unsure := 0 // messages that may or may not be in Redis
	var unsettled *broker.UnsettledError
	if errors.As(perr, &unsettled) {
		// Sent with no reply: handed back, a message that did land would
		// run beside the next attempt. Left dispatched, recovery finds
		// each waiting in its queue, or lost and past the dispatch
		// window, and hands back only those.
		unsure = len(unsettled.Msgs)
		failed = without(failed, unsettled.Msgs)
		s.log.Warn("push got no reply: tasks may or may not be in redis; left dispatched for recovery to settle",
			"tasks", unsure, "err", unsettled.Err)
	}
	// Messages that may be in Redis fill their window as pushed ones do.
	s.win.pushedTo(perQueue(msgs, failed))
	notPushed := len(failed)
	if len(failed) > 0 {
		failed = s.dropUnencodable(ctx, failed)
	}
	if len(failed) > 0 {
		var fresh []string
		if broker.IsOOM(perr) {
			fresh = s.win.refused(slices.Collect(maps.Keys(perQueue(failed, nil))))
		}
		s.handBack(ctx, failed, perr, fresh)
	}
	s.dispatched.Add(int64(len(msgs) - notPushed))
	// Nothing is known to be pushed, and some of it failed for Redis (not
	// a payload no push could carry, now dead).
	if perr != nil && notPushed+unsure == len(msgs) && len(failed)+unsure > 0 {
		return fmt.Errorf("push: %w", perr)
	}
	return nil
}

// without returns the messages of msgs that are not in drop.
func without(msgs, drop []*task.Message) []*task.Message {
	skip := make(map[*task.Message]bool, len(drop))
	for _, m := range drop {
		skip[m] = true
	}
	out := make([]*task.Message, 0, len(msgs))
	for _, m := range msgs {
		if !skip[m] {
			out = append(out, m)
		}
	}
	return out
}

// dropUnrunnable ends dead, with why, the tasks of msgs whose task code
// or queue is not a name taskd accepts, and returns the others. Only an
// INSERT from outside writes one (every front end of taskd refuses such
// names): no handler can be configured for it, and its message, in a queue
// no worker takes from, would wait for ever and be found lost and pushed
// again at every recovery pass.
func (s *Scheduler) dropUnrunnable(ctx context.Context, msgs []*task.Message) []*task.Message {
	// Every push comes here: no copy unless a task is unrunnable.
	if !slices.ContainsFunc(msgs, unrunnable) {
		return msgs
	}
	return s.endDead(ctx, msgs, func(m *task.Message) string {
		if !unrunnable(m) {
			return ""
		}
		return unrunnableWhy(m)
	}, "tasks with an invalid task code or queue")
}

// dropUnencodable ends dead, with why, the tasks of failed (messages whose
// push failed) that no push can carry: a payload that is not JSON, which
// an adopted seed table whose payload column is TEXT takes. Handed back,
// such a task was claimed and handed back again for ever. Only a failed
// push pays for the check.
func (s *Scheduler) dropUnencodable(ctx context.Context, failed []*task.Message) []*task.Message {
	return s.endDead(ctx, failed, func(m *task.Message) string {
		if _, err := m.Encode(); err != nil {
			return fmt.Sprintf("not run: its payload is not JSON (%v); submit it again with a JSON payload", err)
		}
		return ""
	}, "tasks whose payload is not JSON")
}

// endDead ends dead the dispatched tasks of msgs for which why says why,
// and returns the others. what names them in the log.
func (s *Scheduler) endDead(ctx context.Context, msgs []*task.Message, why func(*task.Message) string, what string) []*task.Message {
	var ts []store.Transition
	kept := make([]*task.Message, 0, len(msgs))
	for _, m := range msgs {
		w := why(m)
		if w == "" {
			kept = append(kept, m)
			continue
		}
		ts = append(ts, store.Transition{ID: m.ID, Attempt: m.Attempt, From: task.Dispatched, To: task.Dead, SetResult: true, Result: w,
			Run: &store.RunRecord{Queue: m.Queue, Outcome: task.OutcomeDead, Result: w}})
	}
	if len(ts) == 0 {
		return msgs
	}
	if _, err := s.store.TaskTransition(ctx, ts); err != nil {
		// Still dispatched: recovery hands them back, and the next claim
		// comes here again.
		s.log.Error("end "+what, "tasks", len(ts), "err", err)
		return kept
	}
	s.log.Warn(what+" are dead", "tasks", len(ts))
	return kept
}

func unrunnable(m *task.Message) bool {
	return !task.NameOK(m.Code) || !task.NameOK(m.Queue)
}

// unrunnableWhy is the result of an unrunnable task: what is wrong and
// what to do.
func unrunnableWhy(m *task.Message) string {
	if err := task.ValidateName("task_code", m.Code); err != nil {
		return err.Error() + ": no handler can run it; submit it again with a valid code"
	}
	return task.ValidateName("queue", m.Queue).Error() + ": no worker takes from it; submit it again with a valid queue"
}

// release is the releaser: it pushes each held message when the database
// clock reaches its due time, until ctx is done.
func (s *Scheduler) release(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		_, wait, err := s.releaseOnce(ctx)
		if err != nil {
			s.log.Error("release held tasks; retrying", "err", err, "in", releaseRetry)
			wait = releaseRetry
		}
		if wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-s.hold.kick:
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			return
		}
	}
}

// releaseRetry is how soon the releaser tries again after a failure.
const releaseRetry = 100 * time.Millisecond

// releaseIdle is how long the releaser waits with nothing held: an added
// message wakes it sooner.
const releaseIdle = time.Minute

// releaseOnce pushes the held messages whose due time the database clock
// has certainly reached, and returns how many and how long until the next
// one is due (0: at once).
func (s *Scheduler) releaseOnce(ctx context.Context) (int, time.Duration, error) {
	next, ok := s.hold.next()
	if !ok {
		return 0, releaseIdle, nil
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), roundTimeout)
	defer cancel()
	if err := s.db.SyncIfOlder(pctx, dbSyncEvery); err != nil {
		return 0, 0, fmt.Errorf("read the database clock: %w", err)
	}
	// Never before due: the lower bound of the database clock.
	reached := s.db.Earliest()
	if wait := time.UnixMilli(next).Sub(reached); wait > 0 {
		return 0, wait, nil
	}
	due := s.hold.takeDue(reached.UnixMilli())
	err := s.push(pctx, due)
	return len(due), 0, err
}

// unhold empties the hold at a stop: it pushes the messages that are due
// and hands back the others as they were, pending with their due time.
func (s *Scheduler) unhold(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, roundTimeout)
	defer cancel()
	if _, ok := s.hold.next(); !ok {
		return
	}
	if err := s.db.Sync(ctx); err == nil {
		if due := s.hold.takeDue(s.db.Earliest().UnixMilli()); len(due) > 0 {
			if err := s.push(ctx, due); err != nil {
				s.log.Error("push held tasks at stop", "err", err)
			}
		}
	}
	rest := s.hold.takeAll()
	if len(rest) == 0 {
		return
	}
	ts := make([]store.Transition, len(rest))
	for i, m := range rest {
		ts[i] = store.HandBack(m.ID, m.Attempt) // due when it was: not yet
	}
	if _, err := s.store.TaskTransition(ctx, ts); err != nil {
		// Still dispatched: recovery re-dispatches after its window.
		s.log.Error("hand back held tasks at stop", "tasks", len(rest), "err", err)
		return
	}
	s.log.Info("held tasks handed back at stop", "tasks", len(rest))
}

// claimFilter returns the filter of paused, full and grouped queues,
// locked (the caller unlocks it), or nil when no queue is any of them.
func (s *Scheduler) claimFilter(grouped map[string]limit.Limit) *store.ClaimFilter {
	var paused map[string]bool
	if ps, ok := s.broker.Layout().(interface{ PausedSet() map[string]bool }); ok {
		paused = ps.PausedSet()
	}
	full := s.win.blocked()
	s.filterMu.Lock()
	if len(paused) == 0 && len(full) == 0 && len(grouped) == 0 && !s.win.walk() {
		// The filter keeps its cursors for the next time it is needed.
		s.filterMu.Unlock()
		return nil
	}
	groupedSet := map[string]bool{}
	for q := range grouped {
		groupedSet[q] = true
	}
	// The windows' cursors move past the rows of queues left out. They
	// start over when the paused or grouped queues change, and now and
	// then once they passed every due row, for rows inserted with a due
	// time behind them; a queue with room again finds its rows behind the
	// cursors through the claims that read from the lanes' start.
	if s.filter == nil || !maps.Equal(paused, s.filterSet) || !maps.Equal(groupedSet, s.filterGrouped) ||
		(s.filter.Passed() && time.Since(s.filterSince) > filterReset) {
		s.filter = &store.ClaimFilter{Paused: func(q string) bool { return paused[q] }, Room: s.win.room,
			Grouped: func(q string) bool { return groupedSet[q] }}
		s.filterSet, s.filterGrouped, s.filterSince = paused, groupedSet, time.Now()
	}
	return s.filter
}

// perQueue counts the messages of msgs not in failed, per queue.
func perQueue(msgs, failed []*task.Message) map[string]pushes {
	lost := make(map[*task.Message]bool, len(failed))
	for _, m := range failed {
		lost[m] = true
	}
	out := map[string]pushes{}
	for _, m := range msgs {
		if !lost[m] {
			p := out[m.Queue]
			p.n++
			p.bytes += int64(len(m.Payload))
			out[m.Queue] = p
		}
	}
	return out
}

// handBack returns tasks whose push certainly failed to pending, at their
// due time (a push sent without a reply is not handed back: its message,
// if it landed, would start its handler before the fence turned it
// down). full names the queues whose windows Redis at maxmemory just
// capped.
func (s *Scheduler) handBack(ctx context.Context, msgs []*task.Message, cause error, full []string) {
	ts := make([]store.Transition, len(msgs))
	for i, m := range msgs {
		ts[i] = store.HandBack(m.ID, m.Attempt)
	}
	if _, err := s.store.TaskTransition(ctx, ts); err != nil {
		// Still dispatched: recovery re-dispatches after its window.
		s.log.Error("hand back after failed push", "tasks", len(msgs), "push_err", cause, "err", err)
		return
	}
	switch {
	case len(full) > 0:
		slices.Sort(full)
		s.log.Warn("redis is at maxmemory: pushes refused and their tasks handed back; claims for these queues wait until their workers drain them",
			"tasks", len(msgs), "queues", full, "err", cause)
	case broker.IsOOM(cause):
		// Told when the queue's window was capped; now it drains and
		// refills in steps, each of which may meet a full Redis again.
		s.log.Debug("redis at maxmemory refused a push; tasks handed back", "tasks", len(msgs))
	default:
		s.log.Warn("push failed; tasks handed back", "tasks", len(msgs), "err", cause)
	}
}
