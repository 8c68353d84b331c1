package handler

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/taskd/taskd/pkg/tracing"
)

// KillGraceDefault is the time between SIGTERM and SIGKILL.
const KillGraceDefault = 5 * time.Second

// Exec runs a command: argv (no shell), payload on stdin, TASK_ID,
// TASK_CODE, TASK_ATTEMPT, TASK_UNIQUE_KEY, TASK_QUEUE and TASK_GROUP added to the
// daemon's environment (plus Env, and TRACEPARENT, the attempt's span, when
// tracing is on). Exit 0 is success; otherwise the error is
// "exit status N: <last line of stderr>". The output is stdout and stderr
// combined (their interleaving is approximate: they are separate pipes),
// truncated as by Truncate.
//
// The command runs in its own process group. When ctx is done the group gets
// SIGTERM, then SIGKILL after KillGrace, and the error wraps ctx.Err() (and
// the cancel cause, if any). Handle returns once the leader has exited and
// the output pipes are closed; a process that left the group but holds a
// pipe is waited for at most KillGrace.
type Exec struct {
	Argv        []string
	Env         []string // extra KEY=VALUE
	Dir         string
	KillGrace   time.Duration // 0: KillGraceDefault
	OutputLimit int           // 0: OutputLimitDefault
}

// stderrLineLimit bounds the stderr line quoted in an error.
const stderrLineLimit = 1024

// Handle runs one attempt.
func (e *Exec) Handle(ctx context.Context, r *Request) (string, error) {
	if len(e.Argv) == 0 {
		return "", errors.New("exec: empty argv")
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("exec: %w", ctxErr(ctx))
	}
	grace := cmp.Or(e.KillGrace, KillGraceDefault)
	out := &tailBuffer{limit: cmp.Or(e.OutputLimit, OutputLimitDefault)}
	stderr := &tailBuffer{limit: stderrLineLimit}

	cmd := exec.Command(e.Argv[0], e.Argv[1:]...)
	cmd.Dir = e.Dir
	// TASK_* come last: on duplicates the last wins, and they are the
	// contract with the handler.
	cmd.Env = append(append(inheritedEnv(), e.Env...),
		"TASK_ID="+strconv.FormatInt(r.ID, 10),
		"TASK_CODE="+r.Code,
		"TASK_ATTEMPT="+strconv.Itoa(r.Attempt),
		"TASK_UNIQUE_KEY="+r.UniqueKey,
		"TASK_QUEUE="+r.Queue,
		"TASK_GROUP="+r.Group,
	)
	if tp := tracing.TraceParent(ctx); tp != "" {
		cmd.Env = append(cmd.Env, "TRACEPARENT="+tp) // the attempt's span, for the handler to continue
	}
	cmd.Stdin = bytes.NewReader(r.Payload)
	cmd.Stdout = pooledWriter{r.withTail(out)}
	cmd.Stderr = pooledWriter{r.withTail(io.MultiWriter(out, stderr))}
	cmd.SysProcAttr = handlerAttr()
	// A process outside the group (or a straggler after a normal exit) may
	// hold stdout open forever: stop reading after this long.
	cmd.WaitDelay = grace
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("exec %s: %w", e.Argv[0], err)
	}

	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	select {
	case err := <-waitErr:
		var ee *exec.ExitError
		switch {
		case err == nil || errors.Is(err, exec.ErrWaitDelay): // exited 0; a straggler held the pipe
			return out.String(), nil
		case errors.As(err, &ee):
			msg := ee.ProcessState.String() // "exit status 3", "signal: segmentation fault"
			if line := lastLine(stderr.raw()); line != "" {
				msg += ": " + line
			}
			return out.String(), errors.New(msg)
		default:
			return out.String(), fmt.Errorf("exec %s: %w", e.Argv[0], err)
		}
	case <-ctx.Done():
		stopGroup(cmd.Process.Pid, grace, waitErr)
		return out.String(), fmt.Errorf("%w (%s)", ctxErr(ctx), cmd.ProcessState)
	}
}

// stopGroup terminates process group pgid: SIGTERM, then SIGKILL at the
// end of grace to whatever is left. It returns when the leader has been
// waited for (a receive from exited succeeds) and the group is empty or
// SIGKILLed, so nothing of the attempt outlives Handle.
//
// The pgid cannot be reused while the leader is unwaited or any member is
// alive; after that, a reuse would have to happen between two polls.
func stopGroup[T any](pgid int, grace time.Duration, exited <-chan T) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	select {
	case <-exited:
	case <-deadline.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited // bounded by WaitDelay once the leader is dead
		return
	}
	// The leader is gone; other members may still be exiting, or may ignore
	// SIGTERM. Zombies count as members until PID 1 reaps them.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for syscall.Kill(-pgid, 0) == nil {
		select {
		case <-tick.C:
		case <-deadline.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			return
		}
	}
}

// ctxErr is ctx.Err() (so errors.Is tells timeout from cancel), also
// wrapping the cancel cause when the canceller set one (operator kill vs
// shutdown).
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// lastLine is the last non-blank line of s, made valid UTF-8 (s may start
// mid-rune when it is a tail).
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.ToValidUTF8(s[strings.LastIndexByte(s, '\n')+1:], "")
}

// inheritedEnv is the daemon's environment without its own TASKD_*
// variables: they may hold the task center's and Redis's credentials, which
// a handler has no business reading.
func inheritedEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TASKD_") {
			env = append(env, kv)
		}
	}
	return env
}
