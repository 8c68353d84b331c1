package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/collectors"
	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/queues"
	"github.com/taskd/taskd/pkg/startstop"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// The submit that dispatches at once, under the same faults: --direct of
// the --tasks are submitted by another process (this program run as
// `faults submitter`) with a producer client that follows the queue
// state, as the Go API's and `taskd submit`'s do: it inserts each task due
// now already dispatched and pushes it after the commit. Its links to MariaDB
// and Redis go through proxies in the engine. The MariaDB link is slow
// (directLatency each way, as from an application server farther away):
// once the engine sees a task the submitter inserted, the submitter
// learns of its commit only directLatency later, and pushes after that.
// So each fault on the Redis link starts at such a sight, before the push:
//
//   - cut: every connection reset for directCut; the submits that commit
//     meanwhile cannot push, and hand their tasks back to pending;
//   - held: every byte dropped, and the submitter SIGKILLed directHold
//     later (a second: on a loaded machine the engine may see the insert
//     too late for its own submit, and the window has to catch the next
//     commits), while the submits that committed wait for their push; their
//     tasks stay dispatched with no message until recovery re-dispatches
//     them (recovery.dispatch_window). The submitter starts again a second
//     later and submits what it had not.
//
// Each is tried up to directTries times until it hit a submit. Every
// direct task must then succeed once, like the others.
const (
	directLatency = 50 * time.Millisecond
	directCut     = time.Second
	directHold    = time.Second
	directTries   = 5
	// directSlots submit side by side, each with a connection of its own:
	// enough for the pace over the slow link (a submit takes four round
	// trips) and to catch up after the faults.
	directSlots = 64
)

// What the producer logs when a push after a commit failed: handed back,
// or left to recovery because the hand-back failed too.
const (
	logHandedBack = "push failed; tasks handed back to the schedulers"
	logLeft       = "hand back after failed push; recovery re-dispatches"
)

// directRun is the engine's side of the direct submitter.
type directRun struct {
	proc         *proc
	mysql, redis *toxiproxy.Proxy
	record       string // the ids the submits dispatched themselves, one a line
	start        time.Time
	// killed are the tasks a SIGKILLed submitter had committed dispatched
	// and not pushed: no message of theirs anywhere in Redis.
	killed []int64
	// whether a cut and a kill hit a submit.
	cutHit, killHit bool
}

// directKey is the unique key of direct task i.
func directKey(i int) string { return "d" + strconv.Itoa(i) }

// proxy starts an in-process TCP proxy to upstream.
func proxy(name, upstream string) (*toxiproxy.Proxy, error) {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	srv.Metrics.ProxyMetrics = collectors.NewProxyMetricCollectors()
	p := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("proxy to %s: %w", upstream, err)
	}
	return p, nil
}

func addToxic(p *toxiproxy.Proxy, name, typ, stream string, attrs string) error {
	js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"attributes":%s}`, name, typ, stream, attrs)
	_, err := p.Toxics.AddToxicJson(strings.NewReader(js))
	return err
}

// setupDirect starts the proxies.
func (s *suite) setupDirect() error {
	d := &s.direct
	var err error
	if d.mysql, err = proxy("mysql", fmt.Sprintf("127.0.0.1:%d", s.o.mysqlPort)); err != nil {
		return err
	}
	if d.redis, err = proxy("redis", fmt.Sprintf("127.0.0.1:%d", s.o.redisPort)); err != nil {
		return err
	}
	for _, stream := range []string{"upstream", "downstream"} {
		attrs := fmt.Sprintf(`{"latency":%d}`, directLatency.Milliseconds())
		if err := addToxic(d.mysql, "latency_"+stream, "latency", stream, attrs); err != nil {
			return err
		}
	}
	d.record = filepath.Join(s.o.dir, "direct.txt")
	return nil
}

// startDirect starts the submitter: its submission starts now.
func (s *suite) startDirect() error {
	d := &s.direct
	self, err := os.Executable()
	if err != nil {
		return err
	}
	d.start = time.Now()
	d.proc = s.newProc("submitter", filepath.Join(s.o.dir, "submitter.log"), nil, self, "submitter",
		"--dsn", fmt.Sprintf("root:@tcp(%s)/%s", d.mysql.Listen, database), "--redis", d.redis.Listen,
		"--count", strconv.Itoa(s.o.direct), "--start", strconv.FormatInt(d.start.UnixMilli(), 10),
		"--spread", s.o.spread.String(), "--record", d.record)
	return d.proc.start()
}

func (s *suite) stopDirect() {
	for _, p := range []*toxiproxy.Proxy{s.direct.mysql, s.direct.redis} {
		if p != nil {
			p.Stop()
		}
	}
}

// cutSubmitterLink cuts the submitter's Redis link a third into the
// submission, again until a submit handed back.
func (s *suite) cutSubmitterLink(ctx context.Context) error {
	if err := s.at(ctx, s.direct.start, time.Duration(0.3*float64(s.o.spread))); err != nil {
		return err
	}
	return untilHit(&s.direct.cutHit, func() (int, error) { return s.cutSubmitter(ctx) })
}

// killSubmitterBeforePush kills the submitter, again until a kill left a
// task it had committed unpushed.
func (s *suite) killSubmitterBeforePush(ctx context.Context) error {
	return untilHit(&s.direct.killHit, func() (int, error) { return s.killSubmitter(ctx) })
}

// untilHit tries a fault up to directTries times, until it hit a task.
func untilHit(hit *bool, try func() (int, error)) error {
	for range directTries {
		n, err := try()
		if err != nil || n > 0 {
			*hit = n > 0
			return err
		}
	}
	return nil
}

// cutSubmitter resets every connection of the submitter to Redis for
// directCut and returns the tasks it handed back meanwhile.
func (s *suite) cutSubmitter(ctx context.Context) (int, error) {
	before, _, err := s.directLogs()
	if err != nil {
		return 0, err
	}
	if err := s.snapshot(ctx, "submitter's Redis link cut"); err != nil {
		return 0, err
	}
	s.waitDirectInsert(ctx)
	if err := addToxic(s.direct.redis, "cut", "reset_peer", "upstream", `{"timeout":0}`); err != nil {
		return 0, err
	}
	startstop.Sleep(ctx, directCut)
	if err := s.direct.redis.Toxics.RemoveToxic(ctx, "cut"); err != nil {
		return 0, err
	}
	// A submit that committed during the cut hands back once its push
	// gave up.
	deadline := time.Now().Add(3 * time.Second)
	for {
		after, _, err := s.directLogs()
		if err != nil {
			return 0, err
		}
		if after > before || time.Now().After(deadline) || !startstop.Sleep(ctx, 100*time.Millisecond) {
			s.say("submitter handed back %d tasks", after-before)
			return after - before, ctx.Err()
		}
	}
}

// killSubmitter holds the submitter's Redis link, SIGKILLs it while its
// submits wait for their push, and starts it again. It returns the tasks
// the killed submitter had dispatched and no worker runs yet.
func (s *suite) killSubmitter(ctx context.Context) (int, error) {
	d := &s.direct
	if !d.proc.running() {
		return 0, fmt.Errorf("the submitter is not running (log %s)", d.proc.log)
	}
	last := s.waitDirectInsert(ctx)
	if err := addToxic(d.redis, "hold", "timeout", "upstream", `{"timeout":0}`); err != nil {
		return 0, err
	}
	startstop.Sleep(ctx, directHold)
	d.proc.kill()
	if err := d.redis.Toxics.RemoveToxic(ctx, "hold"); err != nil {
		return 0, err
	}
	// After the kill: the tasks it left without a message are in flight.
	if err := s.snapshot(ctx, "SIGKILL submitter"); err != nil {
		return 0, err
	}
	// Redis first: a message a worker finishes meanwhile leaves its task
	// succeeded, no longer dispatched.
	var sent map[int64]bool
	var ids []int64
	err := s.retrying(ctx, "read the killed submitter's tasks", func(ctx context.Context) error {
		var err error
		if sent, err = s.messages(ctx, "append"); err != nil {
			return err
		}
		ids, err = s.queryIDs(ctx, `SELECT id FROM task_center WHERE id > ? AND `+insertedDispatched+` AND status = 1`, last)
		return err
	})
	if err != nil {
		return 0, err
	}
	var unsent []int64
	for _, id := range ids {
		if !sent[id] {
			unsent = append(unsent, id)
		}
	}
	d.killed = append(d.killed, unsent...)
	s.say("submitter killed: %d tasks it dispatched since the hold still dispatched, %d of them never pushed", len(ids), len(unsent))
	if !startstop.Sleep(ctx, time.Second) {
		return 0, ctx.Err()
	}
	if err := d.proc.start(); err != nil {
		return 0, err
	}
	return len(unsent), nil
}

// messages returns the tasks that have a message in queue q's lists or in
// a processing list, a dead worker's included.
func (s *suite) messages(ctx context.Context, q string) (map[int64]bool, error) {
	rdb := s.br.Client()
	out := map[int64]bool{}
	for _, pattern := range []string{s.br.Keys.Queue(q, 0) + "*", s.br.Keys.Processing(q, "*")} {
		it := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			raws, err := rdb.LRange(ctx, it.Val(), 0, -1).Result()
			if err != nil {
				return nil, err
			}
			for _, raw := range raws {
				if m, err := task.DecodeMessage([]byte(raw)); err == nil {
					out[m.ID] = true
				}
			}
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// insertedDispatched matches the direct tasks a submitter inserted
// dispatched and no scheduler claimed since: every claim and every result
// sets a claim token, and an insert leaves it 0. The rows after the hold's
// start are the killed submitter's: the next one starts after the kill.
const insertedDispatched = directTasks + ` AND attempt = 1 AND claim_token = 0`

// directTasks matches the tasks of the direct submitters.
const directTasks = `task_code = 'append' AND unique_key LIKE 'd%'`

// waitDirectInsert waits (at most 3 s) until the running submitter inserts
// a task dispatched after the highest id it returns: its submit is then
// about to push.
func (s *suite) waitDirectInsert(ctx context.Context) (last int64) {
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM task_center`).Scan(&last); err != nil {
		return last
	}
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		// Inserted dispatched: both stamps are the INSERT's NOW(3).
		err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM task_center WHERE id > ? AND `+directTasks+`
			AND dispatched_at = created_at`, last).Scan(&n)
		if (err == nil && n > 0) || !startstop.Sleep(ctx, time.Millisecond) {
			return last
		}
	}
	s.say("the submitter inserted no task for 3 s; injecting the fault anyway")
	return last
}

// waitDirect waits for the submitter to have submitted every direct task
// and returns their ids.
func (s *suite) waitDirect(ctx context.Context) ([]int64, error) {
	p := s.direct.proc
	select {
	case <-p.done:
	case <-time.After(s.o.spread + s.o.timeout):
		return nil, fmt.Errorf("the submitter did not finish (log %s)", p.log)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		b, _ := os.ReadFile(p.log)
		return nil, fmt.Errorf("the submitter exited %d; its log %s ends:\n%s", code, p.log, tail(string(b), 2000))
	}
	var ids []int64
	err := s.retrying(ctx, "read the direct tasks", func(ctx context.Context) error {
		var err error
		ids, err = s.queryIDs(ctx, `SELECT id FROM task_center WHERE task_code = 'append' AND unique_key LIKE 'd%'`)
		return err
	})
	if err == nil && len(ids) != s.o.direct {
		err = fmt.Errorf("%d direct tasks in the task center, want %d", len(ids), s.o.direct)
	}
	return ids, err
}

// directLogs sums the tasks the submitter's logs say it handed back, and
// left to recovery.
func (s *suite) directLogs() (handedBack, left int, err error) {
	f, err := os.Open(s.direct.proc.log)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l struct {
			Msg   string
			Tasks int
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch l.Msg {
		case logHandedBack:
			handedBack += l.Tasks
		case logLeft:
			left += l.Tasks
		}
	}
	return handedBack, left, sc.Err()
}

// directFigures returns the line of the direct tasks; their successes are
// checked with the others'.
func (s *suite) directFigures(lines map[int64][]int, fail func(string, ...any)) (string, error) {
	d := &s.direct
	dispatched := map[string]bool{}
	b, err := os.ReadFile(d.record)
	if err != nil && !os.IsNotExist(err) {
		return "", err
	}
	for _, l := range strings.Fields(string(b)) {
		dispatched[l] = true
	}
	handedBack, left, err := s.directLogs()
	if err != nil {
		return "", err
	}
	for _, id := range d.killed {
		if contains(lines[id], 1) {
			fail("task %d was never pushed by its submitter, yet its first attempt ran", id)
		}
	}
	if !d.cutHit || handedBack == 0 {
		fail("no submit handed back a task after a failed push (%d cuts of the submitter's Redis link)", directTries)
	}
	if !d.killHit {
		fail("no submitter was killed between its commit and its push (%d kills)", directTries)
	}
	return fmt.Sprintf("direct=%d dispatched-at-submit=%d handed-back=%d left-to-recovery=%d killed-before-push=%d",
		s.o.direct, len(dispatched), handedBack, left, len(d.killed)), nil
}

// --- the submitter process ------------------------------------------------

// runSubmitter is `faults submitter`: it submits direct tasks d0 to
// d(count-1) with a producer client that follows the queue state (so it
// dispatches at submit, as the Go API's does), task i at start + i ×
// spread/count, in directSlots goroutines, skipping those already in the
// task center (a submitter started again). A submit that fails is retried
// with the same unique key, as safe when it had committed. The id of each
// task its submit dispatched itself is appended to the record file. It
// exits 0 once every task is submitted.
func runSubmitter(args []string) int {
	fs := flag.NewFlagSet("submitter", flag.ContinueOnError)
	dsn := fs.String("dsn", "", "the task center")
	addr := fs.String("redis", "", "the Redis address")
	count := fs.Int("count", 0, "direct tasks to submit")
	startMS := fs.Int64("start", 0, "start of the submission (unix ms)")
	spread := fs.Duration("spread", 24*time.Second, "the submission is spread over this long")
	record := fs.String("record", "", "file the dispatched ids are appended to")
	if err := fs.Parse(args); err != nil || *dsn == "" || *addr == "" || *count <= 0 || *record == "" {
		fmt.Fprintln(os.Stderr, "usage: faults submitter --dsn DSN --redis ADDR --count N --start MS --record FILE")
		return 2
	}
	syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0)
	// The drivers log every connection a fault cuts.
	mysql.SetLogger(log.New(io.Discard, "", 0))
	redis.SetLogger(quietRedis{})
	lg := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx := context.Background()
	var st *store.Store
	var br *broker.Broker
	if !retry(ctx, lg, "connect", func(ctx context.Context) error {
		var err error
		if st == nil {
			if st, err = store.Open(ctx, *dsn, store.Options{MaxOpenConns: directSlots}); err != nil {
				return err
			}
		}
		br, err = broker.Open(ctx, broker.Options{Addr: *addr, Prefix: prefix})
		return err
	}) {
		return 1
	}
	defer st.Close()
	defer br.Close()
	qc := queues.New(queues.Config{Logger: lg}, st, br)
	br.SetLayout(qc)
	cl := producer.New(st, br, producer.Options{Queues: qc, Logger: lg})

	have := map[string]bool{}
	retry(ctx, lg, "read the tasks submitted", func(ctx context.Context) error {
		rows, err := st.DB().QueryContext(ctx, `SELECT unique_key FROM task_center WHERE task_code = 'append' AND unique_key LIKE 'd%'`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				return err
			}
			have[k] = true
		}
		return rows.Err()
	})
	out, err := os.OpenFile(*record, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "submitter:", err)
		return 1
	}
	defer out.Close()
	var todo []int
	for i := range *count {
		if !have[directKey(i)] {
			todo = append(todo, i)
		}
	}
	lg.Info("submitter started", "todo", len(todo), "of", *count)
	start := time.UnixMilli(*startMS)
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range directSlots {
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= len(todo) {
					return
				}
				i := todo[k]
				time.Sleep(time.Until(start.Add(time.Duration(i) * *spread / time.Duration(*count))))
				var res producer.Result
				retry(ctx, lg, "submit", func(ctx context.Context) error {
					var err error
					res, err = cl.Submit(ctx, producer.Submission{Code: "append", UniqueKey: directKey(i), Timeout: taskTimeout,
						Payload: json.RawMessage(`{"d":` + strconv.Itoa(i) + `}`)})
					return err
				})
				if res.Dispatched {
					mu.Lock()
					fmt.Fprintln(out, res.ID)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	lg.Info("submitter done")
	return 0
}

// retry calls fn until it succeeds, each call bounded; it reports whether
// it did (the only way it does not is ctx ending).
func retry(ctx context.Context, lg *slog.Logger, what string, fn func(ctx context.Context) error) bool {
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := fn(cctx)
		cancel()
		if err == nil {
			return true
		}
		lg.Info(what+" failed; retrying", "err", err)
		if !startstop.Sleep(ctx, 200*time.Millisecond) {
			return false
		}
	}
}
