package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/taskd/taskd/pkg/task"
)

// tasksView lists one page of tasks, newest first. Pages are keyset
// pages (ids below the last one shown), so paging costs the same deep in a
// table of millions of rows as at its top.
type tasksView struct {
	cur cursor
	q   TaskQuery
	// pages are the BeforeID of each page opened; the last is the current.
	pages    []int64
	rows     []*task.Task
	more     bool // a next page exists
	loaded   bool
	seq      int // changes with the query: older answers are dropped
	selected map[int64]bool
}

// pageSize is the number of tasks a page of height lines shows.
func pageSize(height int) int { return max(1, height-1) } // less the header line

// query is the current page's query: one task more than it shows, to know
// whether a next page exists.
func (v *tasksView) query(height int) TaskQuery {
	q := v.q
	q.Limit = pageSize(height) + 1
	if len(v.pages) > 0 {
		q.BeforeID = v.pages[len(v.pages)-1]
	}
	return q
}

// setQuery changes the filter and goes back to the first page.
func (v *tasksView) setQuery(q TaskQuery) {
	v.q, v.pages, v.rows, v.loaded, v.cur = q, nil, nil, false, cursor{}
	v.seq++
	clear(v.selected)
}

func (v *tasksView) filterText() string {
	var parts []string
	if v.q.Status != nil {
		parts = append(parts, "status:"+v.q.Status.String())
	}
	if v.q.Queue != "" {
		parts = append(parts, "queue:"+v.q.Queue)
	}
	if v.q.Code != "" {
		parts = append(parts, "code:"+v.q.Code)
	}
	return strings.Join(parts, " ")
}

// parseTaskFilter reads "dead queue:Q code:C" (any order, any part), or a
// task id ("42", "#42") to open.
func parseTaskFilter(s string) (q TaskQuery, id int64, err error) {
	for _, tok := range strings.Fields(s) {
		key, val, ok := strings.Cut(tok, ":")
		if !ok {
			if n, err := strconv.ParseInt(strings.TrimPrefix(tok, "#"), 10, 64); err == nil && n > 0 {
				return q, n, nil
			}
			if st, err := task.ParseStatus(tok); err == nil {
				q.Status = &st
				continue
			}
			key, val = "code", tok
		}
		switch key {
		case "status", "s":
			st, err := task.ParseStatus(val)
			if err != nil {
				return q, 0, err
			}
			q.Status = &st
		case "queue", "q":
			q.Queue = val
		case "code", "c":
			q.Code = val
		default:
			return q, 0, task.Invalidf("unknown filter %q (want status:, queue:, code: or a task id)", key)
		}
	}
	return q, 0, nil
}

func (m *Model) applyTaskFilter(s string) tea.Cmd {
	q, id, err := parseTaskFilter(s)
	if err != nil {
		m.setStatus("filter", err)
		return nil
	}
	if id > 0 {
		return m.openDetail(id)
	}
	m.tasks.setQuery(q)
	return m.refresh()
}

// targets are the selected tasks shown on the page, else the one under
// the cursor; selected reports which. A selection that is not on the
// screen never counts: what a key acts on is always what the operator
// sees marked.
func (v *tasksView) targets() (ids []int64, selected bool) {
	for _, t := range v.rows {
		if v.selected[t.ID] {
			ids = append(ids, t.ID)
		}
	}
	if len(ids) > 0 {
		return ids, true
	}
	if v.cur.pos < len(v.rows) {
		return []int64{v.rows[v.cur.pos].ID}, false
	}
	return nil, false
}

// setRows shows a newly read page. The cursor stays on the task it was
// on when that task is still shown, and the selection keeps only the
// tasks still shown (the others changed state past the filter, or were
// deleted).
func (v *tasksView) setRows(rows []*task.Task, more bool) {
	var under int64
	if v.cur.pos < len(v.rows) {
		under = v.rows[v.cur.pos].ID
	}
	v.rows, v.more, v.loaded = rows, more, true
	shown := make(map[int64]bool, len(rows))
	for i, t := range rows {
		shown[t.ID] = true
		if t.ID == under {
			v.cur.pos = i
		}
	}
	for id := range v.selected {
		if !shown[id] {
			delete(v.selected, id)
		}
	}
}

func (m *Model) tasksKey(s string) tea.Cmd {
	v := &m.tasks
	switch s {
	case "]", "pgdown":
		if s == "pgdown" && v.cur.pos < len(v.rows)-1 {
			break
		}
		if v.more {
			v.pages = append(v.pages, v.rows[len(v.rows)-1].ID)
			v.seq++
			v.cur = cursor{}
			clear(v.selected)
			return m.refresh()
		}
		return nil
	case "[", "pgup":
		if s == "pgup" && v.cur.pos > 0 {
			break
		}
		if len(v.pages) > 0 {
			v.pages = v.pages[:len(v.pages)-1]
			v.seq++
			v.cur = cursor{}
			clear(v.selected)
			return m.refresh()
		}
		return nil
	}
	if v.cur.navigate(s, len(v.rows)) {
		return nil
	}
	ids, selected := v.targets()
	if cmd, ok := m.taskKey(s, ids, selected); ok {
		// Whatever the outcome (done, asked and cancelled, refused), the
		// selection was used: the next key starts from the cursor.
		clear(v.selected)
		return cmd
	}
	switch s {
	case "enter":
		if v.cur.pos < len(v.rows) {
			return m.openDetail(v.rows[v.cur.pos].ID)
		}
	case "space":
		if !m.canAct() || v.cur.pos >= len(v.rows) {
			return nil
		}
		id := v.rows[v.cur.pos].ID
		if v.selected[id] {
			delete(v.selected, id)
		} else {
			v.selected[id] = true
		}
		v.cur.move(1)
	case "a":
		if !m.canAct() {
			return nil
		}
		all := true
		for _, t := range v.rows {
			all = all && v.selected[t.ID]
		}
		for _, t := range v.rows {
			if all {
				delete(v.selected, t.ID)
			} else {
				v.selected[t.ID] = true
			}
		}
	case "s":
		q := v.q
		switch {
		case q.Status == nil:
			st := task.Pending
			q.Status = &st
		case *q.Status == task.Cancelled:
			q.Status = nil
		default:
			st := *q.Status + 1
			q.Status = &st
		}
		v.setQuery(q)
		return m.refresh()
	case "esc":
		if len(v.selected) > 0 {
			clear(v.selected)
		} else if v.filterText() != "" {
			v.setQuery(TaskQuery{})
			return m.refresh()
		}
	}
	return nil
}

var taskColumns = []column{
	{title: "ID", width: 8, right: true},
	{title: "STATUS", width: 10},
	{title: "CODE", width: 12, flex: 24},
	{title: "QUEUE", width: 10, flex: 20, drop: 3},
	{title: "TYPE", width: 8, drop: 5},
	{title: "TRY", width: 3, right: true, drop: 4},
	{title: "DUE", width: 10, right: true, drop: 2},
	{title: "UPDATED", width: 10, right: true, drop: 6},
	{title: "LAST RESULT", width: 10, flex: 80, drop: 1},
}

// statusStyle colours a status; the word says it without colour.
func (m *Model) statusStyle(s task.Status) lipgloss.Style {
	switch s {
	case task.Dead:
		return m.st.Bad
	case task.Failed:
		return m.st.Warn
	case task.Running:
		return m.st.Good
	}
	return lipgloss.NewStyle()
}

// relative writes t against now: "in 3m00s" or "5m00s ago".
func relative(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if t.After(now) {
		return "in " + age(t.Sub(now))
	}
	return age(now.Sub(t)) + " ago"
}

func (m *Model) tasksTable(width, height int) string {
	v := &m.tasks
	now := m.opt.Now()
	rows := make([]row, len(v.rows))
	for i, t := range v.rows {
		r := row{style: m.statusStyle(t.Status)}
		if v.selected[t.ID] {
			r.mark, r.style = "*", r.style.Inherit(m.st.Selected)
		}
		r.cells = []string{strconv.FormatInt(t.ID, 10), t.Status.String(), t.Code, t.QueueName(), t.Type.String(),
			strconv.Itoa(t.Attempt), relative(t.PlanNextRun, now), relative(t.UpdatedAt, now), oneLine(t.LastResult)}
		rows[i] = r
	}
	if len(rows) == 0 {
		msg := "loading…"
		if v.loaded {
			msg = "no tasks match"
			if f := v.filterText(); f != "" {
				msg += " " + f + " (esc clears the filter)"
			}
		}
		return m.empty(msg, width, height)
	}
	return renderTable(&m.st, taskColumns, rows, &v.cur, width, height)
}

// tasksInfo is the tasks view's part of the tab line: filter, page,
// selection.
func (m *Model) tasksInfo() string {
	v := &m.tasks
	var parts []string
	if f := v.filterText(); f != "" {
		parts = append(parts, f)
	}
	if len(v.pages) > 0 || v.more {
		parts = append(parts, fmt.Sprintf("page %d", len(v.pages)+1))
	}
	if v.more {
		parts[len(parts)-1] += "+"
	}
	if n := len(v.selected); n > 0 {
		parts = append(parts, fmt.Sprintf("%d selected", n))
	}
	return strings.Join(parts, " · ")
}
