package handler

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The handler guard kills the process groups of exec handlers and pool
// processes when taskd dies without stopping them (SIGKILL, the OOM
// killer). Pdeathsig (GroupAttr) kills only a group's first process; what
// that started (the `sleep` of `sh -c 'sleep 60; echo done'`, a PHP
// worker's children) would run on beside the attempt recovery starts
// elsewhere.
//
// The guard is this binary re-executed (see init) in a session of its own,
// so a signal to taskd's process group (Supervisor's killasgroup, a
// terminal's Ctrl-C) does not take it first. It reads a pipe whose write
// end only taskd holds: "+PGID\n" when a group starts, "-PGID\n" when it
// has ended. At EOF, which the kernel gives when taskd dies, however it
// dies, it SIGKILLs every group still listed and exits. It has no
// Pdeathsig: outliving taskd is its job.
//
// PID reuse: a process group's id cannot be reused while its leader is
// unreaped or any member is alive. A group is unlisted when the attempt
// ends (Handle returns: leader reaped, output closed, and after a kill the
// group empty or SIGKILLed), or when a pool process was stopped, so a
// listed id is still the handler's group but between its last member's
// exit and that write: moments (up to the kill grace when a process
// outside the group holds the output open), while the kernel hands out
// pids in turn and reuses one only after going round all of pid_max.
// Members left behind by an attempt
// that ended normally (a `cmd &` the handler did not wait for) are not
// killed, as before, and no longer guarded: the attempt is over, its
// outcome decided, and at-least-once already allows a rerun of what a
// finished attempt did.

// guardEnv, set in its environment, makes a process of this binary the
// guard (init); its value is the log format, and ":command" for taskd
// lock's guard (its log line names the command, not handlers). Not
// TASKD_*: configuration refuses a TASKD_* variable that names no key.
const guardEnv = "_TASKD_HANDLER_GUARD"

// guardStopWait bounds Stop's wait for the guard to exit.
const guardStopWait = 5 * time.Second

// guardFD is the guard's end of the pipe (the first of ExtraFiles).
const guardFD = 3

func init() {
	v, ok := os.LookupEnv(guardEnv)
	if !ok {
		return
	}
	format, of, _ := strings.Cut(v, ":")
	// Not started by StartGuard, fd 3 may be closed, or anything (the Go
	// runtime opens cgroup files at start).
	var st syscall.Stat_t
	if syscall.Fstat(guardFD, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		fmt.Fprintln(os.Stderr, "taskd: the handler guard is started by `taskd run` and `taskd lock` only")
		os.Exit(2)
	}
	os.Exit(runGuard(os.NewFile(guardFD, "guard"), os.Stderr, format, of == "command"))
}

// runGuard is the guard's body: it keeps the list of groups r announces
// and SIGKILLs those left at EOF; command: taskd lock's guard.
func runGuard(r io.Reader, stderr io.Writer, format string, command bool) int {
	// Its life is the pipe's: what stops taskd (SIGTERM, SIGINT, SIGHUP;
	// systemd signals every process of the unit) must not end the guard
	// while taskd drains. SIGPIPE: its one log line may meet a closed log.
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	setProcessName("taskd-guard")
	groups := map[int]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			groups[pgid] = true
		case '-':
			delete(groups, pgid)
		}
	}
	var killed []int
	for pgid := range groups {
		if syscall.Kill(-pgid, syscall.SIGKILL) == nil {
			killed = append(killed, pgid)
		}
	}
	if len(killed) > 0 {
		var h slog.Handler = slog.NewJSONHandler(stderr, nil)
		if format == "text" {
			h = slog.NewTextHandler(stderr, nil)
		}
		msg := "taskd exited with handlers running: killed their process groups"
		if command {
			msg = "taskd lock exited with its command running: killed its process group"
		}
		slog.New(h).Warn(msg, "component", "guard", "pgids", killed)
	}
	return 0
}

// setProcessName sets the name ps and top show (the guard is started as
// /proc/self/exe, which would show as "exe").
func setProcessName(name string) {
	b := append([]byte(name), 0)
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_NAME, uintptr(unsafe.Pointer(&b[0])), 0)
}

// Guard is the parent's side of the handler guard: the write end of its
// pipe and its process.
type Guard struct {
	cmd    *exec.Cmd
	log    *slog.Logger
	mu     sync.Mutex
	w      int  // the pipe's write end; -1 once Stop closed it
	broken bool // a write failed: the guard was killed
	sent   int  // lines written, which tests wait for
}

// guard is the running guard Exec and Pool announce their groups to; nil
// when none runs.
var guard atomic.Pointer[Guard]

// StartGuard starts the handler guard for this process: Exec and Pool
// announce their process groups to it until Stop. logFormat ("json" or
// "text") is the format of its one log line, written on stderr (a file:
// the guard outlives whatever would copy to a writer; nil drops it). Stop
// it only after the handlers have ended.
func StartGuard(logFormat string, stderr *os.File, log *slog.Logger) (*Guard, error) {
	g, err := startGuard(logFormat, stderr, log)
	if err == nil {
		guard.Store(g)
	}
	return g, err
}

// StartCommandGuard starts a guard of its own for the groups announced to
// it with Group (taskd lock's command), which Exec and Pool do not use.
func StartCommandGuard(logFormat string, stderr *os.File, log *slog.Logger) (*Guard, error) {
	return startGuard(logFormat+":command", stderr, log)
}

func startGuard(logFormat string, stderr *os.File, log *slog.Logger) (*Guard, error) {
	fds, err := cloexecPipe()
	if err != nil {
		return nil, fmt.Errorf("start handler guard: pipe: %w", err)
	}
	r := os.NewFile(uintptr(fds[0]), "guard")
	defer r.Close()
	// A guard that stopped reading must not stall a handler's start.
	if err := syscall.SetNonblock(fds[1], true); err != nil {
		_ = syscall.Close(fds[1])
		return nil, fmt.Errorf("start handler guard: %w", err)
	}
	// /proc/self/exe: this very binary, even if an upgrade replaced or
	// removed its file.
	cmd := exec.Command("/proc/self/exe", "handler-guard")
	cmd.Args[0] = os.Args[0]
	cmd.Env = append(os.Environ(), guardEnv+"="+logFormat)
	cmd.ExtraFiles = []*os.File{r}
	if stderr != nil {
		cmd.Stderr = stderr
	}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		_ = syscall.Close(fds[1])
		return nil, fmt.Errorf("start handler guard: %w", err)
	}
	return &Guard{cmd: cmd, log: log, w: fds[1]}, nil
}

// Pid is the guard's process id.
func (g *Guard) Pid() int { return g.cmd.Process.Pid }

// Stop closes the pipe, so the guard kills what is still announced
// (nothing once the handlers have ended) and exits, and waits for it.
// Safe on nil and twice.
func (g *Guard) Stop() {
	if g == nil {
		return
	}
	guard.CompareAndSwap(g, nil)
	g.mu.Lock()
	if g.w < 0 {
		g.mu.Unlock()
		return
	}
	_ = syscall.Close(g.w)
	g.w = -1
	g.mu.Unlock()
	done := make(chan struct{})
	go func() {
		_ = g.cmd.Wait()
		close(done)
	}()
	t := time.NewTimer(guardStopWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = g.cmd.Process.Kill()
		<-done
	}
}

// send writes one announcement. A failed write (the guard is gone, or
// stopped reading and the pipe is full) leaves its list wrong: it is
// killed, once, so that it never acts on a stale list.
func (g *Guard) send(op byte, pgid int) {
	line := strconv.AppendInt([]byte{op}, int64(pgid), 10)
	line = append(line, '\n')
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w < 0 || g.broken {
		return
	}
	// Shorter than PIPE_BUF: written whole or not at all.
	if _, err := syscall.Write(g.w, line); err == nil {
		g.sent++
	} else {
		g.broken = true
		_ = g.cmd.Process.Kill()
		g.log.Warn("handler guard stopped: the children of a handler may outlive a SIGKILLed taskd", "err", err)
	}
}

// Group announces process group pgid, started with GroupAttr outside
// Exec and Pool (taskd lock's command), to g; the func it returns
// withdraws it once the group ended. Safe on nil.
func (g *Guard) Group(pgid int) (ended func()) {
	if g == nil {
		return func() {}
	}
	g.send('+', pgid)
	return func() { g.send('-', pgid) }
}

// groupStarted announces a handler's process group to the guard.
func groupStarted(pgid int) {
	if g := guard.Load(); g != nil {
		g.send('+', pgid)
	}
}

// groupEnded withdraws a group groupStarted announced.
func groupEnded(pgid int) {
	if g := guard.Load(); g != nil {
		g.send('-', pgid)
	}
}
