// Package watchdog heals a worker that is alive but does no work: its
// heartbeat is fresh, so recovery leaves it alone, yet a slot holds a task
// far past its timeout (a handler that ignores cancellation), or a queue
// with a backlog and free slots sees no result written for a window
// (the fetcher wedged, e.g. on a connection that silently stopped
// answering).
//
// It heals in steps. A slot held past its task's timeout plus Grace is
// abandoned: its attempt is cancelled, its slot handed to a new task, and
// the task recovered in the task center at once (crash_count + 1, the
// fence rejects the frozen attempt's late result). If the abandoned
// handler still has not returned Grace later, or a queue stays idle for
// IdleWindow plus Grace, nothing inside the process can heal it: the
// process exits with ExitCode so that Supervisor or systemd restarts it;
// recovery elsewhere takes its tasks at once, as it withdraws its
// heartbeat first. Every step is logged, counted and recorded as an event
// that the watchdog-heal alert reports.
//
// A worker whose results the task center turns down (it refuses writes,
// or no connection reaches it) is not stuck but waiting, as every node
// is: neither its unwritten results nor the backlog its queues keep
// meanwhile make it exit, and its queues' idle windows start over once
// the task center takes writes again.
package watchdog

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/metrics"
	"github.com/taskd/taskd/pkg/recovery"
	"github.com/taskd/taskd/pkg/startstop"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/worker"
)

// ExitCode is the exit status of a process the watchdog gives up on:
// EX_TEMPFAIL, "try again", so the supervisor restarts it.
const ExitCode = 75

// Defaults of Config.
const (
	IntervalDefault   = 5 * time.Second
	IdleWindowDefault = 2 * time.Minute
	GraceDefault      = 30 * time.Second
)

// Event kinds, also the kinds of taskd_watchdog_heals_total.
const (
	KindAbandoned = metrics.HealAbandoned
	KindIdle      = metrics.HealIdle
	KindExit      = metrics.HealExit
)

// Config configures a Watchdog.
type Config struct {
	// Interval between checks.
	Interval time.Duration
	// IdleWindow: a queue whose backlog has waited with a free slot, and
	// of which no result was written, for this long is idle.
	IdleWindow time.Duration
	// Grace: a slot held this long past its task's timeout is abandoned;
	// an abandoned handler that has not returned this long after, or an
	// idle queue still idle this long after, makes the process exit.
	Grace time.Duration
	// CrashLimit and DefaultTimezone are recovery's (poison tasks, next
	// occurrence of periodic ones).
	CrashLimit      int
	DefaultTimezone string
	Node            string
	// Exit is called once when the process must exit with code. Required.
	Exit func(code int, reason string)
	// Clock is the worker's clock (default: the system clock).
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *metrics.Metrics
}

// Result counts what one check did.
type Result struct {
	Abandoned int  // slots abandoned
	Recovered int  // their tasks recovered in the task center
	Idle      int  // queues found idle
	Exit      bool // the process was told to exit
}

// Slots is what the watchdog needs of a worker: what its slots run, its
// queues' capacity and progress, and a way to give up on a slot.
// *worker.Worker implements it.
type Slots interface {
	ID() string
	Running() []worker.Running
	QueueSlots() []worker.QueueSlots
	// Abandon frees the slot of an attempt whose handler does not return;
	// false when it no longer runs there.
	Abandon(r worker.Running) bool
	// AckAbandoned drops an abandoned attempt's message once its task was
	// recovered.
	AckAbandoned(ctx context.Context, r worker.Running) error
	// ResultsWaiting is how long the oldest result being written has
	// waited for the task center.
	ResultsWaiting() time.Duration
	// ResultsRefused is why the task center turned down the last try of
	// a waiting result (a refusal, or no connection reaches it) instead
	// of not answering; nil otherwise.
	ResultsRefused() error
}

// Watchdog watches one worker.
type Watchdog struct {
	cfg    Config
	w      Slots
	store  *store.Store
	broker *broker.Broker
	clock  *store.Clock // the database clock, synced before each take-over
	log    *slog.Logger
	runner startstop.Runner

	mu        sync.Mutex
	abandoned map[fence]time.Time // abandoned attempt -> exit deadline
	idle      map[string]bool     // queues reported idle
	unwritten bool                // results unwritten, reported
	// waiting are the queues reported waiting on the task center, and
	// waitedAt the last check that found the worker's results turned down.
	waiting  map[string]bool
	waitedAt time.Time
	// settled is, per queue, the last check that found no backlog waiting
	// for a free slot (slots all busy, none waiting, or paused).
	settled  map[string]time.Time
	exitOnce sync.Once
}

type fence struct {
	id      int64
	attempt int
}

// New returns a watchdog of w.
func New(cfg Config, w Slots, s *store.Store, b *broker.Broker) *Watchdog {
	cfg.Interval = cmp.Or(cfg.Interval, IntervalDefault)
	cfg.IdleWindow = cmp.Or(cfg.IdleWindow, IdleWindowDefault)
	cfg.Grace = cmp.Or(cfg.Grace, GraceDefault)
	cfg.CrashLimit = cmp.Or(cfg.CrashLimit, recovery.CrashLimitDefault)
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Watchdog{
		cfg: cfg, w: w, store: s, broker: b, clock: store.NewClock(s, nil),
		log:       cfg.Logger.With("component", "watchdog", "worker_id", w.ID()),
		abandoned: map[fence]time.Time{}, idle: map[string]bool{}, waiting: map[string]bool{},
		settled: map[string]time.Time{},
	}
}

// Start checks every Interval until Stop.
func (d *Watchdog) Start(ctx context.Context) error {
	return d.runner.Start(ctx, func(ctx context.Context) {
		startstop.Every(ctx, d.cfg.Interval, func(ctx context.Context) {
			if _, err := d.RunOnce(ctx); err != nil && ctx.Err() == nil {
				d.log.Error("watchdog check failed", "err", err)
			}
		})
	})
}

// Stop stops the checks. Safe to call twice or without Start.
func (d *Watchdog) Stop() { d.runner.Stop() }

// RunOnce makes one check and heals what it finds.
func (d *Watchdog) RunOnce(ctx context.Context) (Result, error) {
	var res Result
	now := d.cfg.Clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	busy := map[string]int{}
	for _, r := range d.w.Running() {
		f := fence{r.TaskID, r.Attempt}
		if r.Abandoned {
			if deadline, ok := d.abandoned[f]; ok && now.After(deadline) && !returned(r) {
				d.exit(ctx, &res, fmt.Sprintf("the handler of task %d attempt %d did not return %s after it was abandoned", r.TaskID, r.Attempt, d.cfg.Grace))
			}
			continue
		}
		busy[r.Queue]++
		if held := now.Sub(r.Since); held > r.Timeout+d.cfg.Grace {
			d.heal(ctx, &res, r, held)
		}
	}
	for f, deadline := range d.abandoned {
		if now.After(deadline.Add(time.Hour)) {
			delete(d.abandoned, f) // returned long ago
		}
	}
	// Results the task center does not take: the worker may keep its
	// slots busy taking work, but none of it ends. A slow link writes
	// within seconds, not an idle window. A task center that answers
	// with a refusal (read-only for a maintenance or a failover), or that
	// no connection reaches (down, restarting, cut off), fails every node
	// alike: a restart would not write the results, only run their tasks
	// again, so the worker keeps them and waits.
	refused := d.w.ResultsRefused()
	if refused != nil {
		d.waitedAt = now
	}
	if waited := d.w.ResultsWaiting(); waited > d.cfg.IdleWindow {
		if !d.unwritten {
			d.unwritten = true
			res.Idle++
			d.cfg.Metrics.Heal(KindIdle)
			why := "the task center does not answer this worker's writes"
			if refused != nil {
				why = fmt.Sprintf("the task center refuses writes (%v); waiting for it", refused)
			}
			d.log.Error("worker alive but its results unwritten", "waited", waited.Round(time.Second).String(), "why", why)
			d.record(ctx, &broker.Event{Kind: KindIdle, Detail: fmt.Sprintf("results unwritten for %s: %s", waited.Round(time.Second), why)})
		}
		if waited > d.cfg.IdleWindow+d.cfg.Grace && refused == nil {
			d.exit(ctx, &res, fmt.Sprintf("results unwritten for %s", waited.Round(time.Second)))
		}
	} else {
		d.unwritten = false
	}
	for _, qs := range d.w.QueueSlots() {
		q := qs.Name
		// A paused queue keeps its backlog on purpose.
		if busy[q] >= qs.Capacity || d.broker.Layout().Paused(q) {
			d.settle(q, now)
			continue
		}
		quiet := now.Sub(qs.Progress)
		if quiet <= d.cfg.IdleWindow {
			d.forget(q)
			continue
		}
		backlog, err := d.broker.QueueLen(ctx, q)
		if err != nil {
			return res, fmt.Errorf("watchdog: %w", err)
		}
		if backlog == 0 {
			d.settle(q, now)
			continue
		}
		// A queue whose own limit holds its backlog back at take (a rate,
		// a max_running taken on other nodes) waits on purpose too. Group
		// limits hold tasks back at claim, not messages at take: groups at
		// their limit (a serial queue's are whenever a task of theirs
		// waits in Redis) are no reason for a backlog not taken.
		held, err := d.broker.LimitedQueues(ctx, []string{q})
		if err != nil {
			return res, fmt.Errorf("watchdog: %w", err)
		}
		if l, ok := held[q]; ok && l.By != "group" {
			d.forget(q)
			continue
		}
		// A worker whose results the task center turns down writes none,
		// and once a write failed it takes no more (worker's backedUp):
		// its backlog waits on the task center, as every node's does,
		// and a restart would only lose the results. Once the task
		// center takes writes, the window starts over.
		if refused != nil {
			delete(d.idle, q)
			if !d.waiting[q] {
				d.waiting[q] = true
				d.log.Warn("queue backlog waits for the task center to take this worker's results", "queue", q,
					"backlog", backlog, "quiet", quiet.Round(time.Second).String(), "why", refused)
			}
			continue
		}
		// Idle since the latest of its last result, the last check that
		// found no backlog waiting for a free slot, and the task center's
		// last refusal. A result comes only as a task ends: tasks running
		// longer than the window leave the queue quiet, and the slot one
		// of them frees is free for a moment before the next is taken.
		idleFor := min(quiet, now.Sub(d.settled[q]), now.Sub(d.waitedAt))
		if idleFor <= d.cfg.IdleWindow {
			delete(d.idle, q)
			continue
		}
		if !d.idle[q] {
			d.idle[q] = true
			res.Idle++
			d.cfg.Metrics.Heal(KindIdle)
			detail := fmt.Sprintf("queue %s: %d messages waiting, %d of %d slots free, no result written for %s",
				q, backlog, qs.Capacity-busy[q], qs.Capacity, quiet.Round(time.Second))
			d.log.Error("worker alive but idle", "queue", q, "backlog", backlog, "quiet", quiet)
			d.record(ctx, &broker.Event{Kind: KindIdle, Queue: q, Detail: detail})
		}
		if idleFor > d.cfg.IdleWindow+d.cfg.Grace {
			d.exit(ctx, &res, fmt.Sprintf("queue %s idle with a backlog for %s", q, idleFor.Round(time.Second)))
		}
	}
	return res, nil
}

// settle records that queue q has no backlog waiting for a free slot at
// now, and forgets what was reported of it.
func (d *Watchdog) settle(q string, now time.Time) {
	d.settled[q] = now
	d.forget(q)
}

// forget drops what was reported of queue q: it is busy or drained.
func (d *Watchdog) forget(q string) {
	delete(d.idle, q)
	delete(d.waiting, q)
}

func returned(r worker.Running) bool {
	select {
	case <-r.Returned:
		return true
	default:
		return false
	}
}

// heal abandons a slot held past its timeout and recovers its task.
func (d *Watchdog) heal(ctx context.Context, res *Result, r worker.Running, held time.Duration) {
	if !d.w.Abandon(r) {
		return
	}
	res.Abandoned++
	d.cfg.Metrics.Heal(KindAbandoned)
	d.abandoned[fence{r.TaskID, r.Attempt}] = d.cfg.Clock.Now().Add(d.cfg.Grace)
	why := fmt.Sprintf("watchdog: held %s past its timeout of %s on worker %s; slot abandoned", (held - r.Timeout).Round(time.Second), r.Timeout, d.w.ID())
	ok, err := d.recover(ctx, r, why)
	switch {
	case err != nil:
		// The task stays running; if the slot does not let go the process
		// exits and recovery elsewhere takes it.
		d.log.Error("recover the task of an abandoned slot", "task_id", r.TaskID, "task_code", r.Code, "attempt", r.Attempt, "err", err)
	case ok:
		res.Recovered++
		d.cfg.Metrics.Recovered("watchdog", 1)
		if err := d.w.AckAbandoned(ctx, r); err != nil {
			d.log.Warn("drop the message of an abandoned slot", "task_id", r.TaskID, "task_code", r.Code, "attempt", r.Attempt, "err", err)
		}
	}
	d.record(ctx, &broker.Event{Kind: KindAbandoned, Queue: r.Queue, TaskID: r.TaskID, Code: r.Code, Attempt: r.Attempt, Detail: why})
}

// recover takes the task from the abandoned attempt, fenced on it.
func (d *Watchdog) recover(ctx context.Context, r worker.Running, why string) (bool, error) {
	t, err := d.store.TaskGet(ctx, r.TaskID)
	if err != nil {
		return false, err
	}
	if err := d.clock.Sync(ctx); err != nil {
		return false, err
	}
	rt := &store.RunningTask{ID: t.ID, Attempt: r.Attempt, Code: t.Code, Queue: r.Queue, Type: t.Type, CronExpr: t.CronExpr,
		Timezone: t.Timezone, WorkerID: d.w.ID(), CrashCount: t.CrashCount, PlanNextRun: t.PlanNextRun}
	tr := recovery.CrashTransition(rt, why, d.cfg.CrashLimit, d.cfg.DefaultTimezone, d.clock.Earliest())
	tr.Run.Node = d.cfg.Node
	tr.Run.Duration = d.cfg.Clock.Now().Sub(r.Since)
	applied, err := d.store.TaskTransition(ctx, []store.Transition{tr})
	if err != nil {
		return false, err
	}
	return applied[0], nil
}

// exit records why and tells the process to exit, once.
func (d *Watchdog) exit(ctx context.Context, res *Result, reason string) {
	d.exitOnce.Do(func() {
		res.Exit = true
		d.cfg.Metrics.Heal(KindExit)
		d.log.Error("watchdog: exiting so that the supervisor restarts this process", "reason", reason, "exit_code", ExitCode)
		d.record(ctx, &broker.Event{Kind: KindExit, Detail: reason})
		d.cfg.Exit(ExitCode, reason)
	})
}

func (d *Watchdog) record(ctx context.Context, e *broker.Event) {
	e.At, e.Node, e.WorkerID = time.Now(), d.cfg.Node, d.w.ID()
	if err := d.broker.RecordEvent(ctx, e); err != nil {
		d.log.Warn("record watchdog event", "err", err)
	}
}
