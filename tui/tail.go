package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/cli"
)

// tailView is the live output of a running task: the latest output its
// worker published (handler.Tail), reread at each refresh, kept scrolled
// to its end unless the operator scrolls up.
type tailView struct {
	id     int64
	t      *broker.TaskTail
	loaded bool
	vp     viewport.Model
}

// openTail opens task id's live output over what is shown.
func (m *Model) openTail(id int64) tea.Cmd {
	m.push()
	m.cur = page{tail: &tailView{id: id, vp: viewport.New()}}
	m.resizePages()
	return m.refresh()
}

func (v *tailView) set(t *broker.TaskTail) {
	follow := !v.loaded || v.vp.AtBottom()
	v.t, v.loaded = t, true
	v.show()
	if follow {
		v.vp.GotoBottom()
	}
}

// show fills the viewport with the output, wrapped to its width.
func (v *tailView) show() {
	if v.t != nil {
		v.vp.SetContent(cli.WrapWords(strings.TrimRight(clean(v.t.Output), "\n"), v.vp.Width()))
	} else {
		v.vp.SetContent("")
	}
}

func (m *Model) tailKey(k tea.KeyPressMsg) (tea.Cmd, bool) {
	if key.Matches(k, globalKeys.Back, globalKeys.Quit) {
		return m.back(), true
	}
	return nil, scroll(&m.cur.tail.vp, k)
}

// tailBody is the output with a line saying whose and how fresh it is.
func (m *Model) tailBody(w, h int) string {
	v := m.cur.tail
	switch {
	case !v.loaded:
		return m.empty(fmt.Sprintf("reading the output of task %d…", v.id), w, h)
	case v.t == nil:
		return m.empty(fmt.Sprintf("task %d published no output: it is not running, or printed nothing yet", v.id), w, h)
	}
	t := v.t
	state := m.st.Good.Render("live")
	if t.Done {
		state = m.st.Dim.Render("ended")
	}
	head := fmt.Sprintf("Output of task %d, attempt %d on %s · %s, published %s ago", t.ID, t.Attempt, t.Worker, state,
		age(m.opt.Now().Sub(t.At)))
	return m.st.Title.Render(head) + "\n" + v.vp.View()
}
