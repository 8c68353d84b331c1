// Command faults is the engine of scripts/faults.sh: it runs three `taskd
// run` daemons against a private MariaDB and a private Redis, submits tasks
// while it injects faults, waits until every task succeeded, checks the
// task center against the run log and the handler's own record, and prints
// one line of figures. Run it through scripts/faults.sh, which builds it and
// cleans up after it; see that script's header for the figures' meaning.
//
// Exit status: 0 when nothing was lost and the records agree, 1 otherwise,
// 2 on bad usage.
package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/startstop"
	"github.com/taskd/taskd/pkg/store"
)

// Timings of the daemons: short, so that the whole run fits in CI.
const (
	heartbeatInterval = time.Second
	heartbeatTTL      = 3 * time.Second
	recoveryInterval  = time.Second
	dispatchWindow    = 5 * time.Second
	shutdownGrace     = 5 * time.Second
	// taskTimeout of each attempt, and the running grace past it: a
	// backstop only; recovery by heartbeat is what the suite measures.
	taskTimeout  = 60 * time.Second
	runningGrace = 10 * time.Second
	database     = "taskd_faults"
	prefix       = "faults:"
	nodes        = 3
)

// What the worker logs once per stale write it rejected.
var staleLogs = []string{"stale message dropped", "stale result rejected by the fence"}

// What recovery logs when it finds that Redis lost its data.
const lossLog = "redis lost its data"

type options struct {
	tasks       int
	bin         string
	dir         string
	concurrency int
	sleep       time.Duration
	spread      time.Duration
	timeout     time.Duration
	redisPort   int
	mysqlPort   int
	verbose     bool
	chains      int
	batches     int
	batchSize   int
	batchDead   int
	direct      int
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "submitter" {
		os.Exit(runSubmitter(os.Args[2:]))
	}
	var o options
	flag.IntVar(&o.tasks, "tasks", 5000, "number of tasks to submit")
	flag.StringVar(&o.bin, "bin", "", "the taskd binary (required)")
	flag.StringVar(&o.dir, "dir", "", "work directory for logs, data and the run file (required; left in place)")
	flag.IntVar(&o.concurrency, "concurrency", 16, "worker slots per daemon")
	flag.DurationVar(&o.sleep, "sleep", 50*time.Millisecond, "sleep of the handler before it appends its line")
	flag.DurationVar(&o.spread, "spread", 24*time.Second, "submission is spread over this long; the faults happen inside it")
	flag.DurationVar(&o.timeout, "timeout", 120*time.Second, "bound on the wait for quiescence after the last fault")
	flag.IntVar(&o.redisPort, "redis-port", 0, "port of the private redis-server (0: a free one)")
	flag.IntVar(&o.mysqlPort, "mysql-port", 0, "port of the private mariadbd (0: a free one)")
	flag.BoolVar(&o.verbose, "v", false, "log progress to stderr")
	flag.IntVar(&o.chains, "chains", 100, "chains of three steps to submit beside the tasks")
	flag.IntVar(&o.batches, "batches", 20, "batches to submit beside the tasks, each with a callback")
	flag.IntVar(&o.batchSize, "batch-size", 10, "members per batch")
	flag.IntVar(&o.batchDead, "batch-dead", 2, "members per batch whose handler fails (no retry)")
	flag.IntVar(&o.direct, "direct", -1, "of the tasks, those a separate submitter process dispatches at submit (default a fifth)")
	flag.Parse()
	if o.direct < 0 {
		o.direct = o.tasks / 5
	}
	if o.tasks <= 0 || o.bin == "" || o.dir == "" || flag.NArg() > 0 || o.chains < 0 || o.batches < 0 ||
		o.batchSize <= 0 || o.batchDead < 0 || o.direct > o.tasks {
		fmt.Fprintln(os.Stderr, "usage: faults --bin TASKD --dir DIR [--tasks N] [--direct N (at most --tasks)] [flags]")
		os.Exit(2)
	}
	// Should the script that started this die without its trap (SIGKILL),
	// stop too, and stop every child on the way out.
	syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0)
	// The driver logs every connection MariaDB's restart cuts.
	mysql.SetLogger(log.New(io.Discard, "", 0))
	redis.SetLogger(quietRedis{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	s := &suite{o: o}
	code := s.run(ctx)
	s.cleanup()
	os.Exit(code)
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// say reports progress on stderr.
func (s *suite) say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "faults: %6.1fs  %s\n", time.Since(s.t0).Seconds(), fmt.Sprintf(format, args...))
}

type suite struct {
	o      options
	t0     time.Time
	redis  *proc
	mysql  *proc
	nodes  [nodes]*proc
	config string
	out    string // the file the handler appends to
	db     *sql.DB
	st     *store.Store
	br     *broker.Broker

	mu     sync.Mutex
	procs  []*proc // everything started, for cleanup
	faults []fault
	ids    map[int64]bool // submitted task ids
	steps  steps          // chains and batches
	direct directRun      // the tasks dispatched at submit
}

// fault is one injected fault: when (database clock) and which tasks were
// in flight (dispatched or running) at that moment.
type fault struct {
	name   string
	at     float64 // unix seconds, database clock
	flight []int64
}

func (s *suite) run(ctx context.Context) int {
	s.t0 = time.Now()
	s.ids = map[int64]bool{}
	s.steps.batches = map[int64]batchPlan{}
	if err := s.setup(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "faults: setup:", err)
		return 1
	}
	subErr := make(chan error, 1)
	go func() { subErr <- s.submit(ctx) }()
	cutErr := make(chan error, 1)
	if s.o.direct > 0 {
		if err := s.startDirect(); err != nil {
			fmt.Fprintln(os.Stderr, "faults: start the submitter:", err)
			return 1
		}
		go func() { cutErr <- s.cutSubmitterLink(ctx) }()
	} else {
		cutErr <- nil
	}

	if err := s.inject(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "faults: inject:", err)
		return 1
	}
	for _, c := range []struct {
		what string
		err  chan error
	}{{"submit", subErr}, {"cut the submitter's link", cutErr}} {
		select {
		case err := <-c.err:
			if err != nil {
				fmt.Fprintf(os.Stderr, "faults: %s: %v\n", c.what, err)
				return 1
			}
		case <-ctx.Done():
			return 1
		}
	}
	if s.o.direct > 0 {
		ids, err := s.waitDirect(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "faults: direct submits:", err)
			return 1
		}
		s.mu.Lock()
		for _, id := range ids {
			s.ids[id] = true
		}
		s.mu.Unlock()
	}
	s.say("all %d tasks submitted; waiting for quiescence (at most %s)", len(s.ids), s.o.timeout)
	quiet := s.waitQuiescence(ctx)
	if ctx.Err() != nil {
		return 1
	}
	if !quiet {
		s.say("no quiescence within %s", s.o.timeout)
	}
	// Stop the daemons cleanly: SIGTERM drains. Their exit codes count.
	var failures []string
	for _, n := range s.nodes {
		code := n.terminate(shutdownGrace + 20*time.Second)
		if code != 0 {
			failures = append(failures, fmt.Sprintf("%s exited %d after SIGTERM (log %s)", n.name, code, n.log))
		}
	}
	fig, more, err := s.figures(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults: figures:", err)
		return 1
	}
	failures = append(failures, more...)
	fmt.Println(fig)
	if len(failures) > 0 {
		for _, f := range failures {
			fmt.Fprintln(os.Stderr, "FAIL:", f)
		}
		fmt.Fprintf(os.Stderr, "faults: logs and data are in %s\n", s.o.dir)
		return 1
	}
	return 0
}

// --- processes -----------------------------------------------------------

// proc is a child process the suite started and may restart.
type proc struct {
	name string
	argv []string
	env  []string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

func (s *suite) newProc(name, log string, env []string, argv ...string) *proc {
	p := &proc{name: name, argv: argv, env: env, log: log}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return p
}

// start starts the process, its output appended to its log.
func (p *proc) start() error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Should this program die without cleaning up, its children die too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		f.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	return nil
}

func (p *proc) running() bool {
	if p == nil || p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *proc) signal(sig syscall.Signal) error {
	if !p.running() {
		return fmt.Errorf("%s is not running", p.name)
	}
	return p.cmd.Process.Signal(sig)
}

// terminate sends SIGTERM (and SIGCONT, in case it is stopped), waits up to
// within, then SIGKILLs. It returns the exit code (-1: killed).
func (p *proc) terminate(within time.Duration) int {
	if p == nil || p.cmd == nil {
		return 0
	}
	if p.running() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.cmd.Process.Signal(syscall.SIGCONT)
		select {
		case <-p.done:
		case <-time.After(within):
			p.cmd.Process.Kill()
			<-p.done
			return -1
		}
	}
	return p.cmd.ProcessState.ExitCode()
}

// kill SIGKILLs the process and waits for it.
func (p *proc) kill() {
	if p.running() {
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (s *suite) cleanup() {
	s.mu.Lock()
	procs := append([]*proc(nil), s.procs...)
	s.mu.Unlock()
	if s.db != nil {
		s.db.Close()
	}
	if s.st != nil {
		s.st.Close()
	}
	if s.br != nil {
		s.br.Close()
	}
	for _, p := range procs {
		p.kill()
	}
	s.stopDirect()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// --- setup -----------------------------------------------------------------

func (s *suite) setup(ctx context.Context) error {
	var err error
	if err := os.MkdirAll(s.o.dir, 0o755); err != nil {
		return err
	}
	if s.o.redisPort == 0 {
		if s.o.redisPort, err = freePort(); err != nil {
			return err
		}
	}
	if s.o.mysqlPort == 0 {
		if s.o.mysqlPort, err = freePort(); err != nil {
			return err
		}
	}
	redisDir := filepath.Join(s.o.dir, "redis")
	dataDir := filepath.Join(s.o.dir, "mysql")
	for _, d := range []string{redisDir, dataDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("redis-server is not installed (apt-get install redis-server): %w", err)
	}
	mysqlBin := ""
	for _, b := range []string{"/usr/sbin/mariadbd", "/usr/sbin/mysqld", "mariadbd", "mysqld"} {
		if p, err := exec.LookPath(b); err == nil {
			mysqlBin = p
			break
		}
	}
	if mysqlBin == "" {
		return errors.New("mariadbd is not installed (apt-get install mariadb-server)")
	}
	s.redis = s.newProc("redis", filepath.Join(s.o.dir, "redis.log"), nil, redisBin,
		"--port", strconv.Itoa(s.o.redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", redisDir, "--maxmemory-policy", "noeviction")
	// A data directory without system tables is enough with
	// --skip-grant-tables: no mariadb-install-db (seconds) needed.
	s.mysql = s.newProc("mariadb", filepath.Join(s.o.dir, "mysql.log"), nil, mysqlBin,
		"--no-defaults", "--user="+currentUser(), "--datadir="+dataDir,
		"--socket="+filepath.Join(s.o.dir, "mysql.sock"), "--pid-file="+filepath.Join(s.o.dir, "mysql.pid"),
		"--port="+strconv.Itoa(s.o.mysqlPort), "--bind-address=127.0.0.1", "--skip-grant-tables",
		"--skip-name-resolve", "--innodb-buffer-pool-size=128M", "--innodb-log-file-size=64M",
		"--innodb-flush-log-at-trx-commit=2", "--max-connections=500", "--skip-log-bin")
	if err := s.redis.start(); err != nil {
		return err
	}
	if err := s.mysql.start(); err != nil {
		return err
	}
	if err := s.waitRedis(ctx, 15*time.Second); err != nil {
		return err
	}
	if err := s.waitMySQL(ctx, 30*time.Second); err != nil {
		return err
	}
	if s.o.direct > 0 {
		if err := s.setupDirect(); err != nil {
			return err
		}
	}
	admin, err := sql.Open("mysql", fmt.Sprintf("root:@tcp(127.0.0.1:%d)/", s.o.mysqlPort))
	if err != nil {
		return err
	}
	_, err = admin.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+database+" CHARACTER SET utf8mb4")
	admin.Close()
	if err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	s.out = filepath.Join(s.o.dir, "out.txt")
	if err := os.WriteFile(s.out, nil, 0o644); err != nil {
		return err
	}
	s.config = filepath.Join(s.o.dir, "taskd.yaml")
	if err := os.WriteFile(s.config, []byte(s.configYAML()), 0o644); err != nil {
		return err
	}
	mig := exec.CommandContext(ctx, s.o.bin, "--config", s.config, "migrate")
	if out, err := mig.CombinedOutput(); err != nil {
		return fmt.Errorf("taskd migrate: %v: %s", err, out)
	}
	dsn := s.dsn()
	if s.db, err = sql.Open("mysql", dsn); err != nil {
		return err
	}
	if s.st, err = store.Open(ctx, dsn, store.Options{}); err != nil {
		return err
	}
	// The producer wakes the schedulers through Redis, as a real one does.
	if s.br, err = broker.Open(ctx, broker.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.o.redisPort), Prefix: prefix}); err != nil {
		return err
	}
	for i := range s.nodes {
		name := fmt.Sprintf("node-%d", i+1)
		s.nodes[i] = s.newProc(name, filepath.Join(s.o.dir, name+".log"), nil,
			s.o.bin, "--config", s.config, "run", "--node-id", name)
		if err := s.nodes[i].start(); err != nil {
			return err
		}
	}
	for _, n := range s.nodes {
		if err := waitLog(ctx, n, "taskd node started", 20*time.Second); err != nil {
			return err
		}
	}
	s.say("private redis on :%d, mariadb on :%d, %d daemons started; work directory %s",
		s.o.redisPort, s.o.mysqlPort, nodes, s.o.dir)
	return nil
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if os.Geteuid() == 0 {
		return "root"
	}
	return strconv.Itoa(os.Geteuid())
}

func (s *suite) dsn() string {
	return fmt.Sprintf("root:@tcp(127.0.0.1:%d)/%s", s.o.mysqlPort, database)
}

func (s *suite) configYAML() string {
	handler := fmt.Sprintf(`sleep %s; echo "$TASK_ID $TASK_ATTEMPT" >> %s`,
		strconv.FormatFloat(s.o.sleep.Seconds(), 'f', -1, 64), s.out)
	argv, _ := json.Marshal([]string{"sh", "-c", handler})
	dies, _ := json.Marshal([]string{"sh", "-c", handler + "; exit 1"})
	return fmt.Sprintf(`mysql:
  dsn: %q
redis:
  addr: "127.0.0.1:%d"
  prefix: %q
log:
  format: json
  level: info
handlers:
  append:
    exec: %s
  die:
    exec: %s
scheduler:
  poll_interval: 200ms
  batch_size: 200
worker:
  concurrency: %d
  shutdown_grace: %s
  kill_grace: 1s
  heartbeat_interval: %s
  heartbeat_ttl: %s
recovery:
  interval: %s
  dispatch_window: %s
  running_grace: %s
`, s.dsn(), s.o.redisPort, prefix, argv, dies, s.o.concurrency, shutdownGrace, heartbeatInterval, heartbeatTTL,
		recoveryInterval, dispatchWindow, runningGrace)
}

func waitLog(ctx context.Context, p *proc, text string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(p.log)
		if bytes.Contains(b, []byte(text)) {
			return nil
		}
		if !p.running() {
			return fmt.Errorf("%s exited at start; its log %s ends:\n%s", p.name, p.log, tail(string(b), 2000))
		}
		if !startstop.Sleep(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("%s did not log %q within %s (log %s)", p.name, text, within, p.log)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// redisCmd sends one command in the inline protocol and returns the first
// line of the reply.
func (s *suite) redisCmd(cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.o.redisPort), time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

func (s *suite) waitRedis(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		r, err := s.redisCmd("PING")
		if err == nil && r == "+PONG" {
			return nil
		}
		if time.Now().After(deadline) || !s.redis.running() {
			return fmt.Errorf("redis did not answer on :%d (log %s): %v %s", s.o.redisPort, s.redis.log, err, r)
		}
		if !startstop.Sleep(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
}

func (s *suite) waitMySQL(ctx context.Context, within time.Duration) error {
	db, err := sql.Open("mysql", fmt.Sprintf("root:@tcp(127.0.0.1:%d)/?timeout=1s", s.o.mysqlPort))
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(within)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := db.PingContext(pctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || !s.mysql.running() {
			b, _ := os.ReadFile(s.mysql.log)
			return fmt.Errorf("mariadb did not answer on :%d: %v; log:\n%s", s.o.mysqlPort, err, tail(string(b), 2000))
		}
		if !startstop.Sleep(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// --- load ------------------------------------------------------------------

// submit inserts the tasks in small batches spread over the submission
// window, so that work is in flight at every fault. A batch that fails
// (MariaDB restarting) is retried; unique keys make the retry safe when the
// failed attempt did commit.
func (s *suite) submit(ctx context.Context) error {
	const tick = 50 * time.Millisecond
	batches := max(1, int(s.o.spread/tick))
	plain := s.o.tasks - s.o.direct
	per := (plain + batches - 1) / batches
	cl := producer.New(s.st, s.br, producer.Options{Logger: slog.New(slog.DiscardHandler)})
	next := time.Now()
	for i, k := 0, 0; i < plain; k++ {
		if err := s.submitSteps(ctx, cl, k, batches); err != nil {
			return err
		}
		n := min(per, plain-i)
		subs := make([]producer.Submission, n)
		for k := range subs {
			subs[k] = producer.Submission{
				Code: "append", UniqueKey: "f" + strconv.Itoa(i+k), Timeout: taskTimeout,
				Payload: json.RawMessage(`{"n":` + strconv.Itoa(i+k) + `}`),
			}
		}
		for {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			res, err := cl.SubmitBatch(sctx, subs)
			cancel()
			if err == nil {
				s.mu.Lock()
				for _, r := range res {
					s.ids[r.ID] = true
				}
				s.mu.Unlock()
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if s.o.verbose {
				s.say("submit failed, retrying: %v", err)
			}
			if !startstop.Sleep(ctx, 200*time.Millisecond) {
				return ctx.Err()
			}
		}
		i += n
		next = next.Add(tick)
		if d := time.Until(next); d > 0 && !startstop.Sleep(ctx, d) {
			return ctx.Err()
		}
	}
	return s.submitSteps(ctx, cl, batches-1, batches) // the rest, if the tasks ran out first
}

// --- faults ----------------------------------------------------------------

// snapshotWait is how long a fault's snapshot waits for MariaDB: the
// submitter's faults repeat until they hit and may fall in the MariaDB
// restart, which waits up to a minute for the server to stop and another
// for it to answer.
const snapshotWait = 2*time.Minute + 10*time.Second

// snapshot records a fault: the database clock and the tasks in flight.
func (s *suite) snapshot(ctx context.Context, name string) error {
	f := fault{name: name}
	deadline := time.Now().Add(snapshotWait)
	for {
		err := s.db.QueryRowContext(ctx, `SELECT UNIX_TIMESTAMP(NOW(3))`).Scan(&f.at)
		if err == nil {
			f.flight, err = s.queryIDs(ctx, `SELECT id FROM task_center WHERE status IN (1, 2)`)
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) || !startstop.Sleep(ctx, 100*time.Millisecond) {
			return fmt.Errorf("snapshot before %s: %w", name, err)
		}
	}
	s.mu.Lock()
	s.faults = append(s.faults, f)
	s.mu.Unlock()
	s.say("fault: %s (%d tasks in flight)", name, len(f.flight))
	return nil
}

func (s *suite) queryIDs(ctx context.Context, q string, args ...any) ([]int64, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// at sleeps until offset after the start of the submission.
func (s *suite) at(ctx context.Context, start time.Time, offset time.Duration) error {
	if !startstop.Sleep(ctx, time.Until(start.Add(offset))) && ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// inject runs the fault schedule. Offsets are scaled to the submission
// window (24 s by default) so that every fault hits work in flight.
func (s *suite) inject(ctx context.Context) error {
	start := time.Now()
	sp := s.o.spread
	step := func(frac float64) time.Duration { return time.Duration(frac * float64(sp)) }

	// 1. SIGKILL a daemon mid-task, start it again a second later.
	if err := s.at(ctx, start, step(0.12)); err != nil {
		return err
	}
	victim := s.nodes[0]
	s.waitBusy(ctx, victim)
	if err := s.snapshot(ctx, "SIGKILL "+victim.name); err != nil {
		return err
	}
	victim.kill()
	if err := s.at(ctx, start, step(0.12)+time.Second); err != nil {
		return err
	}
	if err := victim.start(); err != nil {
		return err
	}
	s.say("%s started again", victim.name)

	// 2. SIGSTOP another past the heartbeat TTL, then SIGCONT.
	if err := s.at(ctx, start, step(0.22)); err != nil {
		return err
	}
	frozen := s.nodes[1]
	s.waitBusy(ctx, frozen)
	if err := s.snapshot(ctx, "SIGSTOP "+frozen.name); err != nil {
		return err
	}
	if err := frozen.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	if !startstop.Sleep(ctx, heartbeatTTL+2*recoveryInterval+time.Second) {
		return ctx.Err()
	}
	if err := frozen.signal(syscall.SIGCONT); err != nil {
		return err
	}
	s.say("%s continued", frozen.name)

	// 3. FLUSHALL.
	if err := s.at(ctx, start, step(0.52)); err != nil {
		return err
	}
	s.waitDispatched(ctx)
	if err := s.snapshot(ctx, "redis FLUSHALL"); err != nil {
		return err
	}
	if r, err := s.redisCmd("FLUSHALL"); err != nil || r != "+OK" {
		return fmt.Errorf("FLUSHALL: %v %s", err, r)
	}

	// 4. Restart Redis (empty: no persistence).
	if err := s.at(ctx, start, step(0.65)); err != nil {
		return err
	}
	losses, err := s.countLogs(lossLog)
	if err != nil {
		return err
	}
	if err := s.snapshot(ctx, "redis restart"); err != nil {
		return err
	}
	if code := s.redis.terminate(10 * time.Second); code != 0 {
		s.say("redis exited %d", code)
	}
	if !startstop.Sleep(ctx, time.Second) {
		return ctx.Err()
	}
	if err := s.redis.start(); err != nil {
		return err
	}
	if err := s.waitRedis(ctx, 15*time.Second); err != nil {
		return err
	}
	s.say("redis is back")

	// 4b. SIGKILL the direct submitter before a push, once recovery saw
	// that Redis lost its data for the last time: the tasks it leaves must
	// come back by the dispatch window, not by the rebuild after a loss.
	if s.o.direct > 0 {
		s.waitLogged(ctx, lossLog, losses, 15*time.Second)
		if err := s.killSubmitterBeforePush(ctx); err != nil {
			return err
		}
	}

	// 5. Restart MariaDB: every connection is cut.
	if err := s.at(ctx, start, step(0.8)); err != nil {
		return err
	}
	if err := s.snapshot(ctx, "mariadb restart"); err != nil {
		return err
	}
	if code := s.mysql.terminate(60 * time.Second); code != 0 {
		s.say("mariadb exited %d", code)
	}
	if !startstop.Sleep(ctx, time.Second) {
		return ctx.Err()
	}
	if err := s.mysql.start(); err != nil {
		return err
	}
	if err := s.waitMySQL(ctx, 60*time.Second); err != nil {
		return err
	}
	s.say("mariadb is back")
	return nil
}

// waitBusy waits (at most 3 s) until daemon p holds a task, so that killing
// or stopping it hits work in flight. It reads the daemon's processing
// lists, where an attempt is from the moment its worker takes it: the
// running mark comes only for attempts still running after the workers'
// mark delay, so a quick task is never seen as running in the task
// center. The worker id is host-pid-bootid.
func (s *suite) waitBusy(ctx context.Context, p *proc) {
	if !p.running() {
		return
	}
	pattern := s.br.Keys.Processing("*", fmt.Sprintf("*-%d-*", p.cmd.Process.Pid))
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if n, err := s.held(ctx, pattern); err == nil && n > 0 {
			s.say("%s holds %d tasks", p.name, n)
			return
		}
		if !startstop.Sleep(ctx, 10*time.Millisecond) {
			return
		}
	}
	s.say("%s holds no task; injecting the fault anyway", p.name)
}

// held counts the messages in the processing lists matching pattern.
func (s *suite) held(ctx context.Context, pattern string) (int64, error) {
	rdb := s.br.Client()
	var n int64
	it := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for it.Next(ctx) {
		l, err := rdb.LLen(ctx, it.Val()).Result()
		if err != nil {
			return 0, err
		}
		n += l
	}
	return n, it.Err()
}

// waitLogged waits (at most within) until the daemons' logs hold more than
// seen lines saying text.
func (s *suite) waitLogged(ctx context.Context, text string, seen int, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if n, err := s.countLogs(text); err == nil && n > seen {
			return
		}
		if !startstop.Sleep(ctx, 50*time.Millisecond) {
			return
		}
	}
	s.say("no daemon logged %q within %s", text, within)
}

// waitDispatched waits (at most 2 s) until a task is dispatched and not
// yet running, so that a flush loses a message.
func (s *suite) waitDispatched(ctx context.Context) {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM task_center WHERE status = 1`).Scan(&n)
		if (err == nil && n > 0) || !startstop.Sleep(ctx, 5*time.Millisecond) {
			return
		}
	}
}

// waitQuiescence waits until every submitted task succeeded.
func (s *suite) waitQuiescence(ctx context.Context) bool {
	deadline := time.Now().Add(s.o.timeout)
	lastLog := time.Now()
	for time.Now().Before(deadline) {
		var done, open int
		// Dead is an end too: the batches' failing members die.
		err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(status NOT IN (3, 5)), 0) FROM task_center`).Scan(&done, &open)
		done -= open
		s.mu.Lock()
		want := len(s.ids) + s.expectedStepRows()
		s.mu.Unlock()
		if err == nil && open == 0 && done >= want {
			s.say("quiescent: %d tasks succeeded", done)
			return true
		}
		if time.Since(lastLog) > 5*time.Second {
			s.say("waiting: %d succeeded, %d not yet", done, open)
			lastLog = time.Now()
		}
		if !startstop.Sleep(ctx, 200*time.Millisecond) {
			return false
		}
	}
	return false
}

// --- figures ---------------------------------------------------------------

// countLogs counts the lines of the daemons' logs that say one of texts.
func (s *suite) countLogs(texts ...string) (int, error) {
	n := 0
	for _, p := range s.nodes {
		b, err := os.ReadFile(p.log)
		if err != nil {
			return 0, err
		}
		for _, t := range texts {
			n += bytes.Count(b, []byte(t))
		}
	}
	return n, nil
}

func (s *suite) figures(ctx context.Context) (string, []string, error) {
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }

	// The handler's record: id -> attempts that appended a line.
	lines := map[int64][]int{}
	f, err := os.Open(s.out)
	if err != nil {
		return "", nil, err
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 2 {
			fail("malformed line in %s: %q", s.out, sc.Text())
			continue
		}
		id, err1 := strconv.ParseInt(fs[0], 10, 64)
		att, err2 := strconv.Atoi(fs[1])
		if err1 != nil || err2 != nil {
			fail("malformed line in %s: %q", s.out, sc.Text())
			continue
		}
		lines[id] = append(lines[id], att)
	}
	f.Close()
	if err := sc.Err(); err != nil {
		return "", nil, err
	}

	// The task center.
	tasks, err := readTasks(ctx, s.db)
	if err != nil {
		return "", nil, err
	}

	// The run log: succeeded runs per task.
	succ := map[int64][]runRow{}
	rs, err := s.db.QueryContext(ctx, `SELECT task_id, attempt, UNIX_TIMESTAMP(finished_at) FROM task_run WHERE outcome = 'succeeded'`)
	if err != nil {
		return "", nil, err
	}
	for rs.Next() {
		var id int64
		var r runRow
		if err := rs.Scan(&id, &r.attempt, &r.finished); err != nil {
			rs.Close()
			return "", nil, err
		}
		succ[id] = append(succ[id], r)
	}
	rs.Close()

	submitted, succeeded, lost, twice := len(s.ids), 0, 0, 0
	var lostIDs []int64
	// check checks a task that must have succeeded exactly once; plain
	// ones count in the figures.
	check := func(id int64, plain bool) bool {
		t, ok := tasks[id]
		runs := succ[id]
		if len(runs) > 1 {
			fail("task %d has %d 'succeeded' runs in task_run", id, len(runs))
		}
		if plain && len(lines[id]) > 1 {
			twice++
		}
		good := true
		switch {
		case !ok:
			good = false
			fail("task %d is missing from task_center", id)
		case t.status != 3:
			good = false
			if !plain {
				fail("task %d: status %d, want succeeded", id, t.status)
			}
		default:
			if len(runs) != 1 || runs[0].attempt != t.attempt {
				fail("task %d: task_center says succeeded at attempt %d, task_run has succeeded runs %v", id, t.attempt, runs)
			}
			if !contains(lines[id], t.attempt) {
				good = false
				fail("task %d succeeded at attempt %d but its handler recorded only attempts %v", id, t.attempt, lines[id])
			}
		}
		if plain {
			if good {
				succeeded++
			} else {
				lost++
				lostIDs = append(lostIDs, id)
			}
		}
		return good && len(runs) == 1
	}
	for id := range s.ids {
		check(id, true)
	}
	known := map[int64]bool{}
	for id := range s.ids {
		known[id] = true
	}
	stepFig := s.stepFigures(tasks, known, func(id int64) bool { return check(id, false) }, lines, succ, fail)
	for id := range tasks {
		if !known[id] {
			fail("task %d in task_center was not submitted by the suite", id)
		}
	}
	for id := range lines {
		if _, ok := tasks[id]; !ok {
			fail("the handler ran unknown task %d", id)
		}
	}
	for id := range succ {
		if t, ok := tasks[id]; ok && t.status != 3 {
			fail("task %d has a succeeded run but status %d", id, t.status)
		}
	}
	if lost > 0 {
		sort.Slice(lostIDs, func(i, j int) bool { return lostIDs[i] < lostIDs[j] })
		show := lostIDs[:min(len(lostIDs), 20)]
		fail("%d tasks lost (not succeeded, or no handler line for the succeeded attempt), e.g. %v", lost, show)
		for _, id := range show[:min(len(show), 5)] {
			t := tasks[id]
			fail("  task %d: status %d attempt %d, handler lines %v", id, t.status, t.attempt, lines[id])
		}
	}

	// Stale writes rejected, from the daemons' logs.
	stale, err := s.countLogs(staleLogs...)
	if err != nil {
		return "", nil, err
	}

	// Recovery: per fault, the longest time from the fault to the
	// successful completion of a task that was in flight at it.
	maxRec := 0.0
	var perFault []string
	for _, fl := range s.faults {
		worst, worstID := 0.0, int64(0)
		for _, id := range fl.flight {
			runs := succ[id]
			if len(runs) == 0 {
				continue
			}
			if d := runs[len(runs)-1].finished - fl.at; d > worst {
				worst, worstID = d, id
			}
		}
		perFault = append(perFault, fmt.Sprintf("%s %.1fs (task %d)", fl.name, worst, worstID))
		maxRec = max(maxRec, worst)
	}
	s.say("recovery per fault: %s", strings.Join(perFault, ", "))

	fig := fmt.Sprintf("submitted=%d succeeded=%d lost=%d ran-twice=%d stale-writes-rejected=%d max-recovery-seconds=%.1f\n%s",
		submitted, succeeded, lost, twice, stale, maxRec, stepFig)
	if s.o.direct > 0 {
		dirFig, err := s.directFigures(lines, fail)
		if err != nil {
			return "", nil, err
		}
		fig += "\n" + dirFig
	}
	if submitted != s.o.tasks {
		fail("submitted %d tasks, wanted %d", submitted, s.o.tasks)
	}
	return fig, failures, nil
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
