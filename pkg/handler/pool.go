package handler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskd/taskd/pkg/startstop"
	"github.com/taskd/taskd/pkg/tracing"
)

// Defaults of PoolConfig.
const (
	PoolSizeDefault = 4
	// PoolStartTimeoutDefault is how long a process may take to print its
	// ready line (a framework's boot).
	PoolStartTimeoutDefault = time.Minute
	// PoolBackoffMaxDefault caps the wait between two starts of a pool
	// whose processes keep dying at start.
	PoolBackoffMaxDefault = 30 * time.Second
)

// PoolSlotsPerProcess is how many worker slots a pool's queue gets per
// process when its concurrency is not configured: the next tasks are
// claimed and marked running while the processes work, so a process does
// not idle through the task center's round trips between two tasks (a
// no-op PHP pool runs about 2.5x faster than with one slot per process).
// A task waits in its slot for a free process, within its timeout.
const PoolSlotsPerProcess = 4

// PoolCrashLoopStarts is the number of failed starts in a row after which
// a pool is crash-looping: reported as such, and the tasks waiting for a
// process fail at each further failed start instead of waiting.
const PoolCrashLoopStarts = 3

// poolBackoffMin is the wait after a first failed start; it doubles with
// every further one.
const poolBackoffMin = 250 * time.Millisecond

// PoolConfig configures a Pool.
type PoolConfig struct {
	// Code is the task code served, for logs and metrics.
	Code string
	// Argv is the program (no shell).
	Argv []string
	// Env is added to the daemon's environment (without its TASKD_*
	// variables), as for Exec.
	Env []string
	Dir string
	// Size is the number of processes (default PoolSizeDefault).
	Size int
	// MaxJobs recycles a process after this many tasks (0: never).
	MaxJobs int
	// MaxMemory recycles a process whose resident memory passed this many
	// bytes after a task (0: never).
	MaxMemory int64
	// Idle stops a process idle this long; a task starts it again (0:
	// never).
	Idle time.Duration
	// StartTimeout bounds the wait for the ready line.
	StartTimeout time.Duration
	// StdoutOutput keeps what a process writes on stdout as the task's
	// output, as stderr is, and has it answer on descriptor
	// PoolProtocolFD instead (TASK_POOL_FD names it): a framework's
	// console opened on stdout at boot cannot break the protocol.
	StdoutOutput bool
	// KillGrace is the time between SIGTERM and SIGKILL, and the time a
	// process has to exit after EOF on stdin.
	KillGrace   time.Duration
	OutputLimit int
	// BackoffMax caps the wait between failed starts.
	BackoffMax time.Duration
	// Timeout caps each attempt (0: the task's timeout alone).
	Timeout time.Duration
	// WaitCredit is how much of the time a task waited for a free
	// process it gets back: its timeout then runs from when a process
	// took it (0: none). Four tasks per process wait in the worker's
	// slots, and a task that waited 3 s behind a long one was killed 2 s
	// into its 5 s timeout and run again. Recovery and the watchdog take
	// a task at its timeout plus their grace, so the node gives half of
	// the smaller one.
	WaitCredit time.Duration
	Logger     *slog.Logger
}

// AttemptTimeout implements Capped.
func (p *Pool) AttemptTimeout() time.Duration { return p.cfg.Timeout }

// Why pool processes end, as counted in PoolStats.Ended.
const (
	EndMaxJobs   = "max_jobs"   // recycled after MaxJobs tasks
	EndMaxMemory = "max_memory" // recycled past MaxMemory
	EndIdle      = "idle"       // stopped after Idle without a task
	EndExit      = "exit"       // exited by itself (crash, exit())
	EndProtocol  = "protocol"   // wrote something that is not the protocol
	EndTimeout   = "timeout"    // killed at a task's timeout
	EndCancelled = "cancelled"  // killed: operator kill, watchdog, shutdown
	EndStop      = "stop"       // the pool stopped
)

var endReasons = []string{EndMaxJobs, EndMaxMemory, EndIdle, EndExit, EndProtocol, EndTimeout, EndCancelled, EndStop}

// PoolEndReasons lists the End* reasons.
func PoolEndReasons() []string { return slices.Clone(endReasons) }

// PoolStats is a snapshot of a pool.
type PoolStats struct {
	Code      string `json:"code"`
	Size      int    `json:"size"`
	Processes int    `json:"processes"` // running (booting, idle or busy)
	Busy      int    `json:"busy"`      // running a task
	// Starts counts processes that became ready; FailedStarts those that
	// did not, or that died (or spoke unasked) after their ready line but
	// before they were given a task. A process that dies during a task has
	// started: that is the task's failure.
	Starts       int64 `json:"starts"`
	FailedStarts int64 `json:"failed_starts"`
	// Ended counts processes that ended, by reason (End*).
	Ended map[string]int64 `json:"ended,omitempty"`
	// FailuresInARow are the failed starts since a process last answered
	// a task; CrashLooping is FailuresInARow >= PoolCrashLoopStarts.
	FailuresInARow int       `json:"failures_in_a_row,omitempty"`
	CrashLooping   bool      `json:"crash_looping"`
	LastError      string    `json:"last_error,omitempty"`
	NextStart      time.Time `json:"next_start,omitzero"` // while backing off
}

// Pool runs tasks on long-lived processes, one task at a time each, over
// the pool protocol (docs/pool-protocol.md): one JSON line per task on the
// process's stdin, one JSON line back on its stdout (or on descriptor 3,
// StdoutOutput). What a process writes on stderr (and then stdout) is
// logged with the task's id and kept as the attempt's output.
//
// Each process runs in its own process group. A task whose context ends
// (timeout, operator kill, watchdog, shutdown) gets its process group
// killed, SIGTERM then SIGKILL after KillGrace, and a fresh process takes
// the slot; so does a process that exits or breaks the protocol, which
// fails the task it was running. A process is recycled between tasks, never
// during one, after MaxJobs tasks or past MaxMemory, and stopped after Idle.
// Processes that keep dying at start are started again with an
// exponential backoff, one probe at a time, so a broken deploy does not
// spin the CPU.
//
// Start starts the processes; Stop gives each EOF on stdin once its task
// (if any) is done, and waits for them to exit. Handle before Start or
// after Stop fails.
type Pool struct {
	cfg    PoolConfig
	log    *slog.Logger
	env    []string
	calls  chan *poolCall
	probe  chan struct{} // held by the one slot trying a start while starts fail
	runner startstop.Runner
	closed chan struct{} // closed by Stop
	bg     sync.WaitGroup

	started              atomic.Bool
	live, busy           atomic.Int64
	starts, failedStarts atomic.Int64
	ended                [8]atomic.Int64 // by endReasons
	mu                   sync.Mutex
	failures             int
	lastErr              string
	nextStart            time.Time
	closeOnce            sync.Once
}

type poolCall struct {
	ctx    context.Context
	r      *Request
	reply  chan poolReply
	queued time.Time // when it began to wait for a process
}

type poolReply struct {
	out string
	err error
}

// NewPool returns a pool; Start starts its processes.
func NewPool(cfg PoolConfig) *Pool {
	cfg.Size = cmp.Or(cfg.Size, PoolSizeDefault)
	cfg.StartTimeout = cmp.Or(cfg.StartTimeout, PoolStartTimeoutDefault)
	cfg.KillGrace = cmp.Or(cfg.KillGrace, KillGraceDefault)
	cfg.OutputLimit = cmp.Or(cfg.OutputLimit, OutputLimitDefault)
	cfg.BackoffMax = cmp.Or(cfg.BackoffMax, PoolBackoffMaxDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Pool{
		cfg: cfg, log: cfg.Logger.With("component", "pool", "handler", cfg.Code),
		calls: make(chan *poolCall), probe: make(chan struct{}, 1), closed: make(chan struct{}),
	}
	// TASK_* come last: they are the contract with the process.
	p.env = append(append(inheritedEnv(), cfg.Env...),
		"TASK_CODE="+cfg.Code, "TASK_POOL_PROTOCOL="+strconv.Itoa(PoolProtocol))
	if cfg.StdoutOutput {
		p.env = append(p.env, "TASK_POOL_FD="+strconv.Itoa(PoolProtocolFD))
	}
	return p
}

// Start starts the pool's processes. ctx only carries values.
func (p *Pool) Start(ctx context.Context) error {
	if len(p.cfg.Argv) == 0 {
		return errors.New("pool: empty argv")
	}
	err := p.runner.Start(context.WithoutCancel(ctx), func(ctx context.Context) {
		var slots sync.WaitGroup
		for i := range p.cfg.Size {
			slots.Go(func() { p.slot(ctx, i) })
		}
		slots.Wait()
	})
	if err == nil {
		p.started.Store(true)
		p.log.Info("pool started", "size", p.cfg.Size, "argv", p.cfg.Argv)
	}
	return err
}

// Stop lets every slot finish its task, gives its process EOF, and waits
// for the processes to exit (SIGKILL KillGrace after a SIGTERM for one
// that does not). Stop the worker first, so that no task is running.
// Safe to call twice or without Start.
func (p *Pool) Stop() {
	p.closeOnce.Do(func() { close(p.closed) })
	p.runner.Stop()
	p.bg.Wait()
}

var errPoolStopped = errors.New("pool stopped")

// ErrNotStarted is the error of an attempt a handler never started: a
// pool's processes stayed busy until the task's timeout. The worker hands
// such a task back, neither a failure nor a retry: the pool runs a few
// tasks per process ahead of it (PoolSlotsPerProcess), and one that
// waited behind long ones has not been tried.
var ErrNotStarted = errors.New("no process was free")

// Handle runs one attempt on a free process, waiting for one while all
// are busy.
func (p *Pool) Handle(ctx context.Context, r *Request) (string, error) {
	if !p.started.Load() {
		return "", fmt.Errorf("pool %s: not started", p.cfg.Code)
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("pool %s: %w", p.cfg.Code, ctxErr(ctx))
	}
	c := &poolCall{ctx: ctx, r: r, reply: make(chan poolReply, 1), queued: time.Now()}
	select {
	case p.calls <- c:
	case <-ctx.Done():
		return "", p.notStarted(ctx, "waiting for a free process")
	case <-p.closed:
		return "", fmt.Errorf("pool %s: %w", p.cfg.Code, errPoolStopped)
	}
	rep := <-c.reply
	return rep.out, rep.err
}

// notStarted is the error of an attempt whose context ended before a
// process took it, while it waited as doing says.
func (p *Pool) notStarted(ctx context.Context, doing string) error {
	err := ctxErr(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w within the task's timeout: %w", ErrNotStarted, err)
	}
	return fmt.Errorf("pool %s: %s: %w", p.cfg.Code, doing, err)
}

// credited is ctx with its deadline moved d later, cancelled as ctx is
// for any other cause (a kill, a shutdown).
func credited(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok || d <= 0 {
		return ctx, func() {}
	}
	timed, cancelTimed := context.WithDeadline(context.WithoutCancel(ctx), dl.Add(d))
	out, cancel := context.WithCancelCause(timed)
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel(context.Cause(ctx))
		}
	})
	return out, func() {
		stop()
		cancel(nil)
		cancelTimed()
	}
}

// Stats returns a snapshot of the pool.
func (p *Pool) Stats() PoolStats {
	s := PoolStats{
		Code: p.cfg.Code, Size: p.cfg.Size, Processes: int(p.live.Load()), Busy: int(p.busy.Load()),
		Starts: p.starts.Load(), FailedStarts: p.failedStarts.Load(),
	}
	for i, r := range endReasons {
		if n := p.ended[i].Load(); n > 0 {
			if s.Ended == nil {
				s.Ended = map[string]int64{}
			}
			s.Ended[r] = n
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s.FailuresInARow, s.LastError = p.failures, p.lastErr
	s.CrashLooping = p.failures >= PoolCrashLoopStarts
	if p.failures > 0 && time.Now().Before(p.nextStart) {
		s.NextStart = p.nextStart
	}
	return s
}

func (p *Pool) countEnd(reason string) {
	for i, r := range endReasons {
		if r == reason {
			p.ended[i].Add(1)
		}
	}
}

// slot keeps one process and serves calls on it until ctx is done.
func (p *Pool) slot(ctx context.Context, n int) {
	var proc *poolProc
	defer func() {
		if proc != nil {
			p.retire(proc, EndStop)
		}
	}()
	var idle *time.Timer
	if p.cfg.Idle > 0 {
		idle = time.NewTimer(p.cfg.Idle)
		defer idle.Stop()
	}
	asleep := false // stopped when idle: start again for a task only
	for {
		var c *poolCall
		if proc == nil {
			if asleep {
				select {
				case c = <-p.calls:
				case <-ctx.Done():
					return
				}
			}
			var err error
			if c == nil {
				proc, err = p.start(ctx, n)
			} else {
				// A start for a waiting task ends with the task too (its
				// timeout, a kill): a boot that hangs, or the backoff of a
				// pool whose starts fail, held the task past its timeout
				// until the watchdog took its slot.
				sctx, cancel := context.WithCancel(ctx)
				stop := context.AfterFunc(c.ctx, cancel)
				proc, err = p.start(sctx, n)
				stop()
				cancel()
				if err != nil && c.ctx.Err() != nil && ctx.Err() == nil {
					err = p.notStarted(c.ctx, "waiting for a process to start")
				}
			}
			if err != nil {
				if c != nil {
					c.reply <- poolReply{err: err}
				}
				if ctx.Err() != nil {
					return
				}
				continue
			}
			asleep = false
		}
		if c == nil {
			var idleC <-chan time.Time
			if idle != nil {
				idle.Reset(p.cfg.Idle)
				idleC = idle.C
			}
			select {
			case c = <-p.calls:
			case line, ok := <-proc.lines:
				p.broken(proc, idleFault(proc, line, ok))
				proc = nil
				continue
			case <-idleC:
				p.log.Info("pool process idle; stopping it", "pid", proc.pid, "idle", p.cfg.Idle, "tasks", proc.jobs)
				p.retire(proc, EndIdle)
				proc, asleep = nil, true
				continue
			case <-ctx.Done():
				return
			}
		}
		var keep bool
		if keep = p.run(proc, c); !keep {
			proc = nil
			continue
		}
		if reason := p.recycleReason(proc); reason != "" {
			p.retire(proc, reason)
			proc = nil
		}
	}
}

// idleFault is why a process that spoke or closed stdout between tasks is
// replaced.
func idleFault(proc *poolProc, line []byte, ok bool) error {
	when := "between tasks"
	if proc.jobs == 0 {
		when = "after its ready line, before any task"
	}
	if ok {
		return fmt.Errorf("pool process %d wrote on %s %s: %q", proc.pid, proc.channel(), when, quote(line))
	}
	if proc.lineErr != nil {
		return fmt.Errorf("pool process %d: %w", proc.pid, proc.lineErr)
	}
	<-proc.exitedOrTimeout(time.Second)
	return fmt.Errorf("pool process %d exited %s: %s", proc.pid, when, proc.exitErr())
}

// broken replaces a process that failed between tasks. One that failed
// before it was given any task counts as a failed start: no task is to
// blame, and without the backoff a worker that prints its ready line and
// exits (a database it cannot reach) would be restarted in a loop.
func (p *Pool) broken(proc *poolProc, err error) {
	reason := EndExit
	if errors.Is(err, errGarbage) || proc.lineErr != nil {
		reason = EndProtocol
	}
	if proc.jobs == 0 {
		p.startFailed(err)
	} else {
		p.log.Warn("pool process lost; replacing it", "pid", proc.pid, "err", err, "tasks", proc.jobs)
	}
	p.kill(proc, reason)
}

// recycleReason says whether a process must be recycled after a task.
func (p *Pool) recycleReason(proc *poolProc) string {
	if p.cfg.MaxJobs > 0 && proc.jobs >= p.cfg.MaxJobs {
		return EndMaxJobs
	}
	if p.cfg.MaxMemory > 0 {
		if rss := proc.rss(); rss > p.cfg.MaxMemory {
			p.log.Info("pool process past max_memory; recycling it", "pid", proc.pid, "rss", rss, "max_memory", p.cfg.MaxMemory, "tasks", proc.jobs)
			return EndMaxMemory
		}
	}
	return ""
}

// start starts a process and waits for its ready line, after the backoff
// when starts have been failing.
func (p *Pool) start(ctx context.Context, n int) (*poolProc, error) {
	release, ok := p.waitTurn(ctx)
	if !ok {
		return nil, ctx.Err()
	}
	defer release()
	env := append(p.env[:len(p.env):len(p.env)], "TASK_POOL_SLOT="+strconv.Itoa(n))
	proc, err := startProc(p.cfg.Argv, env, p.cfg.Dir, p.cfg.StdoutOutput, p.log)
	if err != nil {
		p.startFailed(fmt.Errorf("pool %s: %w", p.cfg.Code, err))
		return nil, p.failure(err)
	}
	p.live.Add(1)
	if err := p.ready(ctx, proc); err != nil {
		if ctx.Err() != nil {
			p.kill(proc, EndStop)
			return nil, ctx.Err()
		}
		err = fmt.Errorf("pool %s: process %d %w", p.cfg.Code, proc.pid, err)
		p.startFailed(err)
		p.kill(proc, EndExit)
		return nil, p.failure(err)
	}
	p.starts.Add(1)
	p.log.Debug("pool process ready", "pid", proc.pid, "slot", n, "boot", time.Since(proc.started))
	return proc, nil
}

// failure is the error a task waiting for a start gets.
func (p *Pool) failure(err error) error {
	s := p.Stats()
	if s.CrashLooping {
		return fmt.Errorf("pool %s is crash-looping (%d failed starts in a row): %w", p.cfg.Code, s.FailuresInARow, err)
	}
	return err
}

// ready waits for the ready line.
func (p *Pool) ready(ctx context.Context, proc *poolProc) error {
	t := time.NewTimer(p.cfg.StartTimeout)
	defer t.Stop()
	select {
	case line, ok := <-proc.lines:
		if !ok {
			if proc.lineErr != nil {
				return proc.lineErr
			}
			<-proc.exitedOrTimeout(p.cfg.KillGrace)
			return fmt.Errorf("exited before it was ready: %s", proc.exitErr())
		}
		a, err := proc.decode(line)
		switch {
		case err != nil || !a.Ready:
			return fmt.Errorf("did not start with a ready line (%s): %q", `{"ready":true,"protocol":1}`, quote(line))
		case a.Protocol != PoolProtocol:
			return fmt.Errorf("speaks pool protocol %d; this taskd speaks %d", a.Protocol, PoolProtocol)
		}
		return nil
	case <-t.C:
		if proc.fd3 {
			// A program that does not read TASK_POOL_FD prints it on
			// stdout, which is now its output.
			return fmt.Errorf("printed no ready line on %s within %s (the handler's stdout: output has it answer there, "+
				"as TASK_POOL_FD says; what it printed on stdout is in the log)", proc.channel(), p.cfg.StartTimeout)
		}
		return fmt.Errorf("printed no ready line within %s", p.cfg.StartTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitTurn returns at once while starts succeed. While they fail, one slot
// at a time may try, after the backoff; the others wait for its outcome.
func (p *Pool) waitTurn(ctx context.Context) (release func(), ok bool) {
	for {
		p.mu.Lock()
		failing := p.failures > 0
		p.mu.Unlock()
		if !failing {
			return func() {}, true
		}
		select {
		case p.probe <- struct{}{}:
		case <-ctx.Done():
			return nil, false
		}
		p.mu.Lock()
		failing, next := p.failures > 0, p.nextStart
		p.mu.Unlock()
		if !failing {
			<-p.probe
			continue
		}
		if !startstop.Sleep(ctx, time.Until(next)) {
			<-p.probe
			return nil, false
		}
		return func() { <-p.probe }, true
	}
}

// startFailed counts a failed start and sets the backoff. Once the pool is
// crash-looping, the tasks waiting for a process fail with err, which must
// be the start's own error: never a task's.
func (p *Pool) startFailed(err error) {
	p.failedStarts.Add(1)
	p.mu.Lock()
	p.failures++
	k := p.failures
	d := min(poolBackoffMin<<min(k-1, 20), p.cfg.BackoffMax)
	p.nextStart, p.lastErr = time.Now().Add(d), err.Error()
	p.mu.Unlock()
	if k < PoolCrashLoopStarts {
		p.log.Warn("pool process failed to start; trying again", "err", err, "in", d)
		return
	}
	p.log.Error("pool crash-looping: its processes die at start; backing off", "failures_in_a_row", k, "err", err, "next_start_in", d)
	failed := p.failure(err)
	for {
		select {
		case c := <-p.calls:
			c.reply <- poolReply{err: failed}
		default:
			return
		}
	}
}

// answered resets the failure count: a process works.
func (p *Pool) answered() {
	p.mu.Lock()
	if p.failures > 0 {
		p.log.Info("pool recovered: a process answered a task", "failures_in_a_row", p.failures)
	}
	p.failures = 0
	p.mu.Unlock()
}

// retire recycles a healthy process in the background: EOF, then the
// group is stopped if it does not exit within KillGrace.
func (p *Pool) retire(proc *poolProc, reason string) {
	p.countEnd(reason)
	p.bg.Go(func() {
		proc.close(p.cfg.KillGrace, p.cfg.KillGrace)
		p.live.Add(-1)
	})
}

// kill stops a broken process's group now.
func (p *Pool) kill(proc *poolProc, reason string) {
	p.countEnd(reason)
	proc.kill(p.cfg.KillGrace)
	p.live.Add(-1)
}

// run runs call c on proc and replies. It reports whether proc may serve
// another task.
func (p *Pool) run(proc *poolProc, c *poolCall) bool {
	p.busy.Add(1)
	defer p.busy.Add(-1)
	r := c.r
	log := p.log.With("pid", proc.pid, "task_id", r.ID, "attempt", r.Attempt)
	ctx, cancel := credited(c.ctx, min(time.Since(c.queued), p.cfg.WaitCredit))
	defer cancel()
	c = &poolCall{ctx: ctx, r: r, reply: c.reply}
	deadline, _ := c.ctx.Deadline()
	line, err := encodeRequest(r, deadline, tracing.TraceParent(c.ctx))
	if err != nil {
		c.reply <- poolReply{err: err}
		return true
	}
	out := &tailBuffer{limit: p.cfg.OutputLimit}
	proc.tap.begin(r.withTail(out), log)

	// A process that dies during a task, even its first, printed its
	// ready line: that is this task's failure, not a failed start. The
	// task may be the cause (exit(), a segfault on its payload), and
	// counting it would back off the pool and fail the tasks waiting for
	// it with this task's error.
	fail := func(reason string, err error) bool {
		proc.tap.take()
		p.kill(proc, reason)
		c.reply <- poolReply{out: out.String(), err: err}
		return false
	}
	onCancel := func() bool {
		reason := EndCancelled
		if errors.Is(c.ctx.Err(), context.DeadlineExceeded) {
			reason = EndTimeout
		}
		log.Warn("pool task ended before its answer; killing its process", "why", context.Cause(c.ctx))
		return fail(reason, fmt.Errorf("%w (pool process %d killed)", ctxErr(c.ctx), proc.pid))
	}

	// A process that does not read stdin must not hold the slot past the
	// task's end: the write gives up when the context does.
	stopWrite := context.AfterFunc(c.ctx, func() { _ = proc.stdin.SetWriteDeadline(time.Now()) })
	_, werr := proc.stdin.Write(line)
	stopWrite()
	if werr != nil {
		if c.ctx.Err() != nil {
			return onCancel()
		}
		<-proc.exitedOrTimeout(p.cfg.KillGrace)
		return fail(EndExit, fmt.Errorf("pool process %d exited mid-task: %s", proc.pid, proc.exitErr()))
	}

	exited := proc.exited
	var lingerC <-chan time.Time
	for {
		select {
		case l, ok := <-proc.lines:
			if !ok {
				if proc.lineErr != nil {
					return fail(EndProtocol, fmt.Errorf("pool process %d broke the protocol: %w", proc.pid, proc.lineErr))
				}
				<-proc.exitedOrTimeout(p.cfg.KillGrace)
				return fail(EndExit, fmt.Errorf("pool process %d exited mid-task: %s", proc.pid, proc.exitErr()))
			}
			a, err := proc.decode(l)
			if err == nil && a.OK == nil {
				err = fmt.Errorf(`%w: an answer needs "ok": %q`, errGarbage, quote(l))
			}
			if err != nil {
				return fail(EndProtocol, fmt.Errorf("pool process %d broke the protocol: %w", proc.pid, err))
			}
			proc.tap.take()
			proc.jobs++
			p.answered()
			rep := poolReply{out: out.String()}
			if *a.OK {
				rep.out = joinOutput(rep.out, resultText(a.Result))
				if r.Value != nil {
					r.Value(resultText(a.Result)) // without the stderr before it
				}
			} else {
				rep.err = errors.New(cmp.Or(strings.TrimSpace(a.Error), "the handler failed without a message"))
				if a.Permanent {
					rep.err = Permanent(rep.err)
				} else if a.RetryAfter > 0 {
					rep.err = RetryLater(rep.err, time.Duration(min(a.RetryAfter, retryAfterMax.Seconds())*float64(time.Second)))
				}
			}
			c.reply <- rep
			select {
			case <-proc.exited: // answered, then exited: a clean end
				p.kill(proc, EndExit)
				return false
			default:
				return true
			}
		case <-exited:
			// The answer may still be in the pipe; a child holding stdout
			// open must not keep the slot.
			exited, lingerC = nil, time.After(p.cfg.KillGrace)
		case <-lingerC:
			return fail(EndExit, fmt.Errorf("pool process %d exited mid-task: %s", proc.pid, proc.exitErr()))
		case <-c.ctx.Done():
			return onCancel()
		}
	}
}

// joinOutput is stderr's output followed by the result, on its own line.
func joinOutput(stderr, result string) string {
	if result == "" {
		return stderr
	}
	if stderr != "" && !strings.HasSuffix(stderr, "\n") {
		stderr += "\n"
	}
	return stderr + result
}

// exitedOrTimeout is a channel that yields once the process was waited
// for, or after d.
func (p *poolProc) exitedOrTimeout(d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-p.exited:
		case <-t.C:
		}
	}()
	return ch
}

// CheckProgram reports whether argv's program can be started from dir: it
// exists and is executable (looked up in PATH when it has no slash), and
// dir exists; for an interpreter (php, python, ...) its script exists too.
// For doctor-style checks of exec and pool handlers.
func CheckProgram(argv []string, dir string) error {
	if err := checkProgram(argv, dir); err != nil {
		return err
	}
	return checkScript(argv, dir)
}

// interpreters take a script file as their first argument that is not an
// option (php artisan, python worker.py), unless an option says the code
// is inline or a module.
var interpreters = map[string]bool{"php": true, "python": true, "ruby": true, "node": true, "perl": true,
	"bash": true, "sh": true}

// checkScript reports a missing script of an interpreter, relative to dir
// or, without one, to the daemon's working directory: `php worker.php`
// copied from an example runs from / under Supervisor and crash-looped,
// while doctor said the pool could start.
func checkScript(argv []string, dir string) error {
	if !interpreters[strings.TrimRight(filepath.Base(argv[0]), "0123456789.")] { // php8.2, python3.11
		return nil
	}
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "-" || a == "--eval" || a == "--command" ||
			strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.ContainsAny(a[1:], "cemrpE"):
			return nil // code inline (sh -c, bash -lc, php -r, node -e), a module (python -m), standard input
		case a == "-f" && i+1 < len(argv):
			return scriptExists(argv[i+1], dir) // php -f FILE
		case a == "-d" || a == "-W" || a == "-X" || a == "-I":
			i++ // the option's value (php -d memory_limit=256M)
		case strings.HasPrefix(a, "-") || strings.Contains(a, "="):
		default:
			return scriptExists(a, dir)
		}
	}
	return nil
}

func scriptExists(script, dir string) error {
	path := script
	if !filepath.IsAbs(path) && dir != "" {
		path = filepath.Join(dir, path)
	}
	if _, err := os.Stat(path); err != nil {
		wd, _ := os.Getwd()
		return &ScriptError{Script: script, Dir: dir, WorkDir: wd}
	}
	return nil
}

// ScriptError is an interpreter's script not found, looked for in Dir, or
// in WorkDir, this process's working directory, when the handler has none.
type ScriptError struct {
	Script, Dir, WorkDir string
}

// Relative reports whether the script was looked for in WorkDir, which
// need not be the daemon's.
func (e *ScriptError) Relative() bool { return e.Dir == "" && !filepath.IsAbs(e.Script) }

func (e *ScriptError) Error() string {
	switch {
	case e.Relative():
		return fmt.Sprintf("script %s: not found in the working directory %s (the handler has no dir, so each daemon looks where it was started: give it one)",
			e.Script, e.WorkDir)
	case !filepath.IsAbs(e.Script):
		return fmt.Sprintf("script %s: not found in dir %s", e.Script, e.Dir)
	}
	return fmt.Sprintf("script %s: not found", e.Script)
}

func checkProgram(argv []string, dir string) error {
	if len(argv) == 0 {
		return errors.New("empty argv")
	}
	prog := argv[0]
	if strings.Contains(prog, "/") && !filepath.IsAbs(prog) && dir != "" {
		prog = filepath.Join(dir, prog)
	}
	if dir != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return fmt.Errorf("dir %s: not a directory", dir)
		}
	}
	if _, err := exec.LookPath(prog); err != nil {
		return fmt.Errorf("program %s: %w", argv[0], err)
	}
	return nil
}
