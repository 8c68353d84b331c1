package tui

import "strings"

// helpGroup is one block of the help screen.
type helpGroup struct {
	title string
	keys  [][2]string // key, what it does
	act   bool        // actions: hidden when read-only
}

var helpGroups = []helpGroup{
	{title: "Everywhere", keys: [][2]string{
		{"tab / shift+tab", "next / previous view"},
		{"1 … 5", "queues, workers, tasks, events, audit"},
		{"j k ↑ ↓", "move"},
		{"g G pgup pgdn", "top, bottom, page"},
		{"enter", "open"},
		{"/", "filter (tasks: dead, queue:Q, code:C, an id)"},
		{"esc", "back, or clear filter and selection"},
		{"q", "back; quit at the top"},
		{"ctrl+r", "refresh now"},
		{"?", "this help"},
		{"ctrl+c", "quit"},
	}},
	{title: "Tasks", keys: [][2]string{
		{"] [", "next / previous page"},
		{"s", "cycle the status filter"},
		{"enter", "task detail: fields, payload, runs"},
	}},
	{title: "Task actions (selection, else the task under the cursor)", act: true, keys: [][2]string{
		{"space / a", "select / select the page"},
		{"r", "retry (dead, failed, cancelled)"},
		{"x", "kill (asks)"},
		{"R", "run now (pending, failed)"},
		{"D", "delete (pending; asks)"},
		{"e / d", "enable / disable periodic (disable asks)"},
	}},
	{title: "Queue actions", act: true, keys: [][2]string{
		{"p", "pause (asks) / resume"},
		{"S", "reshard: asks for the number of shards"},
		{"enter", "the queue's tasks"},
	}},
}

// helpText renders the help screen in width columns.
func helpText(st *Styles, readonly bool) string {
	var b strings.Builder
	for _, g := range helpGroups {
		if g.act && readonly {
			continue
		}
		b.WriteString(st.Title.Render(g.title) + "\n")
		for _, k := range g.keys {
			b.WriteString("  " + cell(k[0], 16, false) + " " + k[1] + "\n")
		}
	}
	if readonly {
		b.WriteString("\nRead-only: actions are disabled.\n")
	}
	return b.String()
}

// shortHelp is the footer hint of a view.
func shortHelp(v viewID, detail, readonly bool) string {
	var s string
	switch {
	case detail:
		s = "↑↓ scroll · esc back"
		if !readonly {
			s += " · r retry · x kill"
		}
	case v == viewQueues:
		s = "enter tasks · / filter"
		if !readonly {
			s += " · p pause · S reshard"
		}
	case v == viewTasks:
		s = "enter open · / filter · s status · ] [ page"
		if !readonly {
			s += " · r retry · x kill"
		}
	default:
		s = "/ filter · tab views"
	}
	return s + " · ? help"
}
