package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

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
			c, err := a.config()
			if err != nil {
				return err
			}
			if err := checkCode(c, args[0], f.anyCode); err != nil {
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
				Payload: payload, Queue: f.queue, Priority: &f.priority, Timeout: f.timeout, MaxRetry: &f.maxRetry})
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(res)
			}
			verb := "added"
			if res.Updated {
				verb = "updated"
			}
			fmt.Fprintf(a.Stdout, "%s periodic task %d; next run %s\n", verb, res.ID, res.Next.Local().Format(time.RFC3339))
			return nil
		},
	}
	f.register(cmd)
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
					t.CronExpr, dash(t.Timezone), t.Status, t.PlanNextRun.Local().Format("2006-01-02 15:04:05"), oneLine(t.LastResult, 40))
			}
			return w.Flush()
		},
	}
}

func (a *App) cronRemoveCmd() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "remove CODE",
		Short: "Remove a periodic task",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := task.ValidateName("task code", args[0]); err != nil {
				return err
			}
			cl, closeFn, err := a.client(cmd)
			if err != nil {
				return err
			}
			defer closeFn()
			id, err := cl.CronRemove(cmd.Context(), args[0], name)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(map[string]any{"removed": id})
			}
			fmt.Fprintf(a.Stdout, "removed periodic task %d\n", id)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "name of the periodic task (default: the code)")
	return cmd
}
