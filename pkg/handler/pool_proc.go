package handler

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// PoolProtocol is the version of the pool protocol this taskd speaks. A
// process announces the version it speaks in its ready line; any other
// version is refused at start.
const PoolProtocol = 1

// poolLineLimit bounds one line a pool process writes on its protocol
// channel: a longer one is garbage (a result is truncated to the output
// limit anyway).
const poolLineLimit = 16 << 20

// PoolProtocolFD is the descriptor a process answers on when its stdout is
// output (PoolConfig.StdoutOutput), named to it by TASK_POOL_FD.
const PoolProtocolFD = 3

// poolLogLines bounds the stderr lines logged per task (or between two
// tasks); the attempt's output keeps the tail of all of them.
const poolLogLines = 100

// poolRequest is the line written to a process's stdin for one task.
type poolRequest struct {
	ID        int64           `json:"id"`
	Code      string          `json:"code"`
	Attempt   int             `json:"attempt"`
	Retry     int             `json:"retry"`
	MaxRetry  int             `json:"max_retry"`
	UniqueKey string          `json:"unique_key"`
	Queue     string          `json:"queue"`
	Group     string          `json:"group,omitempty"`
	Payload   json.RawMessage `json:"payload"`
	Deadline  string          `json:"deadline,omitempty"`
	// ScheduledAt is Request.ScheduledAt.
	ScheduledAt string `json:"scheduled_at,omitempty"`
	// Traceparent is the attempt's span (W3C trace context), when traces
	// are on: the handler's own spans can continue it.
	Traceparent string `json:"traceparent,omitempty"`
}

// poolAnswer is a line a process writes on its protocol channel: its ready
// line first, then one answer per task.
type poolAnswer struct {
	Ready    bool            `json:"ready"`
	Protocol int             `json:"protocol"`
	OK       *bool           `json:"ok"`
	Result   json.RawMessage `json:"result"`
	Error    string          `json:"error"`
	// Permanent, with "ok": false, says no retry can mend the failure.
	Permanent bool `json:"permanent"`
	// RetryAfter, with "ok": false, is how many seconds the retry must
	// wait at least (RetryLater).
	RetryAfter float64 `json:"retry_after"`
}

// encodeRequest is the request line of r, newline included. A payload that
// is not JSON (a seed-style INSERT can store anything) is sent as a JSON
// string, and an empty one as null.
func encodeRequest(r *Request, deadline time.Time, traceparent string) ([]byte, error) {
	payload := json.RawMessage("null")
	switch {
	case len(bytes.TrimSpace(r.Payload)) == 0:
	case json.Valid(r.Payload):
		payload = r.Payload
	default:
		s, err := json.Marshal(string(r.Payload))
		if err != nil {
			return nil, err
		}
		payload = s
	}
	req := poolRequest{ID: r.ID, Code: r.Code, Attempt: r.Attempt, Retry: r.Retry, MaxRetry: r.MaxRetry, UniqueKey: r.UniqueKey, Queue: r.Queue, Group: r.Group,
		Payload: payload, Traceparent: traceparent, Deadline: formatTime(deadline), ScheduledAt: formatTime(r.ScheduledAt)}
	var b bytes.Buffer
	enc := json.NewEncoder(&b) // Encode appends the newline
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&req); err != nil {
		return nil, fmt.Errorf("encode pool request: %w", err)
	}
	// json.Compact: a payload stored with newlines must stay on one line.
	if bytes.Count(b.Bytes(), []byte{'\n'}) > 1 {
		var c bytes.Buffer
		if err := json.Compact(&c, b.Bytes()); err != nil {
			return nil, fmt.Errorf("encode pool request: %w", err)
		}
		c.WriteByte('\n')
		return c.Bytes(), nil
	}
	return b.Bytes(), nil
}

// errGarbage marks a line on the protocol channel that is not a protocol
// line.
var errGarbage = errors.New("not a protocol line")

// decode parses one line of the process's protocol channel.
func (p *poolProc) decode(line []byte) (*poolAnswer, error) {
	var a poolAnswer
	if err := json.Unmarshal(line, &a); err != nil {
		hint := p.channel() + " is the protocol's"
		if !p.fd3 {
			// Most often a log line: an output stream opened on stdout
			// before the worker took it (a console object made at boot).
			hint += fmt.Sprintf(": logs go to stderr, or give the handler stdout: output, "+
				"which keeps stdout as the task's output and moves the protocol to descriptor %d", PoolProtocolFD)
		}
		return nil, fmt.Errorf("%w: %q (%s)", errGarbage, quote(line), hint)
	}
	return &a, nil
}

// resultText is how a task's result is kept: a JSON string as its text,
// null or nothing as nothing, anything else as the JSON sent.
func resultText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

// quote shortens a line for an error message.
func quote(line []byte) string {
	const max = 200
	s := ValidText(string(line))
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// poolProc is one running process of a pool.
type poolProc struct {
	cmd     *exec.Cmd
	pid     int
	stdin   *os.File
	fd3     bool          // it answers on PoolProtocolFD, its stdout is output
	lines   chan []byte   // its answers; closed at EOF or on a read error
	lineErr error         // why lines was closed, read after it was
	exited  chan struct{} // closed once the process was waited for
	waitErr error         // cmd.Wait's, read after exited
	tap     *stderrTap
	done    chan struct{} // closed when the pool lets go of the process
	started time.Time
	jobs    int // tasks answered
	once    sync.Once
}

// startProc starts argv with the pool protocol's pipes in its own process
// group. It does not wait for the ready line. With stdoutOutput the
// process answers on descriptor PoolProtocolFD, and its stdout shares
// stderr's pipe: both are its output, in the order written.
func startProc(argv, env []string, dir string, stdoutOutput bool, log *slog.Logger) (*poolProc, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pool pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("pool pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		for _, f := range []*os.File{inR, inW, outR, outW} {
			f.Close()
		}
		return nil, fmt.Errorf("pool pipe: %w", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	// Files, not writers: os/exec hands the descriptors over and starts no
	// copying goroutines, so Wait returns when the process exits, and the
	// reads stay ours.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if stdoutOutput {
		cmd.Stdout, cmd.ExtraFiles = errW, []*os.File{outW}
	}
	cmd.SysProcAttr = GroupAttr()
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	groupStarted(cmd.Process.Pid) // withdrawn by close and kill
	p := &poolProc{
		cmd: cmd, pid: cmd.Process.Pid, stdin: inW, fd3: stdoutOutput, lines: make(chan []byte), exited: make(chan struct{}),
		done: make(chan struct{}), started: time.Now(),
	}
	msg := "pool stderr"
	if stdoutOutput {
		msg = "pool output" // stdout and stderr: one pipe
	}
	p.tap = newStderrTap(errR, log.With("pid", p.pid), msg)
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	go p.readLines(outR)
	return p, nil
}

// channel names where p answers, for messages.
func (p *poolProc) channel() string {
	if p.fd3 {
		return fmt.Sprintf("descriptor %d", PoolProtocolFD)
	}
	return "stdout"
}

// readLines sends each line of the protocol channel on p.lines until EOF,
// a read error, an overlong line, or the pool letting go of the process.
func (p *poolProc) readLines(r *os.File) {
	defer r.Close()
	defer close(p.lines)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br, p.channel())
		if err != nil {
			if !errors.Is(err, io.EOF) {
				p.lineErr = err
			}
			return
		}
		select {
		case p.lines <- line:
		case <-p.done:
			return
		}
	}
}

// readLine reads one line of channel without its newline, at most
// poolLineLimit long.
func readLine(br *bufio.Reader, channel string) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > poolLineLimit {
			return nil, fmt.Errorf("%w: a line on %s longer than %d bytes", errGarbage, channel, poolLineLimit)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return bytes.TrimRight(line, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, fmt.Errorf("%w: %s closed in the middle of a line: %q", errGarbage, channel, quote(line))
		default:
			return nil, err
		}
	}
}

// exitErr describes how the process ended, once exited is closed: "exit
// status 3: <last stderr line>", a line written since the running task
// began (or since the last one ended, or since the start): never one left
// by an earlier task.
func (p *poolProc) exitErr() string {
	select {
	case <-p.exited:
	default:
		return "its output closed; it is still running and is killed"
	}
	p.tap.drain() // its last words
	var msg string
	var ee *exec.ExitError
	switch {
	case p.waitErr == nil:
		msg = "exit status 0"
	case errors.As(p.waitErr, &ee):
		msg = ee.ProcessState.String()
	default:
		msg = p.waitErr.Error()
	}
	if line := p.tap.why(); line != "" {
		msg += ": " + line
	}
	return msg
}

// rss is the process's resident memory in bytes (0 when unknown).
func (p *poolProc) rss() int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// close lets go of the process: stdin is closed (EOF asks a well-behaved
// process to exit), then the group gets SIGTERM after wait, SIGKILL grace
// later. It returns when the process was waited for and its group is gone
// or SIGKILLed.
func (p *poolProc) close(wait, grace time.Duration) {
	p.stdin.Close()
	t := time.NewTimer(wait)
	select {
	case <-p.exited:
		t.Stop()
		stopGroup(p.pid, grace, p.exited) // stragglers of the group
	case <-t.C:
		stopGroup(p.pid, grace, p.exited)
	}
	groupEnded(p.pid)
	p.once.Do(func() { close(p.done) })
	p.tap.wait(grace)
}

// kill stops the process group at once: SIGTERM, SIGKILL after grace.
func (p *poolProc) kill(grace time.Duration) {
	p.stdin.Close()
	stopGroup(p.pid, grace, p.exited)
	groupEnded(p.pid)
	p.once.Do(func() { close(p.done) })
	p.tap.wait(grace)
}

// stderrTap reads a process's stderr: each line is logged, with the task
// id while a task runs, and kept in the task's output. A task's output
// holds everything the process wrote on stderr before it answered: the
// answer is read from its own pipe, so take drains what stderr still holds
// before the answer is handled.
type stderrTap struct {
	f      *os.File
	rc     syscall.RawConn
	closed chan struct{}
	msg    string // the log message of each line

	mu      sync.Mutex
	log     *slog.Logger // the process's logger
	taskLog *slog.Logger // with the task's id while one runs
	out     io.Writer    // the running task's output, or nil
	partial []byte       // an unfinished line, for the log
	logged  int          // lines logged since the task began or ended
	// last holds the last bytes since the task began or ended (since the
	// start before the first task), for an exit message.
	last *tailBuffer
}

func newStderrTap(f *os.File, log *slog.Logger, msg string) *stderrTap {
	t := &stderrTap{f: f, log: log, closed: make(chan struct{}), msg: msg}
	t.forget()
	rc, err := f.SyscallConn()
	if err != nil { // an *os.File from os.Pipe always has one
		panic(err)
	}
	t.rc = rc
	go t.read()
	return t
}

// read copies stderr into the tap until EOF. Each read and its handling
// happen under mu, so take sees every byte either handled or still in
// the pipe.
func (t *stderrTap) read() {
	defer close(t.closed)
	defer t.f.Close()
	buf := make([]byte, 32<<10)
	for {
		var n int
		var rerr error
		err := t.rc.Read(func(fd uintptr) bool {
			t.mu.Lock()
			defer t.mu.Unlock()
			for {
				n, rerr = syscall.Read(int(fd), buf)
				if rerr != syscall.EINTR {
					break
				}
			}
			if rerr == syscall.EAGAIN {
				return false
			}
			if n > 0 {
				t.consume(buf[:n])
			}
			return true
		})
		if err != nil || rerr != nil || n <= 0 {
			t.mu.Lock()
			t.flushPartial()
			t.mu.Unlock()
			return
		}
	}
}

// consume handles bytes read; mu is held.
func (t *stderrTap) consume(p []byte) {
	t.last.Write(p)
	if t.out != nil {
		t.out.Write(p)
	}
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		t.logLine(t.partial[:i])
		t.partial = t.partial[i+1:]
	}
	if len(t.partial) > stderrLineLimit { // a very long line: log its start
		t.logLine(t.partial)
		t.partial = t.partial[:0]
	}
	if len(t.partial) == 0 {
		t.partial = nil // do not pin a large buffer
	}
}

func (t *stderrTap) logLine(line []byte) {
	t.logged++
	log := t.log
	if t.taskLog != nil {
		log = t.taskLog
	}
	switch {
	case t.logged <= poolLogLines:
		log.Info(t.msg, "line", quoteLine(line))
	case t.logged == poolLogLines+1:
		log.Info(t.msg + ": more lines, not logged; the attempt's output keeps their tail")
	}
}

func quoteLine(line []byte) string {
	line = bytes.TrimRight(line, "\r")
	if len(line) > stderrLineLimit {
		line = line[:stderrLineLimit]
	}
	return ValidText(string(line))
}

// flushPartial logs an unfinished line; mu is held.
func (t *stderrTap) flushPartial() {
	if len(t.partial) > 0 {
		t.logLine(t.partial)
		t.partial = nil
	}
}

// begin attributes what follows to a task, kept in out. What stderr
// already holds was written before the task and is handled first.
func (t *stderrTap) begin(out io.Writer, log *slog.Logger) {
	t.drain()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flushPartial()
	t.out, t.taskLog, t.logged = out, log, 0
	t.forget()
}

// take ends the task's attribution once every byte already written to
// stderr was handled.
func (t *stderrTap) take() {
	t.drain()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flushPartial()
	t.out, t.taskLog, t.logged = nil, nil, 0
	t.forget()
}

// forget starts last afresh, so that an exit message does not quote an
// earlier task's words; mu is held (or t is new).
func (t *stderrTap) forget() {
	t.last = &tailBuffer{limit: stderrLineLimit}
}

// why is the line of last that says why the process ended.
func (t *stderrTap) why() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return whyLine(t.last.raw())
}

// drain handles what stderr holds now.
func (t *stderrTap) drain() {
	_ = t.rc.Control(func(fd uintptr) {
		t.mu.Lock()
		defer t.mu.Unlock()
		buf := make([]byte, 4<<10)
		for {
			n, err := syscall.Read(int(fd), buf)
			if err == syscall.EINTR {
				continue
			}
			if n <= 0 || err != nil {
				break
			}
			t.consume(buf[:n])
		}
	})
}

// wait waits, at most d, for stderr to reach EOF: a child that left the
// group may hold it open.
func (t *stderrTap) wait(d time.Duration) {
	select {
	case <-t.closed:
	case <-time.After(d):
		t.f.SetReadDeadline(time.Now()) // unblocks read; its fd closes there
		<-t.closed
	}
}
