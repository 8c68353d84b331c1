// Package worker consumes queues: it takes messages from Redis into its own
// processing list, moves each task to running with a compare-and-set fenced
// by attempt, runs the task's handler under its timeout, and writes the
// result back in batches. On shutdown it drains within a grace period and
// hands back what did not finish, without counting a retry.
//
// Components, in start order: the heartbeat, the completer (batched result
// writer), one fetcher per queue. Stop reverses it: fetchers stop taking,
// running tasks finish or are handed back, the completer flushes, the
// heartbeat is withdrawn.
package worker

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/metrics"
	"github.com/taskd/taskd/pkg/startstop"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// Defaults of Config.
const (
	ShutdownGraceDefault     = 30 * time.Second
	HeartbeatIntervalDefault = 5 * time.Second
	HeartbeatTTLDefault      = 30 * time.Second
	OutputLimitDefault       = 64 << 10
	// takeBatchMax bounds the messages taken per Redis round trip.
	takeBatchMax = 256
	// takeWait is how long a take blocks on an empty queue; it bounds how
	// long a fetcher takes to notice shutdown.
	takeWait = time.Second
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
	// OutputLimit is the number of bytes of output kept per attempt.
	OutputLimit int
	// RetryBase and RetryMax shape the backoff between attempts.
	RetryBase, RetryMax time.Duration
	// DefaultTimezone applies to cron tasks that name none.
	DefaultTimezone   string
	HeartbeatInterval time.Duration
	HeartbeatTTL      time.Duration
	Logger            *slog.Logger
	// Metrics, when set, receives start delays and written results.
	Metrics *metrics.Metrics
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

// Worker runs tasks from its queues.
type Worker struct {
	cfg    Config
	store  *store.Store
	broker *broker.Broker
	clock  *store.Clock
	log    *slog.Logger
	policy policy
	comp   *completer

	processed, failed, stale, poison atomic.Int64
	dead                             atomic.Int64 // written results with no retry left
	busy                             atomic.Int64
	// progress holds, per queue, when a task of it last started or ended
	// (unix ns): the watchdog's measure of an alive but idle worker.
	progress map[string]*atomic.Int64

	mu         sync.Mutex
	started    bool
	stopped    bool
	stopFetch  context.CancelFunc // stops taking new messages
	stopRuns   context.CancelFunc // cancels running handlers (hand back)
	runCtx     context.Context
	fetchers   sync.WaitGroup
	runs       sync.WaitGroup
	inflight   map[int64]*job
	abandoned  map[*job]struct{} // given up on, handler not returned yet
	beatCancel context.CancelFunc
	beatDone   chan struct{}
	killsDone  chan struct{}
	startedAt  time.Time
}

// job is one message being run.
type job struct {
	msg     *task.Message
	raw     string
	queue   string
	started time.Time
	// ctx is cancelled with errKilled when an operator kills the task.
	ctx  context.Context
	kill context.CancelCauseFunc
	done atomic.Bool // its result was handed to the completer
	// release frees the job's slot once: when its handler returns, or
	// earlier when the watchdog abandons it.
	release   func()
	abandoned atomic.Bool
	returned  chan struct{} // closed when the handler returned
}

// errKilled is the cancel cause of an attempt killed by an operator.
var errKilled = errors.New("killed by operator")

// New returns a worker.
func New(cfg Config, s *store.Store, b *broker.Broker) *Worker {
	cfg.ID = cmp.Or(cfg.ID, NewID())
	cfg.ShutdownGrace = cmp.Or(cfg.ShutdownGrace, ShutdownGraceDefault)
	cfg.HeartbeatInterval = cmp.Or(cfg.HeartbeatInterval, HeartbeatIntervalDefault)
	cfg.HeartbeatTTL = cmp.Or(cfg.HeartbeatTTL, HeartbeatTTLDefault)
	cfg.OutputLimit = cmp.Or(cfg.OutputLimit, OutputLimitDefault)
	cfg.RetryBase = cmp.Or(cfg.RetryBase, 10*time.Second)
	cfg.RetryMax = cmp.Or(cfg.RetryMax, time.Hour)
	if cfg.Handlers == nil {
		cfg.Handlers = handler.NewRegistry()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	w := &Worker{
		cfg: cfg, store: s, broker: b, clock: store.NewClock(s),
		log:      cfg.Logger.With("component", "worker", "worker_id", cfg.ID),
		inflight: map[int64]*job{}, abandoned: map[*job]struct{}{},
		progress: map[string]*atomic.Int64{},
	}
	for q := range cfg.Queues {
		w.progress[q] = &atomic.Int64{}
	}
	w.policy = policy{
		backoff:         func(r int) time.Duration { return Backoff(cfg.RetryBase, cfg.RetryMax, r) },
		now:             w.clock.Now,
		defaultTimezone: cfg.DefaultTimezone,
		outputLimit:     cfg.OutputLimit,
	}
	w.comp = newCompleter(s, b, cfg.ID, w.log, &w.stale)
	w.comp.written = w.written
	w.comp.now = w.clock.Now
	return w
}

// ID returns the worker id.
func (w *Worker) ID() string { return w.cfg.ID }

// Stats returns the counters.
func (w *Worker) Stats() Stats {
	return Stats{Processed: w.processed.Load(), Failed: w.failed.Load(), Stale: w.stale.Load(), Poison: w.poison.Load()}
}

// Start starts consuming. The worker runs until Stop; ctx only carries
// values and the initial clock sync.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return errors.New("worker already started")
	}
	w.started = true
	w.startedAt = time.Now()
	for _, p := range w.progress {
		p.Store(w.startedAt.UnixNano())
	}
	if err := w.clock.Sync(ctx); err != nil {
		w.log.Warn("database clock sync failed; using the local clock until it succeeds", "err", err)
	}
	base := context.WithoutCancel(ctx)
	w.runCtx, w.stopRuns = context.WithCancel(base)
	var fetchCtx context.Context
	fetchCtx, w.stopFetch = context.WithCancel(base)
	var beatCtx context.Context
	beatCtx, w.beatCancel = context.WithCancel(base)
	w.beatDone = make(chan struct{})
	go w.heartbeat(beatCtx)
	kills, closeKills := w.broker.Kills(beatCtx)
	w.killsDone = make(chan struct{})
	go w.listenKills(beatCtx, kills, closeKills)
	w.comp.start()
	queues := make([]string, 0, len(w.cfg.Queues))
	for q := range w.cfg.Queues {
		queues = append(queues, q)
	}
	sort.Strings(queues)
	for _, q := range queues {
		n := max(1, w.cfg.Queues[q])
		w.fetchers.Add(1)
		go w.fetch(fetchCtx, q, make(chan struct{}, n))
	}
	w.log.Info("worker started", "queues", w.cfg.Queues)
	return nil
}

// Stop drains: no new messages are taken, running tasks get the shutdown
// grace to finish, then are cancelled and handed back (no retry counted).
// It returns when everything is written or given up. Safe to call twice or
// without Start.
func (w *Worker) Stop() {
	if !w.beginStop() {
		return
	}

	w.stopFetch()
	w.fetchers.Wait()

	if !waitTimeout(&w.runs, w.cfg.ShutdownGrace) {
		w.log.Warn("shutdown grace over; handing back running tasks", "running", w.busy.Load())
		w.stopRuns()
		// Exec handlers get their kill grace; Go handlers should return
		// on cancel. A handler that ignores its context is handed back
		// by force: its late result is rejected by the fence.
		if !waitTimeout(&w.runs, 10*time.Second) {
			w.forceHandBack()
		}
	}
	w.stopRuns()
	w.comp.stop(15 * time.Second)
	// The heartbeat stops before the sweep so it cannot register the worker
	// again after the sweep removed it.
	w.beatCancel()
	<-w.beatDone
	<-w.killsDone
	w.sweep()
	w.log.Info("worker stopped", "processed", w.processed.Load())
}

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

// fetch is the loop of one queue: take as many messages as there are free
// slots, mark them running, run them.
func (w *Worker) fetch(ctx context.Context, q string, slots chan struct{}) {
	defer w.fetchers.Done()
	errDelay := 100 * time.Millisecond
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		if ctx.Err() != nil { // select picks at random when both are ready
			<-slots
			return
		}
		n := 1
	fill:
		for n < takeBatchMax {
			select {
			case slots <- struct{}{}:
				n++
			default:
				break fill
			}
		}
		// The take is not cancelled mid-flight: a message moved by Redis
		// must reach us. It blocks at most takeWait.
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), takeWait+5*time.Second)
		raws, err := w.broker.Take(tctx, q, w.cfg.ID, n, takeWait)
		cancel()
		for range n - len(raws) {
			<-slots
		}
		if err != nil {
			w.log.Error("take failed; retrying", "queue", q, "err", err, "in", errDelay)
			if !startstop.Sleep(ctx, errDelay) {
				return
			}
			errDelay = min(errDelay*2, 5*time.Second)
			continue
		}
		errDelay = 100 * time.Millisecond
		if len(raws) > 0 {
			// Marking running is a round trip to the task center: the next
			// take goes on meanwhile, as far as free slots allow.
			w.fetchers.Add(1)
			go func() {
				defer w.fetchers.Done()
				w.begin(ctx, q, raws, slots)
			}()
		}
	}
}

// begin decodes taken messages, claims them with the fenced 1 -> 2
// compare-and-set, and starts the winners. Each message holds one slot.
func (w *Worker) begin(ctx context.Context, q string, raws []string, slots chan struct{}) {
	jobs := make([]*job, 0, len(raws))
	fences := make([]store.Fence, 0, len(raws))
	for _, raw := range raws {
		m, err := task.DecodeMessage([]byte(raw))
		if err != nil {
			w.poison.Add(1)
			w.log.Error("poison message moved aside", "queue", q, "err", err, "message", handler.Truncate(raw, 512))
			if qerr := w.broker.Quarantine(context.WithoutCancel(ctx), q, w.cfg.ID, raw); qerr != nil {
				w.log.Error("quarantine", "err", qerr)
			}
			<-slots
			continue
		}
		jobs = append(jobs, &job{msg: m, raw: raw, queue: q})
		fences = append(fences, store.Fence{ID: m.ID, Attempt: m.Attempt})
	}
	if len(jobs) == 0 {
		return
	}
	ok, err := w.markRunning(ctx, fences)
	if err != nil {
		// Shutting down with the task center unreachable: the messages stay
		// in the processing list and their tasks in dispatched; recovery
		// re-dispatches them.
		w.log.Error("mark running failed; leaving messages for recovery", "queue", q, "tasks", len(jobs), "err", err)
		for range jobs {
			<-slots
		}
		return
	}
	var stale map[string][]string
	for i, j := range jobs {
		if !ok[i] {
			w.stale.Add(1)
			w.log.Warn("stale message dropped", "task_id", j.msg.ID, "task_code", j.msg.Code, "attempt", j.msg.Attempt)
			if stale == nil {
				stale = map[string][]string{}
			}
			stale[q] = append(stale[q], j.raw)
			<-slots
			continue
		}
		w.launch(j, slots)
	}
	if stale != nil {
		if err := w.broker.Ack(context.WithoutCancel(ctx), w.cfg.ID, stale); err != nil {
			w.log.Warn("drop stale messages", "err", err)
		}
	}
}

// markRunning retries the claim while the task center is unreachable,
// until the worker stops taking work.
func (w *Worker) markRunning(ctx context.Context, fences []store.Fence) ([]bool, error) {
	delay := 100 * time.Millisecond
	retried := false
	for {
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		ok, err := w.store.TaskMarkRunning(mctx, w.cfg.ID, fences)
		if err == nil && retried {
			w.ownAlready(mctx, fences, ok)
		}
		cancel()
		if err == nil {
			return ok, nil
		}
		retried = true
		w.log.Error("mark running failed; retrying", "err", err, "in", delay)
		if !startstop.Sleep(ctx, delay) {
			return nil, err
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// ownAlready marks as won the fences a retried claim lost only because an
// earlier try did commit although its reply was lost (MySQL restarted or
// the connection was cut at COMMIT): the task is already running for this
// very worker and attempt. Dropped as stale, it would sit in running, held
// by a live worker that never runs it, until its timeout plus the running
// grace.
func (w *Worker) ownAlready(ctx context.Context, fences []store.Fence, ok []bool) {
	won := map[int64]bool{}
	for i, f := range fences {
		won[f.ID] = won[f.ID] || ok[i]
	}
	for i, f := range fences {
		if won[f.ID] { // a duplicate message of the same dispatch stays a loser
			continue
		}
		t, err := w.store.TaskGet(ctx, f.ID)
		if err == nil && t.Status == task.Running && t.Attempt == f.Attempt && t.WorkerID == w.cfg.ID {
			ok[i], won[f.ID] = true, true
		}
	}
}

func (w *Worker) launch(j *job, slots chan struct{}) {
	j.ctx, j.kill = context.WithCancelCause(w.runCtx)
	j.started = time.Now()
	j.returned = make(chan struct{})
	j.release = sync.OnceFunc(func() {
		w.mu.Lock()
		if w.inflight[j.msg.ID] == j {
			delete(w.inflight, j.msg.ID)
		}
		w.mu.Unlock()
		w.busy.Add(-1)
		<-slots
		w.runs.Done()
	})
	w.markProgress(j.queue)
	if j.msg.DueUnixMS > 0 {
		w.cfg.Metrics.Started(j.queue, w.clock.Now().Sub(time.UnixMilli(j.msg.DueUnixMS)))
	}
	w.mu.Lock()
	w.inflight[j.msg.ID] = j
	w.mu.Unlock()
	w.runs.Add(1)
	w.busy.Add(1)
	go func() {
		defer j.release()
		defer close(j.returned)
		w.run(j)
	}()
}

// run executes one attempt and hands its result to the completer.
func (w *Worker) run(j *job) {
	m := j.msg
	log := w.log.With("task_id", m.ID, "task_code", m.Code, "attempt", m.Attempt)
	timeout := time.Duration(cmp.Or(m.Timeout, task.DefaultTimeout)) * time.Second
	ctx, cancel := context.WithTimeout(j.ctx, timeout)
	defer cancel()
	defer j.kill(nil)

	e := &attemptEnd{}
	h, ok := w.cfg.Handlers.Lookup(m.Code)
	if !ok {
		e.err = fmt.Errorf("no handler for task code %q on worker %s", m.Code, w.cfg.ID)
	} else {
		e.output, e.err = handler.Safe(ctx, h, &handler.Request{
			ID: m.ID, Code: m.Code, Queue: m.Queue, Attempt: m.Attempt, UniqueKey: m.UniqueKey, Payload: m.Payload,
		})
	}
	e.duration = time.Since(j.started)
	w.markProgress(j.queue)
	if e.err != nil {
		switch {
		case errors.Is(context.Cause(j.ctx), errKilled):
			e.killed = true
		case w.runCtx.Err() != nil:
			e.interrupted = true
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			e.timedOut = true
			e.err = fmt.Errorf("timed out after %s: %w", timeout, e.err)
		}
	}
	if !e.interrupted {
		w.processed.Add(1)
		if e.err != nil {
			w.failed.Add(1)
			log.Warn("task attempt failed", "err", e.err, "duration", e.duration)
		} else {
			log.Debug("task succeeded", "duration", e.duration)
		}
	}
	run := &store.RunRecord{Code: m.Code, Queue: j.queue, WorkerID: w.cfg.ID, Node: w.cfg.Node}
	if j.done.CompareAndSwap(false, true) {
		w.comp.add(completion{tr: w.policy.transition(m, e, run), code: m.Code, queue: j.queue, raw: j.raw})
	}
}

// listenKills cancels attempts that an operator killed. Every worker gets
// every request; the one running that attempt acts.
func (w *Worker) listenKills(ctx context.Context, kills <-chan broker.KillRequest, closeKills func() error) {
	defer close(w.killsDone)
	stop := context.AfterFunc(ctx, func() { closeKills() })
	defer stop()
	for r := range kills {
		w.mu.Lock()
		j := w.inflight[r.ID]
		w.mu.Unlock()
		if j != nil && j.msg.Attempt == r.Attempt {
			w.log.Warn("killing task on operator request", "task_id", r.ID, "task_code", j.msg.Code, "attempt", r.Attempt)
			j.kill(errKilled)
		}
	}
}

// forceHandBack hands back tasks whose handlers ignored cancellation.
func (w *Worker) forceHandBack() {
	w.mu.Lock()
	var stuck []*job
	for _, j := range w.inflight {
		stuck = append(stuck, j)
	}
	w.mu.Unlock()
	for _, j := range stuck {
		if !j.done.CompareAndSwap(false, true) {
			continue
		}
		w.log.Error("handler ignored cancellation; task handed back", "task_id", j.msg.ID, "task_code", j.msg.Code, "attempt", j.msg.Attempt)
		run := &store.RunRecord{Code: j.msg.Code, Queue: j.queue, WorkerID: w.cfg.ID, Node: w.cfg.Node}
		e := &attemptEnd{interrupted: true, duration: time.Since(j.started)}
		w.comp.add(completion{tr: w.policy.transition(j.msg, e, run), code: j.msg.Code, queue: j.queue, raw: j.raw})
	}
}

// sweep hands back the messages left in this worker's processing lists
// once the completer flushed (taken but never started), then removes the
// lists and the worker's registration.
func (w *Worker) sweep() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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
	if err := w.broker.Forget(ctx, w.cfg.ID); err != nil {
		w.log.Warn("remove processing lists at shutdown", "err", err)
	}
}

// heartbeat publishes the worker's liveness until ctx is done.
func (w *Worker) heartbeat(ctx context.Context) {
	defer close(w.beatDone)
	host, _ := os.Hostname()
	queues := make([]string, 0, len(w.cfg.Queues))
	for q := range w.cfg.Queues {
		queues = append(queues, q)
	}
	sort.Strings(queues)
	t := time.NewTicker(w.cfg.HeartbeatInterval)
	defer t.Stop()
	// The clock sync runs beside the beats: a database that hangs must not
	// hold back the heartbeat (the watchdog judges a worker whose MySQL
	// hangs by its fresh heartbeat).
	var syncs sync.WaitGroup
	defer syncs.Wait()
	var syncing atomic.Bool
	beats := 0
	// Counts already added to the per-minute counters.
	var sent broker.Counts
	for {
		processed, failed := w.processed.Load(), w.failed.Load()
		now := broker.Counts{Processed: processed, Failed: failed, Dead: w.dead.Load()}
		hb := &broker.Heartbeat{
			ID: w.cfg.ID, Node: w.cfg.Node, Host: host, PID: os.Getpid(), Version: w.cfg.Version,
			Queues: queues, StartedAt: w.startedAt, Busy: int(w.busy.Load()),
			Processed: processed, Failed: failed, Capacity: w.Capacity(), Slots: w.Slots(),
		}
		bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := w.broker.BeatCounts(bctx, hb, w.cfg.HeartbeatTTL, time.Now(), broker.Counts{
			Processed: now.Processed - sent.Processed, Failed: now.Failed - sent.Failed, Dead: now.Dead - sent.Dead})
		if err == nil {
			sent = now
		} else if ctx.Err() == nil {
			w.log.Warn("heartbeat failed", "err", err)
		}
		cancel()
		if beats++; beats%12 == 0 && syncing.CompareAndSwap(false, true) {
			syncs.Add(1)
			go func() {
				defer syncs.Done()
				defer syncing.Store(false)
				sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				if err := w.clock.Sync(sctx); err != nil && ctx.Err() == nil {
					w.log.Warn("database clock sync failed", "err", err)
				}
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
