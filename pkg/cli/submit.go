package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/suggest"
	"github.com/taskd/taskd/pkg/task"
)

// taskFlags are the options shared by submit and cron add.
type taskFlags struct {
	payload  string
	queue    string
	priority int
	timeout  time.Duration
	maxRetry int
	anyCode  bool
	then     []string
}

func (f *taskFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.payload, "payload", "{}", "payload: JSON text, @file, or @- for standard input")
	fl.StringVar(&f.queue, "queue", "", "queue (default: the code's configured queue, else the code)")
	fl.IntVar(&f.priority, "priority", task.DefaultPriority, "priority 0 (highest) to 9")
	fl.DurationVar(&f.timeout, "timeout", task.DefaultTimeout*time.Second, "timeout of each attempt, 1s to 168h")
	fl.IntVar(&f.maxRetry, "max-retry", task.DefaultMaxRetry, "retries after a failed attempt")
	fl.BoolVar(&f.anyCode, "any-code", false, "accept a task code that has no handler in the configuration")
	fl.StringArrayVar(&f.then, "then", nil, "when the task succeeds, submit this code with its result as payload; "+
		"repeat for a chain: --then B --then C runs C after B")
}

// checkTask loads the configuration and checks a submission's code and
// its --then codes.
func (a *App) checkTask(code string, f *taskFlags) (*config.Config, []producer.Child, error) {
	c, err := a.config()
	if err != nil {
		return nil, nil, err
	}
	if err := checkCode(c, code, f.anyCode); err != nil {
		return nil, nil, err
	}
	// A Submission's zero timeout means the default, as a seed row's 0
	// does; on the command line 0 reads as "no timeout", which no task has.
	if err := task.ValidateTimeout(f.timeout); err != nil {
		return nil, nil, fmt.Errorf("--timeout: %w", err)
	}
	children, err := f.children(c)
	if err != nil {
		return nil, nil, err
	}
	return c, children, nil
}

// children turns --then CODE... into a chain: each code the only child of
// the one before. Every code must have a handler, as the task's must.
func (f *taskFlags) children(c *config.Config) ([]producer.Child, error) {
	var chain []producer.Child
	for i := len(f.then) - 1; i >= 0; i-- {
		if err := checkCode(c, f.then[i], f.anyCode); err != nil {
			return nil, fmt.Errorf("--then: %w", err)
		}
		chain = []producer.Child{{Code: f.then[i], Children: chain}}
	}
	return chain, nil
}

// warnStdinUnread warns when a payload seems piped to a command that
// reads standard input only for --payload @-: `echo '{...}' | taskd
// submit CODE` would otherwise submit {} without a word. It warns
// rather than refuses, as a loop that feeds its own input to the
// commands it runs (while read ...; do taskd submit ...; done) pipes it
// too.
func (a *App) warnStdinUnread(cmd *cobra.Command) {
	if cmd.Flags().Changed("payload") {
		return
	}
	if f, ok := a.Stdin.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeNamedPipe != 0 {
			fmt.Fprintln(a.Stderr, "taskd: warning: standard input is a pipe and is not read: the payload is {}; pass --payload @- to send what it carries")
		}
	}
}

// utf8BOM is the byte order mark Windows editors (Notepad) and PowerShell's
// redirections put before UTF-8 text: a payload file saved there was
// refused as "invalid character 'ï' looking for beginning of value". JSON
// has no use for it, and parsers may ignore it (RFC 8259, 8.1).
var utf8BOM = []byte("\xef\xbb\xbf")

// readPayload resolves a payload flag's value p: JSON, @file or @-.
// An empty one is refused: the library would store {} for it, and a
// script piping a failed command's empty output would submit a task
// without its data.
func (a *App) readPayload(flag, p string) (json.RawMessage, error) {
	from, b := flag, []byte(p)
	if p == "-" {
		return nil, task.Invalidf("%s - is not JSON: pass %s @- to read standard input", flag, flag)
	}
	if !strings.HasPrefix(p, "@") && !json.Valid(b) {
		// A file named without its @ (--payload rows.json) would fail as
		// JSON at its first letter.
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return nil, task.Invalidf("%s %s is not JSON: pass %s @%s to read the file", flag, p, flag, p)
		}
	}
	if strings.HasPrefix(p, "@") {
		var err error
		if p == "@-" {
			from = "standard input"
			b, err = io.ReadAll(a.Stdin)
		} else {
			from = p[1:]
			b, err = os.ReadFile(p[1:])
		}
		if err != nil {
			return nil, task.Invalidf("read payload %s: %v", p[1:], err)
		}
		b = bytes.TrimPrefix(b, utf8BOM)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, task.Invalidf("payload from %s is empty: give a JSON value, or leave %s out for {}", from, flag)
	}
	return json.RawMessage(b), nil
}

// checkCode rejects a code no handler is configured for, when the
// configuration lists handlers: a typo would otherwise sit in a queue no
// worker reads.
func checkCode(c *config.Config, code string, any bool) error {
	if err := task.ValidateName("task code", code); err != nil {
		return err
	}
	if any || len(c.Handlers) == 0 {
		return nil
	}
	if _, ok := c.Handlers[code]; !ok {
		return task.Invalidf("unknown task code %q%s: no handler configured for it (pass --any-code if a Go handler or another configuration serves it)",
			code, suggest.DidYouMean(code, slices.Collect(maps.Keys(c.Handlers))))
	}
	return nil
}

// checkRouted checks codes against the task center when the configuration
// has no handlers to check them against (a host that only submits, or no
// file at all), where any code went in: it refuses a code that no node
// records a handler for (task_route) and no task has, once some node has
// recorded its codes. Before any has, it cannot tell, and lets it be.
func (a *App) checkRouted(ctx context.Context, st *store.Store, anyCode bool, codes ...string) error {
	c, err := a.config()
	if err != nil || anyCode || len(c.Handlers) > 0 {
		return err
	}
	routes, err := st.RouteList(ctx)
	if err != nil || len(routes) == 0 {
		return err
	}
	routed := make([]string, len(routes))
	for i, r := range routes {
		routed[i] = r.Code
	}
	for _, code := range codes {
		if slices.Contains(routed, code) {
			continue
		}
		known, err := st.CodeNamed(ctx, code)
		if err != nil {
			return err
		}
		if known {
			continue
		}
		return task.Invalidf("unknown task code %q%s: this configuration has no handlers, and no node records one for it in the task center "+
			"(pass --any-code if a node about to start serves it)", code, suggest.DidYouMean(code, routed))
	}
	return nil
}

// producer is a producer client and the task center it writes to.
type producerClient struct {
	*producer.Client
	store *store.Store
}

// client opens a producer client; Redis is optional (it only wakes the
// schedulers and dispatches at once), and not connected to at all for a
// command that creates no task (withRedis false: cron list, cron remove).
func (a *App) client(cmd *cobra.Command, withRedis bool) (producerClient, func(), error) {
	return a.clientOn(cmd, a.openStore, withRedis)
}

// readClient is a client that only reads (cron list), on mysql.read_dsn
// when set, so that it answers while a failover leaves the primary
// unreachable.
func (a *App) readClient(cmd *cobra.Command) (producerClient, func(), error) {
	return a.clientOn(cmd, a.openReadStore, false)
}

// clientOn is a client on the task center open opens.
func (a *App) clientOn(cmd *cobra.Command, open func(context.Context) (*store.Store, error), withRedis bool) (producerClient, func(), error) {
	c, err := a.config()
	if err != nil {
		return producerClient{}, nil, err
	}
	st, err := open(cmd.Context())
	if err != nil {
		return producerClient{}, nil, err
	}
	var br *broker.Broker
	if withRedis {
		if br, err = a.openBroker(cmd.Context()); err != nil {
			fmt.Fprintf(a.Stderr, "taskd: warning: %v; schedulers will find the task at their next poll\n", err)
			br = nil
		}
	}
	cl := node.NewProducer(c, st, br, slog.New(&warnings{w: a.Stderr}))
	return producerClient{Client: cl, store: st}, func() {
		st.Close()
		if br != nil {
			br.Close()
		}
	}, nil
}

// pastSlack is how far in the past --at may be without --allow-past: a
// time typed for "now" is a little late by the time it is submitted.
const pastSlack = time.Minute

func (a *App) submitCmd() *cobra.Command {
	var f taskFlags
	var delay time.Duration
	var at, uniqueKey, onConflict, group string
	var debounceMax time.Duration
	var allowPast, yes bool
	cmd := &cobra.Command{
		Use:   "submit CODE",
		Short: "Submit a one-off task, now or later",
		Example: `  taskd submit send_email --payload '{"to":"a@example.com"}'
  taskd submit build_report --payload @report.json --delay 30s --priority 1
  taskd submit close_order --at '2026-12-01 10:00:00' --unique-key order-42
  taskd submit reindex --unique-key user-42 --on-conflict debounce=30s
  taskd submit import_rows --group tenant-7 --payload @rows.json
  taskd submit build_report --then email_report --then archive_report`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, children, err := a.checkTask(args[0], &f)
			if err != nil {
				return err
			}
			payload, err := a.readPayload("--payload", f.payload)
			if err != nil {
				return err
			}
			a.warnStdinUnread(cmd)
			conflict, err := producer.ParseConflict(onConflict)
			if err != nil {
				return err
			}
			if debounceMax != 0 {
				if conflict.Mode != store.Debounce {
					return task.Invalidf("--debounce-max needs --on-conflict debounce=DURATION")
				}
				conflict.MaxWait = debounceMax
			}
			sub := producer.Submission{Code: args[0], Payload: payload, Queue: f.queue, Delay: delay,
				Priority: &f.priority, Timeout: f.timeout, MaxRetry: &f.maxRetry, UniqueKey: uniqueKey,
				Children: children, OnConflict: conflict, Group: group}
			if at != "" {
				if delay != 0 {
					return task.Invalidf("give either --delay or --at, not both")
				}
				if sub.At, err = parseTime(at); err != nil {
					return err
				}
			}
			cl, closeFn, err := a.client(cmd, true)
			if err != nil {
				return err
			}
			defer closeFn()
			if err := a.checkRouted(cmd.Context(), cl.store, f.anyCode, append([]string{args[0]}, f.then...)...); err != nil {
				return err
			}
			if !sub.At.IsZero() && !allowPast {
				// The database clock decides when tasks are due.
				now, err := cl.store.Now(cmd.Context())
				if err != nil {
					return err
				}
				if sub.At.Before(now.Add(-pastSlack)) {
					return task.Invalidf("--at %s is %s in the past (pass --allow-past to run it now)",
						fmtTime(&sub.At), ago(now.Sub(sub.At)))
				}
			}
			res, err := cl.Submit(cmd.Context(), sub)
			if err != nil {
				return err
			}
			t, err := cl.store.TaskGet(cmd.Context(), res.ID)
			if err != nil {
				return err
			}
			ch := ops.Change{Action: "submit", Requested: 1, IDs: []int64{}, Unchanged: []ops.Skipped{}, NextRun: &t.PlanNextRun,
				Dispatched: &res.Dispatched}
			reason := cmp.Or(res.Reason, fmt.Sprintf("a task with unique key %q exists", uniqueKey))
			if res.Existing && !res.Changed {
				ch.Unchanged = append(ch.Unchanged, ops.Skipped{ID: res.ID, Status: t.Status.String(), Reason: reason})
			} else {
				ch.Changed, ch.IDs = 1, []int64{res.ID}
			}
			if a.json() {
				return a.printJSON(ch)
			}
			switch {
			case res.Changed:
				fmt.Fprintf(a.Stdout, "task %d with unique key %q %s: due %s\n", res.ID, uniqueKey,
					map[store.ConflictMode]string{store.Replace: "replaced", store.Debounce: "debounced"}[conflict.Mode], fmtTime(&t.PlanNextRun))
			case res.Existing && res.Reason == "":
				fmt.Fprintf(a.Stdout, "task %d already exists with unique key %q; nothing submitted\n", res.ID, uniqueKey)
			case res.Existing:
				fmt.Fprintf(a.Stdout, "task %d not changed: %s; nothing submitted\n", res.ID, reason)
			default:
				fmt.Fprintf(a.Stdout, "submitted task %d\n", res.ID)
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().DurationVar(&delay, "delay", 0, "run after this delay (e.g. 30s, 5m)")
	cmd.Flags().StringVar(&at, "at", "", "run at this time: RFC 3339, or 'YYYY-MM-DD HH:MM[:SS]' in the local zone")
	cmd.Flags().BoolVar(&allowPast, "allow-past", false, "accept an --at more than a minute in the past (the task runs at once)")
	cmd.Flags().StringVar(&uniqueKey, "unique-key", "", "deduplicate: a second submit with the same code and key returns the first task (see --on-conflict)")
	cmd.Flags().StringVar(&onConflict, "on-conflict", "reject", "what a submit does when a task holds its unique key: reject (return it), "+
		"replace (a waiting task takes this payload and due time), debounce=DURATION (and its due time moves out by DURATION), "+
		"until-done (a new task once that one has ended); a dispatched or running task is never changed")
	cmd.Flags().DurationVar(&debounceMax, "debounce-max", 0, "debounce: the longest a task waits after its first submit (default 10 times the debounce)")
	cmd.Flags().StringVar(&group, "group", "", "the task's group (a tenant, a customer): per-group limits and serial queues apply to each group separately")
	neverAsks(cmd, &yes)
	return cmd
}

// ago says how long d is, as a person would: "3m20s", "5 days".
func ago(d time.Duration) string {
	if d >= 48*time.Hour {
		return ops.Plural(int(d/(24*time.Hour)), "day")
	}
	return d.Round(time.Second).String()
}

// neverAsks adds --yes to a command that creates rather than changes, and
// so never asks: a script may pass --yes to every command.
func neverAsks(cmd *cobra.Command, yes *bool) {
	cmd.Flags().BoolVarP(yes, "yes", "y", false, "accepted for uniformity; this command never asks")
}

// parseTime accepts RFC 3339 or a local 'YYYY-MM-DD HH:MM[:SS]'.
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, task.Invalidf("cannot parse time %q (want RFC 3339 or 'YYYY-MM-DD HH:MM:SS')", s)
}
