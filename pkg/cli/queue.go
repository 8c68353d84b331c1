package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/task"
)

// queueCmd is a command changing one queue's state. It asks first: a
// pause stops work on every node at once.
func (a *App) queueCmd(use, short, example string, args cobra.PositionalArgs,
	act func(ctx context.Context, o *ops.Ops, args []string) (ops.Change, error)) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use: use, Short: short, Example: example, Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			o, closeFn, err := a.ops(cmd, redisOptional)
			if err != nil {
				return err
			}
			defer closeFn()
			if err := o.CheckQueue(cmd.Context(), args[0]); err != nil {
				return err
			}
			if err := a.confirm(yes, cmd.Name()+" queue "+strings.Join(args, " ")); err != nil {
				return err
			}
			c, err := act(cmd.Context(), o, args)
			if err != nil {
				return err
			}
			return a.printChange(c)
		},
	}
	yesFlag(cmd, &yes)
	return cmd
}

func (a *App) pauseCmd() *cobra.Command {
	return a.queueCmd("pause QUEUE", "Stop dispatching and starting tasks of a queue (running ones finish)",
		"  taskd pause send_email --yes", cobra.ExactArgs(1),
		func(ctx context.Context, o *ops.Ops, args []string) (ops.Change, error) {
			return o.Pause(ctx, args[0])
		})
}

func (a *App) resumeCmd() *cobra.Command {
	return a.queueCmd("resume QUEUE", "Let a paused queue run again",
		"  taskd resume send_email --yes", cobra.ExactArgs(1),
		func(ctx context.Context, o *ops.Ops, args []string) (ops.Change, error) {
			return o.Resume(ctx, args[0])
		})
}

func (a *App) reshardCmd() *cobra.Command {
	return a.queueCmd("reshard QUEUE N", "Change the number of Redis shards of a queue, online",
		"  taskd reshard send_email 8 --yes", shardsArgs,
		func(ctx context.Context, o *ops.Ops, args []string) (ops.Change, error) {
			n, _ := strconv.Atoi(args[1]) // checked by shardsArgs
			return o.Reshard(ctx, args[0], n)
		})
}

// shardsArgs checks reshard's QUEUE N before anything is asked.
func shardsArgs(cmd *cobra.Command, args []string) error {
	if err := cobra.ExactArgs(2)(cmd, args); err != nil {
		return err
	}
	if n, err := strconv.Atoi(args[1]); err != nil || n < 1 || n > ops.MaxShards {
		return usageError{fmt.Errorf("shards %q is not a number from 1 to %d", args[1], ops.MaxShards)}
	}
	return nil
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
			o, closeFn, err := a.readOps(cmd)
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
			// Narrow: ID, FROM, AFFECTED go first; DETAIL is cut before any.
			g := newGrid(7, []int{0, 3, 6}, "ID", "TIME", "WHO", "FROM", "ACTION", "TARGET", "AFFECTED", "DETAIL")
			for _, e := range es {
				g.add(e.ID, fmtTime(&e.CreatedAt), e.Actor, dash(strings.TrimSpace(e.Origin+" "+e.Key)), e.Action,
					oneLine(e.Target, 40), e.Affected, oneLine(string(e.Detail), 60))
			}
			if err := g.write(a.Stdout, a.width()); err != nil {
				return err
			}
			if len(es) == limit {
				a.nextPage("row", limit, es[len(es)-1].ID)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 50, "rows to show")
	cmd.Flags().Int64Var(&before, "before", 0, "show rows older than this id (paging)")
	return cmd
}
