package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
		require.Equal(t, 2, r.code, "taskd %v: %s", args, r.stderr)
		require.Equal(t, fmt.Sprintf("taskd: unknown key \"mysql.dns\" in %s (did you mean \"mysql.dsn\"?)\n", typo), r.stderr)
		require.Empty(t, r.stdout)
	}
	good := writeFile(t, fmt.Sprintf("mysql: { dsn: %q }\n", env.DSN)+redis+handlers)
	for _, v := range []string{"TASKD_WORKR_CONCURRENCY=4", "TASKD_MYSQL_DNS=" + env.DSN} {
		for _, args := range [][]string{{"submit", "hello"}, {"run", "--node-id", "typo"}} {
			r := runTaskd(t, 30*time.Second, []string{v}, append([]string{"--config", good}, args...)...)
			require.Equal(t, 2, r.code, "%s taskd %v: %s", v, args, r.stderr)
			name, _, _ := strings.Cut(v, "=")
			require.Contains(t, r.stderr, "unknown variable "+name+" in the environment (did you mean")
		}
	}
	require.Zero(t, env.Count(t, `SELECT COUNT(*) FROM task_center`), "nothing written")
	require.Zero(t, env.Count(t, `SELECT COUNT(*) FROM task_audit`))
	require.Equal(t, before, redisKeys(t, env), "no heartbeat, no wakeup: nothing written to Redis")
}
