package benchmark

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/startstop"
)

// Figures are what one scenario measured, by name (see names in report.go).
type Figures map[string]float64

// counter is a Go handler that counts the attempts that succeeded, so a
// scenario knows when every handler ran without polling the task center: a
// poll scans the phase's rows, and every few milliseconds that adds to the
// server CPU the scenario measures (about 100 µs per task of the exec
// scenario). It runs next first when set (see counting); else it is a
// no-op.
type counter struct {
	n    atomic.Int64
	next handler.Handler
}

// counting returns a counter that runs h.
func counting(h handler.Handler) *counter { return &counter{next: h} }

func (c *counter) Handle(ctx context.Context, r *handler.Request) (out string, err error) {
	if c.next != nil {
		if out, err = c.next.Handle(ctx, r); err != nil {
			return out, err
		}
	}
	c.n.Add(1)
	return out, nil
}

func noopRegistry(c *counter) *handler.Registry {
	reg := handler.NewRegistry()
	reg.Register("noop", c)
	return reg
}

func subs(n int, s producer.Submission) []producer.Submission {
	out := make([]producer.Submission, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// fill submits n no-op tasks in batches of 1,000; mod, when set, adjusts
// submission i.
func (e *Env) fill(ctx context.Context, n int, mod func(i int, s *producer.Submission)) error {
	for done := 0; done < n; done += 1000 {
		batch := subs(min(1000, n-done), producer.Submission{Code: "noop", Payload: []byte(`{"n":1}`)})
		if mod != nil {
			for i := range batch {
				mod(done+i, &batch[i])
			}
		}
		if _, err := e.Producer.SubmitBatch(ctx, batch); err != nil {
			return fmt.Errorf("submit: %w", err)
		}
	}
	return nil
}

// newPhase starts a phase whose tasks are those submitted from now on:
// waitSucceeded and latencies read the ids above the highest one so far.
// Without it they read every no-op row, and beside the large table's
// 1,000,000 other rows the optimizer scans the whole table for them: 0.9
// to 6 s a poll with a 128 MB buffer pool, inside the measured time.
func (e *Env) newPhase(ctx context.Context) error {
	if err := e.Settle(ctx); err != nil {
		return err
	}
	if err := e.Store.DB().QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM task_center`).Scan(&e.floor); err != nil {
		return fmt.Errorf("highest task id: %w", err)
	}
	return nil
}

// Settle writes back the pages of the task center that earlier phases
// left dirty, so that a phase does not measure the server writing back
// another's work: a new database has none, the large table's fill a
// million rows of them. The server refuses it to an account without the
// RELOAD privilege; the phase then runs unsettled, and the report says so.
func (e *Env) Settle(ctx context.Context) error {
	c, err := e.Store.DB().Conn(ctx)
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, `FLUSH TABLES task_center, task_run FOR EXPORT`); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if e.Unsettled == "" {
			e.Unsettled = fmt.Sprintf("phases began with earlier phases' pages not written back (FLUSH TABLES ... FOR EXPORT: %v)", err)
		}
		return nil
	}
	if _, err := c.ExecContext(ctx, `UNLOCK TABLES`); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	return nil
}

// waitSucceeded waits until n tasks of the phase have succeeded: first for
// c, the count of its handler's successes (free), then for the results to
// be written. Every scenario counts with one, so none polls the task
// center while it measures.
func (e *Env) waitSucceeded(ctx context.Context, c *counter, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for c.n.Load() < int64(n) {
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d handlers ran within %s", c.n.Load(), n, limit)
		}
		if !startstop.Sleep(ctx, 2*time.Millisecond) {
			return ctx.Err()
		}
	}
	for {
		var done int
		if err := e.Store.DB().QueryRowContext(ctx,
			`SELECT COUNT(*) FROM task_center WHERE id > ? AND task_code = 'noop' AND status = 3`, e.floor).Scan(&done); err != nil {
			return err
		}
		if done >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d tasks succeeded within %s", done, n, limit)
		}
		if !startstop.Sleep(ctx, 5*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// latencies returns to - from of every succeeded task of the phase in
// milliseconds, sorted, from the task center's own timestamps.
func (e *Env) latencies(ctx context.Context, from, to string) ([]float64, error) {
	rows, err := e.Store.DB().QueryContext(ctx, fmt.Sprintf(
		`SELECT TIMESTAMPDIFF(MICROSECOND, %s, %s) / 1000 FROM task_center WHERE id > ? AND task_code = 'noop' AND status = 3`, from, to), e.floor)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []float64
	for rows.Next() {
		var ms float64
		if err := rows.Scan(&ms); err != nil {
			return nil, err
		}
		out = append(out, ms)
	}
	slices.Sort(out)
	return out, rows.Err()
}

// percentile of sorted values, nearest rank.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(float64(len(sorted))*p/100)) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// meter samples this process's resident memory and the CPU time of this
// process and of the MySQL server (when it runs here) over a scenario.
type meter struct {
	server, redis   string
	cpu0, srv0, rd0 time.Duration
	peakRSS         atomic.Int64
	stop            chan struct{}
	wg              sync.WaitGroup
	questions0, rc0 int64
	e               *Env
}

func (e *Env) startMeter(ctx context.Context) *meter {
	debug.FreeOSMemory()
	m := &meter{server: serverPID(ctx, e.Store.DB()), stop: make(chan struct{}), e: e}
	m.redis = e.redisPID(ctx)
	m.cpu0, _ = cpuTime("self")
	if m.server != "" {
		m.srv0, _ = cpuTime(m.server)
	}
	if m.redis != "" {
		m.rd0, _ = cpuTime(m.redis)
	}
	m.questions0 = e.questions(ctx)
	m.rc0 = e.redisCommands(ctx)
	m.peakRSS.Store(rssBytes())
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				if r := rssBytes(); r > m.peakRSS.Load() {
					m.peakRSS.Store(r)
				}
			}
		}
	}()
	return m
}

// done stops sampling and adds per-task costs for n tasks to f.
func (m *meter) done(ctx context.Context, f Figures, prefix string, n int) {
	close(m.stop)
	m.wg.Wait()
	f[prefix+"rss_mb"] = float64(m.peakRSS.Load()) / (1 << 20)
	if n == 0 {
		return
	}
	if c, ok := cpuTime("self"); ok {
		f[prefix+"taskd_cpu_us_per_task"] = float64((c - m.cpu0).Microseconds()) / float64(n)
	}
	if m.server != "" {
		if c, ok := cpuTime(m.server); ok {
			f[prefix+"mysql_cpu_us_per_task"] = float64((c - m.srv0).Microseconds()) / float64(n)
		}
	}
	if m.redis != "" {
		if c, ok := cpuTime(m.redis); ok {
			f[prefix+"redis_cpu_us_per_task"] = float64((c - m.rd0).Microseconds()) / float64(n)
		}
	}
	// Server-wide counters: other clients of the same servers add to them.
	if q := m.e.questions(ctx); q > 0 && m.questions0 > 0 {
		f[prefix+"mysql_statements_per_task"] = float64(q-m.questions0) / float64(n)
	}
	if r := m.e.redisCommands(ctx); r > 0 && m.rc0 > 0 {
		f[prefix+"redis_commands_per_task"] = float64(r-m.rc0) / float64(n)
	}
}

func (e *Env) questions(ctx context.Context) int64 {
	var name string
	var v int64
	if err := e.Store.DB().QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE 'Questions'`).Scan(&name, &v); err != nil {
		return 0
	}
	return v
}

// redisPID is the Redis server's process id when it runs on this host
// (a Cluster or Sentinel: none).
func (e *Env) redisPID(ctx context.Context) string {
	info, err := e.Broker.Client().Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(info, "\n") {
		if pid, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			if _, ok := cpuTime(pid); ok {
				return pid
			}
		}
	}
	return ""
}

func (e *Env) redisCommands(ctx context.Context) int64 {
	info, err := e.Broker.Client().Info(ctx, "stats").Result()
	if err != nil {
		return 0
	}
	var v int64
	for _, line := range strings.Split(info, "\n") {
		if _, err := fmt.Sscanf(line, "total_commands_processed:%d", &v); err == nil {
			return v
		}
	}
	return 0
}

// DrainBatch is the scheduler.batch_size of the scenarios that drain a
// queued backlog (burn_down, exec, pool), where the configuration's
// default is 500: claims of 1,000 ran the burn-down 6-20% faster in four
// alternating pairs (docs/benchmarks.md, 2026-12-06). The report names it
// (environment "drain_batch_size"), so that a comparison says it.
const DrainBatch = 1000

// BurnDown queues n due no-op tasks, then starts a node (scheduler and a
// worker with slots slots, claiming DrainBatch at a time) and measures how
// fast it runs them all.
func BurnDown(ctx context.Context, e *Env, n, slots int) (Figures, error) {
	if err := e.newPhase(ctx); err != nil {
		return nil, err
	}
	if err := e.fill(ctx, n, nil); err != nil {
		return nil, err
	}
	c := &counter{}
	m := e.startMeter(ctx)
	start := time.Now()
	nd, err := e.StartNode(ctx, map[string]int{"noop": slots}, noopRegistry(c), DrainBatch)
	if err != nil {
		return nil, err
	}
	err = e.waitSucceeded(ctx, c, n, 30*time.Minute)
	elapsed := time.Since(start)
	f := Figures{}
	m.done(ctx, f, "burn_down_", n)
	nd.Close()
	if err != nil {
		return nil, err
	}
	f["burn_down_tasks_per_s"] = float64(n) / elapsed.Seconds()
	return f, nil
}

// Steady submits tasks one per call, as web requests do, at rate per second
// for d, with a node running, and measures submit-to-start latency: from
// the Submit call to the handler's start, on this process's monotonic
// clock (to the microsecond: the database's created_at and started_at
// count whole milliseconds, too coarse to tell 2 ms from 2.2), and by the
// database's stamps: created_at to dispatched_at and to started_at.
func Steady(ctx context.Context, e *Env, rate int, d time.Duration) (Figures, error) {
	if err := e.newPhase(ctx); err != nil {
		return nil, err
	}
	st, reg := newStartTimes()
	nd, err := e.StartNode(ctx, map[string]int{"noop": 100}, reg, 0)
	if err != nil {
		return nil, err
	}
	defer nd.Close()
	n := int(float64(rate) * d.Seconds())
	tick := time.NewTicker(time.Second / time.Duration(rate))
	var wg sync.WaitGroup
	var failed atomic.Int64
	var mu sync.Mutex
	called := make(map[int64]time.Time, n)
	for range n {
		select {
		case <-ctx.Done():
			tick.Stop()
			wg.Wait()
			return nil, ctx.Err()
		case <-tick.C:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := time.Now()
			res, err := e.Producer.Submit(ctx, producer.Submission{Code: "noop"})
			if err != nil {
				failed.Add(1)
				return
			}
			mu.Lock()
			called[res.ID] = at
			mu.Unlock()
		}()
	}
	tick.Stop()
	wg.Wait()
	if k := failed.Load(); k > 0 {
		return nil, fmt.Errorf("%d submissions failed", k)
	}
	if err := e.waitSucceeded(ctx, &st.counter, n, 5*time.Minute); err != nil {
		return nil, err
	}
	st.mu.Lock()
	lat := make([]float64, 0, len(called))
	for id, at := range called {
		if started, ok := st.at[id]; ok {
			lat = append(lat, float64(started.Sub(at).Microseconds())/1000)
		}
	}
	st.mu.Unlock()
	slices.Sort(lat)
	disp, err := e.latencies(ctx, "created_at", "dispatched_at")
	if err != nil {
		return nil, err
	}
	// The database's view leaves out what a call waited before its row
	// was written (a connection, a shared INSERT).
	db, err := e.latencies(ctx, "created_at", "started_at")
	if err != nil {
		return nil, err
	}
	return Figures{
		"steady_p50_ms": percentile(lat, 50), "steady_p99_ms": percentile(lat, 99),
		"steady_dispatch_p50_ms": percentile(disp, 50), "steady_dispatch_p99_ms": percentile(disp, 99),
		"steady_db_p50_ms": percentile(db, 50), "steady_db_p99_ms": percentile(db, 99),
	}, nil
}

// seedEvery spaces the rows of Seed: not a multiple of the probe interval,
// so that the rows fall at every phase of it.
const seedEvery = 37 * time.Millisecond

// Seed INSERTs n due rows one at a time, as PHP code writing SQL does
// (no wakeup), with a node running, and measures INSERT-to-start latency
// (created_at to started_at): how soon a scheduler finds such a row
// (scheduler.probe_interval, else its poll).
func Seed(ctx context.Context, e *Env, n int) (Figures, error) {
	if err := e.newPhase(ctx); err != nil {
		return nil, err
	}
	c := &counter{}
	nd, err := e.StartNode(ctx, map[string]int{"noop": 10}, noopRegistry(c), 0)
	if err != nil {
		return nil, err
	}
	defer nd.Close()
	for range n {
		if _, err := e.Store.DB().ExecContext(ctx,
			`INSERT INTO task_center (task_code, payload, plan_next_run_at) VALUES ('noop', '{}', NOW(3))`); err != nil {
			return nil, fmt.Errorf("insert: %w", err)
		}
		if !startstop.Sleep(ctx, seedEvery) {
			return nil, ctx.Err()
		}
	}
	if err := e.waitSucceeded(ctx, c, n, time.Minute); err != nil {
		return nil, err
	}
	lat, err := e.latencies(ctx, "created_at", "started_at")
	if err != nil {
		return nil, err
	}
	return Figures{"seed_p50_ms": percentile(lat, 50), "seed_p99_ms": percentile(lat, 99)}, nil
}

// startTimes is a no-op Go handler that records when each task's handler
// first ran, by this host's clock.
type startTimes struct {
	counter
	mu sync.Mutex
	at map[int64]time.Time
}

// newStartTimes returns a startTimes and a registry where it handles noop.
func newStartTimes() (*startTimes, *handler.Registry) {
	st := &startTimes{at: map[int64]time.Time{}}
	reg := handler.NewRegistry()
	reg.Register("noop", st)
	return st, reg
}

func (s *startTimes) Handle(ctx context.Context, r *handler.Request) (string, error) {
	now := time.Now()
	s.mu.Lock()
	if _, ok := s.at[r.ID]; !ok {
		s.at[r.ID] = now
	}
	s.mu.Unlock()
	return s.counter.Handle(ctx, r)
}

// Lateness submits n tasks due at evenly spread times within window,
// starting a few seconds ahead, and measures how late each started
// (plan_next_run_at to started_at) and how late its claim was (to
// dispatched_at: negative when claimed ahead). When the MySQL server runs
// on this host, its clock is this host's, and lateness_early_tasks counts
// the handlers that ran before their task's plan_next_run_at by it (the
// worker's started_at is the upper bound of the database clock as the
// worker follows it: late by up to its last clock read's round trip plus
// a millisecond, never early).
func Lateness(ctx context.Context, e *Env, n int, window time.Duration) (Figures, error) {
	if err := e.newPhase(ctx); err != nil {
		return nil, err
	}
	st, reg := newStartTimes()
	c := &st.counter
	nd, err := e.StartNode(ctx, map[string]int{"noop": 100}, reg, 0)
	if err != nil {
		return nil, err
	}
	defer nd.Close()
	lead := 3 * time.Second
	if err := e.fill(ctx, n, func(i int, s *producer.Submission) {
		s.Delay = lead + time.Duration(i)*window/time.Duration(n)
	}); err != nil {
		return nil, err
	}
	if err := e.waitSucceeded(ctx, c, n, lead+window+5*time.Minute); err != nil {
		return nil, err
	}
	late, err := e.latencies(ctx, "plan_next_run_at", "started_at")
	if err != nil {
		return nil, err
	}
	disp, err := e.latencies(ctx, "plan_next_run_at", "dispatched_at")
	if err != nil {
		return nil, err
	}
	f := Figures{"lateness_p50_ms": percentile(late, 50), "lateness_p99_ms": percentile(late, 99),
		"lateness_max_ms": late[len(late)-1], "lateness_min_ms": late[0],
		"lateness_dispatch_p50_ms": percentile(disp, 50), "lateness_dispatch_p99_ms": percentile(disp, 99)}
	if serverPID(ctx, e.Store.DB()) != "" {
		early, err := e.startedEarly(ctx, st)
		if err != nil {
			return nil, err
		}
		f["lateness_early_tasks"] = float64(early)
	}
	return f, nil
}

// startedEarly counts the tasks of the phase whose handler ran before
// their plan_next_run_at, by this host's clock.
func (e *Env) startedEarly(ctx context.Context, st *startTimes) (int, error) {
	rows, err := e.Store.DB().QueryContext(ctx,
		`SELECT id, UNIX_TIMESTAMP(plan_next_run_at) * 1000 FROM task_center WHERE id > ? AND task_code = 'noop' AND status = 3`, e.floor)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	st.mu.Lock()
	defer st.mu.Unlock()
	early := 0
	for rows.Next() {
		var id int64
		var dueMS float64
		if err := rows.Scan(&id, &dueMS); err != nil {
			return 0, err
		}
		if at, ok := st.at[id]; ok && float64(at.UnixMicro())/1000 < dueMS {
			early++
		}
	}
	return early, rows.Err()
}

// SubmitBatch measures one client submitting n tasks in batches of 1,000.
func SubmitBatch(ctx context.Context, e *Env, n int) (Figures, error) {
	start := time.Now()
	if err := e.fill(ctx, n, nil); err != nil {
		return nil, err
	}
	return Figures{"submit_batch_tasks_per_s": float64(n) / time.Since(start).Seconds()}, nil
}

// SubmitSingle measures clients goroutines each submitting one task per
// call (a statement and a wakeup each) until n are in.
func SubmitSingle(ctx context.Context, e *Env, n, clients int) (Figures, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if _, err := e.Producer.Submit(ctx, producer.Submission{Code: "noop"}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return nil, fmt.Errorf("submit: %w", err)
	}
	return Figures{"submit_single_tasks_per_s": float64(n) / elapsed.Seconds()}, nil
}

// Exec measures n tasks whose handler runs /bin/true as an exec handler
// (a process each), with slots concurrent slots, and the CPU they cost:
// taskd's, the servers', and the children's own (their fork and exec).
func Exec(ctx context.Context, e *Env, n, slots int) (Figures, error) {
	// Before the reaper below, which would wait for these children too.
	bare, err := bareExecs(ctx, min(n, bareExecRuns), slots)
	if err != nil {
		return nil, err
	}
	if err := e.newPhase(ctx); err != nil {
		return nil, err
	}
	if err := e.fill(ctx, n, nil); err != nil {
		return nil, err
	}
	// As `taskd run` does: reap the orphans of handlers (this one leaves
	// none, but each exit wakes the reaper).
	rctx, stopReaper := context.WithCancel(ctx)
	defer stopReaper()
	_ = handler.StartReaper(rctx) // where it cannot, neither can `taskd run`
	c := counting(&handler.Exec{Argv: []string{"/bin/true"}, KillGrace: time.Second})
	reg := noopRegistry(c)
	m := e.startMeter(ctx)
	children0, _ := childrenCPU()
	start := time.Now()
	nd, err := e.StartNode(ctx, map[string]int{"noop": slots}, reg, DrainBatch)
	if err != nil {
		return nil, err
	}
	defer nd.Close()
	if err := e.waitSucceeded(ctx, c, n, 10*time.Minute); err != nil {
		return nil, err
	}
	f := Figures{"exec_tasks_per_s": float64(n) / time.Since(start).Seconds(), "exec_bare_tasks_per_s": bare}
	f["exec_of_bare"] = f["exec_tasks_per_s"] / bare
	m.done(ctx, f, "exec_", n)
	if c, ok := childrenCPU(); ok {
		f["exec_children_cpu_us_per_task"] = float64((c - children0).Microseconds()) / float64(n)
	}
	return f, nil
}

// bareExecRuns is how many processes bareExecs starts: a few seconds
// where a process costs milliseconds.
const bareExecRuns = 2000

// bareExecs is the rate at which this machine starts /bin/true from a
// bare Go loop, n times over slots goroutines: the ceiling of any exec
// handler here, against which the exec scenario's rate reads as taskd's
// own overhead rather than the machine's cost of a process.
func bareExecs(ctx context.Context, n, slots int) (float64, error) {
	next := make(chan struct{}, n)
	for range n {
		next <- struct{}{}
	}
	close(next)
	g, gctx := errgroup.WithContext(ctx)
	start := time.Now()
	for range min(slots, n) {
		g.Go(func() error {
			for range next {
				if err := exec.CommandContext(gctx, "/bin/true").Run(); err != nil {
					return fmt.Errorf("bare exec of /bin/true: %w", err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// IdleSlots measures resident memory of a node with slots idle worker
// slots spread over ten queues, after it settled.
func IdleSlots(ctx context.Context, e *Env, slots int) (Figures, error) {
	queues := map[string]int{}
	for i := range 10 {
		queues[fmt.Sprintf("idle%d", i)] = slots / 10
	}
	m := e.startMeter(ctx)
	nd, err := e.StartNode(ctx, queues, noopRegistry(&counter{}), 0)
	if err != nil {
		return nil, err
	}
	startstop.Sleep(ctx, 3*time.Second)
	f := Figures{}
	m.done(ctx, f, "idle_", 0)
	nd.Close()
	return f, nil
}

// FillLarge adds rows to the task center, half future (cron and delayed
// tasks due within 30 days) and half finished history, as a busy
// installation holds: the rows the hot path must not pay for.
func FillLarge(ctx context.Context, e *Env, rows int) error {
	const chunk = 10000
	digits := `(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
		UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)`
	seq := fmt.Sprintf(`(SELECT a.d + 10*b.d + 100*c.d + 1000*e.d AS n FROM %s a, %s b, %s c, %s e)`, digits, digits, digits, digits)
	for done := 0; done < rows; done += chunk {
		k := min(chunk, rows-done)
		var q string
		if (done/chunk)%2 == 0 {
			q = `INSERT INTO task_center (task_code, task_type, payload, cron_expr, plan_next_run_at, priority)
				SELECT 'future', IF(s.n % 2 = 0, 1, 2), '{}', IF(s.n % 2 = 0, '0 3 * * *', NULL),
				NOW(3) + INTERVAL 1 HOUR + INTERVAL s.n * 250 SECOND, s.n % 10 FROM ` + seq + ` s WHERE s.n < ?`
		} else {
			q = `INSERT INTO task_center (task_code, payload, status, attempt, dispatched_at, started_at, finished_at, last_run_at)
				SELECT 'history', '{}', 3, 1, NOW(3) - INTERVAL s.n SECOND, NOW(3) - INTERVAL s.n SECOND,
				NOW(3) - INTERVAL s.n SECOND, NOW(3) - INTERVAL s.n SECOND FROM ` + seq + ` s WHERE s.n < ?`
		}
		if _, err := e.Store.DB().ExecContext(ctx, q, k); err != nil {
			return fmt.Errorf("fill task center: %w", err)
		}
	}
	return nil
}
