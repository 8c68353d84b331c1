package cli

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/task"
)

// selection is the "IDs or a filter" part of bulk actions.
type selection struct {
	status, queue, code string
	yes                 bool
}

func (s *selection) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&s.status, "status", "", "select tasks with this status")
	fl.StringVar(&s.queue, "queue", "", "select tasks of this queue")
	fl.StringVar(&s.code, "code", "", "select tasks with this code")
	fl.BoolVarP(&s.yes, "yes", "y", false, "do not ask for confirmation")
}

// ids resolves the arguments or the filter to task ids.
func (s *selection) ids(cmd *cobra.Command, o *ops.Ops, args []string) ([]int64, error) {
	filtered := s.status != "" || s.queue != "" || s.code != ""
	if len(args) > 0 && filtered {
		return nil, task.Invalidf("give task ids or a filter (--status, --queue, --code), not both")
	}
	if len(args) == 0 && !filtered {
		return nil, task.Invalidf("give task ids or a filter (--status, --queue, --code)")
	}
	if len(args) > 0 {
		ids := make([]int64, len(args))
		for i, a := range args {
			id, err := strconv.ParseInt(a, 10, 64)
			if err != nil || id <= 0 {
				return nil, task.Invalidf("task id %q is not a positive number", a)
			}
			ids[i] = id
		}
		return ids, nil
	}
	f := ops.Filter{Queue: s.queue, Code: s.code}
	if s.status != "" {
		st, err := task.ParseStatus(s.status)
		if err != nil {
			return nil, err
		}
		f.Status = &st
	}
	return o.Select(cmd.Context(), f)
}

// confirm asks on a terminal; elsewhere it requires --yes.
func (a *App) confirm(yes bool, prompt string) error {
	if yes {
		return nil
	}
	in, ok := a.Stdin.(*os.File)
	if !ok || !isTerminal(in) {
		return task.Invalidf("%s: refusing without --yes (not a terminal)", prompt)
	}
	fmt.Fprintf(a.Stderr, "%s? [y/N] ", prompt)
	line, _ := bufio.NewReader(in).ReadString('\n')
	if ans := strings.ToLower(strings.TrimSpace(line)); ans != "y" && ans != "yes" {
		return fmt.Errorf("cancelled: nothing changed")
	}
	return nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// ops opens the operator actions.
func (a *App) ops(cmd *cobra.Command) (*ops.Ops, func(), error) {
	st, err := a.openStore(cmd.Context())
	if err != nil {
		return nil, nil, err
	}
	br, err := a.openBroker(cmd.Context())
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return ops.New(st, br), func() { st.Close(); br.Close() }, nil
}

func (a *App) printChange(c ops.Change) error {
	if a.json() {
		return a.printJSON(c)
	}
	fmt.Fprintf(a.Stdout, "%s: %d of %d tasks changed", c.Action, c.Changed, c.Requested)
	if len(c.IDs) > 0 && len(c.IDs) <= 50 {
		fmt.Fprintf(a.Stdout, " (%s)", joinIDs(c.IDs))
	}
	fmt.Fprintln(a.Stdout)
	return nil
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ",")
}

// bulkAction is the body of a command acting on task ids or a filter.
// destructive actions always ask; others ask only for a filter.
func (a *App) bulkAction(sel *selection, verb string, destructive bool,
	act func(o *ops.Ops, cmd *cobra.Command, ids []int64) (ops.Change, error)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		o, closeFn, err := a.ops(cmd)
		if err != nil {
			return err
		}
		defer closeFn()
		ids, err := sel.ids(cmd, o, args)
		if err != nil {
			return err
		}
		if destructive || len(args) == 0 {
			if err := a.confirm(sel.yes, fmt.Sprintf("%s %d tasks", verb, len(ids))); err != nil {
				return err
			}
		}
		c, err := act(o, cmd, ids)
		if err != nil {
			return err
		}
		return a.printChange(c)
	}
}

func (a *App) retryCmd() *cobra.Command {
	var sel selection
	cmd := &cobra.Command{
		Use:   "retry [ID...]",
		Short: "Send dead, failed or cancelled tasks back to pending (retry count reset)",
		Example: `  taskd retry 42 43
  taskd retry --status dead --queue send_email --yes`,
		RunE: a.bulkAction(&sel, "retry", false, func(o *ops.Ops, cmd *cobra.Command, ids []int64) (ops.Change, error) {
			return o.Retry(cmd.Context(), ids)
		}),
	}
	sel.register(cmd)
	return cmd
}

func (a *App) killCmd() *cobra.Command {
	var sel selection
	cmd := &cobra.Command{
		Use:   "kill [ID...]",
		Short: "Cancel tasks; a running one is stopped wherever it runs",
		Example: `  taskd kill 42
  taskd kill --status pending --code report --yes`,
		RunE: a.bulkAction(&sel, "kill", true, func(o *ops.Ops, cmd *cobra.Command, ids []int64) (ops.Change, error) {
			return o.Kill(cmd.Context(), ids)
		}),
	}
	sel.register(cmd)
	return cmd
}
