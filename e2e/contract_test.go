package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/testenv"
)

// exitResult is what a finished taskd process left.
type exitResult struct {
	code           int
	stdout, stderr string
}

// runTaskd runs the binary with extra environment variables, stdin from
// /dev/null, and waits at most within.
func runTaskd(t *testing.T, within time.Duration, env []string, args ...string) exitResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, taskdBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "taskd %v did not exit within %s; stderr: %s", args, within, tail(stderr.String(), 2000))
	r := exitResult{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return r
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "taskd.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

// redisKeys counts the keys under the test's prefix.
func redisKeys(t *testing.T, env *testenv.Env) int {
	t.Helper()
	keys, err := env.Broker.Client().Keys(context.Background(), env.Prefix+"*").Result()
	require.NoError(t, err)
	return len(keys)
}

// FAULTS.md row 28: a misspelt key in the file or a TASKD_* variable is
// exit 2 naming the key and the nearest known one, and nothing is read or
// written anywhere: not the database the misspelt key meant, not the one
// the defaults or the environment point at.
func TestFaultConfigTypo(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	redis := fmt.Sprintf("redis: { addr: %q, master_name: %q, prefix: %q }\n", env.RedisAddr, testenv.RedisMaster(), env.Prefix)
	handlers := "handlers:\n  hello: { exec: [\"true\"] }\n"
	before := redisKeys(t, env)

	// The environment points at the test's database: without the check, the
	// misspelt file key is ignored and the task lands there.
	typo := writeFile(t, fmt.Sprintf("mysql: { dns: %q }\n", env.DSN)+redis+handlers)
	dsnEnv := []string{"TASKD_MYSQL_DSN=" + env.DSN}
	for _, args := range [][]string{{"submit", "hello"}, {"list"}, {"run", "--node-id", "typo"}} {
		r := runTaskd(t, 30*time.Second, dsnEnv, append([]string{"--config", typo}, args...)...)
		require.Equal(t, configExit(args), r.code, "taskd %v: %s", args, r.stderr)
		require.Equal(t, fmt.Sprintf("taskd: unknown key \"mysql.dns\" in %s (did you mean \"mysql.dsn\"?)\n", typo), r.stderr)
		require.Empty(t, r.stdout)
	}
	good := writeFile(t, fmt.Sprintf("mysql: { dsn: %q }\n", env.DSN)+redis+handlers)
	for _, v := range []string{"TASKD_WORKR_CONCURRENCY=4", "TASKD_MYSQL_DNS=" + env.DSN} {
		for _, args := range [][]string{{"submit", "hello"}, {"run", "--node-id", "typo"}} {
			r := runTaskd(t, 30*time.Second, []string{v}, append([]string{"--config", good}, args...)...)
			require.Equal(t, configExit(args), r.code, "%s taskd %v: %s", v, args, r.stderr)
			name, _, _ := strings.Cut(v, "=")
			require.Contains(t, r.stderr, "unknown variable "+name+" in the environment (did you mean")
		}
	}
	require.Zero(t, env.Count(t, `SELECT COUNT(*) FROM task_center`), "nothing written")
	require.Zero(t, env.Count(t, `SELECT COUNT(*) FROM task_audit`))
	require.Equal(t, before, redisKeys(t, env), "no heartbeat, no wakeup: nothing written to Redis")
}

// cannotHealConfig is a configuration of env with mysql.dsn and the Redis
// section replaced.
func cannotHealConfig(t *testing.T, env *testenv.Env, dsn, redis string) string {
	t.Helper()
	if redis == "" {
		redis = fmt.Sprintf("redis: { addr: %q, master_name: %q, prefix: %q }\n", env.RedisAddr, testenv.RedisMaster(), env.Prefix)
	}
	return writeFile(t, fmt.Sprintf("mysql: { dsn: %q }\n", dsn)+redis+"log: { format: json }\nhandlers:\n  hello: { exec: [\"true\"] }\n")
}

func withDSN(t *testing.T, dsn string, change func(*mysql.Config)) string {
	t.Helper()
	c, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	change(c)
	return c.FormatDSN()
}

// FAULTS.md row 29: an error that waiting cannot heal stops `taskd run`
// with EX_CONFIG (78) and one last line saying what to fix, at once,
// without a retry loop.
func TestFaultCannotHeal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, env *testenv.Env) string // the configuration file
		want  string
	}{
		{"wrong password", func(t *testing.T, env *testenv.Env) string {
			return cannotHealConfig(t, env, withDSN(t, env.DSN, func(c *mysql.Config) { c.Passwd = "wrong-password" }), "")
		}, "Access denied for user"},
		{"unknown database", func(t *testing.T, env *testenv.Env) string {
			return cannotHealConfig(t, env, withDSN(t, env.DSN, func(c *mysql.Config) { c.DBName = env.Database + "_nosuch" }), "")
		}, "unknown database \"taskd_test_"},
		{"no database in the DSN", func(t *testing.T, env *testenv.Env) string {
			return cannotHealConfig(t, env, withDSN(t, env.DSN, func(c *mysql.Config) { c.DBName = "" }), "")
		}, ") names no database"},
		{"schema missing", func(t *testing.T, env *testenv.Env) string {
			env.Exec(t, `DROP TABLE taskd_schema`)
			return cannotHealConfig(t, env, env.DSN, "")
		}, "the task center has no schema: run `taskd migrate`"},
		{"schema older", func(t *testing.T, env *testenv.Env) string {
			env.UnapplyLatest(t)
			return cannotHealConfig(t, env, env.DSN, "")
		}, "older than this taskd's"},
		{"schema newer", func(t *testing.T, env *testenv.Env) string {
			env.Exec(t, `INSERT INTO taskd_schema (version, name, contract) VALUES (999, 'from a newer taskd', 1)`)
			return cannotHealConfig(t, env, env.DSN, "")
		}, "contract step 999 (from a newer taskd) of a newer taskd"},
		{"an account that may only read", func(t *testing.T, env *testenv.Env) string {
			return cannotHealConfig(t, env, env.Account(t, "SELECT"), "")
		}, "command denied to user"},
		{"redis refuses the password", func(t *testing.T, env *testenv.Env) string {
			addr := privateRedisWithPassword(t, "s3cret")
			return cannotHealConfig(t, env, env.DSN, fmt.Sprintf("redis: { addr: %q, password: wrong, prefix: %q }\n", addr, env.Prefix))
		}, "refused the password"},
		{"redis wants a password", func(t *testing.T, env *testenv.Env) string {
			addr := privateRedisWithPassword(t, "s3cret")
			return cannotHealConfig(t, env, env.DSN, fmt.Sprintf("redis: { addr: %q, prefix: %q }\n", addr, env.Prefix))
		}, "requires a password"},
		{"redis evicts keys", func(t *testing.T, env *testenv.Env) string {
			addr := testenv.PrivateRedis(t, 0, "--maxmemory-policy", "allkeys-lru")
			return cannotHealConfig(t, env, env.DSN, fmt.Sprintf("redis: { addr: %q, prefix: %q }\n", addr, env.Prefix))
		}, `maxmemory-policy is "allkeys-lru": set it to noeviction`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := testenv.New(t)
			cfg := tc.setup(t, env)
			r := runTaskd(t, 60*time.Second, nil, "--config", cfg, "run", "--node-id", "heal")
			require.Equal(t, 78, r.code, "stderr: %s", r.stderr)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			last := lines[len(lines)-1]
			require.True(t, strings.HasPrefix(last, "taskd: "), last)
			require.Contains(t, last, tc.want)
			require.NotContains(t, r.stderr, "retrying", "no retry on what cannot heal")
			require.NotContains(t, r.stderr, "s3cret")
			require.NotContains(t, r.stderr, "wrong-password")
		})
	}
}

func privateRedisWithPassword(t *testing.T, password string) string {
	t.Helper()
	addr := testenv.PrivateRedis(t, 0)
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rdb.Close()
	require.NoError(t, rdb.ConfigSet(context.Background(), "requirepass", password).Err())
	return addr
}

// A Redis that is not up yet is waited for, with a growing backoff logged
// as durations, and SIGTERM still stops the waiting daemon at once.
func TestTransientErrorsRetry(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	closed := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cfg := cannotHealConfig(t, env, env.DSN, fmt.Sprintf("redis: { addr: %q, prefix: %q }\n", closed, env.Prefix))
	logPath := filepath.Join(t.TempDir(), "taskd.log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	defer logf.Close()
	cmd := exec.Command(taskdBin, "--config", cfg, "run", "--node-id", "transient")
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), `"in":"1s"`)
	}, 30*time.Second, 100*time.Millisecond, "the second retry waits twice as long")
	b, _ := os.ReadFile(logPath)
	require.Contains(t, string(b), `"msg":"cannot connect; retrying","node":"transient","to":"redis"`)
	require.Contains(t, string(b), `"in":"500ms"`)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-done:
		require.NoError(t, err, "a waiting daemon stops cleanly on SIGTERM")
	case <-time.After(15 * time.Second):
		t.Fatal("the waiting daemon did not stop on SIGTERM")
	}
}

// On a real terminal a state change asks, and does what the answer says.
func TestConfirmOnATerminal(t *testing.T) {
	t.Parallel()
	b := setup(t, "handlers:\n  hello: { exec: [\"true\"] }\n")
	id := b.created(t, "submit", "hello", "--delay", "1h").ID
	ids := fmt.Sprint(id)

	s := newScreen(t, taskdBin, "--config", b.config, "kill", ids)
	s.waitFor("kill 1 task (" + ids + ")? [y/N]")
	s.keys("n", "Enter")
	s.waitFor("taskd: cancelled: nothing changed")
	require.Equal(t, "1", s.exitCode(t))
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 0`, id))

	s = newScreen(t, taskdBin, "--config", b.config, "kill", ids)
	s.waitFor("kill 1 task (" + ids + ")? [y/N]")
	s.keys("y", "Enter")
	s.waitFor("kill: 1 of 1 task killed (" + ids + ")")
	require.Equal(t, "0", s.exitCode(t))
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 6`, id))
}

// A filter's tasks are counted when the question is asked, and the action
// takes those of them that still match when it is answered: a task
// another operator retried meanwhile is left alone and said so, not
// deleted as the dead task it no longer is.
func TestConfirmedFilterTakesWhatStillMatches(t *testing.T) {
	t.Parallel()
	b := setup(t, "handlers:\n  hello: { exec: [\"true\"] }\n")
	var ids []int64
	for range 3 {
		ids = append(ids, b.created(t, "submit", "hello", "--delay", "1h").ID)
	}
	b.env.Exec(t, `UPDATE task_center SET status = 5 WHERE id IN (?, ?, ?)`, ids[0], ids[1], ids[2])

	s := newScreen(t, taskdBin, "--config", b.config, "delete", "--status", "dead", "--code", "hello")
	s.waitFor("delete 3 tasks (")
	s.waitFor("? [y/N]")
	b.env.Exec(t, `UPDATE task_center SET status = 0 WHERE id = ?`, ids[1]) // retried by someone else meanwhile
	s.keys("y", "Enter")
	s.waitFor(fmt.Sprintf("delete: 2 of 3 tasks deleted (%d, %d); %d not changed, pending: no longer matches the filter", ids[0], ids[2], ids[1]))
	require.Equal(t, "0", s.exitCode(t))
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 0`, ids[1]), "the retried task is kept")
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id IN (?, ?)`, ids[0], ids[2]))
}

// exitCode waits for the program of the screen to end and returns its
// exit status.
func (s *screen) exitCode(t *testing.T) string {
	t.Helper()
	// Polls the tmux pane of a real process.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if status, err := os.ReadFile(s.exitFile); err == nil && len(status) > 0 {
			return strings.TrimSpace(string(status))
		}
		require.True(t, time.Now().Before(deadline), "the program did not exit:\n%s", s.capture())
	}
}

// tasktop on an unmigrated task center says to migrate, like taskd.
func TestTasktopSaysMigrate(t *testing.T) {
	t.Parallel()
	bin := buildTasktop(t)
	b := setup(t, "")
	b.env.Exec(t, `DROP TABLE taskd_schema`)
	// In a terminal: without one, that is what tasktop says first.
	s := newScreen(t, "sh", "-c", `"$0" --config "$1"; echo "exit $?"; sleep 60`, bin, b.config)
	s.waitFor("tasktop: the task center has no schema: run `taskd migrate`\nexit 1\n")
}

// tasktop where there is no terminal (ssh HOST tasktop without -t, cron)
// says so in words, exit 1: bubbletea's own error named /dev/tty and an
// errno.
func TestTasktopWithoutTerminal(t *testing.T) {
	t.Parallel()
	bin := buildTasktop(t)
	b := setup(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "--config", b.config)
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no controlling terminal
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 1, ee.ExitCode())
	require.Equal(t, "tasktop: no terminal to draw on: run tasktop in one (over SSH: ssh -t HOST tasktop); scripts read taskd stats and taskd list\n", stderr.String())
}

// tasktop started while Redis is down shows what the task center holds
// under an error bar naming Redis, as it does when Redis fails later, and
// clears the bar once Redis answers: before, it exited at once, when an
// operator needs it most.
func TestTasktopStartsWithRedisDown(t *testing.T) {
	t.Parallel()
	bin := buildTasktop(t)
	b := setup(t, "handlers:\n  hello:\n    exec: [\"true\"]\n")
	out := b.taskd(t, "submit", "hello", "--delay", "1h")
	id := strings.TrimSpace(strings.TrimPrefix(out, "submitted task "))
	port := testenv.FreePort(t)
	cfg, err := os.ReadFile(b.config)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(b.config, []byte(strings.Replace(string(cfg),
		"addr: \""+b.env.RedisAddr+"\"", "addr: \"127.0.0.1:"+strconv.Itoa(port)+"\"", 1)), 0o644))

	s := newScreen(t, bin, "--config", b.config, "--refresh", "500ms")
	s.waitFor("Redis:", "connection refused")
	s.keys("3")
	s.waitFor("Redis:", " "+id+" pending ")

	testenv.PrivateRedis(t, port)
	require.Eventually(t, func() bool {
		screen := s.capture()
		return !strings.Contains(screen, "Redis:") && strings.Contains(screen, " "+id+" pending ")
	}, 15*time.Second, 100*time.Millisecond, "the error bar clears once Redis answers:\n%s", s.capture())
}

// configExit is the exit code of a command refusing its configuration: 2,
// and 78 for the daemon (its units restart on 2, which a Go crash exits with).
func configExit(args []string) int {
	if args[0] == "run" {
		return 78
	}
	return 2
}
