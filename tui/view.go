package tui

import (
	"fmt"
	"strconv"
	"strings"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/taskd/taskd/pkg/stats"
)

// View implements tea.Model.
func (m *Model) View() tea.View {
	v := tea.NewView(m.render())
	v.AltScreen = true
	v.WindowTitle = "tasktop"
	return v
}

// tableHeight is the number of lines left for the current view.
func (m *Model) tableHeight() int {
	return max(1, m.h-3-len(m.errorLines())) // header, tabs, footer
}

// errorLines is the error bar: at most two lines.
func (m *Model) errorLines() []string {
	e := m.errorText()
	if e == "" {
		return nil
	}
	lines := strings.Split(ansi.Wrap("✖ "+e, m.w, " "), "\n")
	if len(lines) > 2 {
		lines = lines[:2]
	}
	for i, l := range lines {
		lines[i] = m.st.ErrorBar.Render(cell(l, m.w, false))
	}
	return lines
}

// render draws the whole screen, exactly m.w × m.h cells.
func (m *Model) render() string {
	lines := []string{m.header(), m.tabs()}
	lines = append(lines, m.errorLines()...)
	foot := m.footer()
	// A status of two lines takes the body's last line while it shows;
	// the pages read stay as long as the screen.
	h := max(1, m.tableHeight()-(len(foot)-1))
	var body string
	d := m.cur.detail
	switch {
	case m.help != nil:
		body = m.helpBody(h)
	case m.cur.tail != nil:
		body = m.tailBody(m.w, h)
	case m.cur.worker != nil:
		body = m.workerDetailView(m.w, h)
	case m.cur.locks != nil:
		body = m.locksView(m.w, h)
	case m.cur.row != nil:
		body = m.rowView(m.w)
	case d != nil && d.task == nil:
		body = m.empty(m.notYet(loadDetail, fmt.Sprintf("task %d", d.id)), m.w, h)
	case d != nil:
		body = d.vp.View()
	default:
		body = m.table(m.w, h)
	}
	if m.dialog != nil {
		body = lipgloss.Place(m.w, h, lipgloss.Center, lipgloss.Center, m.dialogView(m.w))
	}
	lines = append(lines, fitLines(body, m.w, h)...)
	lines = append(lines, foot...)
	return strings.Join(lines, "\n")
}

// fitLines cuts or pads s to exactly h lines of at most w cells.
func fitLines(s string, w, h int) []string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > h {
		ls = ls[:h]
	}
	for i, l := range ls {
		ls[i] = ansi.Truncate(l, w, "")
	}
	for len(ls) < h {
		ls = append(ls, "")
	}
	return ls
}

func (m *Model) table(w, h int) string {
	switch m.view {
	case viewQueues:
		return m.queuesTable(w, h)
	case viewWorkers:
		return m.workersTable(w, h)
	case viewTasks:
		return m.tasksTable(w, h)
	case viewEvents:
		return m.eventsTable(w, h)
	default:
		return m.auditTable(w, h)
	}
}

func (m *Model) empty(msg string, w, h int) string {
	return lipgloss.Place(w, h, lipgloss.Center, lipgloss.Center, m.st.Dim.Render(msg))
}

// header is the cluster at a glance.
func (m *Model) header() string {
	var parts []string
	if m.opt.ReadOnly {
		parts = append(parts, m.st.Badge.Render(" READ-ONLY "))
	}
	ov := m.ov
	if ov == nil || ov.Stats == nil {
		parts = append(parts, m.st.Header.Render("tasktop"), m.st.Dim.Render("connecting…"))
		return cell(strings.Join(parts, " "), m.w, false)
	}
	waiting, drain, drains := ov.Stats.Waiting()
	var perMin int64
	for _, q := range ov.Stats.Queues {
		perMin += q.ProcessedPerMin
	}
	live, unsaved := 0, 0
	for _, w := range ov.Workers {
		if w.Alive() {
			live++
			if w.Heartbeat.ResultsStuck() > 0 {
				unsaved++
			}
		}
	}
	// The queues' rates, each weighted by its attempts: what the rows
	// and the success-rate alert say, crashes and gone workers included.
	var ended, succeeded float64
	for _, q := range ov.Stats.Queues {
		if q.SuccessRate10m != nil {
			ended += float64(q.Ended10m)
			succeeded += *q.SuccessRate10m * float64(q.Ended10m)
		}
	}
	nodes := fmt.Sprintf("%d nodes up", ov.NodesUp)
	if ov.NodesUp == 1 {
		nodes = "1 node up"
	}
	if ov.NodesUp == 0 {
		nodes = m.st.Bad.Render("NO NODE UP")
	}
	// Workers in trouble: dead, or alive with results the task center
	// does not take (they take no work: the queues stand still).
	workers := []string{fmt.Sprintf("%d/%d workers", live, len(ov.Workers))}
	if dead := len(ov.Workers) - live; dead > 0 {
		workers = append(workers, fmt.Sprintf("%d dead", dead))
	}
	if unsaved > 0 {
		workers = append(workers, fmt.Sprintf("%d unsaved", unsaved))
	}
	workersText := strings.Join(workers, " · ")
	if len(workers) > 1 {
		workersText = m.st.Bad.Render(workersText)
	}
	rate := "ok -"
	if ended > 0 {
		r := succeeded / ended
		rate = strings.Replace(fmt.Sprintf("ok %.1f%%", 100*r), "100.0", "100", 1)
		if r < 0.99 {
			rate = m.st.Bad.Render(rate)
		}
	}
	firing := 0
	for _, a := range ov.Alerts {
		if a.Firing {
			firing++
		}
	}
	var first []string // what needs saying before the figures
	switch {
	case firing == 1:
		first = append(first, m.st.ErrorBar.Render("1 ALERT"))
	case firing > 1:
		first = append(first, m.st.ErrorBar.Render(fmt.Sprintf("%d ALERTS", firing)))
	}
	// At maxmemory nothing is pushed, so no backlog shows in Redis while
	// due tasks wait in the task center: say why, before the figures.
	if r := m.redisMemory(); r != nil {
		switch {
		case r.Full():
			first = append(first, m.st.ErrorBar.Render(fmt.Sprintf("REDIS FULL %.0f%%", 100*r.Ratio())))
		case r.Near(m.opt.RedisNear):
			first = append(first, m.st.Bad.Render(fmt.Sprintf("redis %.0f%% full", 100*r.Ratio())))
		}
	}
	if held, _ := ov.Stats.Paused(); held > 0 {
		// Left out of "waiting": a pause forgotten holds them for good.
		first = append(first, m.st.Bad.Render("paused "+count(held)))
	}
	line := func(waitingText string, withNodes bool) string {
		figures := []string{nodes, workersText, waitingText, count(perMin) + "/min", rate}
		if !withNodes {
			figures = figures[1:]
		}
		if ov.RedisErr != nil {
			// What waits in the task center is known; what Redis holds is not.
			var pending int64
			for _, q := range ov.Stats.Queues {
				pending += q.Pending
			}
			figures = []string{m.st.Bad.Render("REDIS DOWN"), count(pending) + " pending in the task center"}
		}
		if ov.MySQLErr != nil {
			// What Redis holds is known; what waits in the task center,
			// and so the time to drain, is not.
			var backlog int64
			for _, q := range ov.Stats.Queues {
				backlog += q.BacklogTotal()
			}
			n := len(figures)
			figures = append(append([]string{m.st.Bad.Render("MYSQL DOWN")}, figures[:n-3]...),
				"backlog "+count(backlog), figures[n-2], figures[n-1])
		}
		return strings.Join(append(parts, strings.Join(append(first, figures...), " · ")), " ")
	}
	// The time to drain goes in where the line has room for it; then the
	// nodes up, unless none is, before the rate and the success rate are
	// cut (alerts, dead and unsaved workers at 80 columns).
	if l := line("waiting "+count(waiting)+" (~"+stats.Roughly(drain)+")", true); drains && ansi.StringWidth(l) <= m.w {
		return cell(l, m.w, false)
	}
	l := line("waiting "+count(waiting), true)
	if ansi.StringWidth(l) > m.w && ov.NodesUp > 0 {
		l = line("waiting "+count(waiting), false)
	}
	return cell(l, m.w, false)
}

// tabs names the views, the current one highlighted, and the view's
// filter.
func (m *Model) tabs() string {
	var b strings.Builder
	for i, name := range viewNames {
		t := fmt.Sprintf("%d %s", i+1, name)
		if m.w < 100 && viewID(i) != m.view {
			t = strconv.Itoa(i + 1) // narrow: room for the filter and selection
		}
		if viewID(i) == m.view {
			b.WriteString(m.st.ActiveTab.Render("[" + t + "]"))
		} else {
			b.WriteString(m.st.Tab.Render(" " + t + " "))
		}
	}
	info := ""
	switch {
	case m.cur.detail != nil:
		info = fmt.Sprintf("task %d", m.cur.detail.id)
	case m.cur.worker != nil:
		info = "worker " + m.cur.worker.id
	case m.cur.locks != nil:
		info = "locks"
	case m.cur.row != nil:
		info = strings.ToLower(m.cur.row.title)
	case m.cur.tail != nil:
		info = fmt.Sprintf("task %d output", m.cur.tail.id)
	case m.view == viewTasks:
		info = m.tasksInfo()
	case m.view == viewQueues && m.queues.filter != "":
		info = "/" + m.queues.filter
	case m.view == viewWorkers && m.workers.filter != "":
		info = "/" + m.workers.filter
	case m.view == viewEvents && m.events.filter != "":
		info = "/" + m.events.filter
	case m.view == viewAudit && m.audit.filter != "":
		info = "/" + m.audit.filter
	}
	left := b.String()
	if info != "" {
		left += "  " + m.st.Filter.Render(info)
	}
	return cell(left, m.w, false)
}

// footer is the prompt when one is open, else the status line: what the
// last action changed, or the keys of the view. A status too long for
// one line wraps, over at most statusLines lines: an action's outcome
// says why each task it left alone was left, and ends with its warning,
// and cut at two lines it lost them.
func (m *Model) footer() []string {
	if m.input != nil {
		return []string{cell(m.input.ti.View(), m.w, false)}
	}
	right := ""
	if !m.ovAt.IsZero() {
		right = "updated " + clock(m.ovAt)
	}
	room := m.w - ansi.StringWidth(right) - 1
	text, isErr := m.statusText()
	if text == "" {
		return []string{cell(m.st.Dim.Render(m.shortHelp(room)), room, false) + " " + right}
	}
	style := m.st.Status
	if isErr {
		style = m.st.StatusErr
	}
	if ansi.StringWidth(text) <= room {
		return []string{cell(style.Render(text), room, false) + " " + right}
	}
	lines := strings.Split(ansi.Wrap(text, m.w, " "), "\n")
	if last := lines[len(lines)-1]; ansi.StringWidth(last) > room { // it shares its row with the time
		lines = append(lines[:len(lines)-1], strings.Split(ansi.Wrap(last, room, " "), "\n")...)
	}
	if n := m.statusLines(); len(lines) > n {
		lines = lines[:n]
		lines[n-1] = ansi.Truncate(lines[n-1], room-1, "") + "…"
	}
	last := len(lines) - 1
	out := make([]string, 0, len(lines))
	for _, l := range lines[:last] {
		out = append(out, cell(style.Render(strings.TrimRight(l, " ")), m.w, false))
	}
	return append(out, cell(style.Render(strings.TrimRight(lines[last], " ")), room, false)+" "+right)
}

// statusLines is the most lines a status takes: four, or a third of the
// body on a short screen, and never fewer than two.
func (m *Model) statusLines() int {
	return max(2, min(4, m.tableHeight()/3))
}
