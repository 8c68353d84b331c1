package tui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/cli"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/startstop"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// Main runs tasktop with args on the terminal and returns the exit code:
// 0, 1 when it could not start or failed, 2 on bad usage or configuration.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	v := config.NewViper()
	var configPath string
	var version bool
	cmd := &cobra.Command{
		Use:   "tasktop",
		Short: "tasktop: the operator's terminal UI of taskd",
		Long: "tasktop shows queues, workers, tasks, alerts and the audit log of a taskd cluster, read\n" +
			"from MySQL and Redis, and runs the operator actions of `taskd` (retry, kill, pause, ...).\n" +
			"Press ? in it for the keys.",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if version {
				fmt.Fprintf(stdout, "tasktop %s (commit %s, built %s, %s)\n", node.Version, cli.Commit, cli.Date, runtime.Version())
				return nil
			}
			cfg, err := config.Load(v, configPath)
			if err != nil {
				return err
			}
			return run(cmd.Context(), cfg, stderr)
		},
	}
	if len(args) == 1 && args[0] == "version" {
		args = []string{"--version"}
	}
	cmd.SetArgs(args)
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return config.FlagError(c.Flags(), err) })
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	// Persistent: tasktop serve takes them too.
	fl := cmd.PersistentFlags()
	fl.StringVar(&configPath, "config", "", "configuration file (default $TASKD_CONFIG, then ./taskd.yaml, then /etc/taskd/taskd.yaml)")
	fl.String("mysql-dsn", "", "task center DSN (overrides mysql.dsn)")
	fl.String("redis-addr", "", "Redis address (overrides redis.addr)")
	fl.String("redis-prefix", "", "Redis key prefix (overrides redis.prefix)")
	fl.Bool("readonly", false, "watch only: every action is disabled (tasktop.readonly)")
	fl.Duration("refresh", RefreshDefault, "time between refreshes (tasktop.refresh)")
	cmd.Flags().BoolVar(&version, "version", false, "print the version and exit")
	cmd.AddCommand(serveCommand(v, &configPath, stderr))
	cli.WrapHelp(cmd, cli.TerminalWidth(stdout))
	for key, flag := range map[string]string{"mysql.dsn": "mysql-dsn", "redis.addr": "redis-addr",
		"redis.prefix": "redis-prefix", "tasktop.readonly": "readonly", "tasktop.refresh": "refresh"} {
		config.BindFlag(v, key, fl.Lookup(flag))
	}
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "tasktop: %s\n", strings.ReplaceAll(strings.TrimSpace(node.ErrorText(err)), "\n", " "))
	if errors.As(err, new(configError)) {
		return cli.ExitConfig
	}
	if c, _, ferr := cmd.Find(args); ferr == nil && c.Name() == "serve" && !errors.As(err, new(runError)) {
		return cli.ExitConfig // a unit's mistyped flag: its units restart on 2, a crash
	}
	if task.ErrorCode(err) == task.CodeInvalid || !errors.As(err, new(runError)) {
		return 2
	}
	return 1
}

// configError is tasktop serve refusing its configuration (exit 78,
// EX_CONFIG): its units restart on 2, which a Go crash exits with.
type configError struct{ error }

func (e configError) Unwrap() error { return e.error }

// runError marks failures after the command line was read.
type runError struct{ error }

func (e runError) Unwrap() error { return e.error }

// errNoTerminal is run's error where there is no terminal to draw on:
// `ssh host tasktop` without -t, cron, a pipe.
var errNoTerminal = errors.New("no terminal to draw on: run tasktop in one (over SSH: ssh -t HOST tasktop); scripts read taskd stats and taskd list")

// hasTerminal reports whether there is a terminal to draw on: standard
// input, else the controlling terminal, which bubbletea opens itself.
// Said in words, where bubbletea's own error names /dev/tty and an errno.
var hasTerminal = func() bool {
	if term.IsTerminal(os.Stdin.Fd()) {
		return true
	}
	tty, err := os.Open("/dev/tty")
	if err != nil {
		return false
	}
	tty.Close()
	return true
}

// waitNotice is how long a start may wait on MySQL or Redis before it
// says so.
var waitNotice = time.Second

// run connects and runs the UI until the operator quits.
func run(ctx context.Context, cfg *config.Config, stderr io.Writer) error {
	// No terminal is said at once, not after a wait on the servers.
	if !hasTerminal() {
		return runError{errNoTerminal}
	}
	// A server that takes the connection and never answers holds the
	// start for up to mysql.read_timeout before any screen is drawn: a
	// blank terminal at 2 a.m. should say what it waits for: the replica,
	// when the screens read one (the primary is not waited for then).
	stopNotice := startstop.Notice(waitNotice, func() {
		fmt.Fprintf(stderr, "tasktop: waiting for MySQL (%s) and Redis (%s) to answer; ctrl+c gives up\n",
			store.DSNAddr(cmp.Or(cfg.MySQL.ReadDSN, cfg.MySQL.DSN)), node.RedisAt(cfg))
	})
	be, err := openBackend(ctx, cfg)
	stopNotice() // stderr is the terminal program's from here
	if err != nil {
		return runError{err}
	}
	defer be.Close()
	// Cancelled when the program ends: queries still in flight stop.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opt := Options{
		Source:   be.Loader,
		Actions:  be.Ops,
		ReadOnly: cfg.Tasktop.ReadOnly,
		Refresh:  cfg.Tasktop.Refresh,
		Context:  ctx,
		// A kill waits for its worker up to the kill grace.
		ActionTimeout: ActionTimeoutFor(be.KillWait),
		// Negative (the rule off) is kept: only a full Redis is shown.
		RedisNear: cfg.Alerts.RedisMemoryThreshold,
	}
	p := tea.NewProgram(New(opt), tea.WithContext(ctx), tea.WithOutput(os.Stdout))
	if _, err := p.Run(); err != nil && !errors.Is(err, tea.ErrProgramKilled) {
		return runError{fmt.Errorf("terminal: %w", err)}
	}
	return nil
}
