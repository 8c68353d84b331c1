package e2e

// Fault tests: real `taskd run` processes (scheduler, worker and recovery
// roles) SIGKILLed, SIGSTOPped past their heartbeat TTL, and a private Redis
// flushed under them; plus the whole fault suite, scripts/faults.sh, at a
// CI-sized count. Timings are short: heartbeat 1s/3s, recovery every 1s,
// dispatch window 5s.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/testenv"
)

// faultTimings are the daemons' settings in every fault test.
const faultTimings = `log:
  format: json
  level: info
scheduler:
  poll_interval: 200ms
worker:
  concurrency: 4
  shutdown_grace: 5s
  kill_grace: 1s
  heartbeat_interval: 1s
  heartbeat_ttl: 3s
recovery:
  interval: 1s
  dispatch_window: 5s
`

// faultRecoveryWindow bounds the time from a worker's death to the start of
// its tasks' next attempt: the heartbeat TTL, a recovery interval, a
// scheduler poll, and slack for a loaded CI machine.
const faultRecoveryWindow = 3*time.Second + time.Second + 200*time.Millisecond + 4*time.Second

// faultBundle is one fault test's environment: its database and key
// prefix, the Redis the daemons use, a directory and a configuration.
type faultBundle struct {
	env    *testenv.Env
	ctx    context.Context
	dir    string
	config string
	out    string // the file the handler appends "id attempt" to
	// startWithin bounds a node's start (default 20 s).
	startWithin time.Duration
}

// faultSetup writes a configuration for handler code "work": sh -c script,
// with %OUT% replaced by the run file. redisAddr "" means the test Redis.
func faultSetup(t *testing.T, redisAddr, script string) *faultBundle {
	t.Helper()
	env := testenv.New(t)
	dir := t.TempDir()
	b := &faultBundle{env: env, ctx: context.Background(), dir: dir, out: filepath.Join(dir, "out.txt")}
	if redisAddr == "" {
		redisAddr = env.RedisAddr
	}
	argv, err := json.Marshal([]string{"sh", "-c", strings.ReplaceAll(script, "%OUT%", b.out)})
	require.NoError(t, err)
	yaml := fmt.Sprintf("mysql:\n  dsn: %q\nredis:\n  addr: %q\n  prefix: %q\nhandlers:\n  work:\n    exec: %s\n%s",
		env.DSN, redisAddr, env.Prefix, argv, faultTimings)
	b.config = filepath.Join(dir, "taskd.yaml")
	require.NoError(t, os.WriteFile(b.config, []byte(yaml), 0o644))
	return b
}

// faultNode is one `taskd run` with every role.
type faultNode struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func (b *faultBundle) startNode(t *testing.T, name string) *faultNode {
	t.Helper()
	return b.startNodeWith(t, name, b.config, "scheduler,worker,recovery")
}

// startNodeWith starts a `taskd run` with a configuration file and roles
// of its own, and environment variables added to the test's.
func (b *faultBundle) startNodeWith(t *testing.T, name, config, roles string, env ...string) *faultNode {
	t.Helper()
	n := &faultNode{name: name, log: filepath.Join(b.dir, name+".log"), done: make(chan struct{})}
	logf, err := os.Create(n.log)
	require.NoError(t, err)
	n.cmd = exec.Command(taskdBin, "--config", config, "run", "--node-id", name, "--roles", roles)
	n.cmd.Env = append(os.Environ(), env...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	require.NoError(t, n.cmd.Start())
	go func() {
		n.err = n.cmd.Wait()
		logf.Close()
		close(n.done)
	}()
	t.Cleanup(func() {
		select {
		case <-n.done:
		default:
			_ = n.cmd.Process.Signal(syscall.SIGCONT)
			_ = n.cmd.Process.Kill()
			<-n.done
		}
		if t.Failed() {
			out, _ := os.ReadFile(n.log)
			t.Logf("log of %s:\n%s", name, tail(string(out), 6000))
		}
	})
	deadline := time.Now().Add(cmp.Or(b.startWithin, 20*time.Second))
	for !bytes.Contains(n.read(), []byte("taskd node started")) {
		select {
		case <-n.done:
			t.Fatalf("%s exited at start: %v\n%s", name, n.err, n.read())
		default:
		}
		require.True(t, time.Now().Before(deadline), "%s did not start", name)
		time.Sleep(20 * time.Millisecond) // polls a real process starting
	}
	return n
}

func (n *faultNode) read() []byte {
	b, _ := os.ReadFile(n.log)
	return b
}

// workerLike matches the node's worker id (host-pid-bootid) in SQL LIKE.
func (n *faultNode) workerLike() string { return fmt.Sprintf("%%-%d-%%", n.cmd.Process.Pid) }

func (n *faultNode) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, n.cmd.Process.Signal(sig), "signal %s to %s", sig, n.name)
}

// terminate sends SIGTERM and returns the exit code.
func (n *faultNode) terminate(t *testing.T, within time.Duration) int {
	t.Helper()
	n.signal(t, syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(within):
		t.Fatalf("%s did not exit within %s of SIGTERM", n.name, within)
	}
	return n.cmd.ProcessState.ExitCode()
}

// submit creates n tasks of code "work" and returns their ids.
func (b *faultBundle) submit(t *testing.T, n int) []int64 {
	t.Helper()
	return b.submitDue(t, n, 0)
}

// submitDue creates n tasks of code "work" due in dueIn.
func (b *faultBundle) submitDue(t *testing.T, n int, dueIn time.Duration) []int64 {
	t.Helper()
	subs := make([]producer.Submission, n)
	for i := range subs {
		subs[i] = producer.Submission{Code: "work", Delay: dueIn, Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
	}
	return b.submitAll(t, subs)
}

// submitAll submits subs in one batch and returns their ids.
func (b *faultBundle) submitAll(t *testing.T, subs []producer.Submission) []int64 {
	t.Helper()
	cl := producer.New(b.env.Store, b.env.Broker, producer.Options{Logger: quiet})
	res, err := cl.SubmitBatch(b.ctx, subs)
	require.NoError(t, err)
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

func (b *faultBundle) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	return b.env.Count(t, q, args...)
}

// eventually polls a COUNT query until cond holds, for at most within.
func (b *faultBundle) eventually(t *testing.T, within time.Duration, cond func(int) bool, q string, args ...any) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n := b.count(t, q, args...)
		if cond(n) {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %q = %d", within, q, n)
		}
		time.Sleep(50 * time.Millisecond) // polls the database that real daemons write
	}
}

func atLeast(k int) func(int) bool { return func(n int) bool { return n >= k } }
func equal(k int) func(int) bool   { return func(n int) bool { return n == k } }

// dbNow is the database clock, in unix seconds.
func (b *faultBundle) dbNow(t *testing.T) float64 {
	t.Helper()
	var now float64
	require.NoError(t, b.env.Store.DB().QueryRowContext(b.ctx, `SELECT UNIX_TIMESTAMP(NOW(3))`).Scan(&now))
	return now
}

func (b *faultBundle) ids(t *testing.T, q string, args ...any) []int64 {
	t.Helper()
	rows, err := b.env.Store.DB().QueryContext(b.ctx, q, args...)
	require.NoError(t, err)
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		out = append(out, id)
	}
	require.NoError(t, rows.Err())
	return out
}

// runFile reads the handler's record: task id -> attempts, in order.
// Lines are "id attempt", or events "s|e id attempt ns" of which the
// starts count.
func (b *faultBundle) runFile(t *testing.T) map[int64][]int {
	t.Helper()
	out := map[int64][]int{}
	f, err := os.Open(b.out)
	if os.IsNotExist(err) {
		return out
	}
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 4 { // a start or end event (limits_test.go): starts count
			if fs[0] != "s" {
				continue
			}
			fs = fs[1:3]
		}
		require.Len(t, fs, 2, "line %q", sc.Text())
		id, err := strconv.ParseInt(fs[0], 10, 64)
		require.NoError(t, err)
		att, err := strconv.Atoi(fs[1])
		require.NoError(t, err)
		out[id] = append(out[id], att)
	}
	require.NoError(t, sc.Err())
	return out
}

// checkRecords asserts what every fault must leave true: each task
// succeeded once in the run log, at the attempt the task center holds, and
// its handler ran that attempt.
func (b *faultBundle) checkRecords(t *testing.T, ids []int64) {
	t.Helper()
	require.Zero(t, b.count(t, `SELECT COUNT(*) FROM (SELECT task_id FROM task_run
		WHERE outcome = 'succeeded' GROUP BY task_id HAVING COUNT(*) > 1) x`), "a task has two 'succeeded' runs")
	require.Zero(t, b.count(t, `SELECT COUNT(*) FROM task_center c WHERE c.status = 3 AND
		(SELECT COUNT(*) FROM task_run r WHERE r.task_id = c.id AND r.outcome = 'succeeded' AND r.attempt = c.attempt) <> 1`),
		"task center and run log disagree")
	lines := b.runFile(t)
	for _, id := range ids {
		var att int
		require.NoError(t, b.env.Store.DB().QueryRowContext(b.ctx, `SELECT attempt FROM task_center WHERE id = ? AND status = 3`, id).Scan(&att),
			"task %d did not succeed", id)
		require.Contains(t, lines[id], att, "task %d succeeded at attempt %d, its handler recorded %v", id, att, lines[id])
	}
}

// TestFaultSigkillMidTask kills a daemon while it runs tasks: each of them
// runs again as attempt 2 within the recovery window, and no other task is
// affected.
func TestFaultSigkillMidTask(t *testing.T) {
	t.Parallel()
	b := faultSetup(t, "", `echo "$TASK_ID $TASK_ATTEMPT" >> %OUT%; sleep 2`)
	a := b.startNode(t, "node-a")
	b.startNode(t, "node-b")

	// Eight tasks on eight slots: four run on each node.
	ids := b.submit(t, 8)
	b.eventually(t, 15*time.Second, equal(8), `SELECT COUNT(*) FROM task_center WHERE status = 2`)
	victims := b.ids(t, `SELECT id FROM task_center WHERE status = 2 AND worker_id LIKE ?`, a.workerLike())
	require.NotEmpty(t, victims, "node-a runs nothing")
	killedAt := b.dbNow(t)
	a.signal(t, syscall.SIGKILL)
	<-a.done

	b.eventually(t, 30*time.Second, equal(8), `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	b.checkRecords(t, ids)

	isVictim := map[int64]bool{}
	for _, id := range victims {
		isVictim[id] = true
		var attempt int
		var restarted float64
		require.NoError(t, b.env.Store.DB().QueryRowContext(b.ctx,
			`SELECT attempt, UNIX_TIMESTAMP(started_at) FROM task_center WHERE id = ?`, id).Scan(&attempt, &restarted))
		require.Equal(t, 2, attempt, "task %d of the killed node runs again as attempt 2", id)
		took := time.Duration((restarted - killedAt) * float64(time.Second))
		t.Logf("task %d: attempt 2 started %s after the kill", id, took.Round(time.Millisecond))
		require.Less(t, took, faultRecoveryWindow, "task %d re-run outside the recovery window", id)
		require.Equal(t, 1, b.count(t, `SELECT COUNT(*) FROM task_run WHERE task_id = ? AND attempt = 1 AND outcome = 'crashed'`, id))
		require.Equal(t, 1, b.count(t, `SELECT COUNT(*) FROM task_run WHERE task_id = ? AND attempt = 2 AND outcome = 'succeeded'`, id))
		require.Equal(t, 2, b.count(t, `SELECT COUNT(*) FROM task_run WHERE task_id = ?`, id))
	}
	lines := b.runFile(t)
	for _, id := range ids {
		if isVictim[id] {
			continue
		}
		require.Equal(t, 1, b.count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND attempt = 1 AND crash_count = 0`, id),
			"task %d was not on the killed node: one attempt", id)
		require.Equal(t, 1, b.count(t, `SELECT COUNT(*) FROM task_run WHERE task_id = ?`, id), "task %d: one run", id)
		require.Equal(t, []int{1}, lines[id], "task %d ran once", id)
	}
}

// TestFaultSigstopPastTTL freezes a daemon longer than its heartbeat TTL
// while it runs tasks: they are recovered and run elsewhere; when the daemon
// resumes, its late results are rejected by the fence and counted in its
// log; no task succeeds twice.
func TestFaultSigstopPastTTL(t *testing.T) {
	t.Parallel()
	b := faultSetup(t, "", `sleep 2; echo "$TASK_ID $TASK_ATTEMPT" >> %OUT%`)
	a := b.startNode(t, "node-a")
	b.startNode(t, "node-b")

	ids := b.submit(t, 8)
	b.eventually(t, 15*time.Second, equal(8), `SELECT COUNT(*) FROM task_center WHERE status = 2`)
	victims := b.ids(t, `SELECT id FROM task_center WHERE status = 2 AND worker_id LIKE ?`, a.workerLike())
	require.NotEmpty(t, victims, "node-a runs nothing")
	stopped := time.Now()
	a.signal(t, syscall.SIGSTOP)

	// node-b recovers the frozen node's tasks once its heartbeat expired.
	q := fmt.Sprintf(`SELECT COUNT(*) FROM task_run WHERE attempt = 1 AND outcome = 'crashed' AND task_id IN (%s)`, joinIDs(victims))
	b.eventually(t, 15*time.Second, equal(len(victims)), q)
	time.Sleep(time.Until(stopped.Add(4 * time.Second))) // the frozen node stays stopped 4 s: a real SIGSTOP outlasting its heartbeat TTL
	a.signal(t, syscall.SIGCONT)

	b.eventually(t, 30*time.Second, equal(8), `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	// Its handlers finished while it was stopped: each late result is
	// written, rejected by the fence, and logged.
	deadline := time.Now().Add(15 * time.Second)
	for bytes.Count(a.read(), []byte("stale result rejected by the fence")) < len(victims) {
		require.True(t, time.Now().Before(deadline), "node-a logged %d stale results, want %d",
			bytes.Count(a.read(), []byte("stale result rejected by the fence")), len(victims))
		time.Sleep(50 * time.Millisecond) // polls a real daemon's log
	}
	stale := bytes.Count(a.read(), []byte("stale result rejected by the fence")) + bytes.Count(a.read(), []byte("stale message dropped"))
	t.Logf("%d tasks recovered from the frozen node; %d stale writes rejected", len(victims), stale)
	b.checkRecords(t, ids)
	for _, id := range victims {
		require.Equal(t, 1, b.count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND attempt = 2`, id), "task %d", id)
		require.Zero(t, b.count(t, `SELECT COUNT(*) FROM task_run WHERE task_id = ? AND attempt = 1 AND outcome = 'succeeded'`, id),
			"task %d: the frozen node's late result must not count", id)
	}
	// The frozen node recovers from its pause and still drains cleanly.
	require.Zero(t, a.terminate(t, 15*time.Second), "node-a exit code after SIGTERM")
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ", ")
}

// TestFaultRedisFlushAll flushes Redis (a private server: FLUSHALL would
// wipe other tests' keys) while tasks wait in their queue: recovery rebuilds
// what was in flight from the task center and every task completes.
func TestFaultRedisFlushAll(t *testing.T) {
	t.Parallel()
	addr := testenv.PrivateRedis(t, 0)
	b := faultSetup(t, addr, `sleep 0.05; echo "$TASK_ID $TASK_ATTEMPT" >> %OUT%`)
	b.startNode(t, "node-a")
	b.startNode(t, "node-b")

	const total = 300
	ids := b.submit(t, total)
	// Wait until some ran and many wait dispatched in the queue.
	b.eventually(t, 20*time.Second, atLeast(20), `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	inQueue := b.count(t, `SELECT COUNT(*) FROM task_center WHERE status = 1`)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	require.NoError(t, rdb.FlushAll(b.ctx).Err())
	t.Logf("FLUSHALL with %d tasks dispatched", inQueue)
	require.Positive(t, inQueue, "nothing was dispatched at the flush")

	b.eventually(t, 45*time.Second, equal(total), `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	b.checkRecords(t, ids)
	require.Positive(t, b.count(t, `SELECT COUNT(*) FROM task_center WHERE attempt > 1`),
		"the flushed messages' tasks were re-dispatched")
}

// figuresLine is the one line scripts/faults.sh prints.
var figuresLine = regexp.MustCompile(`(?m)^submitted=(\d+) succeeded=(\d+) lost=(\d+) ran-twice=(\d+) stale-writes-rejected=(\d+) max-recovery-seconds=(\d+\.\d)$`)

// stepsLine is its line of chains and batches.
var stepsLine = regexp.MustCompile(`(?m)^chains=(\d+) chains-complete=(\d+) children=(\d+) batches=(\d+) callbacks=(\d+) callback-counts-right=(\d+)$`)

// directLine is its line of the tasks dispatched at submit.
var directLine = regexp.MustCompile(`(?m)^direct=(\d+) dispatched-at-submit=(\d+) handed-back=(\d+) left-to-recovery=(\d+) killed-before-push=(\d+)$`)

// TestFaultSuite runs scripts/faults.sh at a CI-sized count: three
// daemons, SIGKILL, SIGSTOP, FLUSHALL, Redis and MariaDB restarts (on
// private servers), then quiescence and the checks of the run log; and
// chains and batches under the same faults: every child exactly once,
// every callback exactly once with the right counts; and a fifth of the
// tasks dispatched at submit by a submitter process whose pushes fail and
// which is killed between a commit and its push.
func TestFaultSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault suite takes about a minute")
	}
	for _, bin := range []string{"redis-server", "mariadbd"} {
		if _, err := exec.LookPath(bin); err != nil {
			if _, err := os.Stat("/usr/sbin/" + bin); err != nil {
				t.Skipf("%s is not installed", bin)
			}
		}
	}
	t.Parallel()
	const tasks = 2000
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "scripts/faults.sh", "--tasks", strconv.Itoa(tasks))
	cmd.Dir = ".."
	// On timeout the script gets SIGTERM, so that its trap stops what it
	// started.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("scripts/faults.sh --tasks %d took %s:\n%s%s", tasks, time.Since(start).Round(time.Second), stderr.String(), stdout.String())
	require.NoError(t, err, "scripts/faults.sh failed")

	m := figuresLine.FindStringSubmatch(stdout.String())
	require.NotNil(t, m, "no figures line in the output")
	require.Equal(t, 1, len(figuresLine.FindAllString(stdout.String(), -1)), "one figures line")
	require.Equal(t, strconv.Itoa(tasks), m[1], "submitted")
	require.Equal(t, strconv.Itoa(tasks), m[2], "succeeded")
	require.Equal(t, "0", m[3], "lost")

	st := stepsLine.FindStringSubmatch(stdout.String())
	require.NotNil(t, st, "no chains and batches line in the output")
	require.Equal(t, []string{"100", "100", "200", "20", "20", "20"}, st[1:],
		"chains, complete chains, children, batches, callbacks, callbacks with the right counts")

	d := directLine.FindStringSubmatch(stdout.String())
	require.NotNil(t, d, "no line of the direct tasks in the output")
	require.Equal(t, strconv.Itoa(tasks/5), d[1], "direct")
	for what, i := range map[string]int{"dispatched-at-submit": 2, "handed-back": 3, "killed-before-push": 5} {
		require.NotEqual(t, "0", d[i], what)
	}
}
