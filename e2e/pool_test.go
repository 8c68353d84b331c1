package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// phpWorker is the library's example pool handler.
func phpWorker(t *testing.T) string {
	t.Helper()
	w, err := filepath.Abs("../clients/php/examples/worker.php")
	require.NoError(t, err)
	return w
}

// submitJSON submits a task with taskd submit and returns its id.
func (b *testBundle) submitJSON(t *testing.T, code, payload string, args ...string) int64 {
	t.Helper()
	out := b.taskd(t, append([]string{"-o", "json", "submit", code, "--payload", payload}, args...)...)
	var r struct {
		IDs []int64 `json:"ids"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	require.Len(t, r.IDs, 1, out)
	return r.IDs[0]
}

type poolRun struct {
	attempt int
	outcome string
	result  string
}

func (b *testBundle) poolRuns(t *testing.T, id int64) []poolRun {
	t.Helper()
	rows, err := b.env.Store.DB().Query("SELECT attempt, outcome, COALESCE(result, '') FROM task_run WHERE task_id = ? ORDER BY attempt", id)
	require.NoError(t, err)
	defer rows.Close()
	var out []poolRun
	for rows.Next() {
		var r poolRun
		require.NoError(t, rows.Scan(&r.attempt, &r.outcome, &r.result))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// waitDone waits until task id reaches status and returns its runs.
func (b *testBundle) waitDone(t *testing.T, id int64, status int) []poolRun {
	t.Helper()
	b.waitCount(t, 1, 60*time.Second, "SELECT COUNT(*) FROM task_center WHERE id = ? AND status = ?", id, status)
	return b.poolRuns(t, id)
}

// workerPID is the pid examples/worker.php reports in a result (its last
// line; stderr comes first).
func workerPID(t *testing.T, result string) int {
	t.Helper()
	var r struct {
		PID int `json:"pid"`
	}
	require.NoError(t, json.Unmarshal([]byte(result[strings.LastIndexByte(result, '\n')+1:]), &r), "result %q", result)
	require.NotZero(t, r.PID)
	return r.PID
}

func requireProcessGone(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool { return syscall.Kill(pid, 0) == syscall.ESRCH },
		10*time.Second, 20*time.Millisecond, "process %d is still there", pid)
}

// TestPoolPHP runs a daemon whose pool handlers are the PHP library's
// Worker::run, with real PHP: tasks succeed and fail as returned, stdout
// noise stays out of the protocol, a crash mid-task is retried, a timeout
// kills and replaces the process, max_jobs and max_memory recycle. The
// library's own tests then run against the same task center and daemon,
// with the plain PHP runner and with PHPUnit where it is installed.
func TestPoolPHP(t *testing.T) {
	t.Parallel()
	needTool(t, "php")
	w := phpWorker(t)
	b := setup(t, fmt.Sprintf(`scheduler:
  poll_interval: 300ms
retry:
  base: 100ms
  max: 200ms
worker:
  kill_grace: 2s
handlers:
  php_pool: { pool: ["php", %[1]q], size: 2 }
  php_slow: { pool: ["php", %[1]q], size: 1 }
  php_jobs: { pool: ["php", %[1]q], size: 1, max_jobs: 3 }
  php_mem: { pool: ["php", %[1]q], size: 1, max_memory: 100MB }
`, w))
	b.startDaemon(t, "pool-node")

	t.Run("results", func(t *testing.T) {
		ok := b.submitJSON(t, "php_pool", `{"name":"Zoë"}`)
		r := b.waitDone(t, ok, 3)
		require.Len(t, r, 1)
		require.Equal(t, "succeeded", r[0].outcome)
		require.Contains(t, r[0].result, fmt.Sprintf("handled task %d\n", ok), "stderr is the output")
		require.Contains(t, r[0].result, `"payload":{"name":"Zoë"}`)

		failed := b.submitJSON(t, "php_pool", `{"fail":"no mailbox"}`, "--max-retry", "1")
		r = b.waitDone(t, failed, 5)
		require.Len(t, r, 2)
		require.Equal(t, "failed", r[0].outcome)
		require.Equal(t, "dead", r[1].outcome)
		require.True(t, strings.HasPrefix(r[1].result, "RuntimeException: no mailbox\n"), r[1].result)
		require.Contains(t, r[1].result, "Stack trace:", "the trace went to stderr, kept as output")

		noisy := b.submitJSON(t, "php_pool", `{"echo":"Hello from echo"}`)
		r = b.waitDone(t, noisy, 3)
		require.Equal(t, "succeeded", r[0].outcome)
		require.Contains(t, r[0].result, "Hello from echo\n")
		require.Contains(t, r[0].result, "[noise] => 1")
	})

	t.Run("crash mid-task is retried", func(t *testing.T) {
		id := b.submitJSON(t, "php_pool", `{"exit":3,"exit_until_attempt":1}`)
		r := b.waitDone(t, id, 3)
		require.Len(t, r, 2)
		require.Equal(t, "failed", r[0].outcome)
		require.Regexp(t, `^pool process \d+ exited mid-task: exit status 3: exiting mid-task`, r[0].result)
		require.Equal(t, "succeeded", r[1].outcome)
	})

	t.Run("timeout kills and replaces", func(t *testing.T) {
		first := workerPID(t, b.waitDone(t, b.submitJSON(t, "php_slow", `{}`), 3)[0].result)
		slow := b.submitJSON(t, "php_slow", `{"sleep_ms":60000}`, "--timeout", "1s", "--max-retry", "0")
		r := b.waitDone(t, slow, 5)
		require.Equal(t, "timeout", r[0].outcome)
		require.Contains(t, r[0].result, fmt.Sprintf("pool process %d killed", first))
		requireProcessGone(t, first)
		next := workerPID(t, b.waitDone(t, b.submitJSON(t, "php_slow", `{}`), 3)[0].result)
		require.NotEqual(t, first, next)
	})

	t.Run("kill from the CLI kills the process", func(t *testing.T) {
		first := workerPID(t, b.waitDone(t, b.submitJSON(t, "php_slow", `{}`), 3)[0].result)
		long := b.submitJSON(t, "php_slow", `{"sleep_ms":60000}`)
		b.waitCount(t, 1, 30*time.Second, "SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 2", long)
		b.taskd(t, "kill", strconv.FormatInt(long, 10), "--yes")
		r := b.waitDone(t, long, 6)
		require.Equal(t, "cancelled", r[len(r)-1].outcome)
		requireProcessGone(t, first)
		require.NotEqual(t, first, workerPID(t, b.waitDone(t, b.submitJSON(t, "php_slow", `{}`), 3)[0].result))
	})

	t.Run("max_jobs recycles", func(t *testing.T) {
		var pids []int
		for range 5 {
			pids = append(pids, workerPID(t, b.waitDone(t, b.submitJSON(t, "php_jobs", `{}`), 3)[0].result))
		}
		require.Equal(t, pids[0], pids[1], "pids %v", pids)
		require.Equal(t, pids[0], pids[2], "pids %v", pids)
		require.NotEqual(t, pids[2], pids[3], "pids %v", pids)
		require.Equal(t, pids[3], pids[4], "pids %v", pids)
		requireProcessGone(t, pids[0])
	})

	t.Run("max_memory recycles", func(t *testing.T) {
		first := workerPID(t, b.waitDone(t, b.submitJSON(t, "php_mem", `{}`), 3)[0].result)
		grown := workerPID(t, b.waitDone(t, b.submitJSON(t, "php_mem", `{"grow_mb":150}`), 3)[0].result)
		require.Equal(t, first, grown, "recycled after the task, not during it")
		next := workerPID(t, b.waitDone(t, b.submitJSON(t, "php_mem", `{}`), 3)[0].result)
		require.NotEqual(t, first, next)
		requireProcessGone(t, first)
	})

	t.Run("library tests", func(t *testing.T) {
		env := append(b.phpEnv(t), "TASKD_E2E_CODE=php_pool")
		lib, err := filepath.Abs("../clients/php")
		require.NoError(t, err)
		run := func(name string, args ...string) string {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, name, args...)
			cmd.Dir, cmd.Env = lib, env
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s %v:\n%s", name, args, out)
			return string(out)
		}
		out := run("php", "tests/run.php")
		require.Regexp(t, `(?m)^\d+ passed, 0 failed, 0 skipped$`, out, "every test ran: %s", out)
		if _, err := exec.LookPath("phpunit"); err == nil {
			out = run("phpunit", "--do-not-cache-result")
			require.Contains(t, out, "OK (", out)
		} else {
			t.Log("phpunit is not installed; the plain runner ran the library's tests")
		}
	})
}

// phpEnv is the environment of the PHP library's tests and snippets:
// Laravel's DB_* variables and REDIS_* for the test's task center and Redis.
func (b *testBundle) phpEnv(t *testing.T) []string {
	t.Helper()
	dsn, err := mysql.ParseDSN(b.env.DSN)
	require.NoError(t, err)
	host, port, err := net.SplitHostPort(dsn.Addr)
	require.NoError(t, err)
	redisHost, redisPort, err := net.SplitHostPort(b.env.RedisAddr)
	require.NoError(t, err)
	return append(os.Environ(), "DB_HOST="+host, "DB_PORT="+port, "DB_DATABASE="+dsn.DBName,
		"DB_USERNAME="+dsn.User, "DB_PASSWORD="+dsn.Passwd, "REDIS_HOST="+redisHost, "REDIS_PORT="+redisPort,
		"TASKD_REDIS_PREFIX="+b.env.Prefix)
}

// phpSubmit submits a task with the PHP library's TaskProducer, waking the
// schedulers through phpredis.
func (b *testBundle) phpSubmit(t *testing.T, code, payloadJSON string) int64 {
	t.Helper()
	lib, err := filepath.Abs("../clients/php")
	require.NoError(t, err)
	script := `require 'src/autoload.php'; require 'tests/Env.php';
$redis = Taskd\Tests\Env::redis() ?? throw new RuntimeException('phpredis is missing');
$p = new Taskd\TaskProducer(Taskd\Tests\Env::pdo(), $redis, Taskd\Tests\Env::prefix());
echo $p->submit($argv[1], json_decode($argv[2], true));`
	cmd := exec.Command("php", "-r", script, code, payloadJSON)
	cmd.Dir, cmd.Env = lib, b.phpEnv(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	id, err := strconv.ParseInt(string(out), 10, 64)
	require.NoError(t, err, "%s", out)
	return id
}

// TestPoolPHPSigtermDrains: SIGTERM lets the running pool task finish
// within the shutdown grace, then the PHP processes get EOF and exit, and
// the daemon exits 0. The first task comes from the PHP producer, whose
// Redis wakeup starts it long before the minute-long poll would.
func TestPoolPHPSigtermDrains(t *testing.T) {
	t.Parallel()
	needTool(t, "php")
	b := setup(t, fmt.Sprintf(`scheduler:
  poll_interval: 1m
worker:
  shutdown_grace: 30s
handlers:
  php_pool: { pool: ["php", %q], size: 2 }
`, phpWorker(t)))
	d := b.startDaemon(t, "drain-node")
	require.Eventually(t, func() bool { // its scheduler listens for wakeups
		n, err := b.env.Broker.Client().PubSubNumSub(context.Background(), b.env.Broker.Keys.Wake()).Result()
		return err == nil && n[b.env.Broker.Keys.Wake()] > 0
	}, 30*time.Second, 20*time.Millisecond)
	woken := b.phpSubmit(t, "php_pool", `{"via":"php"}`)
	b.waitCount(t, 1, 20*time.Second, "SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 3", woken)
	warm := workerPID(t, b.poolRuns(t, woken)[0].result)
	id := b.submitJSON(t, "php_pool", `{"sleep_ms":1500}`)
	b.waitCount(t, 1, 30*time.Second, "SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 2", id)
	code, _ := d.stop(t, 30*time.Second)
	require.Equal(t, 0, code)
	r := b.poolRuns(t, id)
	require.Len(t, r, 1)
	require.Equal(t, "succeeded", r[0].outcome, "the running task finished, it was not handed back")
	requireProcessGone(t, warm)
	requireProcessGone(t, workerPID(t, r[0].result))
	log, err := os.ReadFile(d.log)
	require.NoError(t, err)
	require.NotContains(t, string(log), `"level":"ERROR"`)
}

// TestPoolCrashLoopInDoctor: a pool whose program cannot run is backed
// off, fails its tasks with the process's own words instead of holding
// them, and `taskd doctor` says so from the node's heartbeat.
func TestPoolCrashLoopInDoctor(t *testing.T) {
	t.Parallel()
	needTool(t, "php")
	b := setup(t, `scheduler:
  poll_interval: 200ms
worker:
  heartbeat_interval: 300ms
  heartbeat_ttl: 5s
handlers:
  php_broken: { pool: ["php", "/nonexistent/worker.php"], size: 2 }
`)
	b.startDaemon(t, "broken-node")
	id := b.submitJSON(t, "php_broken", `{}`, "--max-retry", "0")
	r := b.waitDone(t, id, 5)
	require.Contains(t, r[0].result, "pool php_broken is crash-looping")
	require.Contains(t, r[0].result, "Could not open input file: /nonexistent/worker.php")
	require.Eventually(t, func() bool {
		cmd := exec.Command(taskdBin, "--config", b.config, "-o", "json", "doctor")
		out, _ := cmd.Output() // exits 1: a check fails
		return strings.Contains(string(out), "node broken-node") && strings.Contains(string(out), "pool php_broken is crash-looping")
	}, 30*time.Second, 200*time.Millisecond)
}
