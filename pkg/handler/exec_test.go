package handler

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func testRequest() *Request {
	return &Request{ID: 42, Code: "send_email", Queue: "mail", Attempt: 3, Retry: 2, MaxRetry: 3, UniqueKey: "uk-1",
		ScheduledAt: time.Date(2026, 12, 5, 10, 0, 0, 250e6, time.FixedZone("CST", 8*3600)), Payload: []byte(`{"a":1}`)}
}

func sh(script string, args ...string) []string {
	return append([]string{"/bin/sh", "-c", script}, args...)
}

func TestExecSuccess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := &Exec{
		Argv: sh(`cat; echo; echo "$TASK_ID $TASK_CODE $TASK_ATTEMPT $TASK_RETRY/$TASK_MAX_RETRY $TASK_UNIQUE_KEY $TASK_QUEUE $TASK_SCHEDULED_AT $EXTRA"; pwd`),
		Env:  []string{"EXTRA=x", "TASK_ID=spoofed"},
		Dir:  dir,
	}
	out, err := h.Handle(context.Background(), testRequest())
	require.NoError(t, err)
	real, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	require.Equal(t, "{\"a\":1}\n42 send_email 3 2/3 uk-1 mail 2026-12-05T02:00:00.250Z x\n"+real+"\n", out)
}

func TestExecStderrInOutput(t *testing.T) {
	t.Parallel()
	out, err := (&Exec{Argv: sh(`echo out; echo err >&2`)}).Handle(context.Background(), testRequest())
	require.NoError(t, err)
	require.Contains(t, out, "out\n")
	require.Contains(t, out, "err\n")
}

func TestExecExitError(t *testing.T) {
	t.Parallel()
	out, err := (&Exec{Argv: sh(`echo progress; echo first >&2; echo 'boom: disk full' >&2; printf '\n  \n' >&2; exit 3`)}).
		Handle(context.Background(), testRequest())
	require.EqualError(t, err, "exit status 3: boom: disk full")
	require.Contains(t, out, "progress\n")

	_, err = (&Exec{Argv: sh(`exit 1`)}).Handle(context.Background(), testRequest())
	require.EqualError(t, err, "exit status 1")

	// Nothing on stderr: stdout's last line says why (PHP's CLI writes
	// "Could not open input file" there; the error said "exit status 1").
	_, err = (&Exec{Argv: sh(`echo starting; echo 'Could not open input file: artisan'; echo; exit 1`)}).Handle(context.Background(), testRequest())
	require.EqualError(t, err, "exit status 1: Could not open input file: artisan")

	_, err = (&Exec{Argv: []string{"/nonexistent/taskd-handler"}}).Handle(context.Background(), testRequest())
	require.ErrorContains(t, err, "/nonexistent/taskd-handler")

	_, err = (&Exec{}).Handle(context.Background(), testRequest())
	require.Error(t, err)
}

// An exit status the handler names as permanent fails the task without its
// retries; any other stays a failure to retry.
func TestExecPermanentExit(t *testing.T) {
	t.Parallel()
	e := &Exec{Argv: sh(`echo "order $1 is gone" >&2; exit $1`, "sh", "65"), PermanentExit: []int{65, 78}}
	_, err := e.Handle(context.Background(), testRequest())
	require.ErrorIs(t, err, ErrPermanent)
	require.ErrorContains(t, err, "exit status 65: order 65 is gone")

	e.Argv[len(e.Argv)-1] = "66"
	_, err = e.Handle(context.Background(), testRequest())
	require.EqualError(t, err, "exit status 66: order 66 is gone")
	require.NotErrorIs(t, err, ErrPermanent)
}

// A PHP job that dies of an uncaught exception ends its stderr with the
// place it was thrown; the summary is the line that says what was thrown.
func TestExecPHPUncaughtSaysWhat(t *testing.T) {
	t.Parallel()
	trace := `PHP Fatal error:  Uncaught RuntimeException: SMTP down in /app/job.php:3
Stack trace:
#0 /app/job.php(7): send()
#1 {main}
  thrown in /app/job.php on line 3
`
	_, err := (&Exec{Argv: sh(`printf '%s' "$0" >&2; exit 255`, trace)}).Handle(context.Background(), testRequest())
	require.EqualError(t, err, "exit status 255: PHP Fatal error:  Uncaught RuntimeException: SMTP down in /app/job.php:3")

	// A last line like it with no fatal error before it is kept.
	_, err = (&Exec{Argv: sh(`echo 'thrown in the towel on line 3' >&2; exit 1`)}).Handle(context.Background(), testRequest())
	require.EqualError(t, err, "exit status 1: thrown in the towel on line 3")

	if _, err := exec.LookPath("php"); err == nil {
		// PHP's CLI defaults (Debian): the error is logged to stderr.
		job := `function send() { throw new RuntimeException("SMTP down"); } send();`
		_, err = (&Exec{Argv: []string{"php", "-d", "display_errors=0", "-d", "log_errors=1", "-r", job}}).
			Handle(context.Background(), testRequest())
		require.EqualError(t, err, "exit status 255: PHP Fatal error:  Uncaught RuntimeException: SMTP down in Command line code:1")
		// Displayed on stderr instead (display_errors=stderr).
		_, err = (&Exec{Argv: []string{"php", "-d", "display_errors=stderr", "-d", "log_errors=0", "-r", job}}).
			Handle(context.Background(), testRequest())
		require.ErrorContains(t, err, "exit status 255: Fatal error: Uncaught RuntimeException: SMTP down in Command line code:1")
		// Displayed on stdout, as PHP's CLI does with display_errors=1 (no
		// php.ini, as in the official images), and no log.
		_, err = (&Exec{Argv: []string{"php", "-d", "display_errors=1", "-d", "log_errors=0", "-r", job}}).
			Handle(context.Background(), testRequest())
		require.ErrorContains(t, err, "exit status 255: Fatal error: Uncaught RuntimeException: SMTP down in Command line code:1")
		_, err = (&Exec{Argv: []string{"php", "artisan", "email:send"}, Dir: t.TempDir()}).Handle(context.Background(), testRequest())
		require.EqualError(t, err, "exit status 1: Could not open input file: artisan")
	}
}

func TestExecTruncatesOutput(t *testing.T) {
	t.Parallel()
	h := &Exec{Argv: sh(`head -c 100000 /dev/zero | tr '\0' a; printf END`), OutputLimit: 1000}
	out, err := h.Handle(context.Background(), testRequest())
	require.NoError(t, err)
	prefix := "…(truncated 99003 bytes)\n"
	require.Equal(t, prefix+strings.Repeat("a", 997)+"END", out)
}

// startScript runs h in the background once its script has written n pids
// to $PIDFILE (the first is $$, the group leader).
func startScript(t *testing.T, ctx context.Context, h *Exec, n int) (pids []int, result <-chan error) {
	t.Helper()
	pidfile := filepath.Join(t.TempDir(), "pids")
	h.Env = append(h.Env, "PIDFILE="+pidfile)
	done := make(chan error, 1)
	go func() {
		_, err := h.Handle(ctx, testRequest())
		done <- err
	}()
	pids = waitPids(t, pidfile, n)
	// The leader heads its own group, and its children are in it.
	require.NoError(t, syscall.Kill(-pids[0], 0))
	for _, pid := range pids[1:] {
		pgid, err := syscall.Getpgid(pid)
		require.NoError(t, err)
		require.Equal(t, pids[0], pgid)
	}
	return pids, done
}

func TestExecTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	h := &Exec{Argv: sh(`echo $$ >"$PIDFILE"; sleep 60 & echo $! >>"$PIDFILE"; sleep 60; wait`)}
	start := time.Now()
	pids, done := startScript(t, ctx, h, 2)

	err := <-done
	// Everything dies on SIGTERM: no need to wait out KillGrace (5s).
	require.Less(t, time.Since(start), 3*time.Second)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, context.Canceled)
	requireGroupGone(t, pids[0])
	require.ErrorIs(t, syscall.Kill(pids[1], 0), syscall.ESRCH)
}

func TestExecCancel(t *testing.T) {
	t.Parallel()
	errKilled := errors.New("killed by operator")
	ctx, cancel := context.WithCancelCause(context.Background())
	h := &Exec{Argv: sh(`echo $$ >"$PIDFILE"; sleep 60`)}
	pids, done := startScript(t, ctx, h, 1)
	cancel(errKilled)

	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, errKilled)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	requireGroupGone(t, pids[0])
}

func TestExecSIGKILLAfterGrace(t *testing.T) {
	t.Parallel()
	const timeout, grace = 300 * time.Millisecond, 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// An ignored SIGTERM is inherited by sleep too.
	h := &Exec{Argv: sh(`trap '' TERM; echo $$ >"$PIDFILE"; sleep 60 & echo $! >>"$PIDFILE"; wait`), KillGrace: grace}
	start := time.Now()
	pids, done := startScript(t, ctx, h, 2)

	err := <-done
	elapsed := time.Since(start)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "signal: killed")
	require.GreaterOrEqual(t, elapsed, timeout+grace)
	require.Less(t, elapsed, timeout+grace+3*time.Second)
	requireGroupGone(t, pids[0])
}

// The leader exits on SIGTERM, but a member of its group ignores it and
// does not hold the pipes: Handle still SIGKILLs it at the end of the grace.
func TestExecSIGKILLStragglerInGroup(t *testing.T) {
	t.Parallel()
	const timeout, grace = 300 * time.Millisecond, 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	h := &Exec{
		Argv:      sh(`echo $$ >"$PIDFILE"; (trap '' TERM; exec sleep 60) </dev/null >/dev/null 2>&1 & echo $! >>"$PIDFILE"; sleep 60`),
		KillGrace: grace,
	}
	start := time.Now()
	pids, done := startScript(t, ctx, h, 2)

	err := <-done
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "signal: terminated")
	require.GreaterOrEqual(t, time.Since(start), timeout+grace)
	requireGroupGone(t, pids[0])
}

// A process that left the group but holds stdout must not hang Handle.
func TestExecEscapedGrandchildHoldingPipe(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	escfile := filepath.Join(t.TempDir(), "escaped")
	h := &Exec{
		Argv:      sh(`setsid sh -c 'echo $$ >"$ESCFILE"; exec sleep 60' & echo $$ >"$PIDFILE"; sleep 60`),
		Env:       []string{"ESCFILE=" + escfile},
		KillGrace: 300 * time.Millisecond,
	}
	start := time.Now()
	pids, done := startScript(t, ctx, h, 1)
	escaped := waitPids(t, escfile, 1)[0]
	t.Cleanup(func() { _ = syscall.Kill(escaped, syscall.SIGKILL) })

	err := <-done
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 3*time.Second)
	requireGroupGone(t, pids[0])
	require.NoError(t, syscall.Kill(escaped, 0), "outside the group, so not ours to kill")
}

// A background process left running after a successful exit delays the
// result by at most KillGrace and does not fail it; the result says why
// it came late.
func TestExecStragglerAfterSuccess(t *testing.T) {
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "pids")
	h := &Exec{Argv: sh(`sleep 60 & echo $! >"$PIDFILE"; echo ok`), Env: []string{"PIDFILE=" + pidfile}, KillGrace: 200 * time.Millisecond}
	start := time.Now()
	out, err := h.Handle(context.Background(), testRequest())
	pids := waitPids(t, pidfile, 1)
	t.Cleanup(func() { _ = syscall.Kill(pids[0], syscall.SIGKILL) })
	require.NoError(t, err)
	require.Equal(t, "ok\n\n…(a process the command started kept its output open after it exited: output read for 200ms more, then no longer)\n", out)
	require.Less(t, time.Since(start), 3*time.Second)
}

func TestExecContextAlreadyDone(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := (&Exec{Argv: sh(`echo never`)}).Handle(ctx, testRequest())
	require.ErrorIs(t, err, context.Canceled)
}

// The daemon's TASKD_* variables (credentials) do not reach handlers.
func TestExecDoesNotLeakDaemonSecrets(t *testing.T) {
	t.Setenv("TASKD_MYSQL_DSN", "secret:pw@tcp(db)/taskd")
	t.Setenv("OTHER_VAR", "kept")
	h := &Exec{Argv: sh(`echo "dsn=[$TASKD_MYSQL_DSN] other=[$OTHER_VAR] id=[$TASK_ID]"`)}
	out, err := h.Handle(context.Background(), testRequest())
	require.NoError(t, err)
	require.Contains(t, out, "dsn=[] other=[kept] id=[")
}

// The payload reaches stdin whatever its size: written before the start
// when it fits the pipe, the rest while the command reads; an empty one is
// an empty stdin.
func TestExecPayloadOnStdin(t *testing.T) {
	t.Parallel()
	h := &Exec{Argv: sh(`wc -c; test -t 0 || echo not-a-tty`)}
	for _, n := range []int{0, 7, 1 << 20} {
		r := testRequest()
		r.Payload = bytes.Repeat([]byte("x"), n)
		out, err := h.Handle(context.Background(), r)
		require.NoError(t, err)
		require.Equal(t, []string{strconv.Itoa(n), "not-a-tty"}, strings.Fields(out), "payload of %d bytes", n)
	}
}

// A command that exits without reading a payload larger than the pipe
// does not hang the attempt.
func TestExecPayloadNotRead(t *testing.T) {
	t.Parallel()
	r := testRequest()
	r.Payload = bytes.Repeat([]byte("x"), 1<<20)
	out, err := (&Exec{Argv: sh(`echo done`)}).Handle(context.Background(), r)
	require.NoError(t, err)
	require.Equal(t, "done\n", out)
}
