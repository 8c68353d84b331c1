package handler

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/taskd/taskd/pkg/testenv"
)

// Not parallel: the guard takes every group started while it runs. EOF
// on the guard's pipe, which taskd's death gives, kills the groups still
// announced, the children of a shell with them; the group of an attempt
// that ended is not announced any more, even if what it left in the
// background runs on. Then the guard exits, reaped by Stop.
func TestGuardKillsGroupsLeftAtEOF(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	stderr, err := os.CreateTemp(t.TempDir(), "guard")
	require.NoError(t, err)
	defer stderr.Close()
	g, err := StartGuard("json", stderr, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer g.Stop()
	left := fmt.Sprintf("62.%09d", rand.IntN(1e9))
	_, err = (&Exec{Argv: sh("sleep " + left + " >/dev/null 2>&1 &")}).Handle(context.Background(), testRequest())
	require.NoError(t, err)
	leftPid := testenv.WaitArgs(t, 10*time.Second, "sleep", left)

	marker := fmt.Sprintf("61.%09d", rand.IntN(1e9))
	leader := make(chan error, 1)
	go func() {
		_, err := (&Exec{Argv: sh("sleep " + marker + "; echo done")}).Handle(context.Background(), testRequest())
		leader <- err
	}()
	pid := testenv.WaitArgs(t, 10*time.Second, "sleep", marker)
	// The leader's group announced: its sleep can be seen before Handle
	// says "+PGID", and a Stop between the two left it unguarded (a CI
	// run under load waited the sleep's 61 s out).
	require.Eventually(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.sent == 3 }, 10*time.Second, time.Millisecond,
		"the first attempt's + and -, then the leader's +")

	g.Stop() // as when taskd dies
	require.EqualError(t, <-leader, "signal: killed")
	require.Eventually(t, func() bool { return !testenv.HasArgs(pid, "sleep", marker) }, 5*time.Second, 10*time.Millisecond,
		"sleep %s outlived the guard's EOF", marker)
	require.True(t, testenv.HasArgs(leftPid, "sleep", left), "a finished attempt's group was killed")
	logged, err := os.ReadFile(stderr.Name())
	require.NoError(t, err)
	require.Contains(t, string(logged), "killed their process groups")
	require.Equal(t, 1, bytes.Count(logged, []byte("\n")), "one line: %s", logged)
	require.Nil(t, guard.Load())
	require.NotNil(t, g.cmd.ProcessState, "the guard was reaped")
	require.Zero(t, g.cmd.ProcessState.ExitCode())
	goleak.VerifyNone(t, opt)
}

// Not parallel, as above. A guard that died (kill -9) costs taskd a
// warning, not its handlers.
func TestGuardGoneIsNotFatal(t *testing.T) {
	var logs bytes.Buffer
	g, err := StartGuard("json", nil, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	defer g.Stop()
	require.NoError(t, g.cmd.Process.Kill())
	require.Eventually(t, func() bool { // dead, its end of the pipe closed
		p, ok := readProc(strconv.Itoa(g.Pid()))
		return ok && p.state == "Z"
	}, 5*time.Second, 10*time.Millisecond)
	for range 2 {
		out, err := (&Exec{Argv: sh(`echo ok`)}).Handle(context.Background(), testRequest())
		require.NoError(t, err)
		require.Equal(t, "ok\n", out)
	}
	require.Equal(t, 1, bytes.Count(logs.Bytes(), []byte("handler guard stopped")), logs.String())
}
