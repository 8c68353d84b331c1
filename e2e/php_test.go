package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/testenv"
)

// toolsMu serialises scripts/test-tools.sh: one apt-get at a time.
var toolsMu sync.Mutex

// needTool makes sure a tool of scripts/test-tools.sh (php, supervisor,
// rpm) is installed, installing it with apt-get where the script can. The
// test is skipped, saying why, only where it cannot (not root, no apt).
func needTool(t *testing.T, tool string) {
	t.Helper()
	toolsMu.Lock()
	defer toolsMu.Unlock()
	out, err := exec.Command("bash", "../scripts/test-tools.sh", tool).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		t.Skipf("%s cannot be installed here: %s", tool, strings.TrimSpace(string(out)))
	}
	require.NoError(t, err, "scripts/test-tools.sh %s: %s", tool, out)
}

// phpTimezone is a PHP date.timezone equal to the database clock's offset
// from UTC: the seed's producer writes plan_next_run_at with PHP's date(),
// which the task center compares with the database's NOW().
func phpTimezone(t *testing.T, b *testBundle) string {
	t.Helper()
	var offset int
	require.NoError(t, b.env.Store.DB().QueryRow("SELECT TIMESTAMPDIFF(MINUTE, UTC_TIMESTAMP(), NOW())").Scan(&offset))
	hours := (offset + 30*sign(offset)) / 60
	if offset-hours*60 != 0 {
		t.Skipf("the database clock is %d minutes off UTC, not whole hours", offset)
	}
	switch {
	case hours == 0:
		return "UTC"
	case hours > 0: // Etc/GMT-8 is UTC+8
		return fmt.Sprintf("Etc/GMT-%d", hours)
	default:
		return fmt.Sprintf("Etc/GMT+%d", -hours)
	}
}

func sign(n int) int {
	if n < 0 {
		return -1
	}
	return 1
}

// TestPHPRoundTrip: the example PHP producer INSERTs tasks the seed
// design's way (PDO, no taskd involved), a daemon runs them with the
// example PHP exec handler and the example PHP http endpoint, and the
// handlers' output lands in task_run; a handler failure is recorded with
// its stderr.
func TestPHPRoundTrip(t *testing.T) {
	t.Parallel()
	needTool(t, "php")
	examples, err := filepath.Abs("../examples/php")
	require.NoError(t, err)

	// The http handler, served by PHP's built-in server.
	port := testenv.FreePort(t)
	srv := exec.Command("php", "-S", "127.0.0.1:"+strconv.Itoa(port), filepath.Join(examples, "http_handler.php"))
	srvLog := filepath.Join(t.TempDir(), "php-server.log")
	logf, err := os.Create(srvLog)
	require.NoError(t, err)
	srv.Stdout, srv.Stderr = logf, logf
	require.NoError(t, srv.Start())
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
		logf.Close()
	})
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "php -S did not listen on %d", port)

	b := setup(t, fmt.Sprintf(`scheduler:
  poll_interval: 200ms
retry:
  base: 100ms
  max: 200ms
handlers:
  php_exec:
    exec: ["php", %q]
  php_http:
    http: "http://127.0.0.1:%d/tasks/report"
`, filepath.Join(examples, "handler.php"), port))
	b.startDaemon(t, "php-node")

	dsn, err := mysql.ParseDSN(b.env.DSN)
	require.NoError(t, err)
	host, dbPort, err := net.SplitHostPort(dsn.Addr)
	require.NoError(t, err)
	zone := phpTimezone(t, b)
	produce := func(args ...string) int64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "php", append([]string{"-d", "date.timezone=" + zone,
			filepath.Join(examples, "producer.php")}, args...)...)
		cmd.Env = append(os.Environ(), "DB_HOST="+host, "DB_PORT="+dbPort, "DB_DATABASE="+dsn.DBName,
			"DB_USERNAME="+dsn.User, "DB_PASSWORD="+dsn.Passwd,
			"TASKD_REDIS_ADDR="+b.env.RedisAddr, "TASKD_REDIS_PREFIX="+b.env.Prefix)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "php producer.php %v: %s", args, out)
		m := regexp.MustCompile(`^inserted task (\d+)\n$`).FindStringSubmatch(string(out))
		require.NotNil(t, m, "producer output: %q", out)
		id, err := strconv.ParseInt(m[1], 10, 64)
		require.NoError(t, err)
		return id
	}

	execID := produce("php_exec", `{"to":"a@example.com","name":"Zoë"}`)
	httpID := produce("php_http", `{"report":"daily"}`)
	failID := produce("php_exec", `{"fail":"no mailbox"}`, "0", "1") // max_retry 1: two attempts

	type run struct {
		attempt int
		outcome string
		result  string
		node    string
	}
	runs := func(id int64) []run {
		rows, err := b.env.Store.DB().Query(
			"SELECT attempt, outcome, COALESCE(result, ''), node FROM task_run WHERE task_id = ? ORDER BY attempt", id)
		require.NoError(t, err)
		defer rows.Close()
		var out []run
		for rows.Next() {
			var r run
			require.NoError(t, rows.Scan(&r.attempt, &r.outcome, &r.result, &r.node))
			out = append(out, r)
		}
		require.NoError(t, rows.Err())
		return out
	}
	b.waitCount(t, 2, 30*time.Second, "SELECT COUNT(*) FROM task_center WHERE id IN (?, ?) AND status = 3", execID, httpID)
	b.waitCount(t, 1, 30*time.Second, "SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 5", failID)

	r := runs(execID)
	require.Len(t, r, 1)
	require.Equal(t, run{1, "succeeded",
		fmt.Sprintf("handled php_exec task %d (attempt 1, key task-%d): {\"to\":\"a@example.com\",\"name\":\"Zoë\"}\n", execID, execID),
		"php-node"}, r[0])
	var last string
	require.NoError(t, b.env.Store.DB().QueryRow("SELECT last_result FROM task_center WHERE id = ?", execID).Scan(&last))
	require.Equal(t, r[0].result, last)

	r = runs(httpID)
	require.Len(t, r, 1)
	require.Equal(t, "succeeded", r[0].outcome)
	require.Equal(t, fmt.Sprintf("report for task %d (attempt 1): {\"report\":\"daily\"}\n", httpID), r[0].result)

	r = runs(failID)
	require.Len(t, r, 2, "max_retry 1: a first attempt and one retry")
	require.Equal(t, "failed", r[0].outcome)
	require.Equal(t, "dead", r[1].outcome)
	require.Contains(t, r[1].result, fmt.Sprintf("refusing task %d: no mailbox", failID))
	show := b.taskd(t, "show", strconv.FormatInt(failID, 10))
	require.Contains(t, show, "exit status 1: refusing task", show)
}

// A TaskProducer given Laravel's Redis client, whose own key prefix
// (laravel_database_) phpredis puts before channels too, still wakes the
// schedulers on the channel they listen on, and leaves the client's
// prefix as it was. The wakeup went to laravel_database_task:wake.
func TestPHPWakeThroughAPrefixedClient(t *testing.T) {
	t.Parallel()
	needTool(t, "php")
	if out, err := exec.Command("php", "-r", `exit(extension_loaded("redis") ? 0 : 1);`).CombinedOutput(); err != nil {
		t.Skipf("php has no redis extension: %s", out)
	}
	b := setup(t, "")
	dsn, err := mysql.ParseDSN(b.env.DSN)
	require.NoError(t, err)
	host, dbPort, err := net.SplitHostPort(dsn.Addr)
	require.NoError(t, err)
	redisHost, redisPort, err := net.SplitHostPort(b.env.RedisAddr)
	require.NoError(t, err)
	ctx := context.Background()
	sub := b.env.Broker.Client().Subscribe(ctx, b.env.Prefix+"wake")
	defer sub.Close()
	_, err = sub.Receive(ctx) // subscribed
	require.NoError(t, err)

	lib, err := filepath.Abs("../clients/php/src/autoload.php")
	require.NoError(t, err)
	script := fmt.Sprintf(`require %q;
$pdo = new PDO(sprintf("mysql:host=%%s;port=%%s;dbname=%%s;charset=utf8mb4", %q, %q, %q), %q, %q);
$r = new Redis(); $r->connect(%q, %s);
$r->setOption(Redis::OPT_PREFIX, "laravel_database_");
(new Taskd\TaskProducer($pdo, $r, %q))->submit("hello", ["n" => 1]);
echo $r->getOption(Redis::OPT_PREFIX);`, lib, host, dbPort, dsn.DBName, dsn.User, dsn.Passwd, redisHost, redisPort, b.env.Prefix)
	out, err := exec.Command("php", "-r", script).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "laravel_database_", string(out), "the client's own prefix is left as it was")
	select {
	case m := <-sub.Channel():
		require.Equal(t, b.env.Prefix+"wake", m.Channel)
	case <-time.After(5 * time.Second):
		t.Fatal("no wakeup on " + b.env.Prefix + "wake")
	}
}
