// Package tui is tasktop, the operator's terminal UI: the cluster at a
// glance, queues, workers, tasks, events and the audit log, read from
// MySQL and Redis at each refresh, and the operator actions of pkg/ops.
// All I/O runs in tea.Cmds with a deadline; Update never blocks.
package tui

import (
	"cmp"
	"context"
	"time"

	tea "charm.land/bubbletea/v2"
)

// Defaults of Options.
const (
	RefreshDefault = 2 * time.Second
	TimeoutDefault = 5 * time.Second
	// actionTimeout bounds an action: a kill waits for the worker.
	actionTimeout = 30 * time.Second
)

// Options configure the model.
type Options struct {
	Source Source
	// Actions is nil or ignored when ReadOnly.
	Actions  Actions
	ReadOnly bool
	// Refresh is the time between refreshes (RefreshDefault).
	Refresh time.Duration
	// Timeout bounds each refresh's queries (TimeoutDefault).
	Timeout time.Duration
	// Now is the clock ages are computed with (time.Now).
	Now func() time.Time
	// Context is cancelled when the program ends; queries in flight stop.
	Context context.Context
	Styles  *Styles
}

type viewID int

const (
	viewQueues viewID = iota
	viewWorkers
	viewTasks
	viewEvents
	viewAudit
	viewCount
)

var viewNames = [viewCount]string{"Queues", "Workers", "Tasks", "Events", "Audit"}

// Model is the root model: it routes keys and messages to the views.
type Model struct {
	opt  Options
	st   Styles
	w, h int
	view viewID

	ov   *Overview
	ovAt time.Time // when ov was read (Now)
	// errs are the errors of the last load of each kind; the error bar
	// shows them while the last good data stays on screen.
	errs    map[loadKind]error
	errFrom time.Time
	loading map[loadKind]bool

	queues  queuesView
	workers workersView
	tasks   tasksView
	events  eventsView
	audit   auditView
	detail  *detailView

	dialog *dialog
	input  *prompt
	help   bool

	status    string
	statusErr bool

	noTick bool // tests drive refreshes themselves
}

// New returns the model.
func New(opt Options) *Model {
	opt.Refresh = cmp.Or(opt.Refresh, RefreshDefault)
	opt.Timeout = cmp.Or(opt.Timeout, TimeoutDefault)
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Context == nil {
		opt.Context = context.Background()
	}
	if opt.Actions == nil {
		opt.ReadOnly = true
	}
	m := &Model{opt: opt, st: DefaultStyles(), w: 80, h: 24,
		errs: map[loadKind]error{}, loading: map[loadKind]bool{}}
	if opt.Styles != nil {
		m.st = *opt.Styles
	}
	m.tasks.selected = map[int64]bool{}
	m.queues.hist = map[string][]int64{}
	return m
}

type tickMsg struct{}

func (m *Model) tick() tea.Cmd {
	if m.noTick {
		return nil
	}
	return tea.Tick(m.opt.Refresh, func(time.Time) tea.Msg { return tickMsg{} })
}

// Init implements tea.Model.
func (m *Model) Init() tea.Cmd {
	return tea.Batch(m.refresh(), m.tick())
}

// Update implements tea.Model.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.w, m.h = max(msg.Width, 20), max(msg.Height, 6)
		return m, m.resizeDetail()
	case tickMsg:
		return m, tea.Batch(m.refresh(), m.tick())
	case loadedMsg:
		return m, m.loaded(msg)
	case actionMsg:
		m.setStatus(msg.text, msg.err)
		return m, m.refresh()
	case tea.KeyPressMsg:
		return m, m.key(msg)
	}
	if m.input != nil {
		var cmd tea.Cmd
		m.input.ti, cmd = m.input.ti.Update(msg)
		return m, cmd
	}
	return m, nil
}

// key routes a key press: the open dialog or prompt first, then the keys
// that work everywhere, then the current view.
func (m *Model) key(k tea.KeyPressMsg) tea.Cmd {
	s := k.String()
	if s == "ctrl+c" {
		return tea.Quit
	}
	switch {
	case m.dialog != nil:
		return m.dialogKey(s)
	case m.input != nil:
		return m.promptKey(k)
	case m.help:
		if s == "?" || s == "esc" || s == "q" {
			m.help = false
		}
		return nil
	}
	switch s {
	case "?":
		m.help = true
		return nil
	case "ctrl+r":
		m.setStatus("refreshing…", nil)
		return m.refresh()
	}
	if m.detail != nil {
		return m.detailKey(s)
	}
	switch s {
	case "tab":
		return m.switchTo((m.view + 1) % viewCount)
	case "shift+tab":
		return m.switchTo((m.view + viewCount - 1) % viewCount)
	case "1", "2", "3", "4", "5":
		return m.switchTo(viewID(s[0] - '1'))
	case "/":
		m.openFilter()
		return nil
	case "q":
		return tea.Quit
	}
	switch m.view {
	case viewQueues:
		return m.queuesKey(s)
	case viewWorkers:
		return m.workersKey(s)
	case viewTasks:
		return m.tasksKey(s)
	case viewEvents:
		return m.eventsKey(s)
	case viewAudit:
		return m.auditKey(s)
	}
	return nil
}

func (m *Model) switchTo(v viewID) tea.Cmd {
	m.view = v
	return m.refresh()
}

func (m *Model) setStatus(s string, err error) {
	m.status, m.statusErr = s, err != nil
	if err != nil {
		m.status = s + ": " + err.Error()
		if s == "" {
			m.status = err.Error()
		}
	}
	if m.status != "" {
		m.status = clock(m.opt.Now()) + " " + m.status
	}
}
