package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/cli"
	"github.com/taskd/taskd/pkg/lock"
	"github.com/taskd/taskd/pkg/testenv"
)

// lockBundle is a test's environment for `taskd lock`.
type lockBundle struct {
	env     *testenv.Env
	cfgPath string
	dir     string
}

func lockSetup(t *testing.T) *lockBundle {
	t.Helper()
	env := testenv.New(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "taskd.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(env.ConfigYAML("")), 0o600))
	return &lockBundle{env: env, cfgPath: cfgPath, dir: dir}
}

type lockResult struct {
	code           int
	stdout, stderr string
}

// lock runs `taskd --config F lock ARGS...` in-process.
func (b *lockBundle) lock(ctx context.Context, stdin string, args ...string) lockResult {
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	code := cli.Execute(ctx, append([]string{"--config", b.cfgPath, "lock"}, args...), &stdout, &stderr, strings.NewReader(stdin))
	return lockResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// owner is the owner id in the Redis lock of name (or the value of a
// string key set by a test), or "".
func (b *lockBundle) owner(t *testing.T, name string) string {
	t.Helper()
	ctx, rdb, key := context.Background(), b.env.Broker.Client(), lock.NewRedis(nil, b.env.Prefix).Key(name)
	typ, err := rdb.Type(ctx, key).Result()
	require.NoError(t, err)
	var v string
	switch typ {
	case "none":
		return ""
	case "string":
		v, err = rdb.Get(ctx, key).Result()
	default:
		v, err = rdb.HGet(ctx, key, "owner").Result()
	}
	if errors.Is(err, redis.Nil) {
		return ""
	}
	require.NoError(t, err)
	return v
}

// hold takes lock name for the test, as another host would.
func (b *lockBundle) hold(t *testing.T, name string) *lock.Lease {
	t.Helper()
	lease, err := lock.NewRedis(b.env.Broker.Client(), b.env.Prefix).Acquire(context.Background(), name, time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { lease.Release(context.Background()) })
	return lease
}

func requireLockOneLine(t *testing.T, r lockResult, code int, contains string) {
	t.Helper()
	require.Equal(t, code, r.code, "stderr %q", r.stderr)
	require.True(t, strings.HasPrefix(r.stderr, "taskd: "), "stderr %q", r.stderr)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line on stderr: %q", r.stderr)
	require.Contains(t, r.stderr, contains)
}

// waitForFile waits until path exists.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	require.Eventually(t, func() bool { _, err := os.Stat(path); return err == nil }, 10*time.Second, 10*time.Millisecond)
}

// TestLockProcesses runs the real binary on several "hosts" at once.
func TestLockProcesses(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "taskd")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/taskd/taskd/cmd/taskd").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	// A holder killed with kill -9 takes its command with it: once its lock
	// expires another host may start, and the two must not overlap.
	t.Run("holder killed", func(t *testing.T) {
		t.Parallel()
		b := lockSetup(t)
		pidFile := filepath.Join(b.dir, "pid")
		cmd := exec.Command(bin, "--config", b.cfgPath, "lock", "job", "--ttl", "5s", "--",
			"sh", "-c", "echo $$ > "+pidFile+"; exec sleep 60")
		testenv.DieWithTest(cmd)
		require.NoError(t, cmd.Start())
		waitForFile(t, pidFile)
		var pid int
		require.Eventually(t, func() bool {
			body, _ := os.ReadFile(pidFile)
			pid, _ = strconv.Atoi(strings.TrimSpace(string(body)))
			return pid > 0
		}, 10*time.Second, 10*time.Millisecond)
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // should it outlive the test
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
		require.Eventually(t, func() bool { return !running(pid) }, 5*time.Second, 20*time.Millisecond,
			"the command died with its holder")
	})
	for _, backend := range []string{"redis", "mysql"} {
		t.Run("frozen holder, "+backend, func(t *testing.T) {
			t.Parallel()
			frozenHolder(t, bin, backend)
		})
		t.Run("three hosts, "+backend, func(t *testing.T) {
			t.Parallel()
			b := lockSetup(t)
			ran := filepath.Join(b.dir, "ran")
			var wg sync.WaitGroup
			results := make([]lockResult, 3)
			for i := range results {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var stdout, stderr bytes.Buffer
					cmd := exec.Command(bin, "--config", b.cfgPath, "lock", "job", "--ttl", "5s", "--backend", backend, "--verbose",
						"--", "sh", "-c", "echo $$ >> "+ran+"; sleep 1")
					cmd.Stdout, cmd.Stderr = &stdout, &stderr
					err := cmd.Run()
					code := 0
					var ee *exec.ExitError
					if errors.As(err, &ee) {
						code = ee.ExitCode()
					} else if err != nil {
						code = -1
					}
					results[i] = lockResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
				}()
			}
			wg.Wait()

			body, err := os.ReadFile(ran)
			require.NoError(t, err)
			require.Equal(t, 1, strings.Count(string(body), "\n"), "exactly one host ran the command: %q", body)
			skipped := 0
			for _, r := range results {
				require.Equal(t, 0, r.code, "stderr %q", r.stderr)
				if r.stderr != "" {
					require.Equal(t, "taskd: lock job is held elsewhere; not running\n", r.stderr)
					skipped++
				}
			}
			require.Equal(t, 2, skipped)
		})
	}
}

func TestLockExitCodes(t *testing.T) {
	t.Parallel()
	b := lockSetup(t)
	ctx := context.Background()

	r := b.lock(ctx, "", "job", "--", "sh", "-c", "exit 7")
	require.Equal(t, 7, r.code, "stderr %q", r.stderr)
	require.Empty(t, r.stderr)
	require.Equal(t, "", b.owner(t, "job"), "released after the command")

	r = b.lock(ctx, "", "job", "--", "sh", "-c", "kill -KILL $$")
	require.Equal(t, 128+9, r.code, "stderr %q", r.stderr)

	// Streams pass through.
	r = b.lock(ctx, "from stdin", "job", "--ttl", "2s", "--", "sh", "-c", "echo out; echo err >&2; cat")
	require.Equal(t, 0, r.code, "stderr %q", r.stderr)
	require.Equal(t, "out\nfrom stdin", r.stdout)
	require.Equal(t, "err\n", r.stderr)

	// No `--` is needed when CMD has no flags.
	r = b.lock(ctx, "", "job", "true")
	require.Equal(t, 0, r.code, "stderr %q", r.stderr)

	r = b.lock(ctx, "", "job", "--", "/nonexistent/command")
	requireLockOneLine(t, r, 127, "/nonexistent/command")
	require.Equal(t, "", b.owner(t, "job"))

	// A crontab line that starts with a builtin says how to run it.
	r = b.lock(ctx, "", "report_daily", "--", "cd", "/srv/app", "&&", "php", "artisan", "report:daily")
	requireLockOneLine(t, r, 127, "cd is a shell builtin, not a program: run the line in a shell, taskd lock report_daily -- sh -c 'cd ...'")
}

func TestLockHeldElsewhere(t *testing.T) {
	t.Parallel()
	b := lockSetup(t)
	ctx := context.Background()
	held := b.hold(t, "job")
	ran := filepath.Join(b.dir, "ran")

	// Off a terminal (cron), a skip prints nothing: cron mails any output.
	r := b.lock(ctx, "", "job", "--", "touch", ran)
	require.Equal(t, 0, r.code)
	require.Empty(t, r.stderr)
	require.Empty(t, r.stdout)

	r = b.lock(ctx, "", "job", "--skip-exit", "75", "--wait", "200ms", "--verbose", "--", "touch", ran)
	require.Equal(t, 75, r.code)
	require.Equal(t, "taskd: lock job is held elsewhere; not running\n", r.stderr)
	require.NoFileExists(t, ran)
	require.Equal(t, held.Owner(), b.owner(t, "job"), "the holder's lock is untouched")

	// --wait outlasts a holder that finishes.
	time.AfterFunc(300*time.Millisecond, func() { held.Release(ctx) })
	r = b.lock(ctx, "", "job", "--wait", "10s", "--", "touch", ran)
	require.Equal(t, 0, r.code, "stderr %q", r.stderr)
	require.FileExists(t, ran)
}

// With no configuration file, variable or flag naming the servers, the
// lock is taken in the built-in default Redis: on hosts whose crontab runs
// from $HOME without /etc/taskd/taskd.yaml, each server took it in its own
// and every one ran the job, silently. It still runs, and says so.
func TestLockWarnsWithoutConfiguration(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/etc/taskd/taskd.yaml"); err == nil {
		t.Skip("/etc/taskd/taskd.yaml exists: a configuration file is found")
	}
	if testenv.RedisAddr() != "127.0.0.1:6379" {
		t.Skip("the tests' Redis is not the built-in default")
	}
	b := lockSetup(t)
	run := func(args ...string) lockResult {
		var stdout, stderr bytes.Buffer
		args = append([]string{"--redis-prefix", b.env.Prefix, "lock"}, args...)
		code := cli.Execute(context.Background(), args, &stdout, &stderr, strings.NewReader(""))
		return lockResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
	}
	r := run("nocfg", "--", "echo", "ran")
	require.Zero(t, r.code, r.stderr)
	require.Equal(t, "ran\n", r.stdout)
	require.Equal(t, "taskd: warning: no configuration file, so lock nocfg is taken in the default Redis at 127.0.0.1:6379, "+
		"which keeps other servers out only if they use it too; pass --config, or install /etc/taskd/taskd.yaml, "+
		"or set TASKD_CONFIG (cron runs jobs from $HOME)\n", r.stderr)

	r = run("nocfg", "--redis-addr", "127.0.0.1:6379", "--", "echo", "ran")
	require.Zero(t, r.code, r.stderr)
	require.Empty(t, r.stderr, "the servers named by a flag")
	require.Empty(t, b.lock(context.Background(), "", "nocfg", "--", "true").stderr, "named by --config")
}

// A command that runs past --timeout is stopped, exit 124 as timeout(1),
// and the lock is released at once: a hung job held it for good, and
// every later run on every host skipped quietly.
func TestLockTimeout(t *testing.T) {
	t.Parallel()
	b := lockSetup(t)
	r := b.lock(context.Background(), "", "hung", "--timeout", "300ms", "--", "sleep", "30")
	requireLockOneLine(t, r, 124, "taskd: sleep ran past --timeout 300ms: stopped (signal: terminated); lock hung released")
	require.Empty(t, b.owner(t, "hung"), "released")
	r = b.lock(context.Background(), "", "quick", "--timeout", "1m", "--", "true")
	require.Zero(t, r.code, r.stderr)
}

func TestLockUsage(t *testing.T) {
	t.Parallel()
	b := lockSetup(t)
	ctx := context.Background()
	for _, tc := range []struct {
		args     []string
		contains string
	}{
		{nil, "lock: missing lock NAME; usage: taskd lock NAME [flags] -- CMD [ARGS...]"},
		{[]string{"--", "true"}, "missing lock NAME"},
		{[]string{"job"}, "missing CMD"},
		{[]string{"job", "--"}, "missing CMD"},
		{[]string{"job", "extra", "--", "true"}, "one lock NAME"},
		{[]string{"job", "--ttl", "10ms", "--", "true"}, "shorter than the minimum"},
		{[]string{"job", "--ttl", "100000h", "--", "true"}, "longer than the maximum of 24h0m0s"},
		{[]string{"job", "--ttl", "soon", "--", "true"}, `bad value "soon" for --ttl: want a duration`},
		{[]string{"job", "--wait", "-1s", "--", "true"}, "--wait"},
		{[]string{"job", "--timeout", "-1s", "--", "true"}, "--timeout must not be negative"},
		{[]string{"job", "--backend", "etcd", "--", "true"}, "--backend"},
		{[]string{"job", "--skip-exit", "256", "--", "true"}, "--skip-exit"},
		{[]string{"bad name", "--", "true"}, "lock name"},
		{[]string{"alerts", "--", "true"}, `lock name "alerts" is taken by taskd run itself`},
		{[]string{"retention", "--", "true"}, `lock name "retention" is taken by taskd run itself`},
		// The command's own flags, without the -- before it.
		{[]string{"job", "sh", "-c", "true"}, "unknown shorthand flag: 'c' in -c; put -- before the command: taskd lock NAME [flags] -- CMD"},
	} {
		r := b.lock(ctx, "", tc.args...)
		requireLockOneLine(t, r, cli.ExitUsage, tc.contains)
		require.Empty(t, r.stdout)
	}
}

func TestLockLostStopsTheCommand(t *testing.T) {
	t.Parallel()
	b := lockSetup(t)
	started := filepath.Join(b.dir, "started")
	done := make(chan lockResult, 1)
	begin := time.Now()
	go func() {
		done <- b.lock(context.Background(), "", "job", "--ttl", "1s", "--", "sh", "-c", "touch "+started+"; sleep 30")
	}()
	waitForFile(t, started)
	// Another owner takes the lock (as if this host had been partitioned
	// away for longer than the TTL): the renewal is refused.
	require.NoError(t, b.env.Broker.Client().Set(context.Background(), lock.NewRedis(nil, b.env.Prefix).Key("job"), "thief", time.Minute).Err())

	r := <-done
	requireLockOneLine(t, r, cli.ExitFailure, "lock lost")
	require.Contains(t, r.stderr, "stopped sh")
	require.Less(t, time.Since(begin), 10*time.Second, "the command was not stopped")
	require.Equal(t, "thief", b.owner(t, "job"), "the new owner's lock is untouched")
}

// A command that ignores SIGTERM is killed once the lock's TTL would have
// run out, not a whole 5 s grace later: with a TTL of 2 s another host
// may hold the lock 200 ms after this one stopped trusting it.
func TestLockLostKillsWithinTheTTL(t *testing.T) {
	t.Parallel()
	b := lockSetup(t)
	started := filepath.Join(b.dir, "started")
	done := make(chan lockResult, 1)
	go func() {
		done <- b.lock(context.Background(), "", "job", "--ttl", "2s", "--", "sh", "-c", "trap '' TERM; touch "+started+"; sleep 30")
	}()
	waitForFile(t, started)
	require.NoError(t, b.env.Broker.Client().Set(context.Background(), lock.NewRedis(nil, b.env.Prefix).Key("job"), "thief", time.Minute).Err())
	stolen := time.Now()
	r := <-done
	requireLockOneLine(t, r, cli.ExitFailure, "lock lost")
	require.Contains(t, r.stderr, "signal: killed")
	// A renewal every third of the TTL finds the loss, then 100 ms of
	// SIGTERM: well under the 5 s a grace of its own took.
	require.Less(t, time.Since(stolen), 4*time.Second, "the command ran on past the lock")
}

func TestLockPassesSIGTERMOn(t *testing.T) {
	t.Parallel()
	b := lockSetup(t)
	started := filepath.Join(b.dir, "started")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan lockResult, 1)
	go func() {
		done <- b.lock(ctx, "", "job", "--", "sh", "-c", "touch "+started+"; sleep 30")
	}()
	waitForFile(t, started)
	cancel() // what SIGTERM to taskd does
	r := <-done
	require.Equal(t, 128+15, r.code, "stderr %q", r.stderr)
	require.Equal(t, "", b.owner(t, "job"), "released although taskd was stopped")
}

// frozenHolder: a `taskd lock` frozen (SIGSTOP) past its TTL cannot stop
// its command, and the next host starts meanwhile; the next host's token
// is greater, and the frozen wrapper stops its command as soon as it runs
// again.
func frozenHolder(t *testing.T, bin, backend string) {
	b := lockSetup(t)
	first, second := filepath.Join(b.dir, "first"), filepath.Join(b.dir, "second")
	var stderr bytes.Buffer
	w1 := exec.Command(bin, "--config", b.cfgPath, "lock", "job", "--ttl", "3s", "--backend", backend,
		"--", "sh", "-c", "echo $TASKD_LOCK_TOKEN > "+first+".tmp; mv "+first+".tmp "+first+"; exec sleep 60")
	w1.Stderr = &stderr
	require.NoError(t, w1.Start())
	exited := make(chan error, 1)
	go func() { exited <- w1.Wait() }()
	t.Cleanup(func() {
		w1.Process.Signal(syscall.SIGCONT)
		w1.Process.Kill()
	})
	waitForFile(t, first)
	require.NoError(t, w1.Process.Signal(syscall.SIGSTOP))

	// The next host waits for the frozen holder's lock to expire.
	out, err := exec.Command(bin, "--config", b.cfgPath, "lock", "job", "--ttl", "3s", "--wait", "30s", "--backend", backend,
		"--", "sh", "-c", "echo $TASKD_LOCK_TOKEN > "+second).CombinedOutput()
	require.NoError(t, err, "%s", out)
	tokens := make([]uint64, 2)
	for i, f := range []string{first, second} {
		body, err := os.ReadFile(f)
		require.NoError(t, err)
		tokens[i], err = strconv.ParseUint(strings.TrimSpace(string(body)), 10, 64)
		require.NoError(t, err, "TASKD_LOCK_TOKEN %q", body)
	}
	require.Greater(t, tokens[1], tokens[0], "the next holder's token is greater than the frozen one's")

	resumed := time.Now()
	require.NoError(t, w1.Process.Signal(syscall.SIGCONT))
	select {
	case err := <-exited: // it exits once its command is stopped
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		require.Equal(t, cli.ExitFailure, ee.ExitCode())
		require.Contains(t, stderr.String(), "lock lost")
		require.Contains(t, stderr.String(), "stopped sh")
		t.Logf("command stopped %s after the wrapper resumed", time.Since(resumed))
	case <-time.After(3 * time.Second):
		t.Fatal("the resumed wrapper did not stop its command within a TTL")
	}
}

// TestLockToken: the command gets the lock's name and a token that grows
// from one holder to the next, on both backends.
func TestLockToken(t *testing.T) {
	t.Parallel()
	b := lockSetup(t)
	ctx := context.Background()
	for _, backend := range []string{"redis", "mysql"} {
		var last uint64
		for range 3 {
			r := b.lock(ctx, "", "job", "--backend", backend, "--", "sh", "-c", `echo "$TASKD_LOCK_NAME $TASKD_LOCK_TOKEN"`)
			require.Equal(t, 0, r.code, "stderr %q", r.stderr)
			name, token, ok := strings.Cut(strings.TrimSpace(r.stdout), " ")
			require.True(t, ok, "stdout %q", r.stdout)
			require.Equal(t, "job", name)
			n, err := strconv.ParseUint(token, 10, 64)
			require.NoError(t, err, "token %q", token)
			require.Greater(t, n, last, "%s: tokens grow", backend)
			last = n
		}
	}
}

// TestLocksCommand: `taskd locks` lists the held locks of both backends,
// in text and JSON.
func TestLocksCommand(t *testing.T) {
	t.Parallel()
	b := lockSetup(t)
	ctx := context.Background()
	run := func(args ...string) lockResult {
		var stdout, stderr bytes.Buffer
		code := cli.Execute(ctx, append([]string{"--config", b.cfgPath}, args...), &stdout, &stderr, strings.NewReader(""))
		return lockResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
	}
	r := run("locks")
	require.Equal(t, 0, r.code, "stderr %q", r.stderr)
	require.Equal(t, "NAME  BACKEND  HOST  PID  SINCE  TTL LEFT  TOKEN\n", r.stdout, "nothing held, no task_lock table yet")

	rl := b.hold(t, "report")
	ml, err := lock.NewMySQL(b.env.Store.DB()).Acquire(ctx, "backup", time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { ml.Release(ctx) })

	r = run("locks")
	require.Equal(t, 0, r.code, "stderr %q", r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3, "%s", r.stdout)
	host, _ := os.Hostname()
	for i, want := range []struct {
		lease   *lock.Lease
		backend string
	}{{ml, "mysql"}, {rl, "redis"}} { // by name
		f := strings.Fields(lines[i+1])
		require.Equal(t, []string{want.lease.Name(), want.backend, host, strconv.Itoa(os.Getpid())}, f[:4], lines[i+1])
		require.Equal(t, strconv.FormatUint(want.lease.Token(), 10), f[len(f)-1])
	}

	// On a terminal of 60 columns the token goes first, and is named.
	var narrow, errOut bytes.Buffer
	a := &cli.App{Stdout: &narrow, Stderr: &errOut, Stdin: strings.NewReader(""), Width: 60}
	require.Equal(t, 0, a.Execute(ctx, []string{"--config", b.cfgPath, "locks"}), errOut.String())
	require.True(t, strings.HasPrefix(narrow.String(), "NAME  "), narrow.String())
	require.NotContains(t, strings.SplitN(narrow.String(), "\n", 2)[0], "TOKEN")
	require.Contains(t, narrow.String(), "\nhidden to fit 60 columns: TOKEN")

	r = run("locks", "--backend", "redis", "-o", "json")
	require.Equal(t, 0, r.code, "stderr %q", r.stderr)
	var held []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &held), r.stdout)
	require.Len(t, held, 1)
	require.Equal(t, "report", held[0]["name"])
	require.EqualValues(t, rl.Token(), held[0]["token"])
	require.InDelta(t, 60000, held[0]["ttl_left_ms"], 10000)

	r = run("locks", "--backend", "etcd")
	requireLockOneLine(t, r, cli.ExitUsage, "--backend")
	r = run("locks", "extra")
	require.Equal(t, cli.ExitUsage, r.code)

	// The task center down: Redis's locks are still listed, and it says
	// why MySQL's are not (exit 1).
	closed := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	r = run("locks", "--mysql-dsn", "root:@tcp("+closed+")/taskd")
	require.Equal(t, cli.ExitFailure, r.code, "stderr %q", r.stderr)
	require.Contains(t, r.stdout, "report  redis")
	require.NotContains(t, r.stdout, "backup")
	require.True(t, strings.HasPrefix(r.stderr, "taskd: warning: MySQL: "), r.stderr)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
	r = run("locks", "--mysql-dsn", "root:@tcp("+closed+")/taskd", "--backend", "mysql")
	requireLockOneLine(t, r, cli.ExitFailure, closed)
}

// running reports whether process pid runs: a zombie does not. (Another
// test of this package runs `taskd run` in-process, which makes the test
// binary a child subreaper: an orphan killed with its parent is then
// reparented here and stays a zombie until reaped.)
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil // no /proc: as best we can
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}
