package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/task"
)

func (a *App) cronCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cron", Short: "Manage periodic tasks"}
	cmd.AddCommand(a.cronAddCmd(), a.cronListCmd(), a.cronRemoveCmd())
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
			payload, err := a.readPayload(f.payload)
			if err != nil {
				return err
			}
			cl, closeFn, err := a.client(cmd)
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := cl.CronAdd(cmd.Context(), producer.Cron{Code: args[0], Name: name, Expr: args[1], Timezone: tz,
				Payload: payload, Queue: f.queue, Priority: &f.priority, Timeout: f.timeout, MaxRetry: &f.maxRetry,
				Children: children})
			if err != nil {
				return err
			}
			ch := ops.Change{Action: "cron add", Requested: 1, Changed: 1, IDs: []int64{res.ID}, Unchanged: []ops.Skipped{}, NextRun: &res.Next}
			verb := "added"
			if res.Updated {
				ch.Action, verb = "cron update", "updated"
			}
			if a.json() {
				return a.printJSON(ch)
			}
			fmt.Fprintf(a.Stdout, "%s periodic task %d; next run %s\n", verb, res.ID, fmtTime(&res.Next))
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
		Use:   "list",
		Short: "List periodic tasks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, closeFn, err := a.client(cmd)
			if err != nil {
				return err
			}
			defer closeFn()
			ts, err := cl.CronList(cmd.Context())
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(nonNil(ts))
			}
			w := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tCODE\tNAME\tEXPR\tTZ\tSTATUS\tNEXT RUN\tLAST RESULT")
			for _, t := range ts {
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Code, producer.CronName(t.UniqueKey),
					t.CronExpr, dash(t.Timezone), t.Status, fmtTime(&t.PlanNextRun), oneLine(t.LastResult, 40))
			}
			return w.Flush()
		},
	}
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
			cl, closeFn, err := a.client(cmd)
			if err != nil {
				return err
			}
			defer closeFn()
			t, err := cl.CronGet(cmd.Context(), args[0], name)
			if err != nil {
				return err
			}
			if err := a.confirm(yes, fmt.Sprintf("remove periodic task %d (%s %q, %s)", t.ID, t.Code, producer.CronName(t.UniqueKey), t.CronExpr)); err != nil {
				return err
			}
			id, err := cl.CronRemove(cmd.Context(), args[0], name)
			if err != nil {
				return err
			}
			if err := cl.store.Audit(cmd.Context(), ops.CurrentActor(), "cron remove", fmt.Sprintf("task %d", id), 1,
				map[string]any{"code": t.Code, "name": producer.CronName(t.UniqueKey), "cron": t.CronExpr}); err != nil {
				fmt.Fprintf(a.Stderr, "taskd: warning: removed, but the audit log was not written: %v\n", err)
			}
			if a.json() {
				return a.printJSON(ops.Change{Action: "cron remove", Requested: 1, Changed: 1, IDs: []int64{id}, Unchanged: []ops.Skipped{}})
			}
			fmt.Fprintf(a.Stdout, "removed periodic task %d\n", id)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "name of the periodic task (default: the code)")
	yesFlag(cmd, &yes)
	return cmd
}
