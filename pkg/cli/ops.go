package cli

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/task"
)

// selection is the "IDs or a filter" part of bulk actions.
type selection struct {
	status, queue, code, search, group string
	changed                            changedWindow
	yes                                bool
}

func (s *selection) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&s.status, "status", "", "select tasks with this status")
	fl.StringVar(&s.queue, "queue", "", "select tasks of this queue")
	fl.StringVar(&s.code, "code", "", "select tasks with this code")
	fl.StringVar(&s.search, "search", "", "select tasks whose code, queue, unique key or last result contains this text")
	fl.StringVar(&s.group, "group", "", "select tasks of this group")
	s.changed.register(cmd, "select")
	yesFlag(cmd, &s.yes)
}

// target resolves the arguments or the filter to what an action applies to.
func (s *selection) target(args []string) (ops.Target, error) {
	filtered := s.status != "" || s.queue != "" || s.code != "" || s.search != "" || s.group != "" || s.changed.set()
	if len(args) > 0 && filtered {
		return ops.Target{}, task.Invalidf("give task ids or a filter (--status, --queue, --code, --group, --search, --since, --until), not both")
	}
	if len(args) == 0 && !filtered {
		return ops.Target{}, task.Invalidf("give task ids or a filter (--status, --queue, --code, --group, --search, --since, --until)")
	}
	if err := limit.ValidateGroup(s.group); err != nil {
		return ops.Target{}, err
	}
	if len(args) > 0 {
		ids := make([]int64, len(args))
		for i, a := range args {
			id, err := strconv.ParseInt(a, 10, 64)
			if err != nil || id <= 0 {
				return ops.Target{}, task.Invalidf("task id %q is not a positive number", a)
			}
			ids[i] = id
		}
		return ops.Target{IDs: ids}, nil
	}
	f := ops.Filter{Queue: s.queue, Code: s.code, Search: s.search, Group: s.group}
	var err error
	if f.ChangedSince, f.ChangedBefore, err = s.changed.bounds(time.Now()); err != nil {
		return ops.Target{}, err
	}
	if s.status != "" {
		st, err := task.ParseStatus(s.status)
		if err != nil {
			return ops.Target{}, err
		}
		f.Status = &st
	}
	return ops.Target{Filter: &f}, nil
}

// confirm asks on a terminal; elsewhere it requires --yes. Only a real
// terminal counts: /dev/null is a character device too, and reading EOF
// from it is not an answer.
func (a *App) confirm(yes bool, prompt string) error {
	if yes {
		return nil
	}
	in, ok := a.Stdin.(*os.File)
	if !ok || !isTerminal(in) {
		return task.Invalidf("%s: refusing without --yes (standard input is not a terminal)", prompt)
	}
	a.flushWarning() // before the question: it may change the answer
	fmt.Fprintf(a.Stderr, "%s? [y/N] ", prompt)
	line, _ := bufio.NewReader(in).ReadString('\n')
	if ans := strings.ToLower(strings.TrimSpace(line)); ans != "y" && ans != "yes" {
		return exitError{code: ExitFailure, msg: "cancelled: nothing changed"}
	}
	return nil
}

func isTerminal(f *os.File) bool { return term.IsTerminal(f.Fd()) }

// yesFlag adds --yes to a command that changes state.
func yesFlag(cmd *cobra.Command, yes *bool) {
	cmd.Flags().BoolVarP(yes, "yes", "y", false, "do not ask for confirmation (required when standard input is not a terminal)")
}

// redisNeed says what a command needs Redis for.
type redisNeed int

const (
	// needRedis: the command reads or writes what only Redis holds (stats,
	// limits).
	needRedis redisNeed = iota
	// redisOptional: the command's change is in the task center, which
	// schedulers and workers read at their next poll; Redis only wakes
	// them, so an operator can still act during a Redis outage. Killing a
	// running task needs Redis to reach its worker, and fails without it.
	redisOptional
	// noRedis: the command reads the task center only (the audit log).
	noRedis
)

// ops opens the operator actions.
func (a *App) ops(cmd *cobra.Command, need redisNeed) (*ops.Ops, func(), error) {
	st, err := a.openStore(cmd.Context())
	if err != nil {
		return nil, nil, err
	}
	var br *broker.Broker
	if need != noRedis {
		if br, err = a.openBroker(cmd.Context()); err != nil {
			if need == needRedis {
				st.Close()
				return nil, nil, err
			}
			// Said with the action's outcome, or before its question: an
			// action that fails for want of Redis says so in its one line.
			a.warning = fmt.Sprintf("%v; going on with the task center alone", err)
			br = nil
		}
	}
	c, _ := a.config() // loaded by openStore
	return ops.NewFromConfig(st, br, c), func() {
		st.Close()
		if br != nil {
			br.Close()
		}
	}, nil
}

// flushWarning prints the warning a.ops left, once.
func (a *App) flushWarning() {
	if a.warning != "" {
		fmt.Fprintf(a.Stderr, "taskd: warning: %s\n", a.warning)
		a.warning = ""
	}
}

// printChange prints what an action did: its JSON, or one sentence.
func (a *App) printChange(c ops.Change) error {
	a.flushWarning()
	if a.json() {
		return a.printJSON(c)
	}
	_, err := fmt.Fprintln(a.Stdout, c.Sentence())
	return err
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ",")
}

// bulkAction is the body of a command acting on task ids or a filter: it
// resolves them (unknown ids or queue: not found, nothing asked or
// written), asks with the count, and acts on exactly the tasks confirmed.
func (a *App) bulkAction(sel *selection, verb string,
	act func(o *ops.Ops, ctx context.Context, t ops.Target) (ops.Change, error)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		t, err := sel.target(args)
		if err != nil {
			return err
		}
		o, closeFn, err := a.ops(cmd, redisOptional)
		if err != nil {
			return err
		}
		defer closeFn()
		if t, err = o.Resolve(cmd.Context(), t); err != nil {
			return err
		}
		prompt := fmt.Sprintf("%s %s", verb, ops.Plural(len(t.IDs), "task"))
		if t.Filter != nil {
			prompt += " (" + t.String() + ")"
		} else {
			prompt += " (" + joinIDs(t.IDs) + ")"
		}
		if err := a.confirm(sel.yes, prompt); err != nil {
			return err
		}
		var left []ops.Skipped
		if !sel.yes {
			// The question may have waited minutes for its answer.
			if t, left, err = o.StillMatching(cmd.Context(), t); err != nil {
				return err
			}
		}
		c, err := act(o, cmd.Context(), t)
		c.Requested += len(left)
		c.Unchanged = append(c.Unchanged, left...)
		if err == nil {
			return a.printChange(c)
		}
		if c.Changed == 0 {
			return err
		}
		// What it did before failing is said as on success: a script
		// told only "exit 1" took it that nothing was written. Not that
		// it goes on without Redis: the error says what it could not do.
		a.warning = ""
		if perr := a.printChange(c); perr != nil {
			return perr
		}
		return partialError{err}
	}
}

// taskCmd is a command acting on task ids or a filter.
func (a *App) taskCmd(use, short, example, verb string,
	act func(o *ops.Ops, ctx context.Context, t ops.Target) (ops.Change, error)) *cobra.Command {
	var sel selection
	cmd := &cobra.Command{Use: use, Short: short, Example: example, RunE: a.bulkAction(&sel, verb, act)}
	sel.register(cmd)
	return cmd
}

func (a *App) runNowCmd() *cobra.Command {
	return a.taskCmd("run-now [ID...]", "Make pending or failed tasks due now (run once)",
		"  taskd run-now 42 --yes\n  taskd run-now --status failed --queue reports --yes", "run", (*ops.Ops).RunNow)
}

func (a *App) deleteCmd() *cobra.Command {
	return a.taskCmd("delete [ID...]", "Delete tasks no worker holds: pending, failed, dead or cancelled",
		"  taskd delete 42 --yes\n  taskd delete --status pending --code report --yes\n  taskd delete --status dead --code import_rows --until 02:45 --yes", "delete", (*ops.Ops).Delete)
}

func (a *App) disableCmd() *cobra.Command {
	return a.taskCmd("disable [ID...]", "Stop periodic tasks from running until enabled",
		"  taskd disable 42 --yes", "disable", (*ops.Ops).Disable)
}

func (a *App) enableCmd() *cobra.Command {
	return a.taskCmd("enable [ID...]", "Put disabled periodic tasks back on their schedules",
		"  taskd enable 42 --yes", "enable", (*ops.Ops).Enable)
}

func (a *App) retryCmd() *cobra.Command {
	return a.taskCmd("retry [ID...]", "Send dead, failed or cancelled tasks back to pending (retry count reset)",
		"  taskd retry 42 43 --yes\n  taskd retry --status dead --queue send_email --yes", "retry", (*ops.Ops).Retry)
}

func (a *App) killCmd() *cobra.Command {
	return a.taskCmd("kill [ID...]", "Cancel tasks; a running one is stopped wherever it runs",
		"  taskd kill 42 --yes\n  taskd kill --status pending --code report --yes", "kill", (*ops.Ops).Kill)
}
