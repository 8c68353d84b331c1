package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/alert"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/lock"
	"github.com/taskd/taskd/pkg/retention"
	"github.com/taskd/taskd/pkg/task"
)

// lockKillGrace is the time between SIGTERM and SIGKILL when the lock is
// lost (or taskd is stopped) while the command runs.
const lockKillGrace = 5 * time.Second

// Exit codes of `taskd lock` when CMD cannot be started, as env(1) and
// timeout(1) use them.
const (
	exitCannotRun = 126
	exitNotFound  = 127
	// exitTimedOut is CMD stopped at --timeout, as timeout(1) says it.
	exitTimedOut = 124
)

func (a *App) lockCmd() *cobra.Command {
	var (
		ttl, wait, timeout time.Duration
		backend            string
		skipExit           int
		verbose            bool
	)
	cmd := &cobra.Command{
		Use:   "lock NAME [flags] -- CMD [ARGS...]",
		Short: "Run a command only on the host that holds a named lock",
		Long: `Run CMD (no shell) while holding the lock NAME, so that of the hosts running
the same line (a crontab on five servers) only one runs CMD at a time.

The lock is renewed every TTL/3 while CMD runs and released when it exits;
taskd then exits with CMD's exit code (128+N when a signal N killed it).
CMD runs in its own process group with taskd's stdin, stdout and stderr
(being in the background, it cannot read from a terminal); processes it
leaves running after it exits are not covered by the lock.

A host that does not get the lock within --wait does not run CMD: it exits
with --skip-exit (default 0) and prints nothing, so cron stays quiet (cron
mails any output); at a terminal, or with --verbose, it says so in one line
on stderr. --wait is for a line run by hand or by one host: on hosts that all
run the same line, each would run CMD in turn once the lock is free.

CMD is a program, not a shell line: wrap a line with builtins, pipes or &&
in a shell, taskd lock NAME -- sh -c 'cd /srv/app && php artisan report:daily',
or the part after && runs on every host, outside the lock. If taskd is
killed (kill -9), the kernel kills CMD too; what CMD started itself runs on.
If the lock is lost while CMD runs (its renewal is refused, or
cannot be confirmed before the TTL would run out), CMD's process group gets
SIGTERM, then SIGKILL once the TTL would have run out (after 5s at most),
and taskd exits 1. SIGTERM or SIGINT to taskd is passed on to CMD the same
way, SIGKILL 5s later.

The lock lives in the servers the configuration names. cron runs a job from
$HOME: name the file (--config, TASKD_CONFIG) unless it is
/etc/taskd/taskd.yaml. With no file, variable or flag naming them, each server
would take the lock in its own local Redis, so taskd warns on stderr.

CMD gets TASKD_LOCK_NAME and TASKD_LOCK_TOKEN, a fencing token: a number
greater than that of every earlier holder of NAME. taskd cannot stop CMD
while taskd itself is frozen (SIGSTOP, a suspended VM), so the next host may
start while CMD still runs; CMD can make its writes refuse an older holder
with it (UPDATE ... SET fence = TOKEN WHERE fence < TOKEN). taskd resumed
after its lock's TTL stops CMD at once. See "taskd locks" for the held locks.

--timeout bounds CMD's run: a hung job would otherwise hold the lock for
good, and every later run on every host would skip quietly.

Exit codes: CMD's; --skip-exit when the lock is held elsewhere; 1 when
Redis/MySQL fails or the lock is lost; 2 for bad usage; 124 when CMD ran
past --timeout; 126/127 when CMD cannot be run / is not found.`,
		Example: `  # the same crontab line on every server; one of them runs it
  * * * * * taskd lock clean_orders -- php artisan orders:clean
  0 3 * * * taskd lock report_daily --ttl 5m -- sh -c 'cd /srv/app && php artisan report:daily'
  taskd lock backup --backend mysql --skip-exit 75 -- /usr/local/bin/backup.sh`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			name, argv, err := lockArgs(cmd, args)
			if err != nil {
				return err
			}
			switch {
			case wait < 0:
				return task.Invalidf("--wait must not be negative")
			case timeout < 0:
				return task.Invalidf("--timeout must not be negative")
			case skipExit < 0 || skipExit > 255:
				return task.Invalidf("--skip-exit must be between 0 and 255, not %d", skipExit)
			case backend != "redis" && backend != "mysql":
				return task.Invalidf("--backend must be redis or mysql, not %q", backend)
			}
			if err := task.ValidateName("lock name", name); err != nil {
				return err
			}
			if err := lock.ValidateTTL(ttl); err != nil {
				return err
			}
			if name == alert.LockName || name == retention.LockName {
				return task.Invalidf("lock name %q is taken by taskd run itself: choose another", name)
			}
			child := exec.Command(argv[0], argv[1:]...)
			if child.Err != nil { // not found: fail before taking the lock
				msg := child.Err.Error()
				if builtin(argv[0]) {
					msg = fmt.Sprintf("%s is a shell builtin, not a program: run the line in a shell, "+
						"taskd lock %s -- sh -c '%s ...'", argv[0], name, argv[0])
				}
				return exitError{code: exitNotFound, msg: msg}
			}
			return a.runLocked(cmd.Context(), lockRun{name: name, argv: argv, child: child,
				ttl: ttl, wait: wait, timeout: timeout, backend: backend, skipExit: skipExit, verbose: verbose,
				serversNamed: cmd.Flags().Changed("redis-addr") || cmd.Flags().Changed("mysql-dsn")})
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&ttl, "ttl", time.Minute, "lock TTL: how long the lock outlives a host that died holding it")
	fl.DurationVar(&wait, "wait", 0, "how long to wait for a lock held elsewhere before giving up")
	fl.DurationVar(&timeout, "timeout", 0, "stop CMD (SIGTERM, SIGKILL 5s later) and release the lock once it has run this long; exit 124 (0: no limit)")
	fl.StringVar(&backend, "backend", "redis", "where the lock lives: redis, or mysql (table task_lock)")
	fl.IntVar(&skipExit, "skip-exit", 0, "exit code when the lock is held elsewhere and CMD was not run")
	fl.BoolVarP(&verbose, "verbose", "v", false, "say on stderr that CMD was not run, also when stderr is not a terminal (cron mails it)")
	return cmd
}

// warnDefaultServers says on stderr (cron mails it) when nothing named the
// servers the lock lives in: no configuration file, no TASKD_* variable,
// no flag. cron runs a job from $HOME, where ./taskd.yaml is not, and on
// a host without /etc/taskd/taskd.yaml each server then took the lock in
// its own local Redis, so every server ran the job, silently.
func (a *App) warnDefaultServers(r lockRun) error {
	c, err := a.config()
	if err != nil || c.File != "" || config.EnvSetsAny() || r.serversNamed {
		return err
	}
	where := "Redis at " + c.Redis.Addr
	if r.backend == "mysql" {
		where = "MySQL, " + c.MySQL.DSN // the built-in one: no password
	}
	fmt.Fprintf(a.Stderr, "taskd: warning: no configuration file, so lock %s is taken in the default %s, which keeps other servers out only if they use it too; %s, or set TASKD_CONFIG (cron runs jobs from $HOME)\n",
		r.name, where, config.NoFileFix)
	return nil
}

// lockArgs splits NAME from CMD: `NAME -- CMD ARGS...`, or `NAME CMD...`
// when CMD has no flags.
func lockArgs(cmd *cobra.Command, args []string) (string, []string, error) {
	switch dash := cmd.ArgsLenAtDash(); {
	case len(args) == 0 || dash == 0:
		return "", nil, argsError(cmd, "missing lock NAME")
	case dash > 1:
		return "", nil, argsError(cmd, "one lock NAME before --, got %d arguments", dash)
	case len(args) == 1:
		return "", nil, argsError(cmd, "missing CMD to run under lock %s", args[0])
	}
	return args[0], args[1:], nil
}

// lockRun is one `taskd lock` invocation.
type lockRun struct {
	name     string
	argv     []string
	child    *exec.Cmd
	ttl      time.Duration
	wait     time.Duration
	timeout  time.Duration // 0: none
	backend  string
	skipExit int
	verbose  bool
	// serversNamed: --redis-addr or --mysql-dsn named the lock's servers.
	serversNamed bool
}

// builtin reports whether name is a shell builtin that a crontab line may
// start with (`cd /srv/app && ...`): no program of that name runs it.
func builtin(name string) bool {
	switch name {
	case "cd", ".", "source", "export", "set", "unset", "ulimit", "umask", "exec", "eval", "alias":
		return true
	}
	return false
}

// runLocked takes the lock, runs the child under it and returns an
// exitError carrying the child's exit code.
func (a *App) runLocked(ctx context.Context, r lockRun) error {
	if err := a.warnDefaultServers(r); err != nil {
		return err
	}
	var locker lock.Locker
	switch r.backend {
	case "mysql":
		st, err := a.openLockStore(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		locker = lock.NewMySQL(st.DB())
	default:
		br, err := a.openBroker(ctx)
		if err != nil {
			return err
		}
		defer br.Close()
		// An evicted lock key is a lock another host can take at once.
		if err := br.CheckEviction(ctx); err != nil {
			return fmt.Errorf("lock %s: %w", r.name, err)
		}
		locker = lock.NewRedis(br.Client(), br.Keys.Prefix)
	}

	lease, err := lock.AcquireWait(ctx, locker, r.name, r.ttl, r.wait)
	if errors.Is(err, lock.ErrNotAcquired) {
		// cron mails whatever a job prints: a skip says so only to a
		// person at a terminal, or when asked.
		if f, ok := a.Stderr.(*os.File); r.verbose || (ok && isTerminal(f)) {
			fmt.Fprintf(a.Stderr, "taskd: lock %s is held elsewhere; not running\n", r.name)
		}
		return exitError{code: r.skipExit}
	}
	if err != nil {
		return err
	}
	// Released on every path; the delete must happen even when ctx was
	// cancelled by SIGTERM.
	defer func() {
		if err := lease.Release(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintf(a.Stderr, "taskd: warning: %v; it expires by its TTL\n", err)
		}
	}()

	c := r.child
	c.Stdin, c.Stdout, c.Stderr = a.Stdin, a.Stdout, a.Stderr
	c.Env = append(os.Environ(), config.EnvLockName+"="+r.name, config.EnvLockToken+"="+strconv.FormatUint(lease.Token(), 10))
	// Its own process group, so that we can signal everything it spawns,
	// killed by the kernel if taskd dies: the lock a kill -9 of taskd
	// gives up must not let another host start beside it.
	c.SysProcAttr = handler.GroupAttr()
	// Only matters when a stream is not a file: a straggler holding a pipe
	// must not keep taskd (and the lock) forever.
	c.WaitDelay = lockKillGrace
	// The kernel's parent-death signal reaches the group's first process
	// only: the php that `sh -c 'php a && php b'` runs would go on beside
	// the next holder. The guard kills the whole group when taskd dies.
	guard := a.startLockGuard()
	defer guard.Stop()
	if err := c.Start(); err != nil {
		code := ExitFailure
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOEXEC) {
			code = exitCannotRun
		} else if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = exitNotFound
		}
		return exitError{code: code, msg: fmt.Sprintf("run %s: %v", r.argv[0], err)}
	}
	defer guard.Group(c.Process.Pid)() // withdrawn once the group ended: deferred after Stop, runs before it
	waitErr := make(chan error, 1)
	go func() { waitErr <- c.Wait() }()
	// A wrapper resumed after SIGSTOP checks its lease before anything else:
	// past the trust window, CMD is stopped at once.
	resumed := make(chan os.Signal, 1)
	signal.Notify(resumed, syscall.SIGCONT)
	defer signal.Stop(resumed)

	var timeout <-chan time.Time
	if r.timeout > 0 {
		t := time.NewTimer(r.timeout)
		defer t.Stop()
		timeout = t.C
	}
	for done := false; !done; {
		select {
		case <-waitErr:
			done = true
		case <-timeout:
			// A hung job held the lock for good, and every later run
			// on every host skipped quietly.
			stopProcessGroup(c.Process.Pid, waitErr, lockKillGrace)
			return exitError{code: exitTimedOut, msg: fmt.Sprintf("%s ran past --timeout %s: stopped (%s); lock %s released", r.argv[0], r.timeout, c.ProcessState, r.name)}
		case <-resumed:
			lease.Check()
		case <-lease.Context().Done():
			// The lease stopped trusting itself a margin before its TTL
			// runs out: past that, another host may hold the lock, and
			// CMD must not run beside it for a whole lockKillGrace.
			stopProcessGroup(c.Process.Pid, waitErr, min(lockKillGrace, lock.Margin(r.ttl)/2))
			return exitError{code: ExitFailure, msg: fmt.Sprintf("%v; stopped %s (%s)", lease.Err(), r.argv[0], c.ProcessState)}
		case <-ctx.Done():
			// taskd was asked to stop: pass it on, then exit as CMD did.
			stopProcessGroup(c.Process.Pid, waitErr, lockKillGrace)
			done = true
		}
	}
	if code := exitStatus(c.ProcessState); code != 0 {
		return exitError{code: code}
	}
	return nil
}

// startLockGuard starts the handler guard for the command of taskd lock;
// nil when it cannot (a warning on stderr: the command runs unguarded, as
// the kernel's parent-death signal still stops its first process). Its
// one line, when it kills the command's group, goes to stderr: cron mails
// it.
func (a *App) startLockGuard() *handler.Guard {
	stderr, _ := a.Stderr.(*os.File)
	log := slog.New(slog.NewTextHandler(a.Stderr, nil))
	g, err := handler.StartCommandGuard("text", stderr, log)
	if err != nil {
		fmt.Fprintf(a.Stderr, "taskd: warning: %v; what the command starts may outlive a killed taskd lock\n", err)
	}
	return g
}

// stopProcessGroup sends SIGTERM to process group pgid (and SIGCONT, so
// that a stopped member gets it), SIGKILL after grace, and returns once its
// leader has been waited for.
func stopProcessGroup(pgid int, waitErr <-chan error, grace time.Duration) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	_ = syscall.Kill(-pgid, syscall.SIGCONT)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-waitErr:
	case <-t.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-waitErr
	}
}

// exitStatus is a shell's view of how a process ended: its exit code, or
// 128+N when signal N killed it.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return ExitFailure
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
