// Package tui is tasktop, the operator's terminal UI: the cluster at a
// glance, queues, workers, tasks, events and the audit log, read from
// MySQL and Redis at each refresh, and the operator actions of pkg/ops.
// All I/O runs in tea.Cmds with a deadline; Update never blocks.
package tui

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/taskd/taskd/pkg/alert"
	"github.com/taskd/taskd/pkg/node"
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
	// ActionTimeout bounds an action (actionTimeout): a kill waits for the
	// worker of a running task up to its kill grace.
	ActionTimeout time.Duration
	// Now is the clock ages are computed with (time.Now).
	Now func() time.Time
	// Context is cancelled when the program ends; queries in flight stop.
	Context context.Context
	Styles  *Styles
	// RedisNear is the share of its maxmemory from which the header says
	// Redis is nearly full: alerts.redis_memory_threshold (0: the rule's
	// default; negative: only once full).
	RedisNear float64
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
	// cur is the page open over the view (a task, a worker, a task's
	// output), zero when none; stack is where esc and q go back to.
	cur   page
	stack []frame

	ov   *Overview
	ovAt time.Time // when ov was read (Now)
	// redisAt is when the workers and events on screen were read, while
	// Redis does not answer (zero: it answers, or it never did).
	redisAt time.Time
	// mysqlAt is when the alerts and series on screen were read, while
	// the task center does not answer (zero: it answers, or never did).
	mysqlAt time.Time
	// errs are the errors of the last load of each kind; the error bar
	// shows them while the last good data stays on screen.
	errs    map[loadKind]error
	loading map[loadKind]bool

	queues  queuesView
	workers workersView
	tasks   tasksView
	events  eventsView
	audit   auditView

	dialog *dialog
	input  *prompt
	help   *helpView

	status status
	// acting counts the actions still running, the oldest started at
	// actingSince: the footer says so until they end, however long a
	// lock or a worker keeps them.
	acting      int
	actingSince time.Time

	noTick bool // tests drive refreshes themselves
}

// status is the footer's message: what the last action did, or why a key
// did nothing. Messages expire after statusTTL; errors stay until the
// operator moves on (esc, another view, or the next message).
type status struct {
	text string
	err  bool
	at   time.Time
	view viewID
}

// ActionTimeoutFor is the time an action may take when a kill waits up to
// killWait for the worker of a running task (ops.Ops.KillWait): with a
// long worker.kill_grace, a kill outlasted the 30 s actions had.
func ActionTimeoutFor(killWait time.Duration) time.Duration {
	return max(actionTimeout, killWait+10*time.Second)
}

// statusTTL is how long a message that is not an error stays.
const statusTTL = 5 * time.Second

// New returns the model.
func New(opt Options) *Model {
	opt.Refresh = cmp.Or(opt.Refresh, RefreshDefault)
	opt.Timeout = cmp.Or(opt.Timeout, TimeoutDefault)
	opt.ActionTimeout = cmp.Or(opt.ActionTimeout, actionTimeout)
	opt.RedisNear = cmp.Or(opt.RedisNear, alert.DefaultRules.RedisMemory.Threshold)
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
	m.queues.dead = map[string][]deadSample{}
	m.queues.sort.col, m.workers.sort.col, m.tasks.sort.col, m.events.sort.col, m.audit.sort.col = -1, -1, -1, -1, -1
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
		m.resizePages()
		return m, nil
	case tickMsg:
		return m, tea.Batch(m.refresh(), m.tick())
	case loadedMsg:
		return m, m.loaded(msg)
	case actionMsg:
		m.acting = max(0, m.acting-1)
		m.setStatus(msg.text, msg.err)
		m.tasks.acted = true // the result says why its tasks leave the page
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
// that work everywhere, then the open page or the current view. A key
// that means nothing there says so.
func (m *Model) key(k tea.KeyPressMsg) tea.Cmd {
	g := globalKeys
	if key.Matches(k, g.ForceQuit) {
		return tea.Quit
	}
	// Esc and a key sent in one write (an SSH session that buffers) read
	// as alt+key, which tasktop binds to nothing: "esc 1" went nowhere,
	// with "alt+1: no meaning". Taken as the two keys, outside a prompt
	// (where alt+backspace and the like edit) and a dialog.
	if k.Mod.Contains(tea.ModAlt) && m.dialog == nil && m.input == nil {
		plain := k
		plain.Mod &^= tea.ModAlt
		return tea.Batch(m.key(tea.KeyPressMsg{Code: tea.KeyEscape}), m.key(plain))
	}
	switch {
	case m.dialog != nil:
		return m.dialogKey(k)
	case m.input != nil:
		return m.promptKey(k)
	case m.help != nil:
		if key.Matches(k, g.Help, g.Back, g.Quit) {
			m.help = nil
		} else {
			m.help.key(k)
		}
		return nil
	}
	switch {
	case key.Matches(k, g.Help):
		m.openHelp()
		return nil
	case key.Matches(k, g.Refresh):
		m.setStatus("refreshing…", nil)
		return m.refresh()
	case key.Matches(k, g.Next):
		return m.switchTo((m.view + 1) % viewCount)
	case key.Matches(k, g.Prev):
		return m.switchTo((m.view + viewCount - 1) % viewCount)
	case key.Matches(k, g.Views):
		return m.switchTo(viewID(k.String()[0] - '1'))
	}
	if m.status.err && key.Matches(k, g.Back) {
		m.status = status{} // esc first dismisses an error
		return nil
	}
	var cmd tea.Cmd
	var ok bool
	switch p := m.cur; {
	case p.tail != nil:
		cmd, ok = m.tailKey(k)
	case p.worker != nil:
		cmd, ok = m.workerDetailKey(k)
	case p.locks != nil:
		cmd, ok = m.locksKey(k)
	case p.row != nil:
		cmd, ok = m.rowKey(k)
	case p.detail != nil:
		cmd, ok = m.detailKey(k)
	default:
		cmd, ok = m.viewKey(k)
	}
	if ok {
		return cmd
	}
	switch {
	case key.Matches(k, g.Back, g.Quit) && m.canGoBack():
		return m.back()
	case key.Matches(k, g.Quit):
		m.confirm("Quit tasktop?", "", "Quit", nil)
		m.dialog.quit = true
		return nil
	case key.Matches(k, g.Back):
		return nil
	}
	m.setStatus(fmt.Sprintf("%s: no meaning in this view (? lists the keys)", k.String()), nil)
	return nil
}

// viewKey routes k to the current view.
func (m *Model) viewKey(k tea.KeyPressMsg) (tea.Cmd, bool) {
	if key.Matches(k, globalKeys.Filter) {
		m.openFilter()
		return nil, true
	}
	if key.Matches(k, listKeys.Row) && m.openRow() {
		return nil, true
	}
	switch m.view {
	case viewQueues:
		return m.queuesKey(k)
	case viewWorkers:
		return m.workersKey(k)
	case viewTasks:
		return m.tasksKey(k)
	case viewEvents:
		return m.eventsKey(k)
	}
	return m.auditKey(k)
}

// switchTo opens a view from the tabs: the navigation starts again there.
func (m *Model) switchTo(v viewID) tea.Cmd {
	m.view, m.cur, m.stack = v, page{}, nil
	if m.status.err {
		m.status = status{}
	}
	return m.refresh()
}

func (m *Model) setStatus(s string, err error) {
	text := s
	if err != nil {
		text = s + ": " + node.ErrorText(err)
		if s == "" {
			text = node.ErrorText(err)
		}
	}
	m.status = status{text: text, err: err != nil, at: m.opt.Now(), view: m.view}
}

// statusText is the message the footer shows now ("" when none).
func (m *Model) statusText() (string, bool) {
	st := m.status
	if st.text == "" || (!st.err && m.opt.Now().Sub(st.at) > statusTTL) {
		if m.acting > 0 {
			return clock(m.actingSince) + " working… " + age(m.opt.Now().Sub(m.actingSince)), false
		}
		return "", false
	}
	return clock(st.at) + " " + st.text, st.err
}
