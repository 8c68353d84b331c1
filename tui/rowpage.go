package tui

import (
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// rowPage shows one table row in full: at 80 columns a queue's state, an
// event's detail or an audit target are cut, and this is where an
// operator reads them whole.
type rowPage struct {
	title  string
	fields [][2]string // column title, the whole cell
}

// openRow opens the row under the cursor of the queues, events or audit
// view (the tasks and workers views open their own detail).
func (m *Model) openRow() bool {
	var cols []column
	var rows []row
	var pos int
	title := ""
	switch m.view {
	case viewQueues:
		cols, pos, title = queueColumns, m.queues.cur.pos, "Queue"
		rows, _ = m.queueRows(SeriesMinutes)
	case viewEvents:
		cols, rows, pos, title = eventColumns, m.eventRows(), m.events.cur.pos, "Event"
	case viewAudit:
		cols, rows, pos, title = auditColumns, m.auditRows(), m.audit.cur.pos, "Audit entry"
	default:
		return false
	}
	if pos >= len(rows) {
		return false
	}
	p := &rowPage{title: title}
	for i, c := range cols {
		if i < len(rows[pos].cells) {
			p.fields = append(p.fields, [2]string{c.title, rows[pos].cells[i]})
		}
	}
	m.push()
	m.cur = page{row: p}
	return true
}

// rowView draws the row: each column's title and its whole cell, wrapped.
func (m *Model) rowView(width int) string {
	p := m.cur.row
	var b strings.Builder
	b.WriteString(m.st.Title.Render(p.title) + "\n\n")
	const pad = 9
	for _, f := range p.fields {
		text := ansi.Wrap(f[1], max(10, width-pad), " ")
		for i, l := range strings.Split(text, "\n") {
			name := ""
			if i == 0 {
				name = f[0]
			}
			b.WriteString(m.st.Dim.Render(padRight(name, pad-1)) + " " + l + "\n")
		}
	}
	return b.String()
}

func padRight(s string, n int) string {
	if w := ansi.StringWidth(s); w < n {
		return s + strings.Repeat(" ", n-w)
	}
	return s
}

func (m *Model) rowKey(k tea.KeyPressMsg) (tea.Cmd, bool) {
	if key.Matches(k, globalKeys.Back, globalKeys.Quit, listKeys.Row) {
		return m.back(), true
	}
	return nil, false
}
