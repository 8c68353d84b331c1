package tui

import (
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
)

// page is what is open over a view: a task's detail, a worker's detail or
// a task's live output (at most one is set).
type page struct {
	detail *detailView
	worker *workerDetail
	tail   *tailView
	locks  *locksPage
	row    *rowPage
}

// frame is a place esc and q go back to: a view, the page open over it,
// and the tasks filter to restore when going there changed it.
type frame struct {
	view  viewID
	page  page
	tasks *TaskQuery
}

// top is the page open now.
func (m *Model) top() page { return m.cur }

// push remembers where the operator is before going elsewhere.
func (m *Model) push() { m.stack = append(m.stack, frame{view: m.view, page: m.cur}) }

func (m *Model) canGoBack() bool { return len(m.stack) > 0 }

// back returns to where the operator came from.
func (m *Model) back() tea.Cmd {
	f := m.stack[len(m.stack)-1]
	m.stack = m.stack[:len(m.stack)-1]
	m.view, m.cur = f.view, f.page
	if f.tasks != nil {
		m.tasks.setQuery(*f.tasks)
	}
	m.resizePages()
	return m.refresh()
}

// helpView is the help screen, scrolled when it does not fit.
type helpView struct{ vp viewport.Model }

func (m *Model) openHelp() {
	m.help = &helpView{vp: viewport.New()}
	m.resizePages()
}

func (h *helpView) key(k tea.KeyPressMsg) {
	scroll(&h.vp, k)
}

// scroll moves a viewport by the table movement keys.
func scroll(vp *viewport.Model, k tea.KeyPressMsg) bool {
	l := listKeys
	switch {
	case key.Matches(k, l.Up):
		vp.ScrollUp(1)
	case key.Matches(k, l.Down):
		vp.ScrollDown(1)
	case key.Matches(k, l.PageUp):
		vp.PageUp()
	case key.Matches(k, l.PageDown, selectKeys.One):
		vp.PageDown()
	case key.Matches(k, l.Top):
		vp.GotoTop()
	case key.Matches(k, l.Bottom):
		vp.GotoBottom()
	default:
		return false
	}
	return true
}

// helpBody is the help screen with a line saying how to see the rest when
// it does not fit.
func (m *Model) helpBody(h int) string {
	vp := &m.help.vp
	if vp.TotalLineCount() <= h {
		return vp.View()
	}
	more := m.st.Dim.Render("↓/j pgdn: more · esc closes")
	if vp.AtBottom() {
		more = m.st.Dim.Render("↑/k pgup: back up · esc closes")
	}
	return vp.View() + "\n" + more
}

// resizePages fits the open pages to the screen.
func (m *Model) resizePages() {
	h := m.tableHeight()
	if m.help != nil {
		m.help.vp.SetWidth(m.w)
		m.help.vp.SetHeight(h)
		m.help.vp.SetContent(helpText(&m.st, m.opt.ReadOnly, m.w))
		if m.help.vp.TotalLineCount() > h {
			m.help.vp.SetHeight(h - 1) // the last line says how to see the rest
		}
	}
	if t := m.cur.tail; t != nil {
		t.vp.SetWidth(m.w)
		t.vp.SetHeight(max(1, h-1)) // less the line that names the task
		t.show()
	}
	if d := m.cur.detail; d != nil {
		d.vp.SetWidth(m.w)
		d.vp.SetHeight(h)
		d.show(m)
	}
}
