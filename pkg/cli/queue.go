package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/task"
)

// queueCmd is a command changing one queue's state.
func (a *App) queueCmd(use, short, example string, args cobra.PositionalArgs,
	act func(ctx context.Context, o *ops.Ops, args []string) (ops.QueueChange, error)) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Example: example, Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			o, closeFn, err := a.ops(cmd)
			if err != nil {
				return err
			}
			defer closeFn()
			c, err := act(cmd.Context(), o, args)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(c)
			}
			if !c.Changed {
				fmt.Fprintf(a.Stdout, "%s: queue %s unchanged (paused=%t shards=%d)\n", c.Action, c.Queue, c.After.Paused, c.After.Shards)
				return nil
			}
			fmt.Fprintf(a.Stdout, "%s: queue %s paused %t -> %t, shards %d -> %d\n", c.Action, c.Queue,
				c.Before.Paused, c.After.Paused, c.Before.Shards, c.After.Shards)
			return nil
		},
	}
}

func (a *App) pauseCmd() *cobra.Command {
	return a.queueCmd("pause QUEUE", "Stop dispatching and starting tasks of a queue (running ones finish)",
		"  taskd pause send_email", cobra.ExactArgs(1),
		func(ctx context.Context, o *ops.Ops, args []string) (ops.QueueChange, error) {
			return o.Pause(ctx, args[0])
		})
}

func (a *App) resumeCmd() *cobra.Command {
	return a.queueCmd("resume QUEUE", "Let a paused queue run again",
		"  taskd resume send_email", cobra.ExactArgs(1),
		func(ctx context.Context, o *ops.Ops, args []string) (ops.QueueChange, error) {
			return o.Resume(ctx, args[0])
		})
}

func (a *App) reshardCmd() *cobra.Command {
	return a.queueCmd("reshard QUEUE N", "Change the number of Redis shards of a queue, online",
		"  taskd reshard send_email 8", cobra.ExactArgs(2),
		func(ctx context.Context, o *ops.Ops, args []string) (ops.QueueChange, error) {
			n, err := strconv.Atoi(args[1])
			if err != nil {
				return ops.QueueChange{}, task.Invalidf("shards %q is not a number", args[1])
			}
			return o.Reshard(ctx, args[0], n)
		})
}

func (a *App) auditCmd() *cobra.Command {
	var limit int
	var before int64
	cmd := &cobra.Command{
		Use:     "audit",
		Short:   "List operator actions, newest first",
		Example: "  taskd audit --limit 20\n  taskd -o json audit",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit <= 0 || limit > 10000 {
				return task.Invalidf("--limit must be between 1 and 10000")
			}
			o, closeFn, err := a.ops(cmd)
			if err != nil {
				return err
			}
			defer closeFn()
			es, err := o.Audit(cmd.Context(), before, limit)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(nonNil(es))
			}
			w := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tTIME\tWHO\tFROM\tACTION\tTARGET\tAFFECTED\tDETAIL")
			for _, e := range es {
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", e.ID, e.CreatedAt.Local().Format(time.DateTime), e.Actor,
					dash(strings.TrimSpace(e.Origin+" "+e.Key)), e.Action, oneLine(e.Target, 40), e.Affected, oneLine(string(e.Detail), 60))
			}
			return w.Flush()
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 50, "rows to show")
	cmd.Flags().Int64Var(&before, "before", 0, "show rows older than this id (paging)")
	return cmd
}
