package handler

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// poolHelper is a pool process for the tests: the test binary, run with
// POOL_HELPER set to a mode. "serve" speaks the protocol and does what each
// task's payload says; "noready" dies at start as a PHP parse error would;
// "readydie" dies right after its ready line, as a worker that cannot reach
// its database would; "badproto" announces another protocol version;
// "silent" never gets ready. It answers on descriptor 3 when TASK_POOL_FD
// says so, as Taskd\Worker does.
func poolHelper(mode string) int {
	proto := os.Stdout
	if os.Getenv("TASK_POOL_FD") == "3" {
		proto = os.NewFile(3, "protocol")
	}
	switch mode {
	case "noready":
		fmt.Fprintln(os.Stderr, "PHP Parse error: syntax error, unexpected '}' in app/Jobs/Resize.php on line 12")
		return 255
	case "readydie":
		fmt.Fprintln(proto, `{"ready":true,"protocol":1}`)
		fmt.Fprintln(os.Stderr, "SQLSTATE[HY000] [2002] Connection refused")
		return 1
	case "badproto":
		fmt.Fprintln(proto, `{"ready":true,"protocol":99}`)
	case "silent":
		time.Sleep(time.Hour) // a helper process that hangs, as a stuck PHP worker does
	}
	if f := os.Getenv("POOL_HANG_IF"); f != "" {
		if _, err := os.Stat(f); err == nil {
			time.Sleep(time.Hour) // its boot hangs from now on (a framework whose database is down)
		}
	}
	fmt.Fprintln(proto, `{"ready":true,"protocol":1}`)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var hog [][]byte
	for sc.Scan() {
		var req struct {
			ID        int64           `json:"id"`
			Code      string          `json:"code"`
			Attempt   int             `json:"attempt"`
			Retry     int             `json:"retry"`
			MaxRetry  int             `json:"max_retry"`
			UniqueKey string          `json:"unique_key"`
			Queue     string          `json:"queue"`
			Deadline  string          `json:"deadline"`
			Scheduled string          `json:"scheduled_at"`
			Payload   json.RawMessage `json:"payload"`
			Trace     string          `json:"traceparent"`
		}
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			fmt.Fprintln(os.Stderr, "bad request:", err)
			return 2
		}
		var do struct {
			Do     string          `json:"do"`
			MS     int             `json:"ms"`
			Code   int             `json:"code"`
			Text   string          `json:"text"`
			MB     int             `json:"mb"`
			Error  string          `json:"error"`
			Result json.RawMessage `json:"result"`
		}
		_ = json.Unmarshal(req.Payload, &do)
		answer := map[string]any{"ok": true, "result": map[string]any{
			"pid": os.Getpid(), "id": req.ID, "code": req.Code, "attempt": req.Attempt, "retry": req.Retry, "max_retry": req.MaxRetry,
			"unique_key": req.UniqueKey,
			"queue":      req.Queue, "deadline": req.Deadline, "payload": req.Payload, "slot": os.Getenv("TASK_POOL_SLOT"),
			"traceparent": req.Trace, "scheduled_at": req.Scheduled,
		}}
		switch do.Do {
		case "sleep":
			time.Sleep(time.Duration(do.MS) * time.Millisecond) // the helper process's work
		case "exit":
			fmt.Fprintln(os.Stderr, cmp.Or(do.Text, "dying on purpose"))
			return do.Code
		case "vanish": // exit() without a word
			return do.Code
		case "garbage":
			fmt.Println("Warning: Undefined variable $x in app/Jobs/Resize.php on line 3")
			continue
		case "stderr":
			fmt.Fprint(os.Stderr, do.Text)
		case "both": // a console on stdout beside a log on stderr
			fmt.Printf("%s: on stdout\n", do.Text)
			fmt.Fprintf(os.Stderr, "%s: on stderr\n", do.Text)
			fmt.Printf("%s: stdout again\n", do.Text)
		case "alloc":
			b := make([]byte, do.MB<<20)
			for i := range b {
				b[i] = 1
			}
			hog = append(hog, b)
		case "fail":
			answer = map[string]any{"ok": false, "error": do.Error}
		case "refuse":
			answer = map[string]any{"ok": false, "error": do.Error, "permanent": true}
		case "later":
			answer = map[string]any{"ok": false, "error": do.Error, "retry_after": do.MS / 1000}
		case "result":
			answer["result"] = do.Result
		}
		b, _ := json.Marshal(answer)
		proto.Write(append(b, '\n'))
	}
	return 0
}

// newTestPool starts a pool of the helper in mode; it is stopped at the
// test's end.
func newTestPool(t *testing.T, mode string, mod func(*PoolConfig)) *Pool {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	cfg := PoolConfig{
		Code: "resize_image", Argv: []string{self}, Env: []string{"POOL_HELPER=" + mode},
		Size: 1, KillGrace: time.Second, BackoffMax: 400 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	}
	if mod != nil {
		mod(&cfg)
	}
	p := NewPool(cfg)
	require.NoError(t, p.Start(context.Background()))
	t.Cleanup(p.Stop)
	return p
}

type helperResult struct {
	PID       int             `json:"pid"`
	ID        int64           `json:"id"`
	Code      string          `json:"code"`
	Attempt   int             `json:"attempt"`
	Retry     int             `json:"retry"`
	MaxRetry  int             `json:"max_retry"`
	UniqueKey string          `json:"unique_key"`
	Queue     string          `json:"queue"`
	Deadline  string          `json:"deadline"`
	Scheduled string          `json:"scheduled_at"`
	Payload   json.RawMessage `json:"payload"`
	Slot      string          `json:"slot"`
	Trace     string          `json:"traceparent"`
}

// handle runs one task with payload on p, with a 20 s timeout.
func handle(t *testing.T, p *Pool, payload string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := testRequest()
	r.Payload = []byte(payload)
	return p.Handle(ctx, r)
}

// waitIdle waits until no slot of p is busy: a slot counts itself busy
// until just after its reply, so a Busy of 1 seen right after a task
// returned may still be that task's.
func waitIdle(t *testing.T, p *Pool) {
	t.Helper()
	require.Eventually(t, func() bool { return p.Stats().Busy == 0 }, 10*time.Second, 5*time.Millisecond)
}

// served runs a task that must succeed and returns what the helper saw.
func served(t *testing.T, p *Pool, payload string) helperResult {
	t.Helper()
	out, err := handle(t, p, payload)
	require.NoError(t, err)
	var r helperResult
	require.NoError(t, json.Unmarshal([]byte(out[strings.LastIndexByte(out, '\n')+1:]), &r), "output %q", out)
	return r
}

func TestPoolServesTasks(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, "serve", nil)
	r := served(t, p, `{"do":"ok","n":1}`)
	require.Equal(t, int64(42), r.ID)
	require.Equal(t, "send_email", r.Code)
	require.Equal(t, 3, r.Attempt)
	require.Equal(t, [2]int{2, 3}, [2]int{r.Retry, r.MaxRetry}, "the try of the retry budget")
	require.Equal(t, "uk-1", r.UniqueKey)
	require.Equal(t, "mail", r.Queue)
	require.JSONEq(t, `{"do":"ok","n":1}`, string(r.Payload))
	require.Equal(t, "0", r.Slot)
	deadline, err := time.Parse("2006-01-02T15:04:05.000Z", r.Deadline)
	require.NoError(t, err, "deadline %q", r.Deadline)
	require.WithinDuration(t, time.Now().Add(20*time.Second), deadline, 10*time.Second)
	require.Equal(t, "2026-12-05T02:00:00.250Z", r.Scheduled, "the occurrence, in UTC to the millisecond")

	// The same process serves the next task.
	require.Equal(t, r.PID, served(t, p, `{}`).PID)

	// A failure is the handler's message; the process stays.
	_, err = handle(t, p, `{"do":"fail","error":"no mailbox for a@example.com"}`)
	require.EqualError(t, err, "no mailbox for a@example.com")
	require.NotErrorIs(t, err, ErrPermanent)
	require.Equal(t, r.PID, served(t, p, `{}`).PID)

	// "permanent": true fails the task without its retries.
	_, err = handle(t, p, `{"do":"refuse","error":"no such order"}`)
	require.ErrorIs(t, err, ErrPermanent)
	require.ErrorContains(t, err, "no such order")

	// "retry_after": N asks the retry to wait N seconds at least (capped).
	_, err = handle(t, p, `{"do":"later","error":"quota used up","ms":30000}`)
	require.EqualError(t, err, "quota used up")
	require.NotErrorIs(t, err, ErrPermanent)
	require.Equal(t, 30*time.Second, RetryAfter(err))
	_, err = handle(t, p, `{"do":"later","error":"quota used up","ms":99999999000}`)
	require.Equal(t, 24*time.Hour, RetryAfter(err))

	// A string result is kept as its text, null as nothing.
	out, err := handle(t, p, `{"do":"result","result":"resized 3 images"}`)
	require.NoError(t, err)
	require.Equal(t, "resized 3 images", out)
	out, err = handle(t, p, `{"do":"result","result":null}`)
	require.NoError(t, err)
	require.Equal(t, "", out)

	// A payload that is not JSON (a seed-style INSERT) arrives as a string.
	require.JSONEq(t, `"plain text"`, string(served(t, p, `plain text`).Payload))
	s := p.Stats()
	require.Equal(t, 1, s.Processes)
	require.Equal(t, int64(1), s.Starts)
	require.False(t, s.CrashLooping)
}

// What a process writes on stderr before it answers is the task's output,
// however the two pipes' reads interleave.
func TestPoolStderrIsTheTasksOutput(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, "serve", nil)
	for i := range 50 {
		text := fmt.Sprintf("task %d: step one\ntask %d: %s\n", i, i, strings.Repeat("x", i*200))
		b, err := json.Marshal(map[string]any{"do": "stderr", "text": text})
		require.NoError(t, err)
		out, err := handle(t, p, string(b))
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(out, text), "task %d: output %.80q", i, out)
		require.NotContains(t, out[len(text):], "\n", "task %d: another task's stderr in %.80q", i, out)
	}
	// Long output keeps its tail.
	small := newTestPool(t, "serve", func(c *PoolConfig) { c.OutputLimit = 100 })
	b, _ := json.Marshal(map[string]any{"do": "stderr", "text": strings.Repeat("y", 1000) + "\nthe end\n"})
	out, err := handle(t, small, string(b))
	require.NoError(t, err)
	require.Contains(t, out, "…(truncated")
	require.Contains(t, out, "the end\n")
}

// A task with children is told the result alone, without the stderr
// before it in its output: that is their payload.
func TestPoolValueIsTheResultAlone(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, "serve", nil)
	r := testRequest()
	r.Payload = []byte(`{"do":"stderr","text":"a log line\n"}`)
	var value *string
	r.Value = func(v string) { value = &v }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := p.Handle(ctx, r)
	require.NoError(t, err)
	require.NotNil(t, value)
	require.NotEmpty(t, *value)
	require.Equal(t, "a log line\n"+*value, out)
}

func TestPoolTimeoutKillsAndReplaces(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, "serve", nil)
	first := served(t, p, `{}`)
	waitIdle(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := p.Handle(ctx, &Request{ID: 7, Code: "resize_image", Payload: []byte(`{"do":"sleep","ms":60000}`)})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, fmt.Sprintf("pool process %d killed", first.PID))
	requireGroupGone(t, first.PID)
	next := served(t, p, `{}`)
	require.NotEqual(t, first.PID, next.PID)
	require.Equal(t, int64(1), p.Stats().Ended[EndTimeout])
}

// A task that waited for a free process gets that time back, up to
// WaitCredit: its timeout runs from when a process took it. Without it,
// the second of two 400 ms tasks with timeouts of 600 ms on one process
// was killed 200 ms into its run.
func TestPoolWaitIsCredited(t *testing.T) {
	t.Parallel()
	for _, credit := range []time.Duration{0, 2 * time.Second} {
		p := newTestPool(t, "serve", func(c *PoolConfig) { c.WaitCredit = credit })
		served(t, p, `{}`)
		waitIdle(t, p)
		errs := make(chan error, 2)
		for i := range 2 {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
				defer cancel()
				_, err := p.Handle(ctx, &Request{ID: int64(i + 1), Code: "resize_image", Payload: []byte(`{"do":"sleep","ms":400}`)})
				errs <- err
			}()
		}
		var failed []error
		for range 2 {
			if err := <-errs; err != nil {
				failed = append(failed, err)
			}
		}
		if credit == 0 {
			require.Len(t, failed, 1, "the one that waited ran out of time")
			require.ErrorIs(t, failed[0], context.DeadlineExceeded)
			require.NotErrorIs(t, failed[0], ErrNotStarted, "it was started, and killed")
		} else {
			require.Empty(t, failed, "each had its 600 ms")
		}
	}
}

// A task whose timeout passes while every process is busy was never
// started: its error says so (ErrNotStarted, which the worker hands back),
// and the busy process is left alone.
func TestPoolWaitPastTimeoutIsNotStarted(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, "serve", nil)
	served(t, p, `{}`)
	waitIdle(t, p)
	long, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.Handle(long, &Request{ID: 8, Code: "resize_image", Payload: []byte(`{"do":"sleep","ms":60000}`)})
		done <- err
	}()
	require.Eventually(t, func() bool { return p.Stats().Busy == 1 }, 10*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := p.Handle(ctx, &Request{ID: 9, Code: "resize_image", Payload: []byte(`{}`)})
	require.ErrorIs(t, err, ErrNotStarted)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, 1, p.Stats().Busy, "the busy process runs on")
	stop()
	require.Error(t, <-done)
}

// An operator kill (the context cancelled with a cause) kills the process
// too, and the error carries the cause.
func TestPoolKill(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, "serve", nil)
	first := served(t, p, `{}`)
	waitIdle(t, p)
	killed := errors.New("killed by operator")
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.Handle(ctx, &Request{ID: 8, Code: "resize_image", Payload: []byte(`{"do":"sleep","ms":60000}`)})
		done <- err
	}()
	require.Eventually(t, func() bool { return p.Stats().Busy == 1 }, 10*time.Second, 5*time.Millisecond)
	cancel(killed)
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, killed)
	requireGroupGone(t, first.PID)
	require.NotEqual(t, first.PID, served(t, p, `{}`).PID)
	require.Equal(t, int64(1), p.Stats().Ended[EndCancelled])
}

func TestPoolCrashMidTask(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, "serve", nil)
	first := served(t, p, `{}`)
	out, err := handle(t, p, `{"do":"exit","code":3}`)
	require.EqualError(t, err, fmt.Sprintf("pool process %d exited mid-task: exit status 3: dying on purpose", first.PID))
	require.Equal(t, "dying on purpose\n", out)
	require.NotEqual(t, first.PID, served(t, p, `{}`).PID)
	s := p.Stats()
	require.Equal(t, int64(1), s.Ended[EndExit])
	require.Zero(t, s.FailedStarts, "a process that served tasks before is no failed start")
}

// Tasks that kill their process (exit(), exit(0), a segfault) fail with
// their own process's error, even on a fresh process's first task: it
// printed its ready line, so it started. The pool neither backs off nor
// crash-loops, and a task waiting behind them never gets another task's
// error.
func TestPoolTaskCrashesAreNotFailedStarts(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, "serve", nil)
	const n = 6
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = handle(t, p, fmt.Sprintf(`{"do":"exit","code":%d,"text":"task %d dies"}`, i%2*7, i))
		})
	}
	wg.Wait()
	pids := map[string]bool{}
	for i, err := range errs {
		require.Error(t, err, "task %d", i)
		m := regexp.MustCompile(fmt.Sprintf(`^pool process (\d+) exited mid-task: exit status %d: task %d dies$`, i%2*7, i)).FindStringSubmatch(err.Error())
		require.NotNil(t, m, "task %d: %v", i, err)
		pids[m[1]] = true
	}
	require.Len(t, pids, n, "a process per task")
	s := p.Stats()
	require.Zero(t, s.FailedStarts)
	require.Zero(t, s.FailuresInARow)
	require.False(t, s.CrashLooping)
	require.Equal(t, int64(n), s.Ended[EndExit])
	served(t, p, `{}`)
}

// A process that dies after its ready line but before it was given any
// task counts as a failed start: no task is to blame, and restarting it
// at once would spin.
func TestPoolDeathBeforeAnyTaskIsAFailedStart(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, "readydie", nil)
	require.Eventually(t, func() bool { return p.Stats().CrashLooping }, 20*time.Second, 10*time.Millisecond)
	require.Regexp(t, `^pool process \d+ exited after its ready line, before any task: exit status 1: SQLSTATE\[HY000\] \[2002\] Connection refused$`,
		p.Stats().LastError)
}

// A process that dies mid-task is quoted from what it wrote on stderr
// during that task only, never from what an earlier task left there (the
// "#3 {main}" ending a handled exception's trace).
func TestPoolCrashQuotesOnlyItsTasksStderr(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, "serve", nil)
	first := served(t, p, `{"do":"stderr","text":"task 245 attempt 1 failed: RuntimeException: no mailbox\n#0 {main}\nchild-err\n"}`)
	out, err := handle(t, p, `{"do":"vanish","code":0}`)
	require.EqualError(t, err, fmt.Sprintf("pool process %d exited mid-task: exit status 0", first.PID))
	require.Empty(t, out)

	second := served(t, p, `{"do":"stderr","text":"#3 {main}\n"}`)
	_, err = handle(t, p, `{"do":"exit","code":3}`)
	require.EqualError(t, err, fmt.Sprintf("pool process %d exited mid-task: exit status 3: dying on purpose", second.PID))
}

func TestPoolGarbageMidTask(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, "serve", nil)
	first := served(t, p, `{}`)
	_, err := handle(t, p, `{"do":"garbage"}`)
	require.ErrorContains(t, err, fmt.Sprintf("pool process %d broke the protocol", first.PID))
	require.ErrorContains(t, err, "Warning: Undefined variable")
	requireGroupGone(t, first.PID)
	require.NotEqual(t, first.PID, served(t, p, `{}`).PID)
	require.Equal(t, int64(1), p.Stats().Ended[EndProtocol])
}

// With StdoutOutput (a handler's stdout: output) what a process writes on
// stdout is its task's output, in order with stderr, and it answers on
// descriptor 3: a framework's console opened on stdout at boot no longer
// breaks the protocol. A line on descriptor 3 that is no answer still does.
func TestPoolStdoutAsOutput(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, "serve", func(c *PoolConfig) { c.StdoutOutput = true })
	first := served(t, p, `{}`)
	for i := range 20 {
		b, err := json.Marshal(map[string]any{"do": "both", "text": fmt.Sprintf("task %d", i)})
		require.NoError(t, err)
		out, err := handle(t, p, string(b))
		require.NoError(t, err)
		want := fmt.Sprintf("task %d: on stdout\ntask %d: on stderr\ntask %d: stdout again\n{", i, i, i)
		require.True(t, strings.HasPrefix(out, want), "task %d: output %.120q", i, out)
	}
	require.Equal(t, first.PID, served(t, p, `{}`).PID, "one process served them all")
	require.Zero(t, p.Stats().Ended[EndProtocol])

	// The same console without the option breaks the protocol, and the
	// error names the option.
	plain := newTestPool(t, "serve", nil)
	_, err := handle(t, plain, `{"do":"both","text":"console"}`)
	require.ErrorContains(t, err, `broke the protocol: not a protocol line: "console: on stdout"`)
	require.ErrorContains(t, err, "give the handler stdout: output")
}

// A process given descriptor 3 that prints its ready line on stdout (a
// program that does not read TASK_POOL_FD) has not started, and the
// error says where taskd waited for it.
func TestPoolStdoutOutputWaitsOnDescriptor3(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	require.NoError(t, err)
	p := NewPool(PoolConfig{Code: "resize_image", Argv: []string{"env", "-u", "TASK_POOL_FD", self}, Env: []string{"POOL_HELPER=serve"},
		Size: 1, KillGrace: time.Second, StartTimeout: 300 * time.Millisecond, StdoutOutput: true, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, p.Start(context.Background()))
	t.Cleanup(p.Stop)
	require.Eventually(t, func() bool { return p.Stats().FailedStarts > 0 }, 10*time.Second, 10*time.Millisecond)
	require.Contains(t, p.Stats().LastError, "printed no ready line on descriptor 3 within 300ms")
	require.Contains(t, p.Stats().LastError, "TASK_POOL_FD")
}

func TestPoolRecyclesAfterMaxJobs(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, "serve", func(c *PoolConfig) { c.MaxJobs = 2 })
	var pids []int
	for range 6 {
		pids = append(pids, served(t, p, `{}`).PID)
	}
	for i := 0; i < 6; i += 2 {
		require.Equal(t, pids[i], pids[i+1], "pids %v", pids)
		if i > 0 {
			require.NotEqual(t, pids[i-1], pids[i], "pids %v", pids)
		}
	}
	requireGroupGone(t, pids[0])
	require.Eventually(t, func() bool { return p.Stats().Ended[EndMaxJobs] == 3 }, 5*time.Second, 5*time.Millisecond)
}

func TestPoolRecyclesPastMaxMemory(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, "serve", func(c *PoolConfig) { c.MaxMemory = 64 << 20 })
	first := served(t, p, `{}`)
	require.Equal(t, first.PID, served(t, p, `{}`).PID, "under the limit the process stays")
	require.Equal(t, first.PID, served(t, p, `{"do":"alloc","mb":100}`).PID, "recycled after the task, not during it")
	require.NotEqual(t, first.PID, served(t, p, `{}`).PID)
	require.Equal(t, int64(1), p.Stats().Ended[EndMaxMemory])
}

func TestPoolStopsIdleProcesses(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, "serve", func(c *PoolConfig) { c.Idle = 200 * time.Millisecond })
	first := served(t, p, `{}`)
	require.Eventually(t, func() bool { return p.Stats().Processes == 0 }, 10*time.Second, 10*time.Millisecond)
	requireGroupGone(t, first.PID)
	require.NotEqual(t, first.PID, served(t, p, `{}`).PID, "a task starts a process again")
	require.Equal(t, int64(1), p.Stats().Ended[EndIdle])
}

// A task that wakes a process stopped for being idle waits for its boot
// no longer than its own timeout: a boot that hung held it for the whole
// start_timeout, past its timeout, until the watchdog took the slot.
func TestPoolStartForATaskEndsWithTheTask(t *testing.T) {
	t.Parallel()
	hang := filepath.Join(t.TempDir(), "hang")
	p := newTestPool(t, "serve", func(c *PoolConfig) {
		c.Idle = 100 * time.Millisecond
		c.StartTimeout = time.Minute
		c.Env = append(c.Env, "POOL_HANG_IF="+hang)
	})
	served(t, p, `{}`)
	require.Eventually(t, func() bool { return p.Stats().Processes == 0 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, os.WriteFile(hang, nil, 0o600))

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := p.Handle(ctx, testRequest())
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrNotStarted)
		require.ErrorContains(t, err, "waiting for a process to start")
	case <-time.After(20 * time.Second):
		t.Fatal("the task waited for the boot past its timeout")
	}
	require.Eventually(t, func() bool { return p.Stats().Processes == 0 }, 10*time.Second, 10*time.Millisecond, "the hung boot is stopped")
}

// A pool whose processes die at start backs off, one start at a time,
// says it is crash-looping, and fails the tasks waiting for it with the
// process's own words.
func TestPoolCrashLoopBacksOff(t *testing.T) {
	t.Parallel()
	began := time.Now()
	p := newTestPool(t, "noready", func(c *PoolConfig) { c.Size = 4 })
	require.Eventually(t, func() bool { return p.Stats().CrashLooping }, 20*time.Second, 10*time.Millisecond)
	_, err := handle(t, p, `{}`)
	require.ErrorContains(t, err, "pool resize_image is crash-looping")
	require.ErrorContains(t, err, "exited before it was ready: exit status 255: PHP Parse error: syntax error")
	s := p.Stats()
	elapsed := time.Since(began)
	// Four slots start at once; after the first failure one start per
	// backoff of at least 250 ms.
	require.LessOrEqual(t, s.FailedStarts, int64(4+elapsed/poolBackoffMin+1), "%d failed starts in %s", s.FailedStarts, elapsed)
	require.Zero(t, s.Starts)
	require.LessOrEqual(t, s.Processes, 1, "one start at a time while crash-looping")
	require.Contains(t, s.LastError, "PHP Parse error")
}

func TestPoolRefusesOtherProtocols(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, "badproto", nil)
	require.Eventually(t, func() bool { return p.Stats().FailedStarts > 0 }, 20*time.Second, 10*time.Millisecond)
	require.Contains(t, p.Stats().LastError, "speaks pool protocol 99; this taskd speaks 1")

	silent := newTestPool(t, "silent", func(c *PoolConfig) { c.StartTimeout = 200 * time.Millisecond })
	require.Eventually(t, func() bool { return silent.Stats().FailedStarts > 0 }, 20*time.Second, 10*time.Millisecond)
	require.Contains(t, silent.Stats().LastError, "printed no ready line within 200ms")

	missing := NewPool(PoolConfig{Code: "x", Argv: []string{"/nonexistent/php"}, BackoffMax: 300 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, missing.Start(context.Background()))
	defer missing.Stop()
	require.Eventually(t, func() bool { return missing.Stats().FailedStarts > 0 }, 20*time.Second, 10*time.Millisecond)
	require.Contains(t, missing.Stats().LastError, "/nonexistent/php")
}

// Stop lets the running task finish, then the processes get EOF and exit;
// Handle after Stop fails at once.
func TestPoolStopDrains(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, "serve", func(c *PoolConfig) { c.Size = 2 })
	first := served(t, p, `{}`)
	waitIdle(t, p)
	var wg sync.WaitGroup
	var out string
	var err error
	wg.Go(func() { out, err = handle(t, p, `{"do":"sleep","ms":1000}`) })
	require.Eventually(t, func() bool { return p.Stats().Busy == 1 }, 10*time.Second, 5*time.Millisecond)
	p.Stop()
	wg.Wait()
	require.NoError(t, err)
	require.Contains(t, out, `"pid"`)
	require.Zero(t, p.Stats().Processes)
	require.Equal(t, int64(2), p.Stats().Ended[EndStop])
	require.Equal(t, syscall.ESRCH, syscall.Kill(-first.PID, 0))
	_, err = handle(t, p, `{}`)
	require.ErrorIs(t, err, errPoolStopped)
}

func TestCheckProgram(t *testing.T) {
	t.Parallel()
	require.NoError(t, CheckProgram([]string{"sh", "-c", "true"}, ""))
	require.ErrorContains(t, CheckProgram([]string{"no-such-php-binary"}, ""), "no-such-php-binary")
	require.ErrorContains(t, CheckProgram([]string{"sh"}, "/nonexistent/dir"), "/nonexistent/dir")
	require.Error(t, CheckProgram(nil, ""))

	// An interpreter's script: relative to dir, else the working directory.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "artisan"), []byte("<?php\n"), 0o644))
	require.NoError(t, CheckProgram([]string{"sh", "artisan"}, dir))
	require.NoError(t, CheckProgram([]string{"sh", "-x", "artisan", "taskd:work"}, dir))
	require.EqualError(t, CheckProgram([]string{"sh", "worker.php"}, dir), "script worker.php: not found in dir "+dir)
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.EqualError(t, CheckProgram([]string{"sh", "no/such/worker.sh"}, ""), "script no/such/worker.sh: not found in the working directory "+wd+
		" (the handler has no dir, so each daemon looks where it was started: give it one)")
	for _, inline := range [][]string{{"sh", "-c", "exit 0"}, {"bash", "-lc", "exit 0"}, {"sh", "-"}} {
		if _, err := exec.LookPath(inline[0]); err == nil {
			require.NoError(t, CheckProgram(inline, dir), "%v", inline)
		}
	}
	if _, err := exec.LookPath("php"); err == nil {
		require.NoError(t, CheckProgram([]string{"php", "-d", "memory_limit=256M", "artisan", "taskd:work"}, dir))
		require.ErrorContains(t, CheckProgram([]string{"php", "-d", "memory_limit=256M", "worker.php"}, dir), "script worker.php: not found")
		require.NoError(t, CheckProgram([]string{"php", "-r", "echo 1;"}, dir))
	}
}

// Not parallel: it runs while no other test does. After Stop, nothing of
// the pool is left: no goroutine, no process.
func TestPoolLeavesNothingBehind(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	self, err := os.Executable()
	require.NoError(t, err)
	p := NewPool(PoolConfig{Code: "leak", Argv: []string{self}, Env: []string{"POOL_HELPER=serve"}, Size: 3,
		MaxJobs: 2, KillGrace: time.Second, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, p.Start(context.Background()))
	var pids []int
	for range 5 {
		pids = append(pids, served(t, p, `{"do":"stderr","text":"x\n"}`).PID)
	}
	_, err = handle(t, p, `{"do":"exit","code":1}`)
	require.Error(t, err)
	p.Stop()
	for _, pid := range pids {
		require.Equal(t, syscall.ESRCH, syscall.Kill(pid, 0), "process %d", pid)
	}
	goleak.VerifyNone(t, opt)
}
