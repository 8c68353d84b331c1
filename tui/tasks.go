package tui

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/store"
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
	edge     int64 // the smallest id of rows: the next page's BeforeID
	more     bool  // a next page exists
	turned   bool  // rows are the page before a turn: the cursor follows none
	acted    bool  // an action ended since the last page was read
	loaded   bool
	seq      int // changes with the query: older answers are dropped
	selected map[int64]bool
	// all: every task matching the filter is selected, allCount of them
	// when counted (-1 while counting).
	all      bool
	allCount int
	// sort orders the page (ids newest first by default).
	sort sorting
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
	v.q, v.pages, v.rows, v.more, v.loaded, v.cur = q, nil, nil, false, false, cursor{}
	v.seq++
	v.unselect()
}

// unselect clears the selection, all-matching included.
func (v *tasksView) unselect() {
	clear(v.selected)
	v.all = false
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
	if v.q.Search != "" {
		parts = append(parts, v.q.Search)
	}
	return strings.Join(parts, " ")
}

// parseTaskFilter reads "dead queue:Q code:C words" (any order, any
// part), or a task id ("42", "#42") to open. Words that are not a status
// are searched for in the code, queue, unique key and last result.
func parseTaskFilter(s string) (q TaskQuery, id int64, err error) {
	var words []string
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
			words = append(words, tok)
			continue
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
		case "search", "text":
			words = append(words, val)
		default:
			return q, 0, task.Invalidf("unknown filter %q (want status:, queue:, code:, words to search or a task id)", key)
		}
	}
	q.Search = strings.Join(words, " ")
	return q, 0, nil
}

func (m *Model) applyTaskFilter(s string) tea.Cmd {
	q, id, err := parseTaskFilter(s)
	if err != nil {
		m.setStatus("filter", err)
		return nil
	}
	if m.status.err {
		m.status = status{} // the filter that failed is mended
	}
	if id > 0 {
		return m.openDetail(id)
	}
	m.tasks.setQuery(q)
	return m.refresh()
}

// targets are the selected tasks shown on the page, else the one under
// the cursor, with the attempt of each shown; selected reports which. A selection that is not on the
// screen never counts: what a key acts on is always what the operator
// sees marked.
func (v *tasksView) targets() (ids []int64, attempts task.SeenAttempts, selected bool) {
	attempts = task.SeenAttempts{}
	for _, t := range v.rows {
		if v.selected[t.ID] {
			ids = append(ids, t.ID)
			attempts[t.ID] = t.Attempt
		}
	}
	if len(ids) > 0 {
		return ids, attempts, true
	}
	if v.cur.pos < len(v.rows) {
		t := v.rows[v.cur.pos]
		return []int64{t.ID}, task.SeenAttempts{t.ID: t.Attempt}, false
	}
	return nil, nil, false
}

// setRows shows a newly read page. The cursor stays on the task it was
// on when that task is still shown, and the selection keeps only the
// tasks still shown (the others changed state past the filter, were
// deleted, or the screen got shorter): it returns how many it dropped,
// and the task the cursor was on when it left the page (0: none did).
func (v *tasksView) setRows(rows []*task.Task, more bool) (dropped int, left int64) {
	var under int64
	if v.cur.pos < len(v.rows) && !v.turned {
		under = v.rows[v.cur.pos].ID
	}
	v.rows, v.more, v.loaded, v.turned = rows, more, true, false
	// The next page starts below the page's smallest id, as the query
	// reads them, whatever order the rows are shown in.
	v.edge = 0
	for _, t := range rows {
		if v.edge == 0 || t.ID < v.edge {
			v.edge = t.ID
		}
	}
	v.sortRows()
	shown := make(map[int64]bool, len(rows))
	for i, t := range v.rows {
		shown[t.ID] = true
		if t.ID == under {
			v.cur.pos = i
		}
	}
	for id := range v.selected {
		if !shown[id] {
			delete(v.selected, id)
			dropped++
		}
	}
	if under != 0 && !shown[under] {
		left = under
	}
	return dropped, left
}

// unselectedText says that n selected tasks were unselected, and why: an
// action applies only to selected tasks the operator can see.
func unselectedText(n int, why string) string {
	what := fmt.Sprintf("%d selected tasks", n)
	if n == 1 {
		what = "1 selected task"
	}
	return what + " unselected: " + why
}

func (m *Model) tasksKey(k tea.KeyPressMsg) (tea.Cmd, bool) {
	v, tk, sk := &m.tasks, tasksKeys, selectKeys
	switch {
	case key.Matches(k, tk.NextPage) || (key.Matches(k, listKeys.PageDown) && v.cur.pos >= len(v.rows)-1):
		if v.more && len(v.rows) > 0 {
			v.pages = append(v.pages, v.edge)
			m.turned()
			return m.refresh(), true
		}
		return nil, true
	case key.Matches(k, tk.PrevPage) || (key.Matches(k, listKeys.PageUp) && v.cur.pos == 0):
		if len(v.pages) > 0 {
			v.pages = v.pages[:len(v.pages)-1]
			m.turned()
			return m.refresh(), true
		}
		return nil, true
	}
	if v.cur.navigate(k, len(v.rows)) {
		return nil, true
	}
	if v.sort.key(k, len(taskColumns)) {
		var under int64
		if v.cur.pos < len(v.rows) {
			under = v.rows[v.cur.pos].ID
		}
		v.sortRows()
		for i, t := range v.rows {
			if t.ID == under {
				v.cur.pos = i
			}
		}
		return nil, true
	}
	if v.all {
		if cmd, ok := m.filterKey(k); ok {
			v.unselect()
			return cmd, true
		}
	}
	ids, attempts, selected := v.targets()
	if cmd, ok := m.taskKey(k, ids, attempts, selected); ok {
		// Whatever the outcome (done, asked and cancelled, refused), the
		// selection was used: the next key starts from the cursor.
		v.unselect()
		return cmd, true
	}
	switch {
	case key.Matches(k, tk.Open):
		if v.cur.pos < len(v.rows) {
			return m.openDetail(v.rows[v.cur.pos].ID), true
		}
	case key.Matches(k, tailKey):
		if v.cur.pos < len(v.rows) {
			return m.openTail(v.rows[v.cur.pos].ID), true
		}
	case key.Matches(k, sk.One):
		if !m.canAct() || v.cur.pos >= len(v.rows) {
			return nil, true
		}
		id := v.rows[v.cur.pos].ID
		if v.selected[id] {
			delete(v.selected, id)
		} else {
			v.selected[id] = true
		}
		v.all = false
		v.cur.move(1)
	case key.Matches(k, sk.Page):
		if !m.canAct() {
			return nil, true
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
		v.all = false
	case key.Matches(k, sk.All):
		if !m.canAct() {
			return nil, true
		}
		if v.all {
			v.unselect()
			return nil, true
		}
		clear(v.selected)
		v.all, v.allCount = true, -1
		return m.count(), true
	case key.Matches(k, tk.Status):
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
		return m.refresh(), true
	case key.Matches(k, globalKeys.Back):
		switch {
		case len(v.selected) > 0 || v.all:
			v.unselect()
		case m.canGoBack():
			return m.back(), true
		case v.filterText() != "":
			v.setQuery(TaskQuery{})
			return m.refresh(), true
		}
	default:
		return nil, false
	}
	return nil, true
}

// turned starts a newly turned page: cursor at the top, no selection.
func (m *Model) turned() {
	v := &m.tasks
	v.seq++
	v.cur, v.turned = cursor{}, true
	switch n := len(v.selected); {
	case v.all:
		m.setStatus("all matching tasks unselected: the page turned", nil)
	case n > 0:
		m.setStatus(unselectedText(n, "the page turned"), nil)
	}
	v.unselect()
}

// taskColumns: at 80 columns LAST RESULT keeps its room; QUEUE, TYPE and
// UPDATED go first.
var taskColumns = []column{
	{title: "ID", width: 20, right: true}, // as wide as its ids: a cut id names no task
	{title: "STATUS", width: 10},
	{title: "CODE", width: 12, flex: 24, middle: true},
	{title: "QUEUE", width: 10, flex: 20, drop: 5, middle: true},
	{title: "TYPE", width: 8, drop: 6},
	{title: "TRY", width: 7, right: true, drop: 3}, // "100/128": max_retry goes to 127
	{title: "DUE", width: 10, right: true, drop: 4},
	{title: "UPDATED", width: 10, right: true, drop: 7},
	{title: "LAST RESULT", width: 18, flex: 80},
}

// sortRows puts the page in the sort's order (by id, newest first, by
// default).
func (v *tasksView) sortRows() {
	if v.sort.col < 0 && !v.sort.desc {
		slices.SortFunc(v.rows, func(a, b *task.Task) int { return cmp.Compare(b.ID, a.ID) })
		return
	}
	rows := make([]row, len(v.rows))
	for i, t := range v.rows {
		rows[i].keys = []any{t.ID, int(t.Status), t.Code, t.QueueName(), t.Type.String(), t.RetryCount,
			t.PlanNextRun, t.UpdatedAt, t.LastResult}
	}
	_, v.rows = sortBy(v.sort, rows, v.rows)
}

// tries reads "attempt/max": the try of the current retry budget (a
// retry by an operator starts a new one), "-" before the first.
func tries(t *task.Task) string {
	if t.Attempt == 0 {
		return "-/" + strconv.Itoa(t.MaxRetry+1)
	}
	return strconv.Itoa(min(t.RetryCount+1, t.MaxRetry+1)) + "/" + strconv.Itoa(t.MaxRetry+1)
}

// due is when a task runs next: only tasks that wait for a time have one.
func due(t *task.Task, now time.Time) string {
	if t.Status.Waiting() {
		return relative(t.PlanNextRun, now)
	}
	return "-"
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
		r.cells = []string{strconv.FormatInt(t.ID, 10), t.StatusText(), t.Code, t.QueueName(), t.Type.String(),
			tries(t), due(t, now), relative(t.UpdatedAt, now), oneLine(t.LastResult)}
		rows[i] = r
	}
	if len(rows) == 0 {
		msg := m.notYet(loadTasks, "tasks")
		if v.loaded {
			msg = "no tasks match"
			if f := v.filterText(); f != "" {
				msg += " " + f + " (esc clears the filter)"
			}
		}
		return m.empty(msg, width, height)
	}
	return renderTable(&m.st, v.sort.titled(taskColumns), rows, &v.cur, width, height)
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
	if v.sort.col >= 0 && (len(v.pages) > 0 || v.more) {
		// The pages follow ids; a sort orders the one shown, not all.
		parts[len(parts)-1] += " sorted within it"
	}
	if n := len(v.selected); n > 0 {
		parts = append(parts, fmt.Sprintf("%d selected", n))
	}
	if v.all {
		parts = append(parts, "ALL "+v.allText()+" selected")
	}
	return strings.Join(parts, " · ")
}

// allText says how many tasks match the filter: "2,000 matching".
func (v *tasksView) allText() string {
	switch {
	case v.allCount < 0:
		return "matching (counting…)"
	case v.allCount >= store.TaskCountMax:
		return fmt.Sprintf("%d+ matching", store.TaskCountMax)
	}
	return fmt.Sprintf("%d matching", v.allCount)
}

// count counts the tasks matching the filter, for the all-matching
// selection.
func (m *Model) count() tea.Cmd {
	q, seq, src := m.tasks.q, m.tasks.seq, m.opt.Source
	return m.load(loadCount, seq, func(ctx context.Context, msg *loadedMsg) (err error) {
		msg.count, err = src.Count(ctx, q)
		return err
	})
}

// filterKey runs the task action of key k on every task matching the
// filter, through the ops layer's filter target (one audit row naming the
// filter). It always asks, with the count.
func (m *Model) filterKey(k tea.KeyPressMsg) (tea.Cmd, bool) {
	a, ok := actionOf(k)
	if !ok || !m.canAct() {
		return nil, ok
	}
	v := &m.tasks
	if v.allCount < 0 {
		m.setStatus("still counting the matching tasks: press again in a moment", nil)
		return nil, true
	}
	if v.allCount == 0 {
		m.setStatus("no task matches the filter: nothing to do", nil)
		return nil, true
	}
	f := v.q.filter()
	what := v.allText() + " tasks"
	if t := v.filterText(); t != "" {
		what += " " + t
	} else {
		what = fmt.Sprintf("EVERY task (%s, no filter)", v.allText())
	}
	confirmed := v.allCount
	fn := func(ctx context.Context) (string, error) {
		// The action takes the tasks that match when it runs, and those
		// only: when they are no longer as many as the operator
		// confirmed (submitted, dispatched or ended meanwhile), nothing
		// is done and the count is shown again.
		ids, err := m.opt.Actions.IDs(ctx, ops.Target{Filter: &f})
		if err != nil {
			return a.name, err
		}
		if confirmed < store.TaskCountMax && len(ids) != confirmed || confirmed >= store.TaskCountMax && len(ids) < confirmed {
			return a.name, fmt.Errorf("%d tasks match now, not the %d confirmed: nothing done; select again", len(ids), confirmed)
		}
		c, err := a.fn(m.opt.Actions, ctx, ops.Target{Filter: &f, IDs: ids})
		return outcome(a, c, err)
	}
	m.confirm(fmt.Sprintf("%s all %s?", a.name, what), a.explain, a.name, fn)
	return nil, true
}
