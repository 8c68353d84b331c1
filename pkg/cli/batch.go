package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

func (a *App) batchCmd() *cobra.Command {
	var f taskFlags
	var callback, callbackPayload string
	cmd := &cobra.Command{
		Use:   "batch CODE PAYLOAD... --callback CODE",
		Short: "Submit tasks as a batch, with a callback task run once when the last has ended",
		Long: `Submit one task of CODE per PAYLOAD (JSON), or per line of standard input
when PAYLOAD is -, and a callback task: created once, when every member has
ended (succeeded, dead or cancelled), whatever retries, kills and crashes
happened on the way. The callback's payload is --callback-payload (a JSON
object) with a "batch" key: {"id", "total", "succeeded", "dead",
"cancelled"}. "taskd show --batch ID" shows a batch's progress.`,
		Example: `  taskd batch send_email '{"to":"a@example.com"}' '{"to":"b@example.com"}' --callback mail_report
  jq -c '.[]' recipients.json | taskd batch send_email - --callback mail_report --callback-payload '{"campaign":7}'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, children, err := a.checkTask(args[0], &f)
			if err != nil {
				return err
			}
			if callback == "" {
				return task.Invalidf("--callback CODE is required: the task to run when the batch has ended")
			}
			if err := checkCode(c, callback, f.anyCode); err != nil {
				return fmt.Errorf("--callback: %w", err)
			}
			payloads, err := a.batchPayloads(args[1:])
			if err != nil {
				return err
			}
			if len(payloads) == 0 {
				return task.Invalidf("empty batch: give one PAYLOAD per task, or - and one per line of standard input")
			}
			cbPayload, err := a.readPayload("--callback-payload", callbackPayload)
			if err != nil {
				return err
			}
			b := producer.Batch{Callback: producer.Callback{Code: callback, Payload: cbPayload}}
			for _, p := range payloads {
				b.Members = append(b.Members, producer.Submission{Code: args[0], Payload: p, Queue: f.queue,
					Priority: &f.priority, Timeout: f.timeout, MaxRetry: &f.maxRetry, Children: children})
			}
			cl, closeFn, err := a.client(cmd, true)
			if err != nil {
				return err
			}
			defer closeFn()
			if err := a.checkRouted(cmd.Context(), cl.store, f.anyCode, append([]string{args[0], callback}, f.then...)...); err != nil {
				return err
			}
			res, err := cl.Batch(cmd.Context(), b)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(ops.Change{Action: "batch", Requested: len(b.Members), Changed: len(res.MemberIDs),
					IDs: res.MemberIDs, Unchanged: []ops.Skipped{}, BatchID: res.ID})
			}
			fmt.Fprintf(a.Stdout, "submitted batch %d: %s (%s); %s runs when the last has ended\n",
				res.ID, ops.Plural(len(res.MemberIDs), "task"), idRange(res.MemberIDs), callback)
			return nil
		},
	}
	f.register(cmd)
	var yes bool
	neverAsks(cmd, &yes)
	fl := cmd.Flags()
	fl.StringVar(&callback, "callback", "", "code of the task to run once every member has ended")
	fl.StringVar(&callbackPayload, "callback-payload", "{}", "the callback's payload: a JSON object, @file, or @- for standard input")
	return cmd
}

// batchPayloads reads the members' payloads: the arguments, or one JSON
// value per non-blank line of standard input for "-".
func (a *App) batchPayloads(args []string) ([]json.RawMessage, error) {
	if len(args) != 1 || args[0] != "-" {
		out := make([]json.RawMessage, len(args))
		for i, p := range args {
			if p == "-" {
				return nil, task.Invalidf("- reads the payloads from standard input and must be the only PAYLOAD")
			}
			out[i] = json.RawMessage(p)
		}
		return out, nil
	}
	var out []json.RawMessage
	sc := bufio.NewScanner(a.Stdin)
	sc.Buffer(make([]byte, 64*1024), task.DefaultMaxPayload+1)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if n == 1 {
			line = bytes.TrimPrefix(line, utf8BOM)
		}
		if len(line) == 0 {
			continue
		}
		if !json.Valid(line) {
			return nil, task.Invalidf("standard input, line %d: not one JSON value", n)
		}
		out = append(out, json.RawMessage(bytes.Clone(line)))
	}
	if err := sc.Err(); err != nil {
		return nil, task.Invalidf("read payloads: %v", err)
	}
	return out, nil
}

// idRange shows ids as "101-104" when they are consecutive.
func idRange(ids []int64) string {
	switch {
	case len(ids) == 0:
		return "none"
	case len(ids) == 1:
		return fmt.Sprintf("task %d", ids[0])
	case ids[len(ids)-1]-ids[0] == int64(len(ids)-1):
		return fmt.Sprintf("tasks %d-%d", ids[0], ids[len(ids)-1])
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	return "tasks " + strings.Join(parts, ", ")
}

// failedMembersMax bounds the failed members `show --batch` lists.
const failedMembersMax = 100

// batchView is `show --batch`: the batch and its failed members.
type batchView struct {
	*store.Batch
	Failed []*task.Task `json:"failed"`
}

func (a *App) showBatch(cmd *cobra.Command, s *store.Store, id int64) error {
	b, err := s.BatchGet(cmd.Context(), id)
	if err != nil {
		return err
	}
	v := batchView{Batch: b}
	if v.Failed, err = s.BatchFailed(cmd.Context(), id, failedMembersMax); err != nil {
		return err
	}
	if a.json() {
		v.Failed = nonNil(v.Failed)
		return a.printJSON(v)
	}
	w := newTable(a.Stdout, 2)
	row := func(k, v string) { fmt.Fprintf(w, "%s\t%s\n", k, v) }
	row("batch", fmt.Sprint(b.ID))
	row("progress", batchProgress(b))
	cb := b.Callback.Code
	if b.CallbackID != 0 {
		cb += fmt.Sprintf(" (task %d)", b.CallbackID)
	} else {
		cb += " (when the last member has ended)"
	}
	row("callback", cb)
	row("created", fmtTime(&b.CreatedAt))
	row("finished", fmtTime(b.FinishedAt))
	w.Flush()
	if len(v.Failed) > 0 {
		fmt.Fprintf(a.Stdout, "\nfailed members (taskd retry ID... sends them back):\n")
		w = newTable(a.Stdout, 2)
		fmt.Fprintln(w, "ID\tSTATUS\tATTEMPT\tLAST RESULT")
		for _, t := range v.Failed {
			fmt.Fprintf(w, "%d\t%s\t%d\t%s\n", t.ID, t.Status, t.Attempt, oneLine(t.LastResult, 50))
		}
		w.Flush()
	}
	return nil
}

// batchProgress is one line: "3 of 4 ended: 2 succeeded, 1 dead, 0 cancelled".
func batchProgress(b *store.Batch) string {
	ended := b.Succeeded + b.Dead + b.Cancelled
	return fmt.Sprintf("%d of %d ended: %d succeeded, %d dead, %d cancelled", ended, b.Total, b.Succeeded, b.Dead, b.Cancelled)
}
