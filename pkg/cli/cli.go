// Package cli is the taskd command line: the subcommands scripts and
// operators call. Every command writes to injected streams, prints JSON with
// -o json, and exits 0 on success, 1 on failure and 2 on bad usage or bad
// input, with a one-line error on stderr.
package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/startstop"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/watchdog"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
	// ExitConfig (EX_CONFIG of sysexits.h) is `taskd run` stopping on an
	// error that waiting cannot heal: wrong credentials, an unknown
	// database, a schema to migrate, Redis refusing the password or
	// evicting keys. Supervisor and systemd are told not to restart on it.
	ExitConfig = 78
	// ExitRestart (EX_TEMPFAIL) is `taskd run` exiting to be started
	// again: the watchdog gave up on the process (its own exit), or SIGHUP
	// asked for a reload. The shipped units restart on it.
	ExitRestart = watchdog.ExitCode
	// ExitInterrupted (128 + SIGINT, as shells report it) is a command
	// stopped by ctrl+c or SIGTERM before it was done.
	ExitInterrupted = 130
	// ExitPartial is an action on several tasks that failed part way:
	// stdout says what it changed, as on success, and the error what it
	// could not do. Exit 1 says that nothing was written.
	ExitPartial = 3
)

// App holds what every command shares: streams, flags, configuration.
type App struct {
	Stdout, Stderr io.Writer
	Stdin          io.Reader
	// Handlers are Go handlers of a program that embeds taskd; `run` adds
	// them to the configured ones.
	Handlers *handler.Registry
	// Width bounds the tables a command writes, as a terminal that wide
	// would (tests); 0: stdout's width when it is a terminal.
	Width int

	// migrations replace the embedded ones in `migrate` (tests); nil in
	// the product.
	migrations []store.Migration

	v          *viper.Viper
	configPath string
	output     string
	cfg        *config.Config
	// warning is what an action goes on without (Redis down), said with
	// its outcome (flushWarning).
	warning string
}

// Signalled is the cause of a context cancelled by a signal.
type Signalled struct{ Signal os.Signal }

func (s Signalled) Error() string { return s.Signal.String() + " signal received" }

// Is makes a signal's cause a cancellation, as signal.NotifyContext's is.
func (s Signalled) Is(target error) bool { return target == context.Canceled }

// reloading says that ctx was cancelled by SIGHUP, which asks a daemon
// under a supervisor for a restart with its configuration read anew.
func reloading(ctx context.Context) bool {
	var s Signalled
	return errors.As(context.Cause(ctx), &s) && s.Signal == syscall.SIGHUP
}

// usageError marks errors of the command line itself (exit 2).
type usageError struct{ error }

// exitError makes a command exit with code; msg, when set, is printed as
// the one-line error. `lock` passes its child's exit code through with it.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return fmt.Sprintf("exit status %d", e.code)
}

// Execute runs the command line and returns the process exit code.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer, stdin io.Reader) int {
	a := &App{Stdout: stdout, Stderr: stderr, Stdin: stdin}
	return a.Execute(ctx, args)
}

// Execute runs args with a's streams.
func (a *App) Execute(ctx context.Context, args []string) int {
	root := a.Root()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintf(a.Stderr, "taskd: %s\n", strings.ReplaceAll(strings.TrimSpace(ee.msg), "\n", " "))
		}
		return ee.code
	}
	msg := strings.ReplaceAll(strings.TrimSpace(node.ErrorText(err)), "\n", " ")
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// Said as what was interrupted, not as Go's "context canceled".
		fmt.Fprintf(a.Stderr, "taskd: interrupted: %s\n", strings.TrimSuffix(msg, ": "+context.Canceled.Error()))
		return ExitInterrupted
	}
	fmt.Fprintf(a.Stderr, "taskd: %s\n", msg)
	// Bad usage of the daemon is EX_CONFIG: its units restart on 2, which
	// a Go crash exits with, and a unit's mistyped flag looped.
	usage := ExitUsage
	if c, _, ferr := root.Find(args); ferr == nil && c.Annotations[daemon] != "" {
		usage = ExitConfig
	}
	var re runError
	if !errors.As(err, &re) {
		// Not from a command's body: cobra rejected the command line.
		return usage
	}
	if errors.As(re.error, new(partialError)) {
		return ExitPartial
	}
	if task.ErrorCode(re.error) == task.CodeInvalid {
		return usage
	}
	var ue usageError
	if errors.As(re.error, &ue) {
		return usage
	}
	return ExitFailure
}

// daemon annotates the command that runs the daemon (`run`).
const daemon = "daemon"

// partialError is the error of an action that changed part of what it
// was asked to before it failed (ExitPartial).
type partialError struct{ error }

func (e partialError) Unwrap() error { return e.error }

// runError marks errors returned by a command's body, as opposed to
// cobra's own errors about the command line.
type runError struct{ error }

func (e runError) Unwrap() error { return e.error }

// markRunErrors wraps the RunE of every command in the tree so that its
// errors are told apart from command-line errors.
func markRunErrors(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := run(cmd, args); err != nil {
				return runError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		markRunErrors(sub)
	}
}

// Root builds the command tree.
func (a *App) Root() *cobra.Command {
	a.v = config.NewViper()
	root := &cobra.Command{
		Use:           "taskd",
		Short:         "taskd: a distributed task scheduler on MySQL and Redis",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if a.output != "text" && a.output != "json" {
				return usageError{fmt.Errorf("--output must be text or json, not %q", a.output)}
			}
			return nil
		},
	}
	root.SetOut(a.Stdout)
	root.SetErr(a.Stderr)
	root.SetIn(a.Stdin)
	root.SetFlagErrorFunc(flagError)
	pf := root.PersistentFlags()
	pf.StringVar(&a.configPath, "config", "", "configuration file (default $TASKD_CONFIG, then ./taskd.yaml, then /etc/taskd/taskd.yaml)")
	pf.StringVarP(&a.output, "output", "o", "text", "output format: text or json")
	pf.String("mysql-dsn", "", "task center DSN (overrides mysql.dsn)")
	pf.String("redis-addr", "", "Redis address (overrides redis.addr)")
	pf.String("redis-prefix", "", "Redis key prefix (overrides redis.prefix)")
	config.BindFlag(a.v, "mysql.dsn", pf.Lookup("mysql-dsn"))
	config.BindFlag(a.v, "redis.addr", pf.Lookup("redis-addr"))
	config.BindFlag(a.v, "redis.prefix", pf.Lookup("redis-prefix"))

	root.AddCommand(a.runCmd(), a.migrateCmd(), a.submitCmd(), a.cronCmd(), a.listCmd(), a.showCmd(), a.retryCmd(), a.killCmd(),
		a.runNowCmd(), a.deleteCmd(), a.enableCmd(), a.disableCmd(), a.pauseCmd(), a.resumeCmd(), a.reshardCmd(), a.limitCmd(), a.auditCmd(), a.statsCmd(),
		a.batchCmd(), a.lockCmd(), a.doctorCmd(), a.locksCmd(), a.benchCmd(), a.versionCmd())
	rejectUnknownSubcommands(root)
	WrapHelp(root, a.width())
	explainArgs(root)
	markRunErrors(root)
	return root
}

// rejectUnknownSubcommands makes the root and every group of commands
// (taskd cron) refuse a subcommand it does not have, in one line. cobra
// checks only the root's, in several lines ("Did you mean this?\n\t..."),
// and "taskd cron ad ..." printed the group's help and exited 0, so a
// script's typo looked like success. Alone, the root or a group still
// prints its help.
func rejectUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		rejectUnknownSubcommands(sub)
	}
	if !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		return unknownCommand(cmd, args[0])
	}
}

// unknownCommand is the error of a name that is none of group's commands:
// `unknown command "submitt" (did you mean "submit"?)`, and below the root
// `unknown command "ad" for "taskd cron" (did you mean "add"?)`.
func unknownCommand(group *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q", name)
	if group.HasParent() {
		msg += fmt.Sprintf(" for %q", group.CommandPath())
	}
	if group.SuggestionsMinimumDistance <= 0 {
		group.SuggestionsMinimumDistance = 2 // cobra's own default, which SuggestionsFor does not set
	}
	var quoted []string
	for _, s := range group.SuggestionsFor(name) {
		if q := strconv.Quote(s); !slices.Contains(quoted, q) {
			quoted = append(quoted, q)
		}
	}
	switch n := len(quoted); {
	case n == 1:
		msg += fmt.Sprintf(" (did you mean %s?)", quoted[0])
	case n > 1:
		msg += fmt.Sprintf(" (did you mean %s or %s?)", strings.Join(quoted[:n-1], ", "), quoted[n-1])
	}
	return usageError{errors.New(msg)}
}

// flagError is the error of a flag the command line could not parse. On
// the root or a group, a flag that follows an unknown command
// ("taskd submitt hello --yes") is no flag of theirs because the command
// is mistyped: that is said, not "unknown flag: --yes".
func flagError(cmd *cobra.Command, err error) error {
	if cmd.HasSubCommands() {
		if args := cmd.Flags().Args(); len(args) > 0 {
			return unknownCommand(cmd, args[0])
		}
	}
	unknown := strings.HasPrefix(err.Error(), "unknown ")
	err = config.FlagError(cmd.Flags(), err)
	if unknown && cmd.Name() == "lock" && cmd.ArgsLenAtDash() < 0 {
		// `taskd lock job sh -c '...'`: the command's own flags were read
		// as taskd's.
		err = fmt.Errorf("%w; put -- before the command: taskd lock NAME [flags] -- CMD [ARGS...]", err)
	}
	return usageError{err}
}

// explainArgs makes every command's check of its positional arguments
// (cobra.ExactArgs and the like, whose errors read "accepts 1 arg(s),
// received 0") say what is missing or extra, by the names of the
// command's usage line, and show that line: "submit: missing CODE;
// usage: taskd submit CODE [flags]". Errors a check words itself (a
// usage or invalid-input error: reshard's shard count) are kept.
func explainArgs(c *cobra.Command) {
	for _, sub := range c.Commands() {
		explainArgs(sub)
	}
	check := c.Args
	if check == nil {
		return
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		err := check(cmd, args)
		var ue usageError
		if err == nil || errors.As(err, &ue) || task.ErrorCode(err) == task.CodeInvalid {
			return err
		}
		return arityError(cmd, args)
	}
}

// arityError says which positional arguments of cmd are missing, or which
// are too many, for args that its Args check refused.
func arityError(cmd *cobra.Command, args []string) error {
	ps := positionals(cmd.Use)
	var required []string
	most := len(ps)
	for _, p := range ps {
		if !p.optional {
			required = append(required, p.name)
		}
		if p.variadic {
			most = -1
		}
	}
	if len(args) < len(required) {
		missing := required[len(args):]
		if n := len(missing); n > 1 {
			return argsError(cmd, "missing %s and %s", strings.Join(missing[:n-1], ", "), missing[n-1])
		}
		return argsError(cmd, "missing %s", missing[0])
	}
	if most >= 0 && len(args) > most {
		extra := args[most:]
		if i := slices.IndexFunc(ps, func(p positional) bool { return p.name == "EXPR" }); i >= 0 && !strings.Contains(args[i], " ") &&
			!slices.ContainsFunc(extra, looksLikePayload) {
			return argsError(cmd, "%s", splitExpression(args[i:]))
		}
		quoted := make([]string, 0, len(extra))
		for _, e := range extra[:min(len(extra), shownArgs)] {
			quoted = append(quoted, strconv.Quote(e))
		}
		if len(extra) > shownArgs {
			quoted = append(quoted, fmt.Sprintf("and %d more", len(extra)-shownArgs))
		}
		if len(extra) == 1 {
			if cmd.Flags().Lookup("payload") != nil && looksLikePayload(extra[0]) {
				return argsError(cmd, "unexpected argument %s (a payload is given with --payload)", quoted[0])
			}
			return argsError(cmd, "unexpected argument %s", quoted[0])
		}
		return argsError(cmd, "unexpected arguments %s", strings.Join(quoted, " "))
	}
	return argsError(cmd, "wrong number of arguments (%d)", len(args))
}

// shownArgs is how many stray arguments an error quotes: a glob the
// shell expanded gave hundreds, all on one line.
const shownArgs = 5

// splitExpression says that a cron expression came as several
// arguments (cron add CODE 0 3 * * *): the shell split it at its spaces
// and, where a * was unquoted, put the names of the files of the
// directory in its place.
func splitExpression(fields []string) string {
	for _, f := range fields {
		if _, err := os.Lstat(f); err == nil && strings.ContainsFunc(f, unicode.IsLetter) {
			return fmt.Sprintf("the cron expression came as %d arguments, file names among them (%q): the shell put the files here in place of an unquoted *; quote the expression, as in '*/5 * * * *'",
				len(fields), f)
		}
	}
	return fmt.Sprintf("the cron expression came as %d arguments: quote it as one, '%s'", len(fields), strings.Join(fields, " "))
}

// looksLikePayload reports whether a stray argument was meant as a
// payload: JSON text (an object, an array, a string) or @file.
func looksLikePayload(arg string) bool {
	s := strings.TrimSpace(arg)
	return s != "" && strings.ContainsRune("{[\"@", rune(s[0]))
}

// argsError is the error of a command's positional arguments, one for
// every command: "PATH: WHAT; usage: USE LINE", bad usage (exit 2).
func argsError(cmd *cobra.Command, format string, a ...any) error {
	path := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
	return usageError{fmt.Errorf("%s: %s; usage: %s", path, fmt.Sprintf(format, a...), cmd.UseLine())}
}

// positional is an argument named in a command's usage line.
type positional struct {
	name               string
	optional, variadic bool
}

// positionals reads the arguments of a usage line such as "add CODE
// 'EXPR'", "timezone [ZONE]" or "batch CODE PAYLOAD... --callback CODE":
// a flag and its value, [flags], and what follows "|" (another form) or
// "--" are not among them.
func positionals(use string) []positional {
	var ps []positional
	fields := strings.Fields(use)
	for i := 1; i < len(fields); i++ {
		f := fields[i]
		switch {
		case f == "|" || f == "--":
			return ps
		case f == "[flags]":
			continue
		case strings.HasPrefix(f, "-"):
			if i+1 < len(fields) && !strings.HasPrefix(fields[i+1], "-") && !strings.HasPrefix(fields[i+1], "[") && fields[i+1] != "|" {
				i++ // the flag's value: --callback CODE
			}
			continue
		}
		var p positional
		if strings.HasPrefix(f, "[") {
			p.optional, f = true, strings.Trim(f, "[]")
		}
		if strings.HasSuffix(f, "...") {
			p.variadic, f = true, strings.TrimSuffix(f, "...")
		}
		p.name = strings.Trim(f, `'"`)
		ps = append(ps, p)
	}
	return ps
}

// config loads the configuration once.
func (a *App) config() (*config.Config, error) {
	if a.cfg != nil {
		return a.cfg, nil
	}
	c, err := config.Load(a.v, a.configPath)
	if err != nil {
		return nil, err
	}
	a.cfg = c
	return c, nil
}

// openStore opens the task center, whose schema must be this binary's:
// every command on an unmigrated or outdated one says to run migrate.
func (a *App) openStore(ctx context.Context) (*store.Store, error) {
	c, err := a.config()
	if err != nil {
		return nil, err
	}
	defer a.waiting("MySQL", store.DSNAddr(c.MySQL.DSN))()
	st, err := node.OpenStore(ctx, c)
	return checked(ctx, st, err)
}

// openReadStore opens the task center for reads: mysql.read_dsn when set.
func (a *App) openReadStore(ctx context.Context) (*store.Store, error) {
	c, err := a.config()
	if err != nil {
		return nil, err
	}
	defer a.waiting("MySQL", store.DSNAddr(cmp.Or(c.MySQL.ReadDSN, c.MySQL.DSN)))()
	st, err := node.OpenReadStore(ctx, c)
	return checked(ctx, st, err)
}

// openLockStore opens the task center for named locks (GET_LOCK), which
// need no schema: `taskd lock` works on any database.
func (a *App) openLockStore(ctx context.Context) (*store.Store, error) {
	c, err := a.config()
	if err != nil {
		return nil, err
	}
	defer a.waiting("MySQL", store.DSNAddr(c.MySQL.DSN))()
	return node.OpenStore(ctx, c)
}

// noticeAfter is how long opening a server may take before a command on
// a terminal says what it waits for.
var noticeAfter = time.Second

// waiting says on a terminal, once opening server at addr has taken
// noticeAfter, what the command waits for: a server that takes the
// connection and never answers holds it up to its dial and read timeouts
// (40 s for MySQL by default), on a silent terminal at 2 a.m. Off a
// terminal (a script, cron's mail) it says nothing. Call the returned
// func when the wait is over.
func (a *App) waiting(server, addr string) (done func()) {
	f, ok := a.Stderr.(*os.File)
	if !ok || !isTerminal(f) {
		return func() {}
	}
	return startstop.Notice(noticeAfter, func() {
		fmt.Fprintf(a.Stderr, "taskd: waiting for %s (%s) to answer; ctrl+c gives up\n", server, addr)
	})
}

// checked closes st unless its schema is the one of this binary.
func checked(ctx context.Context, st *store.Store, err error) (*store.Store, error) {
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := st.CheckSchema(ctx); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// openBroker opens Redis; commands that only need it to wake schedulers
// treat a failure as a warning.
func (a *App) openBroker(ctx context.Context) (*broker.Broker, error) {
	c, err := a.config()
	if err != nil {
		return nil, err
	}
	defer a.waiting("Redis", node.RedisAt(c))()
	return node.OpenBroker(ctx, c)
}

// logger builds the process logger: JSON, or text on a terminal.
func (a *App) logger(c *config.Config) *slog.Logger { return NewLogger(c, a.Stderr) }

// NewLogger builds a process logger on w as log.format and log.level say:
// JSON, or text on a terminal (auto).
func NewLogger(c *config.Config, w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	level.UnmarshalText([]byte(c.Log.Level))
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: logValue}
	if logFormat(c, w) == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// logFormat is the log format on w: log.format, where auto is text on a
// terminal and JSON elsewhere.
func logFormat(c *config.Config, w io.Writer) string {
	if c.Log.Format != "auto" && c.Log.Format != "" {
		return c.Log.Format
	}
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		return "text"
	}
	return "json"
}

// warnings is the log of a command's library code (the producer): its
// warnings and errors as the command's own one-line warnings on w,
// "taskd: warning: MSG (key=value, ...)", not as a daemon's log records;
// what it logs below that is for daemons and dropped.
type warnings struct {
	w     io.Writer
	attrs []slog.Attr
}

func (h *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *warnings) Handle(_ context.Context, r slog.Record) error {
	var kv []string
	add := func(a slog.Attr) bool {
		kv = append(kv, a.Key+"="+logValue(nil, a).Value.String())
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	line := "taskd: warning: " + r.Message
	if len(kv) > 0 {
		line += " (" + strings.Join(kv, ", ") + ")"
	}
	_, err := fmt.Fprintln(h.w, strings.ReplaceAll(line, "\n", " "))
	return err
}

func (h *warnings) WithAttrs(as []slog.Attr) slog.Handler {
	return &warnings{w: h.w, attrs: append(slices.Clip(h.attrs), as...)}
}

// WithGroup is not used by the code that logs here: groups are flattened.
func (h *warnings) WithGroup(string) slog.Handler { return h }

// logValue logs a time.Duration as "500ms", not as nanoseconds, and an
// error with what it means (node.ErrorText).
func logValue(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindDuration:
		a.Value = slog.StringValue(a.Value.Duration().String())
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok {
			a.Value = slog.StringValue(node.ErrorText(err)) // what both handlers write for an error, and more
		}
	}
	return a
}

// json reports whether output is JSON.
func (a *App) json() bool { return a.output == "json" }

// printJSON writes v as indented JSON.
func (a *App) printJSON(v any) error {
	enc := json.NewEncoder(a.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
