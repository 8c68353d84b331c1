package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	flowlimit "github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

func (a *App) listCmd() *cobra.Command {
	var status, code, queue, search, group string
	var changed changedWindow
	var limit int
	var before, parent, batchID int64
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tasks, newest first (page with --before ID)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := &store.TaskListParams{Code: code, Queue: queue, Search: search, Group: group, Limit: limit, BeforeID: before,
				ParentID: parent, BatchID: batchID}
			if err := flowlimit.ValidateGroup(group); err != nil {
				return err
			}
			if status != "" {
				st, err := task.ParseStatus(status)
				if err != nil {
					return err
				}
				p.Status = &st
			}
			var err error
			if p.ChangedSince, p.ChangedBefore, err = changed.bounds(time.Now()); err != nil {
				return err
			}
			if limit < 1 || limit > 10000 {
				return task.Invalidf("--limit %d is out of range 1-10000", limit)
			}
			s, err := a.openReadStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			ts, err := s.TaskList(cmd.Context(), p)
			if err != nil {
				return err
			}
			if len(ts) == 0 {
				a.warnUnknown(cmd.Context(), s, code, queue)
			}
			if a.json() {
				return a.printJSON(nonNil(ts))
			}
			// Narrow: TYPE, PRI, ATTEMPT, QUEUE, RETRY go first; LAST
			// RESULT is cut before any.
			g := newGrid(9, []int{3, 5, 6, 2, 7}, "ID", "CODE", "QUEUE", "TYPE", "STATUS", "PRI", "ATTEMPT", "RETRY", "NEXT RUN", "LAST RESULT")
			g.quiet = []int{8, 6} // NEXT RUN - (all ended), ATTEMPT 0 (none run)
			for _, t := range ts {
				g.add(t.ID, t.Code, t.QueueName(), t.Type, t.StatusText(), t.Priority, t.Attempt,
					fmt.Sprintf("%d/%d", t.RetryCount, t.MaxRetry), nextRun(t), oneLine(t.LastResult, 40))
			}
			if err := g.write(a.Stdout, a.width()); err != nil {
				return err
			}
			if len(ts) == limit {
				a.nextPage("task", limit, ts[len(ts)-1].ID)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&status, "status", "", "only this status (pending, dispatched, running, succeeded, failed, dead, cancelled)")
	fl.StringVar(&code, "code", "", "only this task code")
	fl.StringVar(&queue, "queue", "", "only this queue")
	fl.StringVar(&search, "search", "", "only tasks whose code, queue, unique key or last result contains this text")
	fl.StringVar(&group, "group", "", "only tasks of this group")
	changed.register(cmd, "only")
	fl.IntVar(&limit, "limit", 50, "number of tasks")
	fl.Int64Var(&before, "before", 0, "only tasks with an id below this (next page)")
	fl.Int64Var(&parent, "parent", 0, "only the children of this task (submitted when it succeeded)")
	fl.Int64Var(&batchID, "batch", 0, "only the members of this batch")
	return cmd
}

func (a *App) showCmd() *cobra.Command {
	var runs int
	var batchID int64
	cmd := &cobra.Command{
		Use:   "show ID | --batch ID",
		Short: "Show a task and its run history, or a batch and its failed members",
		Example: `  taskd show 42
  taskd show --batch 7`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("batch") {
				if len(args) > 0 || batchID <= 0 {
					return task.Invalidf("give either a task ID or --batch with a positive batch id")
				}
			} else if len(args) == 0 {
				return argsError(cmd, "missing task ID")
			}
			s, err := a.openReadStore(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			if batchID > 0 {
				return a.showBatch(cmd, s, batchID)
			}
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return task.Invalidf("task id %q is not a positive number", args[0])
			}
			t, err := s.TaskGet(cmd.Context(), id)
			if err != nil {
				return err
			}
			rs, err := s.RunList(cmd.Context(), id, runs)
			if err != nil {
				return err
			}
			node := a.workerNode(cmd, t.WorkerID, rs)
			st, err := s.TaskSteps(cmd.Context(), t, stepsShown)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(struct {
					*task.Task
					WorkerNode string       `json:"worker_node"`
					Runs       []*task.Run  `json:"runs"`
					Children   []*task.Task `json:"children,omitempty"`
					Batch      *store.Batch `json:"batch,omitempty"`
				}{t, node, nonNil(rs), st.Children, st.Batch})
			}
			a.printTask(t, node, rs, st)
			return nil
		},
	}
	cmd.Flags().IntVar(&runs, "runs", 20, "number of runs to show")
	cmd.Flags().Int64Var(&batchID, "batch", 0, "show this batch: progress, callback and failed members")
	return cmd
}

// workerNode names the node of worker id: from its heartbeat while it
// lives, else from the task's runs ("" when neither knows it).
func (a *App) workerNode(cmd *cobra.Command, id string, rs []*task.Run) string {
	if id == "" {
		return ""
	}
	if node := task.RunNode(id, rs); node != "" {
		return node
	}
	br, err := a.openBroker(cmd.Context())
	if err != nil {
		return "" // best effort: show still shows the task
	}
	defer br.Close()
	live, _ := br.LiveWorkers(cmd.Context())
	for _, w := range live {
		if w.ID == id {
			return w.Node
		}
	}
	return ""
}

// stepsShown bounds the children and failed members `show` lists.
const stepsShown = 50

// nextRun is a task's next run as listed: only a waiting task has one
// (pending, or failed until its retry). A task in flight or ended shows
// none rather than its past plan time, and a disabled periodic task's
// enable sets it anew.
func nextRun(t *task.Task) string {
	if !t.Status.Waiting() {
		return "-" // in flight, ended or disabled: its plan time is past
	}
	return fmtTime(&t.PlanNextRun)
}

func (a *App) printTask(t *task.Task, node string, rs []*task.Run, st *store.Steps) {
	w := newTable(a.Stdout, 2)
	row := func(k, v string) { fmt.Fprintf(w, "%s\t%s\n", k, v) }
	row("id", strconv.FormatInt(t.ID, 10))
	row("code", t.Code)
	row("queue", t.QueueName())
	row("type", t.Type.String())
	if t.Disabled() {
		row("status", fmt.Sprintf("disabled (cancelled; `taskd enable %d` sets its next run from then)", t.ID))
	} else {
		row("status", t.Status.String())
	}
	if t.CronExpr != "" {
		row("cron", t.CronExpr+" "+dash(t.Timezone))
	}
	row("priority", strconv.Itoa(t.Priority))
	row("attempt", strconv.Itoa(t.Attempt))
	row("retries", fmt.Sprintf("%d of %d", t.RetryCount, t.MaxRetry))
	row("crashes", strconv.Itoa(t.CrashCount))
	timeout := task.EffectiveTimeout(t.Timeout).String()
	if d := time.Duration(t.Timeout) * time.Second; d.String() != timeout {
		timeout += fmt.Sprintf(" (its row says %d)", t.Timeout)
	}
	row("timeout", timeout)
	row("unique key", dash(t.UniqueKey))
	if t.ReleasedKey != "" {
		row("released key", t.ReleasedKey+" (taken over by a later until-done submit)")
	}
	if t.Group != "" {
		row("group", t.Group)
	}
	if t.WorkerID == "" && len(rs) > 0 {
		// The task center names a worker only while the task runs; its
		// last attempt's is in the newest run.
		row("worker", task.WithNode(rs[0].WorkerID, rs[0].Node)+", its last run")
	} else {
		row("worker", task.WithNode(t.WorkerID, node))
	}
	row("next run", nextRun(t))
	if t.ScheduledAt != nil {
		// A retry or a recovery moved the next run: its handler still gets
		// the time of the run it repeats.
		row("scheduled", fmtTime(t.ScheduledAt)+" (the occurrence its retry runs for; the handler gets this time)")
	}
	row("dispatched", fmtTime(t.Dispatched))
	row("started", fmtTime(t.StartedAt))
	row("last run", fmtTime(t.LastRunAt))
	row("created", fmtTime(&t.CreatedAt))
	row("updated", fmtTime(&t.UpdatedAt))
	if t.ParentID != 0 {
		row("parent", strconv.FormatInt(t.ParentID, 10))
	}
	if len(t.Then) > 0 {
		row("then", task.ChainText(t.Then))
	}
	if b := st.Batch; b != nil {
		role := "member of batch"
		if t.BatchID == 0 {
			role = "callback of batch"
		}
		row("batch", fmt.Sprintf("%s %d: %s (taskd show --batch %d)", role, b.ID, batchProgress(b), b.ID))
	}
	for i, c := range st.Children {
		k := ""
		if i == 0 {
			k = "children"
		}
		row(k, fmt.Sprintf("%d %s %s", c.ID, c.Code, c.Status))
	}
	w.Flush()
	var pretty bytes.Buffer
	if json.Indent(&pretty, t.Payload, "", "  ") != nil {
		pretty.Reset()
		pretty.Write(t.Payload)
	}
	// On a terminal, a screenful of each; piped, all of it.
	width := a.width()
	screenful := func(s, what string, size int) string {
		if width <= 0 {
			return s
		}
		return CutText(s, width, shownBytes, shownRows, false, CutNote(what, size, t.ID))
	}
	fmt.Fprintf(a.Stdout, "\npayload:\n%s\n", screenful(pretty.String(), "payload", len(t.Payload)))
	if t.LastResult != "" {
		fmt.Fprintf(a.Stdout, "\nlast result:\n%s\n", screenful(printable(t.LastResult), "result", len(t.LastResult)))
	}
	fmt.Fprintf(a.Stdout, "\nruns (newest first):\n")
	// Narrow: WORKER, NODE go first; RESULT is cut before any.
	g := newGrid(6, []int{5, 4}, "ATTEMPT", "OUTCOME", "STARTED", "DURATION", "NODE", "WORKER", "RESULT")
	for _, r := range rs {
		g.add(r.Attempt, r.Outcome, fmtTime(&r.StartedAt), (time.Duration(r.DurationMS) * time.Millisecond).String(),
			dash(r.Node), r.WorkerID, oneLine(r.Result, 50))
	}
	g.write(a.Stdout, width)
}

// timeLayout is the one format of times in text output: the local time,
// as --at takes it. JSON has RFC 3339.
const timeLayout = "2006-01-02 15:04:05"

func fmtTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.Local().Format(timeLayout)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// nonNil makes an empty list print as [] in JSON.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// nextPage says, after a full page of text, that more rows may match and
// where the next page starts: a full page reads like the whole list. On
// stderr, so that what is piped stays the table.
func (a *App) nextPage(noun string, limit int, lastID int64) {
	fmt.Fprintf(a.Stderr, "taskd: %s shown, more may match: the next page is --before %d (or --limit up to 10000)\n", ops.Plural(limit, noun), lastID)
}
