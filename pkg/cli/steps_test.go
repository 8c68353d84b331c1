package cli_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/cli"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// TestSubmitThen: --then B --then C is a chain: B after the task, C after
// B; show names it, and once the children exist, links them.
func TestSubmitThen(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.submit(t, "hello", "--then", "report", "--then", "hello", "--priority", "2")
	tk, err := b.env.Store.TaskGet(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, []task.Child{{Code: "report", Priority: task.DefaultPriority, Timeout: task.DefaultTimeout,
		MaxRetry: task.DefaultMaxRetry, Then: []task.Child{{Code: "hello", Priority: task.DefaultPriority,
			Timeout: task.DefaultTimeout, MaxRetry: task.DefaultMaxRetry}}}}, tk.Then, "children do not inherit the parent's flags")
	require.Contains(t, b.ok(t, "show", itoa(id)), "then        report → hello\n")

	// A child, as the parent's success creates it.
	b.env.Exec(t, `INSERT INTO task_center (task_code, payload, parent_id) VALUES ('report', '{}', ?)`, id)
	out := b.ok(t, "show", itoa(id))
	require.Regexp(t, `children +\d+ report pending\n`, out)
	var shown struct {
		ParentID int64 `json:"parent_id"`
		Children []struct {
			ID       int64  `json:"id"`
			Code     string `json:"task_code"`
			ParentID int64  `json:"parent_id"`
		} `json:"children"`
	}
	b.okJSON(t, &shown, "show", itoa(id))
	require.Len(t, shown.Children, 1)
	require.Equal(t, id, shown.Children[0].ParentID)
	child := shown.Children[0].ID
	require.Contains(t, b.ok(t, "show", itoa(child)), "parent      "+itoa(id)+"\n")
	require.Contains(t, b.ok(t, "list", "--parent", itoa(id)), "report")
	require.NotContains(t, b.ok(t, "list", "--parent", itoa(child)), "report")
}

// TestBatchCommand: members from arguments or standard input, the batch's
// progress and failed members in show, and the callback's link back.
func TestBatchCommand(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var ch struct {
		Action    string  `json:"action"`
		Requested int     `json:"requested"`
		Changed   int     `json:"changed"`
		IDs       []int64 `json:"ids"`
		BatchID   int64   `json:"batch_id"`
	}
	b.okJSON(t, &ch, "batch", "hello", `{"n":1}`, `{"n":2}`, "--callback", "report", "--callback-payload", `{"month":"may"}`,
		"--max-retry", "0")
	require.Equal(t, "batch", ch.Action)
	require.Equal(t, 2, ch.Requested)
	require.Equal(t, 2, ch.Changed)
	require.Len(t, ch.IDs, 2)
	res := store.BatchInsertResult{ID: ch.BatchID, MemberIDs: ch.IDs}

	r := runCLI(t, b.cfgPath, "{\"n\":3}\n\n{\"n\":4}\n{\"n\":5}\n", "batch", "hello", "-", "--callback", "report")
	require.Equal(t, cli.ExitOK, r.code, "stderr %q", r.stderr)
	require.Regexp(t, `^submitted batch \d+: 3 tasks \(tasks \d+-\d+\); report runs when the last has ended\n$`, r.stdout)
	r = runCLI(t, b.cfgPath, "\n\n", "batch", "hello", "-", "--callback", "report")
	requireOneLineError(t, r, cli.ExitUsage)
	require.Contains(t, r.stderr, "empty batch")
	r = runCLI(t, b.cfgPath, "{}\nnot json\n", "batch", "hello", "-", "--callback", "report")
	requireOneLineError(t, r, cli.ExitUsage)
	require.Contains(t, r.stderr, "line 2")
	require.Equal(t, 5, b.rows(t), "bad input wrote nothing")

	out := b.ok(t, "show", "--batch", itoa(res.ID))
	require.Contains(t, out, "progress  0 of 2 ended: 0 succeeded, 0 dead, 0 cancelled\n")
	require.Contains(t, out, "callback  report (when the last member has ended)\n")
	require.Contains(t, b.ok(t, "show", itoa(res.MemberIDs[0])), "member of batch "+itoa(res.ID)+": 0 of 2 ended")

	b.env.Exec(t, `UPDATE task_center SET status = 3 WHERE id = ?`, res.MemberIDs[0])
	b.env.Exec(t, `UPDATE task_center SET status = 5, attempt = 1, last_result = 'no such mailbox' WHERE id = ?`, res.MemberIDs[1])
	done, err := b.env.Store.BatchFinish(ctx, []int64{res.ID})
	require.NoError(t, err)
	require.Equal(t, []int64{res.ID}, done)

	out = b.ok(t, "show", "--batch", itoa(res.ID))
	require.Contains(t, out, "progress  2 of 2 ended: 1 succeeded, 1 dead, 0 cancelled\n")
	require.Regexp(t, `callback  report \(task \d+\)\n`, out)
	require.Regexp(t, `\n`+itoa(res.MemberIDs[1])+` +dead +1 +no such mailbox\n`, out, "failed members listed")
	var v struct {
		ID         int64 `json:"id"`
		Total      int   `json:"total"`
		Dead       int   `json:"dead"`
		CallbackID int64 `json:"callback_id"`
		Failed     []struct {
			ID int64 `json:"id"`
		} `json:"failed"`
	}
	b.okJSON(t, &v, "show", "--batch", itoa(res.ID))
	require.Equal(t, res.ID, v.ID)
	require.Equal(t, 2, v.Total)
	require.Equal(t, 1, v.Dead)
	require.Len(t, v.Failed, 1)
	require.Equal(t, res.MemberIDs[1], v.Failed[0].ID)

	cb, err := b.env.Store.TaskGet(ctx, v.CallbackID)
	require.NoError(t, err)
	var p map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(cb.Payload, &p))
	require.JSONEq(t, `"may"`, string(p["month"]))
	require.Contains(t, b.ok(t, "show", itoa(cb.ID)), "callback of batch "+itoa(res.ID)+": 2 of 2 ended")
	list := b.ok(t, "list", "--batch", itoa(res.ID), "--status", "dead")
	require.Equal(t, 2, strings.Count(list, "\n"), "the header and the dead member: %s", list)

	r = b.run(t, "show", "--batch", "99999")
	requireOneLineError(t, r, cli.ExitFailure)
	require.Contains(t, r.stderr, "batch 99999 not found")
	require.Regexp(t, `^submitted batch \d+: 1 task \(task \d+\); report`, b.ok(t, "batch", "hello", "{}", "--callback", "report"))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
