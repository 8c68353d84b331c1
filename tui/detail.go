package tui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"

	"github.com/taskd/taskd/pkg/cli"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// detailView shows one task: every field, the payload as indented JSON,
// the run history and the last result.
type detailView struct {
	id    int64
	task  *task.Task
	runs  []*task.Run
	steps *store.Steps // nil: the Source reads none
	hop   int          // the child or failed member c or f opens next
	vp    viewport.Model
	// payload and result are the long texts, made once per content and
	// width (see textBlock).
	payload, result textBlock
}

// openDetail opens task id's detail over what is shown.
func (m *Model) openDetail(id int64) tea.Cmd {
	m.push()
	m.cur = page{detail: &detailView{id: id, vp: viewport.New()}}
	m.resizePages()
	return m.refresh()
}

func (d *detailView) set(m *Model, t *task.Task, runs []*task.Run, steps *store.Steps) {
	if was := d.task; was == nil || was.ID != t.ID || !bytes.Equal(was.Payload, t.Payload) {
		d.payload.reset()
	}
	if was := d.task; was == nil || was.ID != t.ID || was.LastResult != t.LastResult {
		d.result.reset()
	}
	d.task, d.runs, d.steps = t, runs, steps
	d.show(m)
}

// show fills the viewport with the task, wrapped to its width: a line
// longer than the screen (a payload's string, an error message, two
// columns a character in Chinese) was cut at the edge, and what was
// past it could not be seen. The payload and the last result are made
// again only when they or the width changed.
func (d *detailView) show(m *Model) {
	t := d.task
	if t == nil {
		return
	}
	w := d.vp.Width()
	payload := d.payload.text(w, func() string {
		return cutText(indentJSON(t.Payload), w, cli.CutNote("payload", len(t.Payload), t.ID))
	})
	result := d.result.text(w, func() string {
		if t.LastResult == "" {
			return "-"
		}
		return cutText(strings.TrimRight(clean(t.LastResult), "\n"), w, cli.CutNote("result", len(t.LastResult), t.ID))
	})
	head, runs := m.detailText(t, d.runs)
	d.vp.SetContent(cli.WrapWords(head, w) + "\n" + payload + "\n" + cli.WrapWords(runs, w) + "\n" + result + "\n" +
		cli.WrapWords(m.stepsText(t, d.steps), w))
}

func (m *Model) detailKey(k tea.KeyPressMsg) (tea.Cmd, bool) {
	d := m.cur.detail
	if key.Matches(k, globalKeys.Back, globalKeys.Quit) || k.String() == "backspace" {
		return m.back(), true
	}
	if scroll(&d.vp, k) {
		return nil, true
	}
	if key.Matches(k, tailKey) {
		return m.openTail(d.id), true
	}
	if cmd, ok := m.stepKey(k); ok {
		return cmd, true
	}
	var attempts task.SeenAttempts
	if d.task != nil {
		attempts = task.SeenAttempts{d.id: d.task.Attempt}
	}
	return m.taskKey(k, []int64{d.id}, attempts, false)
}

// indentJSON indents a payload; what is not JSON is shown as it is.
func indentJSON(raw []byte) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return clean(string(raw))
	}
	return clean(b.String())
}

// detailText is the detail but for the payload and the last result: what
// comes before the payload (ending with its title), and what comes
// between it and the result (ending with the result's title).
func (m *Model) detailText(t *task.Task, runs []*task.Run) (head, mid string) {
	now := m.opt.Now()
	var b strings.Builder
	kv := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%-12s %s\n", k, v)
		}
	}
	at := func(p *time.Time) string {
		if p == nil {
			return ""
		}
		return stamp(*p) + " (" + relative(*p, now) + ")"
	}
	b.WriteString(m.st.Title.Render(fmt.Sprintf("Task %d", t.ID)) + "  " + m.statusStyle(t.Status).Render(t.StatusText()) + "\n")
	kv("code", t.Code)
	kv("queue", t.QueueName())
	kv("type", t.Type.String())
	if t.CronExpr != "" {
		kv("cron", strings.TrimSpace(t.CronExpr+" "+t.Timezone))
	}
	kv("unique key", t.UniqueKey)
	kv("attempt", fmt.Sprintf("%d (retries %d of %d, crashes %d)", t.Attempt, t.RetryCount, t.MaxRetry, t.CrashCount))
	kv("priority", fmt.Sprintf("%d · timeout %ds · delay %ds", t.Priority, int(task.EffectiveTimeout(t.Timeout).Seconds()), t.Delay))
	if t.WorkerID != "" {
		kv("worker", task.WithNode(t.WorkerID, m.workerNode(t.WorkerID, runs)))
	}
	if due(t, now) != "-" {
		kv("due", at(&t.PlanNextRun))
		kv("scheduled", at(t.ScheduledAt)) // the occurrence a retry repeats
	}
	kv("dispatched", at(t.Dispatched))
	kv("started", at(t.StartedAt))
	kv("last run", at(t.LastRunAt))
	kv("created", at(&t.CreatedAt))
	kv("updated", at(&t.UpdatedAt))

	b.WriteString("\n" + m.st.Title.Render("Payload"))
	head = b.String()

	b.Reset()
	b.WriteString("\n" + m.st.Title.Render(fmt.Sprintf("Runs (%d, newest first)", len(runs))) + "\n")
	if len(runs) == 0 {
		b.WriteString("none yet\n")
	}
	for _, r := range runs {
		line := fmt.Sprintf("#%-3d %-11s %s %8s  %s", r.Attempt, r.Outcome, stamp(r.FinishedAt),
			age(time.Duration(r.DurationMS)*time.Millisecond), r.WorkerID)
		style := m.st.Status
		if r.Outcome != task.OutcomeSucceeded {
			style = m.st.Warn
		}
		b.WriteString(style.Render(line) + "\n")
		if res := oneLine(r.Result); res != "" {
			b.WriteString("     " + res + "\n")
		}
	}
	b.WriteString("\n" + m.st.Title.Render("Last result"))
	return head, b.String()
}

// workerNode names the node of worker id, from the task's runs or else
// the registered workers, as `taskd show` does.
func (m *Model) workerNode(id string, runs []*task.Run) string {
	if node := task.RunNode(id, runs); node != "" {
		return node
	}
	if m.ov == nil {
		return ""
	}
	for _, w := range m.ov.Workers {
		if w.ID == id {
			return w.Node
		}
	}
	return ""
}
