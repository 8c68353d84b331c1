// Package worker consumes queues: it takes messages from Redis into its own
// processing list, moves each task to running with a compare-and-set fenced
// by attempt, runs the task's handler under its timeout, and writes the
// result back in batches. On shutdown it drains within a grace period and
// hands back what did not finish, without counting a retry.
//
// A Worker is five components, each a startstop component in its own file:
//
//   - the heartbeater (heartbeat.go) publishes liveness, slots and counters;
//   - the kill listener (kills.go) cancels attempts an operator killed;
//   - the completer (completer.go) writes results in batches, then acks;
//   - the marker (marker.go) marks running, in batches, the attempts still
//     running a moment after they started;
//   - the pool (pool.go) fetches messages and runs them in bounded slots.
//
// They start in that order and stop in the reverse one (shutdown, below):
// the pool stops taking and drains, the marker stops, the completer
// flushes, the listener and the heartbeat go, and last the processing
// lists are swept.
package worker

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/metrics"
	"github.com/taskd/taskd/pkg/startstop"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// Defaults of Config.
const (
	ShutdownGraceDefault     = 30 * time.Second
	HandBackWaitDefault      = 10 * time.Second
	FlushWaitDefault         = 15 * time.Second
	HeartbeatIntervalDefault = 5 * time.Second
	HeartbeatTTLDefault      = 30 * time.Second
	OutputLimitDefault       = 64 << 10
	RetryBaseDefault         = 10 * time.Second
	RetryMaxDefault          = time.Hour
	RunningMarkDelayDefault  = 250 * time.Millisecond
)

// Deadlines of the calls the components make; each network call has one.
// A slow link is not a dead one: each fits the call on a new connection
// (its handshake is a few round trips) with a second added each way.
const (
	// takeWait is how long a take blocks on an empty queue; it bounds how
	// long a fetcher takes to notice shutdown.
	takeWait    = time.Second
	takeTimeout = takeWait + 20*time.Second
	markTimeout = 30 * time.Second
	// writeTimeout bounds one result transaction, ackTimeout the acks and
	// counters that follow it.
	writeTimeout = 30 * time.Second
	ackTimeout   = 15 * time.Second
	beatTimeout  = 15 * time.Second
	sweepTimeout = 30 * time.Second
	// retryFirst and retryMax shape the backoff of a failing take, mark or
	// write.
	retryFirst = 100 * time.Millisecond
	retryMax   = 5 * time.Second
	// lockedRetry is how long the worker waits before writing again what
	// it could not because another transaction held the task's row;
	// lockedRetryFirst before the first time: a scheduler's claim that
	// raced for the row holds it for milliseconds.
	lockedRetry      = time.Second
	lockedRetryFirst = 50 * time.Millisecond
)

// Config configures a Worker.
type Config struct {
	// ID is unique per process start: host, pid and a random boot id, so a
	// restart with the same pid is a new worker (default: generated).
	ID string
	// Node is the node id recorded in task_run.
	Node string
	// Version is published in the heartbeat.
	Version string
	// Queues to consume, with the number of concurrent slots of each.
	Queues map[string]int
	// Handlers by task code.
	Handlers *handler.Registry
	// ShutdownGrace is how long Stop lets running tasks finish before it
	// cancels them and hands them back.
	ShutdownGrace time.Duration
	// HandBackWait is how long Stop waits for cancelled handlers to return
	// before it hands their tasks back by force.
	HandBackWait time.Duration
	// FlushWait is how long Stop retries writing the last results.
	FlushWait time.Duration
	// RunningMarkDelay is how long an attempt runs before its task is
	// marked running in the task center; one that ends sooner goes from
	// dispatched straight to its result.
	RunningMarkDelay time.Duration
	// OutputLimit is the number of bytes of output kept per attempt.
	OutputLimit int
	// RetryBase and RetryMax shape the backoff between attempts.
	RetryBase, RetryMax time.Duration
	// DefaultTimezone applies to cron tasks that name none.
	DefaultTimezone   string
	HeartbeatInterval time.Duration
	HeartbeatTTL      time.Duration
	// Clock, when set, is both the local and the database clock, so tests
	// can pin or advance time. Default: the system clock, and the database
	// clock followed from it.
	Clock  clock.Clock
	Logger *slog.Logger
	// Metrics, when set, receives start delays and written results.
	Metrics *metrics.Metrics
	// Tracer, when set, records a span per attempt (trace.go).
	Tracer trace.Tracer
}

// withDefaults fills what cfg leaves unset.
func (cfg Config) withDefaults() Config {
	cfg.ID = cmp.Or(cfg.ID, NewID())
	cfg.ShutdownGrace = cmp.Or(cfg.ShutdownGrace, ShutdownGraceDefault)
	cfg.HandBackWait = cmp.Or(cfg.HandBackWait, HandBackWaitDefault)
	cfg.FlushWait = cmp.Or(cfg.FlushWait, FlushWaitDefault)
	cfg.RunningMarkDelay = cmp.Or(cfg.RunningMarkDelay, RunningMarkDelayDefault)
	cfg.HeartbeatInterval = cmp.Or(cfg.HeartbeatInterval, HeartbeatIntervalDefault)
	cfg.HeartbeatTTL = cmp.Or(cfg.HeartbeatTTL, HeartbeatTTLDefault)
	cfg.OutputLimit = cmp.Or(cfg.OutputLimit, OutputLimitDefault)
	cfg.RetryBase = cmp.Or(cfg.RetryBase, RetryBaseDefault)
	cfg.RetryMax = cmp.Or(cfg.RetryMax, RetryMaxDefault)
	if cfg.Handlers == nil {
		cfg.Handlers = handler.NewRegistry()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider().Tracer("")
	}
	return cfg
}

// NewID returns a worker id: host-pid-bootid.
func NewID() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	rand.Read(b)
	host = cmp.Or(host, "host")
	if len(host) > 96 { // worker_id columns hold 128 characters
		host = host[:96]
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

// Stats are the worker's counters.
type Stats struct {
	Processed int64 // attempts finished (any outcome)
	Failed    int64 // attempts that failed or timed out
	Stale     int64 // messages or results rejected by the fence
	Poison    int64 // messages quarantined
}

// counters are shared by the components.
type counters struct {
	processed, failed, stale, poison atomic.Int64
	dead                             atomic.Int64 // written results with no retry left
}

// Worker runs tasks from its queues.
type Worker struct {
	cfg    Config
	store  Store
	broker Broker
	// leaseLock is broker's lease releases, kept apart from renewals.
	leaseLock *leaseLock
	clock     clock.Clock // local: start times, durations, progress
	db        dbClock     // the database clock: starts, next cron times, per-minute counters
	log       *slog.Logger
	count     counters
	slots     *slotTable
	held      *held

	beat  *heartbeater
	kills *killListener
	comp  *completer
	mark  *marker
	pool  *pool

	mu        sync.Mutex
	started   bool
	stopped   bool
	startedAt time.Time
}

// New returns a worker over the task center s and the broker b (a
// *store.Store and a *broker.Broker, or wrappers of them).
func New(cfg Config, s Store, b Broker) *Worker {
	cfg = cfg.withDefaults()
	lb := &leaseLock{Broker: b}
	b = lb
	w := &Worker{cfg: cfg, store: s, broker: b, leaseLock: lb, clock: clock.Or(cfg.Clock)}
	w.db = store.NewClock(s, w.clock)
	if cfg.Clock != nil {
		w.db = fixedClock{cfg.Clock}
	}
	w.log = cfg.Logger.With("component", "worker", "worker_id", cfg.ID)
	w.slots = newSlotTable(cfg.Queues, w.clock)
	w.held = newHeld()
	w.beat = &heartbeater{w: w}
	w.kills = &killListener{broker: b, log: w.log, kill: w.slots.kill, early: newKilledSet(w.clock.Now),
		readFails: startstop.FailLog{Log: w.log, Level: slog.LevelWarn,
			Failed: "kill requests not read; attempts killed while this worker did not listen may run once",
			Again:  "kill requests read again"}}
	w.comp = newCompleter(s, b, cfg.ID, w.log, &w.count.stale)
	w.comp.written = w.written
	w.comp.now = w.db.Latest
	w.mark = &marker{store: s, workerID: cfg.ID, log: w.log, slots: w.slots, delay: cfg.RunningMarkDelay,
		fails: startstop.FailLog{Log: w.log, Level: slog.LevelError, Failed: "mark running failed; retrying",
			Again: "running marks written again"}}
	pol := policy{
		backoff:         func(r int) time.Duration { return Backoff(cfg.RetryBase, cfg.RetryMax, r) },
		now:             w.db.Earliest,
		defaultTimezone: cfg.DefaultTimezone,
		outputLimit:     cfg.OutputLimit,
	}
	w.pool = &pool{w: w, policy: pol}
	return w
}

// dbClock is the database clock: a *store.Clock, or Config.Clock.
type dbClock interface {
	Earliest() time.Time
	Latest() time.Time
	Sync(ctx context.Context) error
}

// fixedClock is a Config.Clock standing in for the database clock: both
// bounds are its time.
type fixedClock struct{ clock.Clock }

func (c fixedClock) Earliest() time.Time      { return c.Now() }
func (c fixedClock) Latest() time.Time        { return c.Now() }
func (fixedClock) Sync(context.Context) error { return nil }

// ID returns the worker id.
func (w *Worker) ID() string { return w.cfg.ID }

// Stats returns the counters.
func (w *Worker) Stats() Stats {
	return Stats{Processed: w.count.processed.Load(), Failed: w.count.failed.Load(),
		Stale: w.count.stale.Load(), Poison: w.count.poison.Load()}
}

// components are the worker's parts in start order; shutdown stops them in
// the reverse one.
func (w *Worker) components() []interface {
	Start(context.Context) error
} {
	return []interface{ Start(context.Context) error }{w.beat, w.kills, w.comp, w.mark, w.pool}
}

// Start starts consuming. The worker runs until Stop or Abort; ctx only
// carries values and the initial clock sync.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return fmt.Errorf("worker: %w", startstop.ErrStarted)
	}
	w.started = true
	w.startedAt = w.clock.Now()
	w.slots.resetProgress(w.startedAt)
	if err := w.db.Sync(ctx); err != nil {
		w.log.Warn("database clock sync failed; using the local clock until it succeeds", "err", err)
	}
	base := context.WithoutCancel(ctx)
	for _, c := range w.components() {
		if err := c.Start(base); err != nil {
			return fmt.Errorf("worker: %w", err)
		}
	}
	w.log.Info("worker started", "queues", w.cfg.Queues)
	return nil
}

// Stop drains: no new messages are taken, running tasks get the shutdown
// grace to finish, then are cancelled and handed back (no retry counted).
// It returns when everything is written or given up. Safe to call twice or
// without Start.
func (w *Worker) Stop() {
	w.shutdown(shutdownPlan{grace: w.cfg.ShutdownGrace, handBack: w.cfg.HandBackWait, flush: w.cfg.FlushWait})
}

// Abort is the watchdog's last resort before the process exits: the
// heartbeat is withdrawn at once (recovery elsewhere takes the running
// tasks without waiting for the TTL), no more work is taken, running
// attempts are cancelled (exec handlers' process groups are killed) and
// given up to wait to return. Results are not written: recovery re-runs
// what did not finish. Stop after Abort returns at once.
func (w *Worker) Abort(wait time.Duration) {
	w.shutdown(shutdownPlan{abort: true, handBack: wait})
}

// shutdownPlan says how a shutdown goes: a drain (Stop) or an abort.
type shutdownPlan struct {
	// abort: withdraw the heartbeat first, write nothing more, leave the
	// processing lists to recovery.
	abort bool
	// grace lets running tasks finish; handBack waits for cancelled
	// handlers to return; flush retries the last result writes.
	grace, handBack, flush time.Duration
}

// shutdown stops the components in the reverse of their start order.
func (w *Worker) shutdown(p shutdownPlan) {
	if !w.beginStop() {
		return
	}
	if p.abort {
		// Recovery elsewhere takes over now; what is written from here on
		// could only race it.
		w.beat.withdraw()
		w.comp.abandon()
	}
	w.pool.stop(p.grace, p.handBack, !p.abort)
	if p.abort {
		w.mark.abandon()
	} else {
		w.mark.Stop()
	}
	if !p.abort {
		w.comp.stop(p.flush)
	}
	w.kills.Stop()
	// The heartbeat stops before the sweep so it cannot register the worker
	// again after the sweep removed it.
	w.beat.Stop()
	if !p.abort {
		w.sweep()
	}
	w.log.Info("worker stopped", "processed", w.count.processed.Load(), "aborted", p.abort)
}

// beginStop reports whether the caller is the one to stop the worker: it
// was started and nobody stopped it yet.
func (w *Worker) beginStop() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started || w.stopped {
		return false
	}
	w.stopped = true
	return true
}

// sweep hands back the messages left in this worker's processing lists
// once the completer flushed (taken but never started), then removes the
// lists and the worker's registration.
func (w *Worker) sweep() {
	ctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
	defer cancel()
	left, err := w.broker.Orphans(ctx, w.cfg.ID)
	if err != nil {
		w.log.Error("read processing lists at shutdown; recovery will hand them back", "err", err)
		return
	}
	var ts []store.Transition
	for _, raws := range left {
		for _, raw := range raws {
			if m, err := task.DecodeMessage([]byte(raw)); err == nil {
				ts = append(ts, store.HandBack(m.ID, m.Attempt))
			}
		}
	}
	if len(ts) > 0 {
		if _, err := w.store.TaskTransition(ctx, ts); err != nil {
			w.log.Error("hand back untaken messages at shutdown; recovery will", "tasks", len(ts), "err", err)
			return
		}
	}
	if err := w.broker.Leave(ctx, w.cfg.ID); err != nil {
		w.log.Warn("remove processing lists at shutdown", "err", err)
	}
}

// ResultsWaiting is how long the oldest result being written has waited
// for the task center (0: none is being written). A healthy write takes
// milliseconds, a slow link's seconds; minutes mean the task center does
// not answer, and the watchdog takes the worker for stuck.
func (w *Worker) ResultsWaiting() time.Duration { return w.comp.waiting() }

// ResultsRefused is why the task center turned down the last try of a
// waiting result: the server's refusal (read-only during a failover or
// maintenance, too many connections), or no server to connect to (down,
// restarting, cut off: "unreachable: dial tcp ..."). Either holds for
// every node alike, and a restart of this process would not get the
// result written. Nil when it did not answer on an open connection, or
// no result waits.
func (w *Worker) ResultsRefused() error {
	if r := w.comp.refused.Load(); r != nil && w.comp.waiting() > 0 {
		return r.err
	}
	return nil
}

// Capacity is the number of slots over all queues.
func (w *Worker) Capacity() int { return w.slots.capacity() }

// Queues returns the queues the worker consumes, sorted.
func (w *Worker) Queues() []string {
	out := make([]string, 0, len(w.cfg.Queues))
	for q := range w.cfg.Queues {
		out = append(out, q)
	}
	sort.Strings(out)
	return out
}

// written tallies a written batch: results by outcome for the metrics, and
// dead ones for the per-minute counters.
func (w *Worker) written(batch []completion, applied []bool) {
	rs := make([]metrics.Result, 0, len(batch))
	for i := range batch {
		w.slots.markProgress(batch[i].queue)
		w.held.drop(batch[i].raw) // its end is durable
	}
	for i, ok := range applied {
		r := batch[i].tr.Run
		if !ok || r == nil {
			continue
		}
		if r.Outcome == task.OutcomeDead {
			w.count.dead.Add(1)
		}
		rs = append(rs, metrics.Result{Queue: batch[i].queue, Outcome: r.Outcome, Retry: batch[i].tr.To == task.Failed, Duration: r.Duration})
	}
	w.cfg.Metrics.Completed(rs)
}
