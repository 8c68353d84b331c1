package cli_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/cli"
	"github.com/taskd/taskd/pkg/testenv"
)

// While `taskd run` waits for MySQL and Redis at its start, its metrics
// address already answers: /livez (it runs), /readyz 503 saying why, and
// taskd_monitor_up 0, so that a node that cannot start is seen as such
// rather than as a target that refuses connections.
func TestRunSeenWhileWaiting(t *testing.T) {
	t.Parallel()
	closed := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	path := writeConfig(t, "mysql: { dsn: \"root:@tcp("+closed+")/taskd\" }\nredis: { addr: \""+closed+"\" }\nmetrics: { addr: \""+addr+"\" }\n")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		var out, errOut bytes.Buffer
		done <- cli.Execute(ctx, []string{"--config", path, "run"}, &out, &errOut, strings.NewReader(""))
	}()
	get := func(p string) (int, string) {
		resp, err := http.Get("http://" + addr + p)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	require.Eventually(t, func() bool { code, _ := get("/livez"); return code == http.StatusOK }, 10*time.Second, 20*time.Millisecond)
	code, body := get("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "starting: waiting for MySQL and Redis")
	code, body = get("/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "\ntaskd_monitor_up 0\n")
	cancel()
	select {
	case rc := <-done:
		require.Equal(t, cli.ExitOK, rc)
	case <-time.After(30 * time.Second):
		t.Fatal("taskd run did not stop")
	}
	code, _ = get("/livez")
	require.Zero(t, code, "the listener is closed")
}

// A `taskd run` that found no configuration file, and has no TASKD_*
// variable either, says so before it waits for the defaults' database:
// started from the wrong directory, it would otherwise run unnoticed on
// another database, or fail on a password no file of the operator's holds.
func TestRunWithoutConfigFileSaysSo(t *testing.T) {
	if _, err := os.Stat("/etc/taskd/taskd.yaml"); err == nil {
		t.Skip("/etc/taskd/taskd.yaml exists: taskd run reads it")
	}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "TASKD_") && !strings.HasPrefix(name, "TASKD_TEST_") {
			t.Setenv(name, "") // restored after the test
			require.NoError(t, os.Unsetenv(name))
		}
	}
	t.Chdir(t.TempDir())
	closed := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	start := func(args ...string) string {
		ctx, cancel := context.WithCancel(context.Background())
		errOut := &testenv.LogBuffer{}
		done := make(chan int, 1)
		go func() {
			done <- cli.Execute(ctx, append(args, "--mysql-dsn", "root:@tcp("+closed+")/taskd", "--redis-addr", closed, "run"),
				io.Discard, errOut, strings.NewReader(""))
		}()
		// It waits for the closed port: its first retry is logged.
		require.Eventually(t, func() bool { return strings.Contains(errOut.String(), "cannot connect") }, 10*time.Second, 20*time.Millisecond)
		cancel()
		require.Equal(t, cli.ExitOK, <-done)
		return errOut.String()
	}
	require.Contains(t, start(), `"no configuration file: the defaults and TASKD_* variables are in force","fix":"pass --config, or install /etc/taskd/taskd.yaml"`)
	require.NotContains(t, start("--config", writeConfig(t, "log: { level: info }\n")), "no configuration file")
	t.Setenv("TASKD_LOG_LEVEL", "info")
	require.NotContains(t, start(), "no configuration file", "configured by its environment")
}

// A node run with the watchdog role and no worker role says that the
// watchdog has nothing to watch: it watches its own process's workers.
func TestRunWatchdogAloneSaysSo(t *testing.T) {
	t.Parallel()
	closed := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	cfg := writeConfig(t, "log: { level: info }\n")
	start := func(roles string) string {
		ctx, cancel := context.WithCancel(context.Background())
		errOut := &testenv.LogBuffer{}
		done := make(chan int, 1)
		go func() {
			done <- cli.Execute(ctx, []string{"--config", cfg, "--mysql-dsn", "root:@tcp(" + closed + ")/taskd", "--redis-addr", closed,
				"run", "--roles", roles}, io.Discard, errOut, strings.NewReader(""))
		}()
		require.Eventually(t, func() bool { return strings.Contains(errOut.String(), "cannot connect") }, 10*time.Second, 20*time.Millisecond)
		cancel()
		require.Equal(t, cli.ExitOK, <-done)
		return errOut.String()
	}
	require.Contains(t, start("scheduler,watchdog"), "the watchdog role does nothing without the worker role in the same process")
	require.NotContains(t, start("worker,watchdog"), "the watchdog role does nothing")
}
