package handler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/taskd/taskd/pkg/tracing"
)

// KillGraceDefault is the time between SIGTERM and SIGKILL.
const KillGraceDefault = 5 * time.Second

// Exec runs a command: argv (no shell), payload on stdin, TASK_ID,
// TASK_CODE, TASK_ATTEMPT, TASK_RETRY, TASK_MAX_RETRY, TASK_UNIQUE_KEY,
// TASK_QUEUE, TASK_GROUP and TASK_SCHEDULED_AT added to the
// daemon's environment (plus Env, and TRACEPARENT, the attempt's span, when
// tracing is on). Exit 0 is success; otherwise the error is
// "exit status N: <last line of stderr, else of stdout>", permanent (no retry) for an
// exit status in PermanentExit. The output is stdout and stderr
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
	// PermanentExit are exit statuses that say no retry can mend the
	// failure (a payload the command refuses): the task is dead at once.
	PermanentExit []int
	// Timeout caps each attempt (0: the task's timeout alone).
	Timeout time.Duration
}

// AttemptTimeout implements Capped.
func (e *Exec) AttemptTimeout() time.Duration { return e.Timeout }

// stderrLineLimit bounds the stderr line quoted in an error.
const stderrLineLimit = 1024

// Handle runs one attempt. It forks and waits for itself rather than
// through os/exec, whose pipe ends all go to the poller and whose streams
// each take a goroutine: that was 40% more of taskd's CPU per exec.
func (e *Exec) Handle(ctx context.Context, r *Request) (string, error) {
	if len(e.Argv) == 0 {
		return "", errors.New("exec: empty argv")
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("exec: %w", ctxErr(ctx))
	}
	path := e.Argv[0]
	if filepath.Base(path) == path {
		lp, err := exec.LookPath(path)
		if err != nil {
			return "", fmt.Errorf("exec %s: %w", path, err)
		}
		path = lp
	}
	// TASK_* come last: on duplicates the last wins, and they are the
	// contract with the handler.
	env := append(append(inheritedEnv(), e.Env...),
		"TASK_ID="+strconv.FormatInt(r.ID, 10),
		"TASK_CODE="+r.Code,
		"TASK_ATTEMPT="+strconv.Itoa(r.Attempt),
		"TASK_RETRY="+strconv.Itoa(r.Retry), // TASK_MAX_RETRY: the last try
		"TASK_MAX_RETRY="+strconv.Itoa(r.MaxRetry),
		"TASK_UNIQUE_KEY="+r.UniqueKey,
		"TASK_QUEUE="+r.Queue,
		"TASK_GROUP="+r.Group,
		"TASK_SCHEDULED_AT="+formatTime(r.ScheduledAt),
	)
	if tp := tracing.TraceParent(ctx); tp != "" {
		env = append(env, "TRACEPARENT="+tp) // the attempt's span, for the handler to continue
	}

	p, err := startAttempt(path, e.Argv, e.Dir, env, r.Payload)
	if err != nil {
		return "", fmt.Errorf("exec %s: %w", e.Argv[0], err)
	}
	// Withdrawn once the attempt is over: the group is then empty, or
	// SIGKILLed, or left to what the handler did not wait for (guard_linux.go).
	groupStarted(p.pid)
	defer groupEnded(p.pid)
	grace := cmp.Or(e.KillGrace, KillGraceDefault)
	out := &tailBuffer{limit: cmp.Or(e.OutputLimit, OutputLimitDefault)}
	stderr := &tailBuffer{limit: stderrLineLimit}

	var ws syscall.WaitStatus
	var waitErr error
	var cutoff *time.Timer
	exited := make(chan struct{})
	go func() {
		ws, waitErr = waitPid(p.pid)
		// A process outside the group (or a straggler after a normal
		// exit) may hold a pipe open forever: stop reading after grace.
		cutoff = time.AfterFunc(grace, p.cutoff)
		close(exited)
	}()
	stopped := make(chan struct{})
	stopOnCancel := context.AfterFunc(ctx, func() {
		defer close(stopped)
		stopGroup(p.pid, grace, exited)
	})
	errDone := make(chan struct{})
	go func() {
		defer close(errDone)
		copyOutput(p.stderr, r.withTail(io.MultiWriter(out, stderr)))
	}()
	stdout := io.Writer(out)
	var value *tailBuffer // stdout alone, for the children's payload
	if r.Value != nil {
		value = &tailBuffer{limit: out.limit}
		stdout = io.MultiWriter(out, value)
	}
	copyOutput(p.stdout, r.withTail(stdout))
	<-errDone
	p.wait() // the payload's writer, if the payload did not fit the pipe
	<-exited
	// Why it failed, read only if it did, and before the note below joins
	// the output: stderr's line, else stdout's (where PHP's CLI writes
	// "Could not open input file: artisan" and, with display_errors on,
	// its fatal errors).
	var why string
	if !ws.Exited() || ws.ExitStatus() != 0 {
		if why = whyLine(stderr.raw()); why == "" {
			why = whyLine(out.raw())
		}
	}
	if !cutoff.Stop() {
		// Said in the result: the attempt ended grace late, and what the
		// straggler wrote after that is not in it.
		fmt.Fprintf(out, "\n…(a process the command started kept its output open after it exited: output read for %s more, then no longer)\n", grace)
	}

	if !stopOnCancel() {
		<-stopped
		return out.String(), fmt.Errorf("%w (%s)", ctxErr(ctx), exitString(ws))
	}
	switch {
	case waitErr != nil:
		return out.String(), fmt.Errorf("exec %s: %w", e.Argv[0], waitErr)
	case ws.Exited() && ws.ExitStatus() == 0: // a straggler may have held a pipe
		if value != nil {
			r.Value(value.String())
		}
		return out.String(), nil
	}
	msg := exitString(ws)
	if why != "" {
		msg += ": " + why
	}
	if ws.Exited() && slices.Contains(e.PermanentExit, ws.ExitStatus()) {
		return out.String(), Permanent(errors.New(msg))
	}
	return out.String(), errors.New(msg)
}

// attempt is a started command: its leader's pid and the parent's ends of
// its pipes.
type attempt struct {
	pid            int
	stdout, stderr *os.File
	stdin          *os.File      // the payload's rest, when it did not fit the pipe; else nil
	stdinDone      chan struct{} // closed when stdin is written and closed
}

// startAttempt starts argv in a process group of its own (handlerAttr) with
// the payload on stdin: /dev/null when it is empty, else a pipe it is
// written into before the start (a goroutine writes what does not fit).
// The child's ends of the pipes are plain descriptors, closed once it
// started; the parent's read ends go to the poller.
func startAttempt(path string, argv []string, dir string, env []string, payload []byte) (_ *attempt, err error) {
	var open []int // every descriptor made here, closed on failure
	defer func() {
		if err != nil {
			for _, fd := range open {
				_ = syscall.Close(fd)
			}
		}
	}()
	pipe := func() (r, w int, err error) {
		fds, err := cloexecPipe()
		if err != nil {
			return 0, 0, fmt.Errorf("pipe: %w", err)
		}
		open = append(open, fds[0], fds[1])
		return fds[0], fds[1], nil
	}

	// The child's stdin; the writer of the payload's rest (-1 none).
	inR, inW, inPipe := 0, -1, len(payload) > 0
	if !inPipe {
		if inR, err = devNull(); err != nil {
			return nil, err
		}
	} else {
		if inR, inW, err = pipe(); err != nil {
			return nil, err
		}
		if err := syscall.SetNonblock(inW, true); err != nil {
			return nil, fmt.Errorf("stdin: %w", err)
		}
		n, err := syscall.Write(inW, payload)
		if err != nil && err != syscall.EAGAIN {
			return nil, fmt.Errorf("stdin: %w", err)
		}
		if payload = payload[max(n, 0):]; len(payload) == 0 { // it fit the pipe's buffer
			_ = syscall.Close(inW)
			open, inW = open[:1], -1
		}
	}
	outR, outW, err := pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		return nil, err
	}
	for _, fd := range []int{outR, errR} {
		if err := syscall.SetNonblock(fd, true); err != nil { // for the poller
			return nil, fmt.Errorf("pipe: %w", err)
		}
	}
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Dir: dir, Env: env, Files: []uintptr{uintptr(inR), uintptr(outW), uintptr(errW)}, Sys: GroupAttr(),
	})
	if err != nil {
		return nil, &os.PathError{Op: "fork/exec", Path: path, Err: err}
	}
	if inPipe {
		_ = syscall.Close(inR)
	}
	_ = syscall.Close(outW)
	_ = syscall.Close(errW)
	p := &attempt{pid: pid, stdout: os.NewFile(uintptr(outR), "|0"), stderr: os.NewFile(uintptr(errR), "|0")}
	if inW >= 0 {
		p.stdin, p.stdinDone = os.NewFile(uintptr(inW), "|1"), make(chan struct{})
		go func() {
			defer close(p.stdinDone)
			_, _ = p.stdin.Write(payload) // EPIPE: the command did not read it all
			_ = p.stdin.Close()
		}()
	}
	return p, nil
}

// cutoff ends the reads and the write of the pipes now.
func (p *attempt) cutoff() {
	past := time.Unix(1, 0)
	_ = p.stdout.SetReadDeadline(past)
	_ = p.stderr.SetReadDeadline(past)
	if p.stdin != nil {
		_ = p.stdin.SetWriteDeadline(past)
	}
}

// wait waits for the payload's writer, if there is one.
func (p *attempt) wait() {
	if p.stdinDone != nil {
		<-p.stdinDone
	}
}

// waitPid waits for process pid to exit.
func waitPid(pid int) (syscall.WaitStatus, error) {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			if err != nil {
				return ws, fmt.Errorf("wait: %w", err)
			}
			return ws, nil
		}
	}
}

// exitString is how a process ended, as os.ProcessState says it: "exit
// status 3", "signal: killed".
func exitString(ws syscall.WaitStatus) string {
	var s string
	switch {
	case ws.Exited():
		s = "exit status " + strconv.Itoa(ws.ExitStatus())
	case ws.Signaled():
		s = "signal: " + ws.Signal().String()
	default:
		s = "wait status " + strconv.Itoa(int(ws))
	}
	if ws.CoreDump() {
		s += " (core dumped)"
	}
	return s
}

// devNull is a descriptor of /dev/null, opened once: the stdin of a command
// without payload.
var devNull = sync.OnceValues(func() (int, error) {
	fd, err := syscall.Open(os.DevNull, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	return fd, nil
})

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
		<-exited // the leader is dead: soon waited for (within WaitDelay by an os/exec Wait)
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
	return ValidText(strings.TrimSpace(s[strings.LastIndexByte(s, '\n')+1:]))
}

// whyLine is the line of a failed command's stderr that says why it
// failed: the last non-blank one, except after PHP's trace of an uncaught
// exception, whose last line ("  thrown in /app/job.php on line 12")
// names only a place: then the "PHP Fatal error:  Uncaught ..." line that
// opened the trace.
func whyLine(s string) string {
	last := lastLine(s)
	if !strings.HasPrefix(last, "thrown in ") || !strings.Contains(last, " on line ") {
		return last
	}
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "PHP Fatal error:") || strings.HasPrefix(l, "Fatal error:") {
			return ValidText(l)
		}
	}
	return last
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
