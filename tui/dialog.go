package tui

import (
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
)

// dialog asks to confirm an action. Cancel has the focus when it opens,
// so an enter typed too fast changes nothing.
type dialog struct {
	title, body, verb string
	ok                bool // the focus is on the action's button
	run               actionFn
	quit              bool // the action is to quit
}

func (m *Model) confirm(title, body, verb string, run actionFn) {
	m.dialog = &dialog{title: title, body: body, verb: verb, run: run}
}

func (m *Model) dialogKey(k tea.KeyPressMsg) tea.Cmd {
	d, dk := m.dialog, dialogKeys
	yes := key.Matches(k, dk.Yes) || (key.Matches(k, dk.Choose) && d.ok)
	switch {
	case key.Matches(k, dk.Switch):
		d.ok = !d.ok
	case yes && d.quit:
		m.dialog = nil
		return tea.Quit
	case yes:
		m.dialog = nil
		return m.act(d.run)
	case key.Matches(k, dk.Choose, dk.No):
		m.dialog = nil
		if !d.quit {
			m.setStatus("cancelled: nothing changed", nil)
		}
	}
	return nil
}

func (m *Model) dialogView(width int) string {
	d := m.dialog
	cancel, ok := m.st.ActiveButton, m.st.Button
	if d.ok {
		cancel, ok = m.st.Button, m.st.ActiveButton
	}
	w := min(width-4, 64)
	parts := []string{m.st.Title.Width(w).Render(d.title), ""}
	if d.body != "" {
		parts = append(parts, lipgloss.NewStyle().Width(w).Render(d.body), "")
	}
	buttons := cancel.Render("[ Cancel ]") + "  " + ok.Render("[ "+d.verb+" ]")
	h := help.New()
	h.ShortSeparator = " · "
	hint := h.ShortHelpView([]key.Binding{dialogKeys.Switch, dialogKeys.Choose, dialogKeys.Yes, dialogKeys.No})
	return m.st.Dialog.Render(strings.Join(append(parts, buttons, hint), "\n"))
}

// prompt reads one line: the filter, or the number of shards.
type prompt struct {
	ti     textinput.Model
	filter bool // the filter of the current view
	done   func(string) tea.Cmd
}

func (m *Model) openPrompt(label, value string, done func(string) tea.Cmd) {
	ti := textinput.New()
	ti.Prompt = label
	ti.SetValue(value)
	ti.CharLimit = 200
	ti.SetWidth(max(10, m.w-len(label)-2))
	ti.Focus()
	m.input = &prompt{ti: ti, done: done}
}

func (m *Model) promptKey(k tea.KeyPressMsg) tea.Cmd {
	switch k.String() {
	case "esc":
		m.input = nil
		return nil
	case "enter":
		p := m.input
		m.input = nil
		return p.done(p.ti.Value())
	}
	// The cursor does not blink: its timer would wake the program for
	// nothing.
	m.input.ti, _ = m.input.ti.Update(k)
	return nil
}

// openFilter opens the filter prompt of the current view.
func (m *Model) openFilter() {
	switch m.view {
	case viewTasks:
		m.openPrompt("/", m.tasks.filterText(), m.applyTaskFilter)
	case viewQueues:
		m.openPrompt("/", m.queues.filter, func(s string) tea.Cmd { m.queues.filter = strings.TrimSpace(s); return nil })
	case viewWorkers:
		m.openPrompt("/", m.workers.filter, func(s string) tea.Cmd { m.workers.filter = strings.TrimSpace(s); return nil })
	case viewEvents:
		m.openPrompt("/", m.events.filter, func(s string) tea.Cmd { m.events.filter = strings.TrimSpace(s); return nil })
	case viewAudit:
		m.openPrompt("/", m.audit.filter, func(s string) tea.Cmd { m.audit.filter = strings.TrimSpace(s); return nil })
	}
	m.input.filter = true
}
