package tui

import (
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"

	"github.com/taskd/taskd/pkg/cli"
)

// The key bindings of every view. The key handlers match these, and the
// help screen and the footer hints are rendered from them, so what help
// says is what the keys do.

func bind(keys []string, name, desc string) key.Binding {
	return key.NewBinding(key.WithKeys(keys...), key.WithHelp(name, desc))
}

func keys(k ...string) []string { return k }

// globalKeys work in every view.
var globalKeys = struct {
	Next, Prev, Views, Filter, Back, Quit, Refresh, Help, ForceQuit key.Binding
}{
	Next:      bind(keys("tab"), "tab", "next view"),
	Prev:      bind(keys("shift+tab"), "shift+tab", "previous view"),
	Views:     bind(keys("1", "2", "3", "4", "5"), "1…5", "go to queues, workers, tasks, events, audit"),
	Filter:    bind(keys("/"), "/", "filter (tasks: and search, see Task filter)"),
	Back:      bind(keys("esc"), "esc", "back; clear selection, then filter"),
	Quit:      bind(keys("q"), "q", "back; at the top, quit (asks)"),
	Refresh:   bind(keys("ctrl+r"), "ctrl+r", "refresh now"),
	Help:      bind(keys("?"), "?", "help (this screen; esc closes)"),
	ForceQuit: bind(keys("ctrl+c"), "ctrl+c", "quit at once"),
}

// listKeys move in and sort every table.
var listKeys = struct {
	Up, Down, Top, Bottom, PageUp, PageDown, Sort, Reverse, Row key.Binding
}{
	Up:       bind(keys("up", "k"), "↑/k", "up"),
	Down:     bind(keys("down", "j"), "↓/j", "down"),
	Top:      bind(keys("home", "g"), "g/home", "top"),
	Bottom:   bind(keys("end", "G"), "G/end", "bottom"),
	PageUp:   bind(keys("pgup", "ctrl+u"), "pgup", "page up"),
	PageDown: bind(keys("pgdown", "ctrl+d"), "pgdn", "page down"),
	Sort:     bind(keys("o"), "o", "sort (by the next column)"),
	Reverse:  bind(keys("O"), "O", "reverse the sort"),
	Row:      bind(keys("v"), "v", "full row; every cell uncut (queues, events, audit)"),
}

// tasksKeys are the tasks view's own keys.
var tasksKeys = struct {
	Open, NextPage, PrevPage, Status key.Binding
}{
	Open:     bind(keys("enter"), "enter", "open: fields, payload, runs"),
	NextPage: bind(keys("]"), "]", "next page"),
	PrevPage: bind(keys("["), "[", "previous page"),
	Status:   bind(keys("s"), "s", "status filter (cycles pending … cancelled)"),
}

// selectKeys choose what the task actions apply to.
var selectKeys = struct {
	One, Page, All key.Binding
}{
	One:  bind(keys("space"), "space", "select / unselect"),
	Page: bind(keys("a"), "a", "select the page"),
	All:  bind(keys("A"), "A", "select all matching (every task of the filter)"),
}

// actionKeys are the task actions: on the selection shown, else the task
// under the cursor.
var actionKeys = struct {
	Retry, Kill, RunNow, Delete, Enable, Disable key.Binding
}{
	Retry:   bind(keys("r"), "r", "retry (dead, failed, cancelled; asks)"),
	Kill:    bind(keys("x"), "x", "kill (asks)"),
	RunNow:  bind(keys("R"), "R", "run now (pending, failed; asks)"),
	Delete:  bind(keys("D"), "D", "delete (not running; asks)"),
	Enable:  bind(keys("e"), "e", "enable periodic (asks)"),
	Disable: bind(keys("d"), "d", "disable periodic (asks)"),
}

// tailKey opens the live output of a running task.
var tailKey = bind(keys("l"), "l", "log (live output of a running exec or http task)")

var queueKeys = struct {
	Open, Pause, Reshard key.Binding
}{
	Open:    bind(keys("enter"), "enter", "tasks (of the queue)"),
	Pause:   bind(keys("p"), "p", "pause (asks) / resume (asks)"),
	Reshard: bind(keys("S"), "S", "reshard: asks for the number of shards"),
}

var workerKeys = struct {
	Open key.Binding
}{
	Open: bind(keys("enter"), "enter", "open: node, full id, running tasks"),
}

var auditKeys = struct {
	NextPage, PrevPage key.Binding
}{
	NextPage: bind(keys("]"), "]", "older entries"),
	PrevPage: bind(keys("["), "[", "newer entries"),
}

// dialogKeys answer a confirmation.
var dialogKeys = struct {
	Switch, Yes, Choose, No key.Binding
}{
	Switch: bind(keys("left", "right", "tab", "shift+tab", "h", "l"), "←/→", "choose"),
	Choose: bind(keys("enter"), "enter", "the chosen button"),
	Yes:    bind(keys("y"), "y", "yes"),
	No:     bind(keys("esc", "n", "q"), "esc", "no"),
}

// helpGroup is one block of the help screen.
type helpGroup struct {
	title string
	keys  []key.Binding
	act   bool // actions: hidden when read-only
}

func helpGroups() []helpGroup {
	g, l := globalKeys, listKeys
	return []helpGroup{
		{title: "Everywhere", keys: []key.Binding{g.Next, g.Prev, g.Views, g.Filter, g.Back, g.Quit, g.Refresh, g.Help, g.ForceQuit}},
		{title: "Tables", keys: []key.Binding{l.Up, l.Down, l.Top, l.Bottom, l.PageUp, l.PageDown, l.Sort, l.Reverse, l.Row}},
		{title: "Tasks", keys: []key.Binding{tasksKeys.Open, tasksKeys.NextPage, tasksKeys.PrevPage, tasksKeys.Status, tailKey}},
		{title: "Task filter (/)", keys: []key.Binding{
			bind(nil, "words", "search code, queue, unique key, last result"),
			bind(nil, "dead …", "a status: pending … cancelled"),
			bind(nil, "queue:Q code:C", "exact queue, exact code"),
			bind(nil, "42", "open task 42"),
		}},
		{title: "Task actions: selection shown, else the cursor's task", act: true, keys: []key.Binding{
			selectKeys.One, selectKeys.Page, selectKeys.All,
			actionKeys.Retry, actionKeys.Kill, actionKeys.RunNow, actionKeys.Delete, actionKeys.Enable, actionKeys.Disable,
		}},
		{title: "Queues", keys: []key.Binding{queueKeys.Open}},
		{title: "Queue actions", act: true, keys: []key.Binding{queueKeys.Pause, queueKeys.Reshard}},
		{title: "Workers", keys: []key.Binding{workerKeys.Open, tailKey, stepKeys.Locks}},
		{title: "Task detail: chains and batches", keys: []key.Binding{stepKeys.Parent, stepKeys.Child, stepKeys.Failed}},
		{title: "Audit", keys: []key.Binding{auditKeys.NextPage, auditKeys.PrevPage}},
	}
}

// helpText renders the help screen.
func helpText(st *Styles, readonly bool, width int) string {
	const keyW = 2 + 15 + 1 // the indent, the key's column, a space
	var b strings.Builder
	if readonly {
		b.WriteString("Read-only: actions are disabled.\n\n")
	}
	for _, g := range helpGroups() {
		if g.act && readonly {
			continue
		}
		b.WriteString(st.Title.Render(g.title) + "\n")
		for _, k := range g.keys {
			h := k.Help()
			desc := h.Desc
			if width-keyW >= 20 {
				// Between words, under its own column: at 60 columns the
				// lines were cut mid-word at the screen's edge.
				desc = strings.ReplaceAll(cli.WrapWords(desc, width-keyW), "\n", "\n"+strings.Repeat(" ", keyW))
			}
			b.WriteString("  " + cell(h.Key, 15, false) + " " + desc + "\n")
		}
	}
	return b.String()
}

// shortKeys are the footer hints of a view, most useful first.
func (m *Model) shortKeys() []key.Binding {
	ro := m.opt.ReadOnly
	pick := func(always []key.Binding, acts ...key.Binding) []key.Binding {
		out := append([]key.Binding{globalKeys.Help}, always...)
		if !ro {
			out = append(out, acts...)
		}
		return out
	}
	switch p := m.top(); {
	case m.help != nil:
		return []key.Binding{listKeys.Down, listKeys.PageDown, globalKeys.Back}
	case p.tail != nil:
		return pick([]key.Binding{listKeys.Up, listKeys.Bottom, globalKeys.Back})
	case p.worker != nil:
		return pick([]key.Binding{workerKeys.Open, tailKey, globalKeys.Back})
	case p.locks != nil:
		return pick([]key.Binding{listKeys.Down, globalKeys.Back})
	case p.row != nil:
		return []key.Binding{globalKeys.Help, globalKeys.Back}
	case p.detail != nil:
		return pick([]key.Binding{listKeys.Down, globalKeys.Back, tailKey}, actionKeys.Retry, actionKeys.Kill)
	}
	switch m.view {
	case viewQueues:
		return pick([]key.Binding{queueKeys.Open, globalKeys.Filter, listKeys.Sort}, queueKeys.Pause, queueKeys.Reshard)
	case viewWorkers:
		return pick([]key.Binding{workerKeys.Open, globalKeys.Filter, listKeys.Sort, stepKeys.Locks})
	case viewTasks:
		return pick([]key.Binding{tasksKeys.Open, globalKeys.Filter, tasksKeys.Status, tailKey},
			selectKeys.One, selectKeys.All, actionKeys.Retry, actionKeys.Kill)
	}
	return pick([]key.Binding{listKeys.Row, globalKeys.Filter, globalKeys.Next})
}

// shortHelp renders the footer hints in width cells.
func (m *Model) shortHelp(width int) string {
	h := help.New()
	h.ShortSeparator = " · "
	h.SetWidth(width)
	var short []key.Binding
	for _, b := range m.shortKeys() {
		short = append(short, brief(b))
	}
	return h.ShortHelpView(short)
}

// brief is b with its description cut to its first words (before a
// parenthesis, colon or semicolon), for the footer.
func brief(b key.Binding) key.Binding {
	h := b.Help()
	d := h.Desc
	if i := strings.IndexAny(d, "(:;"); i > 0 {
		d = strings.TrimSpace(d[:i])
	}
	return key.NewBinding(key.WithKeys(b.Keys()...), key.WithHelp(h.Key, d))
}
