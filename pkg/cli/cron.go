package cli

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/cronspec"
	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

func (a *App) cronCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cron", Short: "Manage periodic tasks"}
	cmd.AddCommand(a.cronAddCmd(), a.cronListCmd(), a.cronRemoveCmd(), a.cronTimezoneCmd())
	return cmd
}

func (a *App) cronAddCmd() *cobra.Command {
	var f taskFlags
	var tz, name string
	var yes bool
	cmd := &cobra.Command{
		Use:   "add CODE 'EXPR'",
		Short: "Add a periodic task, or update the one with the same code and name",
		Long: `Add a periodic task. EXPR is a cron expression with five fields, or six
with leading seconds, or a descriptor (@hourly, @daily, @every 10m); a
CRON_TZ=Zone prefix or --tz sets its time zone. Running it again with the
same CODE and --name updates the task in place.`,
		Example: `  taskd cron add report:daily '0 2 * * *' --tz Asia/Shanghai
  taskd cron add heartbeat '*/10 * * * * *' --name every-10s`,
		Args: cobra.ExactArgs(2),
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
			cl, closeFn, err := a.client(cmd, true)
			if err != nil {
				return err
			}
			defer closeFn()
			if err := a.checkRouted(cmd.Context(), cl.store, f.anyCode, append([]string{args[0]}, f.then...)...); err != nil {
				return err
			}
			res, err := cl.CronAdd(cmd.Context(), producer.Cron{Code: args[0], Name: name, Expr: args[1], Timezone: tz,
				Payload: payload, Queue: f.queue, Priority: &f.priority, Timeout: f.timeout, MaxRetry: &f.maxRetry,
				Children: children})
			if err != nil {
				return err
			}
			if w := cronspec.YearLike(args[1]); w != "" {
				fmt.Fprintf(a.Stderr, "taskd: warning: %s\n", w)
			}
			for _, w := range cronspec.Oversteps(args[1]) {
				fmt.Fprintf(a.Stderr, "taskd: warning: %s\n", w)
			}
			ch := ops.Change{Action: "cron add", Requested: 1, Changed: 1, IDs: []int64{res.ID}, Unchanged: []ops.Skipped{}, NextRun: &res.Next}
			verb := "added"
			disabled := false
			if res.Updated {
				ch.Action, verb = "cron update", "updated"
				// An update leaves a disabled task disabled: it has no next
				// run until taskd enable sets one.
				t, err := cl.store.TaskGet(cmd.Context(), res.ID)
				if err != nil {
					fmt.Fprintf(a.Stderr, "taskd: warning: updated, but not read back to tell whether it is disabled: %v\n", err)
				} else if disabled = t.Disabled(); disabled {
					ch.NextRun = nil
				}
			}
			// An operator's change of what runs when, as cron remove's is.
			if err := cl.store.Audit(cmd.Context(), ops.CurrentActor(), ch.Action, fmt.Sprintf("task %d", res.ID), 1,
				map[string]any{"code": args[0], "name": cmp.Or(name, args[0]), "cron": args[1], "timezone": tz}); err != nil {
				fmt.Fprintf(a.Stderr, "taskd: warning: %s, but the audit log was not written: %v\n", verb, err)
			}
			if a.json() {
				return a.printJSON(ch)
			}
			if disabled {
				fmt.Fprintf(a.Stdout, "%s periodic task %d; disabled: taskd enable %d puts it back on its schedule\n", verb, res.ID, res.ID)
				return nil
			}
			fmt.Fprintf(a.Stdout, "%s periodic task %d; next run %s%s\n", verb, res.ID, fmtTime(&res.Next), thenText(res.Next, res.Then))
			return nil
		},
	}
	f.register(cmd)
	neverAsks(cmd, &yes)
	cmd.Flags().StringVar(&tz, "tz", "", "IANA time zone of the expression (default: cron.timezone)")
	cmd.Flags().StringVar(&name, "name", "", "name among periodic tasks of the same code (default: the code)")
	return cmd
}

func (a *App) cronListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list [CODE]",
		Short:   "List periodic tasks, or those of one task code",
		Example: "  taskd cron list\n  taskd cron list report:daily -o json",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if err := task.ValidateName("task code", args[0]); err != nil {
					return err
				}
			}
			cl, closeFn, err := a.readClient(cmd)
			if err != nil {
				return err
			}
			defer closeFn()
			ts, err := cl.CronList(cmd.Context())
			if err != nil {
				return err
			}
			if len(args) == 1 {
				// A code with no periodic task lists nothing, as a filter
				// does; a script tells it by the empty list.
				ts = slices.DeleteFunc(ts, func(t *task.Task) bool { return t.Code != args[0] })
				if len(ts) == 0 {
					a.warnUnknown(cmd.Context(), cl.store, args[0], "")
				}
			}
			if a.json() {
				out := make([]cronEntry, len(ts))
				for i, t := range ts {
					out[i] = cronEntry{Task: t, Name: producer.CronName(t.UniqueKey)}
				}
				return a.printJSON(out)
			}
			// Narrow: ID, TZ go first; LAST RESULT is cut before any.
			g := newGrid(7, []int{0, 4}, "ID", "CODE", "NAME", "EXPR", "TZ", "STATUS", "NEXT RUN", "LAST RESULT")
			for _, t := range ts {
				g.add(t.ID, t.Code, producer.CronName(t.UniqueKey), t.CronExpr, dash(t.Timezone), t.StatusText(), nextRun(t),
					oneLine(t.LastResult, 40))
			}
			return g.write(a.Stdout, a.width())
		},
	}
}

// cronEntry is a periodic task as cron list -o json prints it, with its
// name ("": none), so that scripts need not take it out of the unique key.
type cronEntry struct {
	*task.Task
	Name string `json:"name"`
}

func (a *App) cronRemoveCmd() *cobra.Command {
	var name string
	var yes bool
	cmd := &cobra.Command{
		Use:     "remove CODE",
		Short:   "Remove a periodic task",
		Example: "  taskd cron remove report:daily --yes\n  taskd cron remove heartbeat --name every-10s --yes",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := task.ValidateName("task code", args[0]); err != nil {
				return err
			}
			cl, closeFn, err := a.client(cmd, false)
			if err != nil {
				return err
			}
			defer closeFn()
			t, err := cl.CronGet(cmd.Context(), args[0], name)
			if task.ErrorCode(err) == task.CodeNotFound {
				// A mistyped code: say so, with the nearest one.
				return cmp.Or(a.unknown(cmd.Context(), cl.store, (*ops.Ops).CheckCode, args[0]), err)
			}
			if err != nil {
				return err
			}
			if err := a.confirm(yes, fmt.Sprintf("remove periodic task %d (%s %q, %s)", t.ID, t.Code, producer.CronName(t.UniqueKey), t.CronExpr)); err != nil {
				return err
			}
			id, auditErr, err := cl.CronRemove(cmd.Context(), args[0], name, ops.CurrentActor())
			if err != nil {
				return err
			}
			if auditErr != nil {
				fmt.Fprintf(a.Stderr, "taskd: warning: removed, but the audit log was not written: %v\n", auditErr)
			}
			if a.json() {
				return a.printJSON(ops.Change{Action: "cron remove", Requested: 1, Changed: 1, IDs: []int64{id}, Unchanged: []ops.Skipped{}})
			}
			if t.Status == task.Running || t.Status == task.Dispatched {
				// Its worker runs it to the end and finds it gone.
				fmt.Fprintf(a.Stdout, "removed periodic task %d; its run under way ends on its own, and its result is not kept\n", id)
				return nil
			}
			fmt.Fprintf(a.Stdout, "removed periodic task %d\n", id)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "name of the periodic task (default: the code)")
	yesFlag(cmd, &yes)
	return cmd
}

func (a *App) cronTimezoneCmd() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "timezone [ZONE]",
		Short: "Show or set the time zone of periodic tasks that name none",
		Long: `Periodic tasks INSERTed without a timezone (the seed's producers write
none) run in one zone for the whole cluster, kept in the task center: the
first node or migrate records cron.timezone, else its host's zone. With
ZONE (an IANA name), set it; every node follows at once, and the next
run of those waiting moves to its time in ZONE. Tasks added with taskd
cron add record their own zone and are not affected.`,
		Example: "  taskd cron timezone\n  taskd cron timezone Asia/Shanghai",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if args[0] == "" {
					return task.Invalidf("time zone is empty")
				}
				if _, err := task.ValidateTimezone(args[0]); err != nil {
					return err
				}
			}
			open := a.openStore
			if len(args) == 0 {
				open = a.openReadStore // a read: the replica alone when there is one
			}
			st, err := open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			before, _, err := st.SettingGet(cmd.Context(), store.SettingCronTimezone)
			if err != nil {
				return err
			}
			out := map[string]any{"timezone": before}
			changed := len(args) == 1 && args[0] != before
			var moved []int64
			if changed {
				// The next runs first: should the setting then fail, the
				// same command again moves them to the same times and sets it.
				if moved, err = a.moveZoneless(cmd.Context(), st, args[0]); err != nil {
					return err
				}
				if err := st.SettingSet(cmd.Context(), store.SettingCronTimezone, args[0]); err != nil {
					return err
				}
				if err := st.Audit(cmd.Context(), ops.CurrentActor(), "cron timezone", args[0], 1,
					map[string]any{"before": before, "after": args[0], "moved": nonNil(moved)}); err != nil {
					fmt.Fprintf(a.Stderr, "taskd: warning: set, but the audit log was not written: %v\n", err)
				}
			}
			if len(args) == 1 {
				// One shape for every setting, a change or not, for scripts.
				out = map[string]any{"timezone": args[0], "before": before, "moved": nonNil(moved)}
			}
			if a.json() {
				return a.printJSON(out)
			}
			movedText := ""
			if len(moved) > 0 {
				movedText = "; moved the next run of " + ops.Plural(len(moved), "periodic task")
			}
			switch {
			case changed && before == "":
				fmt.Fprintf(a.Stdout, "periodic tasks that name no time zone now run in %s (each node used its own)%s\n", args[0], movedText)
			case changed:
				fmt.Fprintf(a.Stdout, "periodic tasks that name no time zone now run in %s (was %s)%s\n", args[0], before, movedText)
			case before == "":
				fmt.Fprintln(a.Stdout, "no default time zone: each node uses its own (set one: taskd cron timezone ZONE)")
			default:
				fmt.Fprintf(a.Stdout, "periodic tasks that name no time zone run in %s\n", before)
			}
			return nil
		},
	}
	neverAsks(cmd, &yes)
	return cmd
}

// moveZoneless moves the next run of the pending periodic tasks that name
// no time zone to their first occurrence in zone after now, by the
// database clock, as cron add moves a pending task whose zone it changes
// (cronspec.NextRun, as enable), and returns the ids it moved. A task in
// flight gets its next run when its run ends; a failed one keeps the time
// of its retry.
func (a *App) moveZoneless(ctx context.Context, st *store.Store, zone string) ([]int64, error) {
	zs, err := st.CronZonelessList(ctx)
	if err != nil || len(zs) == 0 {
		return nil, err
	}
	now, err := st.Now(ctx)
	if err != nil {
		return nil, err
	}
	move := make([]store.CronZoneless, 0, len(zs))
	next := make([]time.Time, 0, len(zs))
	for _, z := range zs {
		if cronspec.ExprZone(z.Expr) != "" {
			continue // CRON_TZ= names its own zone
		}
		at, err := cronspec.NextRun(z.Expr, zone, now, now)
		if err != nil {
			// Its next run ends it with this error anyway, in any zone.
			fmt.Fprintf(a.Stderr, "taskd: warning: periodic task %d keeps its next run: %v\n", z.ID, err)
			continue
		}
		move, next = append(move, z), append(next, at)
	}
	return st.CronZonelessMove(ctx, move, next)
}

// thenText lists the runs after next, for a person to check the
// expression against what was meant: ", then 18:03:00 and 19:03:00",
// each with its date when that is not the run's before it.
func thenText(next time.Time, then []time.Time) string {
	if len(then) == 0 {
		return ""
	}
	parts := make([]string, len(then))
	prev, _, _ := strings.Cut(fmtTime(&next), " ")
	for i, t := range then {
		day, clock, _ := strings.Cut(fmtTime(&t), " ")
		parts[i] = clock
		if day != prev {
			parts[i] = day + " " + clock
		}
		prev = day
	}
	return ", then " + strings.Join(parts, " and ")
}
