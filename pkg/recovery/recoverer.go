// Package recovery finds work that was lost and puts it back: tasks
// dispatched whose message never reached a worker, tasks running on a
// worker that died or hung, and messages left in dead workers' processing
// lists. MySQL is the truth: after Redis lost its data, everything in
// flight is rebuilt from the task center. Every change is a fenced
// compare-and-set, so recovery racing a worker that is just finishing never
// reverts a completed task, and any number of nodes may run it at once.
package recovery

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/cronspec"
	"github.com/taskd/taskd/pkg/metrics"
	"github.com/taskd/taskd/pkg/startstop"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/worker"
)

// Defaults of Config.
const (
	IntervalDefault       = 5 * time.Second
	DispatchWindowDefault = time.Minute
	RunningGraceDefault   = time.Minute
	HeartbeatTTLDefault   = 30 * time.Second
	CrashLimitDefault     = 3
	BatchSizeDefault      = 1000
	// queueSlack absorbs the difference between the order schedulers
	// claim in and the order their pushes land in a queue.
	queueSlack = 30 * time.Second
	// markSlack is what a live worker's running mark may take past its
	// delay (the marker's tick, a write on a busy server).
	markSlack = 2 * time.Second
)

// LossGrace is how long after Redis lost its data the tasks dispatched
// before are handed back, for workers marking running after markDelay.
func LossGrace(markDelay time.Duration) time.Duration { return markDelay + markSlack }

// Config configures a Recoverer.
type Config struct {
	// Interval between passes.
	Interval time.Duration
	// DispatchWindow: a task dispatched longer ago whose message is not
	// waiting in its queue is re-dispatched (attempt + 1; the old message
	// is rejected by the fence if it ever surfaces).
	DispatchWindow time.Duration
	// RunningGrace: a running task past its timeout plus this is taken
	// from its (hung) worker.
	RunningGrace time.Duration
	// HeartbeatTTL of workers: a worker whose heartbeat key is gone is
	// dead, and its running tasks are recovered.
	HeartbeatTTL time.Duration
	// LossGrace: an attempt a live worker took before Redis lost its data
	// runs unmarked for up to the workers' running mark delay; the tasks
	// dispatched before a loss are handed back this long after it was
	// seen, when each has ended or been marked running (default
	// LossGrace(worker.RunningMarkDelayDefault)).
	LossGrace time.Duration
	// CrashLimit: a task found held by a dead worker this many times is a
	// poison task and goes to dead (periodic ones to their next run).
	CrashLimit int
	// BatchSize bounds every scan and transaction.
	BatchSize       int
	DefaultTimezone string
	Logger          *slog.Logger
	// Metrics, when set, counts what the passes put back.
	Metrics *metrics.Metrics
}

// Event kinds recovery records in the broker's event list (tasktop's
// Events view).
const (
	KindDrained      = "drained"      // a dead worker's lists were handed back and removed
	KindRecovered    = "recovered"    // a running task taken from a dead or hung worker
	KindPoisoned     = "poisoned"     // a task that crashed its worker CrashLimit times
	KindRedispatched = "redispatched" // dispatched tasks whose message was lost
	// eventsPerPass bounds the per-task events of one pass, so a mass
	// recovery does not push every other event out of the list.
	eventsPerPass = 50
)

// Result counts what one pass did.
type Result struct {
	Redispatched int // dispatched tasks whose message was lost
	Recovered    int // running tasks of dead or hung workers, back to pending
	Poisoned     int // tasks that crashed their worker CrashLimit times
	Orphans      int // attempts dead workers had taken, not yet marked running, recovered as crashes
	DeadWorkers  int // dead workers whose lists were drained
	RedisReset   bool
}

// Recoverer is the recovery scanner.
type Recoverer struct {
	cfg    Config
	store  *store.Store
	broker *broker.Broker
	clock  *store.Clock // the database clock, synced each pass
	log    *slog.Logger
	runner startstop.Runner
	fails  startstop.FailLog
	// lostAt is when this node was told Redis lost its data (the database
	// clock), until it handed back what was dispatched before; passes run
	// one at a time.
	lostAt time.Time
}

// New returns a recoverer.
func New(cfg Config, s *store.Store, b *broker.Broker) *Recoverer {
	cfg.Interval = cmp.Or(cfg.Interval, IntervalDefault)
	cfg.DispatchWindow = cmp.Or(cfg.DispatchWindow, DispatchWindowDefault)
	cfg.RunningGrace = cmp.Or(cfg.RunningGrace, RunningGraceDefault)
	cfg.HeartbeatTTL = cmp.Or(cfg.HeartbeatTTL, HeartbeatTTLDefault)
	cfg.CrashLimit = cmp.Or(cfg.CrashLimit, CrashLimitDefault)
	cfg.LossGrace = cmp.Or(cfg.LossGrace, LossGrace(worker.RunningMarkDelayDefault))
	cfg.BatchSize = cmp.Or(cfg.BatchSize, BatchSizeDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	log := cfg.Logger.With("component", "recovery")
	return &Recoverer{cfg: cfg, store: s, broker: b, clock: store.NewClock(s, nil), log: log,
		fails: startstop.FailLog{Log: log, Level: slog.LevelError, Failed: "recovery pass failed", Again: "recovery pass works again"}}
}

// Start runs passes every Interval until Stop.
func (r *Recoverer) Start(ctx context.Context) error {
	return r.runner.Start(ctx, func(ctx context.Context) {
		startstop.Every(ctx, r.cfg.Interval, func(ctx context.Context) {
			res, err := r.RunOnce(ctx)
			r.fails.Pass(ctx, err)
			if err != nil && ctx.Err() == nil {
				return
			}
			if res != (Result{}) {
				r.log.Warn("recovered lost work", "redispatched", res.Redispatched, "recovered", res.Recovered,
					"poisoned", res.Poisoned, "orphans", res.Orphans, "dead_workers", res.DeadWorkers, "redis_reset", res.RedisReset)
			}
		})
	})
}

// Stop stops the loop. Safe to call twice or without Start.
func (r *Recoverer) Stop() { r.runner.Stop() }

// RunOnce makes one recovery pass.
func (r *Recoverer) RunOnce(ctx context.Context) (res Result, err error) {
	defer func() {
		r.cfg.Metrics.Recovered("redispatched", res.Redispatched)
		r.cfg.Metrics.Recovered("running", res.Recovered)
		r.cfg.Metrics.Recovered("orphan", res.Orphans)
	}()
	since, age, _, err := r.broker.Epoch(ctx)
	if err != nil {
		return res, err
	}
	// The task center knows which Redis data set it worked with last: a
	// marker it has never seen is a first start, with nothing to lose; a
	// different one is a Redis that lost its data. One node is told so.
	seen, err := r.store.RedisEpoch(ctx, r.broker.Keys.Prefix, strconv.FormatInt(since.UnixMilli(), 10))
	if err != nil {
		return res, err
	}
	if err := r.clock.Sync(ctx); err != nil {
		return res, err
	}
	reset := seen == store.EpochLost
	switch seen {
	case store.EpochFirst:
		r.log.Info("first start on this Redis: nothing was in flight there, nothing to rebuild", "prefix", r.broker.Keys.Prefix)
	case store.EpochLost:
		r.log.Warn("redis lost its data: rebuilding what was in flight from the task center (if this repeats, nodes sharing this task center and prefix use different Redis servers)",
			"prefix", r.broker.Keys.Prefix)
	}
	res.RedisReset = reset
	// Right after Redis lost its data, or a first start, live workers
	// have not beaten yet: judging them by heartbeats would take tasks from
	// living workers.
	trustHeartbeats := seen == store.EpochKnown && age > r.cfg.HeartbeatTTL

	if trustHeartbeats {
		if err := r.drainDeadWorkers(ctx, &res); err != nil {
			return res, err
		}
	}
	if reset {
		// The lower bound: NOW(3) was read after the epoch, so it is past
		// the loss, and by as little as this node can tell; a later instant
		// would hand back tasks dispatched after the loss, whose messages
		// are in the new Redis.
		r.lostAt = r.clock.Earliest()
	}
	if err := r.redispatch(ctx, &res); err != nil {
		return res, err
	}
	if err := r.redispatchUndated(ctx, &res); err != nil {
		return res, err
	}
	r.retireShards(ctx)
	if err := r.recoverRunning(ctx, trustHeartbeats, &res); err != nil {
		return res, err
	}
	return res, nil
}

// drainDeadWorkers recovers the attempts in dead workers' processing lists
// whose tasks are still dispatched, and deletes the lists. A worker starts
// what it takes at once and marks it running only later, so such an
// attempt did start: it counts as a crash, which is what stops a poison
// task that kills its worker before the mark. Their marked (running) tasks
// are recovered by recoverRunning, from the task center.
func (r *Recoverer) drainDeadWorkers(ctx context.Context, res *Result) error {
	dead, err := r.broker.DeadWorkers(ctx, r.cfg.HeartbeatTTL)
	if err != nil {
		return err
	}
	for _, w := range dead {
		node := r.broker.WorkerNode(ctx, w)
		orphans, err := r.broker.Orphans(ctx, w)
		if err != nil {
			return err
		}
		ts, err := r.orphanCrashes(ctx, w, node, orphans)
		if err != nil {
			return err
		}
		applied, err := r.applyEach(ctx, ts)
		if err != nil {
			return err
		}
		n := 0
		for i, ok := range applied {
			if !ok {
				continue
			}
			n++
			// The attempt that killed its worker a last time: said as
			// recoverRunning says it of a marked one, not as a message
			// handed back.
			if poisoned(ts[i]) {
				res.Poisoned++
				r.log.Warn("task recovered", "task_id", ts[i].ID, "task_code", ts[i].Run.Code,
					"attempt", ts[i].Attempt, "to", ts[i].To.String(), "reason", ts[i].Result)
				r.record(ctx, &broker.Event{Kind: KindPoisoned, Node: node, WorkerID: w, Queue: ts[i].Run.Queue, TaskID: ts[i].ID,
					Code: ts[i].Run.Code, Attempt: ts[i].Attempt, Detail: fmt.Sprintf("task recovered, now %s: %s", ts[i].To, ts[i].Result)})
			}
		}
		res.Orphans += n
		if err := r.broker.Forget(ctx, w); err != nil {
			return err
		}
		res.DeadWorkers++
		r.log.Warn("dead worker drained", "worker_id", w, "worker_node", node, "recovered", n)
		attempts := "attempts"
		if n == 1 {
			attempts = "attempt"
		}
		r.record(ctx, &broker.Event{Kind: KindDrained, Node: node, WorkerID: w,
			Detail: fmt.Sprintf("dead worker drained: %d %s it had taken recovered, each counted as a crash", n, attempts)})
	}
	return nil
}

// poisoned reports whether crash transition tr gives its task up (dead) or
// moves a periodic one past its occurrence: its crash limit was reached.
func poisoned(tr store.Transition) bool {
	return tr.To != task.Pending || !tr.NextAt.IsZero()
}

// redispatch hands back the dispatched tasks whose message was lost. After
// Redis lost its data nothing that was queued survived, but an attempt a
// live worker took just before may still run without its running mark:
// the tasks dispatched before the loss are handed back once every such
// attempt has ended or been marked, and until then none is, so that a
// running handler is not started a second time.
func (r *Recoverer) redispatch(ctx context.Context, res *Result) error {
	if r.lostAt.IsZero() {
		return r.redispatchLost(ctx, time.Time{}, res)
	}
	// The grace has passed by the lower bound (give or take the round
	// trip of the sync lostAt came from, far inside markSlack).
	if r.clock.Earliest().Sub(r.lostAt) < r.cfg.LossGrace {
		return nil
	}
	if err := r.redispatchLost(ctx, r.lostAt, res); err != nil {
		return err
	}
	r.lostAt = time.Time{}
	return nil
}

// redispatchUndated returns to pending the tasks INSERTed as dispatched
// or running (a seed-style producer copying its own states): without a
// dispatch time no scan by age finds them, and nothing of taskd holds
// them. The attempt stays; the fence rejects anything that ran it.
func (r *Recoverer) redispatchUndated(ctx context.Context, res *Result) error {
	for {
		us, err := r.store.TaskListUndatedInFlight(ctx, r.cfg.BatchSize)
		if err != nil || len(us) == 0 {
			return err
		}
		zero := time.Duration(0)
		ts := make([]store.Transition, len(us))
		for i, u := range us {
			ts[i] = store.Transition{ID: u.ID, Attempt: u.Attempt, From: u.Status, To: task.Pending, NextIn: &zero,
				SetResult: true, Result: "recovered: " + u.Status.String() + " without a dispatch time (INSERTed so?): back to pending"}
		}
		n, err := r.apply(ctx, ts)
		if err != nil {
			return err
		}
		if n > 0 {
			res.Redispatched += n
			r.log.Warn("tasks in flight without a dispatch time, back to pending", "tasks", n)
		}
		if len(us) < r.cfg.BatchSize || n == 0 {
			return nil
		}
	}
}

// redispatchLost returns to pending the tasks whose message cannot still
// be waiting in their queue: with a zero lostAt, those dispatched longer
// than the dispatch window ago; otherwise all those dispatched before
// lostAt. That bound is the instant itself: a window back from the
// query's NOW(3) would move it by the error of this pass's clock sync and
// by however long the query took to start, and hand back tasks dispatched
// just after the loss, whose messages are in the new Redis.
func (r *Recoverer) redispatchLost(ctx context.Context, lostAt time.Time, res *Result) error {
	all := !lostAt.IsZero()
	var cur store.InFlightCursor
	for {
		var stuck []store.StuckDispatched
		var err error
		if all {
			stuck, err = r.store.TaskListDispatchedBefore(ctx, lostAt, cur, r.cfg.BatchSize)
		} else {
			stuck, err = r.store.TaskListStuckDispatched(ctx, r.cfg.DispatchWindow, cur, r.cfg.BatchSize)
		}
		if err != nil || len(stuck) == 0 {
			return err
		}
		last := stuck[len(stuck)-1]
		cur = store.InFlightCursor{DispatchedAt: last.DispatchedAt, ID: last.ID}
		oldest := map[string]*time.Time{}
		taken := map[string]map[broker.Attempt]bool{}
		var ts []store.Transition
		for _, d := range stuck {
			if !all {
				o, ok := oldest[d.Queue]
				if !ok {
					t, has, err := r.broker.OldestDispatch(ctx, d.Queue)
					if err != nil {
						return err
					}
					if has {
						o = &t
					}
					oldest[d.Queue] = o
				}
				// The queue holds messages dispatched before this task: it
				// may still be waiting its turn behind a backlog.
				if o != nil && !d.DispatchedAt.Before(o.Add(-queueSlack)) {
					continue
				}
				// A worker took it and runs it, unmarked yet: after a long
				// wait in its list (a rate, a max_running) its dispatch is
				// old, and the queue behind it empty or younger. Read after
				// the queue, so that a message moving from one to the
				// other meanwhile is seen in either.
				in, ok := taken[d.Queue]
				if !ok {
					if in, err = r.broker.TakenAttempts(ctx, d.Queue); err != nil {
						return err
					}
					taken[d.Queue] = in
				}
				if in[broker.Attempt{ID: d.ID, Attempt: d.Attempt}] {
					continue
				}
			}
			ts = append(ts, store.HandBack(d.ID, d.Attempt))
		}
		n, err := r.apply(ctx, ts)
		if err != nil {
			return err
		}
		res.Redispatched += n
		if n > 0 {
			r.record(ctx, &broker.Event{Kind: KindRedispatched,
				Detail: fmt.Sprintf("%d dispatched tasks whose message was lost, back to pending", n)})
		}
		if len(stuck) < r.cfg.BatchSize {
			return nil
		}
	}
}

// recoverRunning takes running tasks from workers that are dead (heartbeat
// gone) or hung (past timeout plus grace). A task found this way
// CrashLimit times is a poison task.
func (r *Recoverer) recoverRunning(ctx context.Context, trustHeartbeats bool, res *Result) error {
	var cur store.InFlightCursor
	for {
		running, err := r.store.TaskListRunning(ctx, r.cfg.RunningGrace, cur, r.cfg.BatchSize)
		if err != nil {
			return err
		}
		if len(running) == 0 {
			return nil
		}
		last := running[len(running)-1]
		cur = store.InFlightCursor{DispatchedAt: last.DispatchedAt, ID: last.ID}
		alive := map[string]bool{}
		if trustHeartbeats {
			ids := make([]string, 0, len(running))
			for _, t := range running {
				ids = append(ids, t.WorkerID)
			}
			if alive, err = r.broker.Alive(ctx, ids); err != nil {
				return err
			}
		}
		holding, err := r.holdingResults(ctx, running, alive)
		if err != nil {
			return err
		}
		var ts []store.Transition
		var taken []*store.RunningTask
		nodes := map[string]string{} // worker -> node
		for i := range running {
			t := &running[i]
			dead := trustHeartbeats && !alive[t.WorkerID]
			if !dead && (!t.Overdue || holding[t.WorkerID]) {
				continue
			}
			why := "its worker " + t.WorkerID + " died"
			if !dead {
				why = "it ran past its timeout plus grace on worker " + t.WorkerID
			}
			tr := r.crashTransition(t, why)
			// The run row names where and since when the attempt ran, as
			// its worker would have: an operator counts crashes by node.
			node, ok := nodes[t.WorkerID]
			if !ok {
				node = r.broker.WorkerNode(ctx, t.WorkerID)
				nodes[t.WorkerID] = node
			}
			tr.Run.Node = node
			if !t.StartedAt.IsZero() {
				tr.Run.Duration = max(0, r.clock.Earliest().Sub(t.StartedAt))
			}
			ts = append(ts, tr)
			taken = append(taken, t)
		}
		applied, err := r.applyEach(ctx, ts)
		if err != nil {
			return err
		}
		for i, ok := range applied {
			if !ok {
				continue // another node, or the worker itself, got there first
			}
			res.Recovered++
			kind := KindRecovered
			if poisoned(ts[i]) {
				res.Poisoned++
				kind = KindPoisoned
			}
			t := taken[i]
			r.log.Warn("task recovered", "task_id", t.ID, "task_code", t.Code,
				"attempt", t.Attempt, "to", ts[i].To.String(), "reason", ts[i].Result)
			if res.Recovered <= eventsPerPass {
				r.record(ctx, &broker.Event{Kind: kind, Node: ts[i].Run.Node, WorkerID: t.WorkerID, Queue: t.Queue, TaskID: t.ID, Code: t.Code,
					Attempt: t.Attempt, Detail: fmt.Sprintf("task recovered, now %s: %s", ts[i].To, ts[i].Result)})
			}
		}
		if len(running) < r.cfg.BatchSize {
			return nil
		}
	}
}

// holdingResults reports which live workers of the overdue tasks of
// running hold results they could not write yet. Such a task's attempt may
// have ended long ago, its result held on the worker while the task center
// was down; taken as hung, it would run again and its result be refused.
// The worker writes it once the task center takes writes, and a worker
// whose writes hang is exited by its watchdog, which ends its heartbeat.
func (r *Recoverer) holdingResults(ctx context.Context, running []store.RunningTask, alive map[string]bool) (map[string]bool, error) {
	var ids []string
	for _, t := range running {
		if t.Overdue && alive[t.WorkerID] && !slices.Contains(ids, t.WorkerID) {
			ids = append(ids, t.WorkerID)
		}
	}
	return r.broker.HoldingResults(ctx, ids)
}

// record adds an event for operators; losing one is not worth failing the
// pass for.
func (r *Recoverer) record(ctx context.Context, e *broker.Event) {
	e.At = time.Now()
	if err := r.broker.RecordEvent(ctx, e); err != nil {
		r.log.Warn("record recovery event", "err", err)
	}
}

func (r *Recoverer) crashTransition(t *store.RunningTask, why string) store.Transition {
	return CrashTransition(t, why, r.cfg.CrashLimit, r.cfg.DefaultTimezone, r.clock.Earliest())
}

// orphanCrashes are the crash transitions of dead worker w's taken
// attempts whose tasks are still dispatched for them.
func (r *Recoverer) orphanCrashes(ctx context.Context, w, node string, orphans map[string][]string) ([]store.Transition, error) {
	var ts []store.Transition
	for q, raws := range orphans {
		for _, raw := range raws {
			m, err := task.DecodeMessage([]byte(raw))
			if err != nil {
				continue
			}
			t, err := r.store.TaskGet(ctx, m.ID)
			if task.ErrorCode(err) == task.CodeNotFound {
				continue
			}
			if err != nil {
				return nil, err
			}
			if t.Status != task.Dispatched || t.Attempt != m.Attempt {
				continue
			}
			rt := &store.RunningTask{ID: t.ID, Attempt: t.Attempt, Code: t.Code, Queue: q, Type: t.Type, CronExpr: t.CronExpr,
				Timezone: t.Timezone, WorkerID: w, CrashCount: t.CrashCount, PlanNextRun: t.PlanNextRun}
			tr := CrashTransition(rt, "its worker "+w+" died", r.cfg.CrashLimit, r.cfg.DefaultTimezone, r.clock.Earliest())
			tr.From, tr.Run.Node = task.Dispatched, node
			ts = append(ts, tr)
		}
	}
	return ts, nil
}

// CrashTransition takes running task t from a worker that died or hung:
// back to pending, due now, crash_count + 1; at crashLimit a one-off task
// is dead (poison) and a periodic one moves to its next occurrence after
// now, a lower bound of the database clock: the first occurrence after it
// is one the database clock has not passed, or only just.
func CrashTransition(t *store.RunningTask, why string, crashLimit int, defaultTZ string, now time.Time) store.Transition {
	zero := time.Duration(0)
	tr := store.Transition{
		ID: t.ID, Attempt: t.Attempt, From: task.Running, To: task.Pending, NextIn: &zero,
		Crash: store.RetryInc, SetResult: true, Result: "recovered: " + why,
		Run: &store.RunRecord{Code: t.Code, Queue: t.Queue, WorkerID: t.WorkerID, Outcome: task.OutcomeCrashed, Result: "recovered: " + why},
	}
	if t.CrashCount+1 < crashLimit {
		return tr
	}
	tr.Result = fmt.Sprintf("poison task: its worker died or hung %d times; last: %s", t.CrashCount+1, why)
	tr.Run.Result = tr.Result
	if t.Type != task.Periodic {
		tr.To, tr.NextIn = task.Dead, nil
		return tr
	}
	// Periodic tasks never die: move on to the next occurrence.
	next, err := cronspec.NextRun(t.CronExpr, cmp.Or(t.Timezone, defaultTZ), t.PlanNextRun, now)
	if err != nil {
		tr.To, tr.NextIn = task.Dead, nil
		return tr
	}
	tr.NextIn, tr.NextAt, tr.Crash = nil, next, store.RetryReset
	return tr
}

// apply writes transitions in batches and returns how many applied.
func (r *Recoverer) apply(ctx context.Context, ts []store.Transition) (int, error) {
	applied, err := r.applyEach(ctx, ts)
	n := 0
	for _, ok := range applied {
		if ok {
			n++
		}
	}
	return n, err
}

// applyEach writes transitions in batches of 500 and reports which applied.
func (r *Recoverer) applyEach(ctx context.Context, ts []store.Transition) ([]bool, error) {
	out := make([]bool, 0, len(ts))
	for len(ts) > 0 {
		chunk := ts[:min(len(ts), 500)]
		ts = ts[len(chunk):]
		applied, err := r.store.TaskTransition(ctx, chunk)
		if err != nil && store.LockedEntries(err) == nil {
			return out, err
		}
		// Tasks whose rows another transaction holds did not apply: the
		// next pass finds them again.
		out = append(out, applied...)
		// The queues' per-minute counters count the attempts ended here.
		ended := map[string]broker.Ended{}
		for i, ok := range applied {
			if run := chunk[i].Run; ok && run != nil {
				broker.CountEnded(ended, run.Queue, run.Outcome)
			}
		}
		if len(ended) > 0 {
			// After the write: not counted in a minute before its finished_at.
			if err := r.broker.AckEnded(ctx, "", nil, r.clock.Latest(), ended); err != nil {
				r.log.Warn("count ended attempts", "err", err)
			}
		}
	}
	return out, nil
}
