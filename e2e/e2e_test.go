// Package e2e runs the real taskd binary: daemons as separate processes on
// the test's private database and Redis prefix, driven by the CLI and the
// producer API, stopped with real signals.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// taskdBin is the binary built once by TestMain.
var taskdBin string

func TestMain(m *testing.M) {
	// Output the tests read from pipes is whole: a COLUMNS exported here
	// (a shell's, watch's) would narrow taskd's tables.
	os.Unsetenv("COLUMNS")
	removeStaleBuilds()
	dir, err := os.MkdirTemp("", "taskd-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	taskdBin = filepath.Join(dir, "taskd")
	build := exec.Command("go", "build", "-o", taskdBin, "github.com/taskd/taskd/cmd/taskd")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build taskd:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// removeStaleBuilds removes the binaries of runs that ended without
// TestMain's cleanup (a -timeout panic, a kill): directories older than
// any run. Younger ones may be another run's, going on now.
func removeStaleBuilds() {
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), "taskd-e2e-*"))
	for _, d := range old {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() && time.Since(fi.ModTime()) > 3*time.Hour {
			os.RemoveAll(d)
		}
	}
}

var quiet = slog.New(slog.DiscardHandler)

type testBundle struct {
	env    *testenv.Env
	ctx    context.Context
	dir    string
	config string // path of the configuration file
}

// setup creates the environment and writes a configuration for it; extra
// is YAML appended to it, with %DIR% replaced by the test's directory.
func setup(t *testing.T, extra string) *testBundle {
	t.Helper()
	env := testenv.New(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "taskd.yaml")
	yaml := env.ConfigYAML("log:\n  format: json\n  level: info\n" + strings.ReplaceAll(extra, "%DIR%", dir))
	require.NoError(t, os.WriteFile(cfg, []byte(yaml), 0o644))
	return &testBundle{env: env, ctx: context.Background(), dir: dir, config: cfg}
}

// taskd runs a one-shot command and returns its stdout; it fails the test
// unless the command exits 0.
func (b *testBundle) taskd(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, taskdBin, append([]string{"--config", b.config}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, err, "taskd %v: stderr: %s", args, stderr.String())
	return stdout.String()
}

// created is the task a submit or cron add created, read from the JSON
// result every action prints.
type created struct{ ID int64 }

func (b *testBundle) created(t *testing.T, args ...string) created {
	t.Helper()
	var res struct{ IDs []int64 }
	require.NoError(t, json.Unmarshal([]byte(b.taskd(t, append([]string{"-o", "json"}, args...)...)), &res))
	require.Len(t, res.IDs, 1)
	require.Positive(t, res.IDs[0])
	return created{ID: res.IDs[0]}
}

// daemon is one `taskd run` process.
type daemon struct {
	node string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // set when done is closed
}

func (b *testBundle) startDaemon(t *testing.T, node string) *daemon {
	t.Helper()
	return b.startDaemonArgs(t, node, "run", "--node-id", node, "--roles", "scheduler,worker")
}

// startDaemonArgs starts taskd with args as a daemon named node.
func (b *testBundle) startDaemonArgs(t *testing.T, node string, args ...string) *daemon {
	t.Helper()
	return b.startBinary(t, node, taskdBin, args...)
}

// startBinary starts bin (taskd, tasktop) with the configuration and args
// as a daemon named node, its output in node.log.
func (b *testBundle) startBinary(t *testing.T, node, bin string, args ...string) *daemon {
	t.Helper()
	logPath := filepath.Join(b.dir, node+".log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(bin, append([]string{"--config", b.config}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	testenv.DieWithTest(cmd)
	require.NoError(t, cmd.Start())
	d := &daemon{node: node, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		logf.Close()
		close(d.done)
	}()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = cmd.Process.Kill()
			<-d.done
		}
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("log of node %s:\n%s", node, tail(string(out), 4000))
		}
	})
	return d
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// stop sends SIGTERM and waits up to within for the exit; it returns the
// exit code and how long the exit took.
func (d *daemon) stop(t *testing.T, within time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-d.done:
	case <-time.After(within):
		t.Fatalf("node %s did not exit within %s of SIGTERM", d.node, within)
	}
	took := time.Since(start)
	var ee *exec.ExitError
	if errors.As(d.err, &ee) {
		return ee.ExitCode(), took
	}
	require.NoError(t, d.err)
	return 0, took
}

// waitCount polls a COUNT query until it returns want. It fails when the
// count has not moved for within: real processes do the work, at the pace
// of a loaded machine, so a count still moving is waited for, up to five
// times within in all.
func (b *testBundle) waitCount(t *testing.T, want int, within time.Duration, q string, args ...any) {
	t.Helper()
	start := time.Now()
	stall := start.Add(within)
	last := b.env.Count(t, q, args...)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for last != want {
		if now := time.Now(); now.After(stall) || now.Sub(start) > 5*within {
			b.logUnfinished(t)
			t.Fatalf("after %s (the last %s without a change): %q = %d, want %d",
				now.Sub(start).Round(time.Millisecond), within, q, last, want)
		}
		<-tick.C
		if n := b.env.Count(t, q, args...); n != last {
			last, stall = n, time.Now().Add(within)
		}
	}
}

// logUnfinished logs the tasks that have not succeeded, for a test that
// waited for them in vain.
func (b *testBundle) logUnfinished(t *testing.T) {
	t.Helper()
	rows, err := b.env.Store.DB().Query(`SELECT id, status, attempt, queue, task_code, COALESCE(CAST(dispatched_at AS CHAR), ''),
		COALESCE(CAST(started_at AS CHAR), ''), worker_id, COALESCE(last_result, '') FROM task_center WHERE status <> 3 ORDER BY id LIMIT 20`)
	if err != nil {
		t.Logf("read the unfinished tasks: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var status, attempt int
		var queue, code, dispatched, started, worker, result string
		if err := rows.Scan(&id, &status, &attempt, &queue, &code, &dispatched, &started, &worker, &result); err != nil {
			t.Logf("read the unfinished tasks: %v", err)
			return
		}
		t.Logf("not succeeded: task %d status %d attempt %d queue %q code %q dispatched %s started %s worker %q result %q",
			id, status, attempt, queue, code, dispatched, started, worker, result)
	}
}

// readLines parses the "id attempt" lines the append handler writes.
func readLines(t *testing.T, path string) [][2]int64 {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out [][2]int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		require.Len(t, fields, 2, "line %q", sc.Text())
		id, err := strconv.ParseInt(fields[0], 10, 64)
		require.NoError(t, err)
		att, err := strconv.ParseInt(fields[1], 10, 64)
		require.NoError(t, err)
		out = append(out, [2]int64{id, att})
	}
	require.NoError(t, sc.Err())
	return out
}

const appendHandler = `handlers:
  append:
    exec: ["sh", "-c", "echo \"$TASK_ID $TASK_ATTEMPT\" >> %DIR%/out.txt"]
`

// TestTwoNodes runs 1,000 tasks on two daemons: each runs exactly once,
// both nodes take work, and both drain and exit 0 on SIGTERM.
func TestTwoNodes(t *testing.T) {
	t.Parallel()
	b := setup(t, appendHandler+`
scheduler:
  poll_interval: 200ms
  batch_size: 100
worker:
  concurrency: 8
  shutdown_grace: 5s
`)
	out := b.taskd(t, "migrate")
	require.Contains(t, out, "up to date", "testenv migrated already: migrate is idempotent")

	n1 := b.startDaemon(t, "node-1")
	n2 := b.startDaemon(t, "node-2")

	const total = 1000
	cl := producer.New(b.env.Store, b.env.Broker, producer.Options{Logger: quiet})
	subs := make([]producer.Submission, total)
	for i := range subs {
		subs[i] = producer.Submission{Code: "append", Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
	}
	res, err := cl.SubmitBatch(b.ctx, subs)
	require.NoError(t, err)
	want := map[int64]bool{}
	for _, r := range res {
		want[r.ID] = true
	}
	require.Len(t, want, total)

	b.waitCount(t, total, 120*time.Second, `SELECT COUNT(*) FROM task_center WHERE status = 3`)

	lines := readLines(t, filepath.Join(b.dir, "out.txt"))
	require.Len(t, lines, total, "each task ran exactly once")
	got := map[int64]bool{}
	for _, l := range lines {
		require.True(t, want[l[0]], "unknown task id %d", l[0])
		require.EqualValues(t, 1, l[1], "task %d ran as attempt %d", l[0], l[1])
		got[l[0]] = true
	}
	require.Len(t, got, total)

	require.Equal(t, total, b.env.Count(t, `SELECT COUNT(*) FROM task_run`))
	require.Equal(t, total, b.env.Count(t, `SELECT COUNT(*) FROM task_run WHERE outcome = 'succeeded' AND attempt = 1`))
	require.Equal(t, total, b.env.Count(t, `SELECT COUNT(DISTINCT task_id) FROM task_run`))
	require.Equal(t, total, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE attempt = 1 AND retry_count = 0`))

	// Both nodes did work, and their workers are told apart.
	rows, err := b.env.Store.DB().QueryContext(b.ctx, `SELECT node, COUNT(*), COUNT(DISTINCT worker_id) FROM task_run GROUP BY node`)
	require.NoError(t, err)
	perNode := map[string]int{}
	for rows.Next() {
		var node string
		var n, workers int
		require.NoError(t, rows.Scan(&node, &n, &workers))
		require.Equal(t, 1, workers, "node %s", node)
		perNode[node] = n
	}
	require.NoError(t, rows.Err())
	rows.Close()
	t.Logf("runs per node: %v", perNode)
	require.Len(t, perNode, 2, "work spread over both nodes: %v", perNode)
	require.Positive(t, perNode["node-1"])
	require.Positive(t, perNode["node-2"])
	require.Equal(t, 2, b.env.Count(t, `SELECT COUNT(DISTINCT worker_id) FROM task_run`))

	for _, d := range []*daemon{n1, n2} {
		code, took := d.stop(t, 20*time.Second) // see TestSigtermStopsTakingPromptly
		require.Zero(t, code, "node %s exit code", d.node)
		t.Logf("node %s exited in %s", d.node, took)
	}
	// Clean shutdown withdraws the workers' heartbeats.
	require.Zero(t, b.env.Broker.Client().ZCard(b.ctx, b.env.Broker.Keys.Workers()).Val())
}

// TestDelayedAndCron checks that a delayed task waits by the database clock
// and that a per-second periodic task keeps running.
func TestDelayedAndCron(t *testing.T) {
	t.Parallel()
	b := setup(t, appendHandler+`  tick:
    exec: ["true"]
scheduler:
  poll_interval: 200ms
worker:
  shutdown_grace: 2s
`)
	b.startDaemon(t, "node-1")

	sub := b.created(t, "submit", "append", "--delay", "2s")
	cron := b.created(t, "cron", "add", "tick", "*/1 * * * * *")

	// Delayed: it ran, and not before its delay by the database clock.
	b.waitCount(t, 1, 15*time.Second, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 3`, sub.ID)
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_run r JOIN task_center c ON c.id = r.task_id
		WHERE c.id = ? AND r.outcome = 'succeeded' AND r.started_at >= c.created_at + INTERVAL 2 SECOND`, sub.ID),
		"the delayed task started before its delay")
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center
		WHERE id = ? AND started_at >= created_at + INTERVAL 2 SECOND`, sub.ID))
	lines := readLines(t, filepath.Join(b.dir, "out.txt"))
	require.Equal(t, [][2]int64{{sub.ID, 1}}, lines)

	// Cron: three runs within about five seconds of being added (the
	// first occurrence is the next whole second).
	b.waitCount(t, 3, 6*time.Second, `SELECT LEAST(COUNT(*), 3) FROM task_run WHERE task_id = ?`, cron.ID)
	require.Equal(t,
		b.env.Count(t, `SELECT COUNT(*) FROM task_run WHERE task_id = ?`, cron.ID),
		b.env.Count(t, `SELECT COUNT(DISTINCT attempt) FROM task_run WHERE task_id = ?`, cron.ID),
		"each run is its own attempt")
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_run WHERE task_id = ? AND outcome <> 'succeeded'`, cron.ID))
	// Between runs it waits as pending for its next occurrence.
	b.waitCount(t, 1, 3*time.Second, `SELECT COUNT(*) FROM task_center
		WHERE id = ? AND task_type = 1 AND status = 0 AND plan_next_run_at > NOW(3) AND retry_count = 0`, cron.ID)
}

// TestSigtermInterruptsLongTask checks the shutdown contract: a task still
// running when the grace ends is handed back, not failed.
func TestSigtermInterruptsLongTask(t *testing.T) {
	t.Parallel()
	b := setup(t, `handlers:
  slow:
    exec: ["sleep", "30"]
scheduler:
  poll_interval: 200ms
worker:
  shutdown_grace: 1s
  kill_grace: 1s
`)
	d := b.startDaemon(t, "node-1")
	sub := b.created(t, "submit", "slow")
	b.waitCount(t, 1, 15*time.Second, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 2`, sub.ID)
	// SIGTERM may land before or after the handler starts: either way the
	// attempt is handed back.

	code, took := d.stop(t, 20*time.Second) // see TestSigtermStopsTakingPromptly
	require.Zero(t, code)
	t.Logf("exited %s after SIGTERM", took)

	tk, err := b.env.Store.TaskGet(b.ctx, sub.ID)
	require.NoError(t, err)
	require.Equal(t, task.Pending, tk.Status, "handed back")
	require.Zero(t, tk.RetryCount, "an interruption is not a failed attempt")
	require.Equal(t, 1, tk.Attempt)
	require.Empty(t, tk.WorkerID)
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_run WHERE task_id = ? AND attempt = 1 AND outcome = 'interrupted'`, sub.ID))
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_run WHERE task_id = ?`, sub.ID))
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND plan_next_run_at <= NOW(3)`, sub.ID),
		"due again at once")
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND COALESCE(scheduled_at, plan_next_run_at) = created_at`, sub.ID),
		"its next run keeps the time the interrupted one was scheduled for (submitted due now)")
}

// A drain stops an exec handler's group without waiting out its kill
// grace for an orphan that died after its shell: the orphan is reparented
// to taskd, and its zombie kept the group looking alive until taskd's
// reaper, which stopped at SIGTERM, reaped it: each such task held the
// drain for the whole kill_grace.
func TestDrainReapsOrphansOfAHandler(t *testing.T) {
	t.Parallel()
	b := setup(t, `handlers:
  wrapped:
    exec: ["sh", "-c", "(trap 'sleep 0.5; exit 0' TERM; sleep 60 & wait); echo never"]
scheduler:
  poll_interval: 200ms
worker:
  shutdown_grace: 1s
  kill_grace: 20s
  hand_back_wait: 25s
`)
	d := b.startDaemon(t, "node-1")
	sub := b.created(t, "submit", "wrapped")
	b.waitCount(t, 1, 15*time.Second, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 2`, sub.ID)
	time.Sleep(300 * time.Millisecond) // the subshell's trap is set
	code, took := d.stop(t, 40*time.Second)
	require.Zero(t, code)
	// 1 s of shutdown_grace, 0.5 s of the orphan's trap, a reaper's sweep:
	// far from the 20 s of kill_grace it waited.
	require.Less(t, took, 10*time.Second, "the drain waited out kill_grace")
	tk, err := b.env.Store.TaskGet(b.ctx, sub.ID)
	require.NoError(t, err)
	require.Equal(t, task.Pending, tk.Status, "handed back")
}

// TestSighupDrains: SIGHUP (an SSH session that dropped under a `taskd
// run` started by hand, a HUP sent for a reload) stops the daemon as
// SIGTERM does, draining what runs: Go's default would kill it at once
// and leave the attempt to recovery. It exits 75, which the shipped units
// restart on (after an exit 0 they leave it down). Under nohup, which
// ignores SIGHUP, it keeps running.
func TestSighupDrains(t *testing.T) {
	t.Parallel()
	b := setup(t, `handlers:
  nap:
    exec: ["sleep", "1"]
scheduler:
  poll_interval: 200ms
worker:
  shutdown_grace: 20s
`)
	d := b.startDaemon(t, "node-1")
	sub := b.created(t, "submit", "nap")
	b.waitCount(t, 1, 15*time.Second, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 2`, sub.ID)
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGHUP))
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30s of SIGHUP")
	}
	var ee *exec.ExitError
	require.ErrorAs(t, d.err, &ee, "an exit, not death by the signal")
	require.Equal(t, 75, ee.ExitCode(), "exits for a restart")
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 3`, sub.ID), "drained: the task finished")
	logged, err := os.ReadFile(d.log)
	require.NoError(t, err)
	require.Contains(t, string(logged), "hangup signal received")
	require.Contains(t, string(logged), "taskd: stopped on SIGHUP: exit 75")

	nohup, err := exec.LookPath("nohup")
	if err != nil {
		t.Skip("no nohup here")
	}
	logf, err := os.Create(filepath.Join(b.dir, "nohup.log"))
	require.NoError(t, err)
	defer logf.Close()
	cmd := exec.Command(nohup, taskdBin, "--config", b.config, "run", "--node-id", "node-2", "--roles", "worker")
	cmd.Stdout, cmd.Stderr = logf, logf
	testenv.DieWithTest(cmd)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	require.Eventually(t, func() bool {
		out, _ := os.ReadFile(logf.Name())
		return strings.Contains(string(out), "taskd node started")
	}, 15*time.Second, 20*time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	select {
	case err := <-exited:
		t.Fatalf("stopped by SIGHUP under nohup: %v", err)
	case <-time.After(time.Second): // an absence: a second in which it may not stop
	}
	out, err := os.ReadFile(logf.Name())
	require.NoError(t, err)
	require.NotContains(t, string(out), "shutting down", "stopping on SIGHUP under nohup")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30s of SIGTERM")
	}
}

// TestSeedInsertRuns checks that a row INSERTed by a seed-design producer
// (old columns only, no wakeup) is found by polling and runs.
func TestSeedInsertRuns(t *testing.T) {
	t.Parallel()
	b := setup(t, appendHandler+`
scheduler:
  poll_interval: 200ms
worker:
  shutdown_grace: 2s
`)
	b.startDaemon(t, "node-1")
	res := b.env.Exec(t, `INSERT INTO task_center (task_code, task_type, payload, cron_expr, priority, timeout, max_retry, plan_next_run_at, status)
		VALUES ('append', 0, '{"a":1}', NULL, 5, 300, 3, NOW(), 0)`)
	id, err := res.LastInsertId()
	require.NoError(t, err)
	b.waitCount(t, 1, 15*time.Second, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 3`, id)
	require.Equal(t, [][2]int64{{id, 1}}, readLines(t, filepath.Join(b.dir, "out.txt")))
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_run WHERE task_id = ? AND outcome = 'succeeded'`, id))
}

// TestSigtermStopsTakingPromptly checks that SIGTERM stops the fetchers at
// once: an idle daemon must exit after at most the take already in flight
// (worker takeWait, 1 s), whatever the number of queues.
func TestSigtermStopsTakingPromptly(t *testing.T) {
	t.Parallel()
	var cfg strings.Builder
	cfg.WriteString("handlers:\n")
	for i := range 10 {
		fmt.Fprintf(&cfg, "  q%d:\n    exec: [\"true\"]\n", i)
	}
	cfg.WriteString("scheduler:\n  poll_interval: 200ms\nworker:\n  concurrency: 4\n  shutdown_grace: 1s\n")
	b := setup(t, cfg.String())
	d := b.startDaemon(t, "node-1")
	rdb := b.env.Broker.Client()
	require.Eventually(t, func() bool {
		return rdb.ZCard(b.ctx, b.env.Broker.Keys.Workers()).Val() == 1
	}, 15*time.Second, 20*time.Millisecond, "worker up")

	code, took := d.stop(t, 30*time.Second)
	require.Zero(t, code)
	t.Logf("idle daemon with 10 queues exited %s after SIGTERM", took)
	// A liveness bound, generous for a loaded machine: fetchers stop at
	// once and a blocked take ends within a second.
	require.Less(t, took, 10*time.Second)
}

// TestSubmitRunsWithoutScheduler: `taskd submit` of a task due now
// dispatches it itself, so a worker-only daemon runs it with no scheduler
// anywhere; a delayed one waits for a scheduler.
func TestSubmitRunsWithoutScheduler(t *testing.T) {
	t.Parallel()
	b := setup(t, appendHandler+`
worker:
  shutdown_grace: 2s
`)
	b.startDaemonArgs(t, "worker-1", "run", "--node-id", "worker-1", "--roles", "worker")
	now := b.created(t, "submit", "append")
	later := b.created(t, "submit", "append", "--delay", "1s")
	b.waitCount(t, 1, 15*time.Second, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 3 AND attempt = 1`, now.ID)
	require.Equal(t, [][2]int64{{now.ID, 1}}, readLines(t, filepath.Join(b.dir, "out.txt")))
	time.Sleep(2 * time.Second) // an absence: a second past its due time in which no scheduler runs it
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 0`, later.ID),
		"a delayed task waits for a scheduler")
}
