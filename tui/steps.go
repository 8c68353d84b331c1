package tui

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/taskd/taskd/pkg/lock"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// StepSource is what a Source may also read: a task's chain and batch,
// and the held locks. The detail view and the locks page show them when
// the Source has it.
type StepSource interface {
	// Steps returns t's parent, children and batch with its failed
	// members.
	Steps(ctx context.Context, t *task.Task) (*store.Steps, error)
	// Locks returns the held locks of both backends.
	Locks(ctx context.Context) ([]lock.Held, error)
}

// stepsShown bounds the children and failed members a detail lists.
const stepsShown = 20

// Steps implements StepSource.
func (l *Loader) Steps(ctx context.Context, t *task.Task) (*store.Steps, error) {
	s, err := l.store(ctx)
	if err != nil {
		return nil, err
	}
	st, err := s.TaskSteps(ctx, t, stepsShown)
	if err != nil {
		return nil, fmt.Errorf("MySQL: %w", err)
	}
	return st, nil
}

// Locks implements StepSource.
func (l *Loader) Locks(ctx context.Context) ([]lock.Held, error) {
	st, err := l.store(ctx)
	if err != nil {
		return nil, err
	}
	return lock.ListAll(ctx, lock.NewRedis(l.Broker.Client(), l.Broker.Keys.Prefix), lock.NewMySQL(st.DB()))
}

// Steps implements StepSource when the shared Source does (nil steps
// otherwise); not cached: one detail or locks page reads it.
func (s *Shared) Steps(ctx context.Context, t *task.Task) (*store.Steps, error) {
	if ss, ok := s.Source.(StepSource); ok {
		return ss.Steps(ctx, t)
	}
	return nil, nil
}

// Locks implements StepSource.
func (s *Shared) Locks(ctx context.Context) ([]lock.Held, error) {
	if ss, ok := s.Source.(StepSource); ok {
		return ss.Locks(ctx)
	}
	return nil, nil
}

var stepKeys = struct {
	Parent, Child, Failed, Locks key.Binding
}{
	Parent: bind(keys("p"), "p", "open the parent (its success created the task)"),
	Child:  bind(keys("c"), "c", "open the next child"),
	Failed: bind(keys("f"), "f", "open the next failed member of its batch"),
	Locks:  bind(keys("L"), "L", "locks held: holder, since, TTL left, token"),
}

// loadSteps adds the steps of msg.task to a detail load.
func loadSteps(ctx context.Context, src Source, msg *loadedMsg) error {
	ss, ok := src.(StepSource)
	if !ok || msg.task == nil {
		return nil
	}
	var err error
	msg.steps, err = ss.Steps(ctx, msg.task)
	return err
}

// stepsText is the detail's "Steps" section ("" when the task is in no
// chain or batch).
func (m *Model) stepsText(t *task.Task, st *store.Steps) string {
	if st == nil || (st.Parent == nil && t.ParentID == 0 && len(t.Then) == 0 && len(st.Children) == 0 && st.Batch == nil) {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n" + m.st.Title.Render("Steps") + "\n")
	ref := func(t *task.Task) string {
		return fmt.Sprintf("#%d %s %s", t.ID, t.Code, m.statusStyle(t.Status).Render(t.Status.String()))
	}
	switch {
	case st.Parent != nil:
		fmt.Fprintf(&b, "%-12s %s  [p]\n", "parent", ref(st.Parent))
	case t.ParentID != 0:
		fmt.Fprintf(&b, "%-12s #%d (gone)\n", "parent", t.ParentID)
	}
	if len(t.Then) > 0 {
		fmt.Fprintf(&b, "%-12s %s\n", "then", task.ChainText(t.Then))
	}
	for i, c := range st.Children {
		k := ""
		if i == 0 {
			k = "children"
		}
		fmt.Fprintf(&b, "%-12s %s\n", k, ref(c))
	}
	if len(st.Children) > 0 {
		b.WriteString(strings.Repeat(" ", 13) + m.st.Dim.Render("[c] opens the next") + "\n")
	}
	if bt := st.Batch; bt != nil {
		role := "member of"
		if t.BatchID == 0 {
			role = "callback of"
		}
		ended := bt.Succeeded + bt.Dead + bt.Cancelled
		fmt.Fprintf(&b, "%-12s %s batch %d: %d of %d ended, %d succeeded, %d dead, %d cancelled\n",
			"batch", role, bt.ID, ended, bt.Total, bt.Succeeded, bt.Dead, bt.Cancelled)
		cb := "runs when the last member has ended"
		if bt.CallbackID != 0 {
			cb = fmt.Sprintf("task #%d", bt.CallbackID)
		}
		fmt.Fprintf(&b, "%-12s %s (%s)\n", "callback", bt.Callback.Code, cb)
		for i, f := range st.Failed {
			k := ""
			if i == 0 {
				k = "failed"
			}
			fmt.Fprintf(&b, "%-12s %s  %s\n", k, ref(f), oneLine(f.LastResult))
		}
		if len(st.Failed) > 0 {
			b.WriteString(strings.Repeat(" ", 13) + m.st.Dim.Render("[f] opens the next") + "\n")
		}
	}
	return b.String()
}

// stepKey handles p, c and f in a task's detail: they open the parent,
// the next child, the next failed member of its batch.
func (m *Model) stepKey(k tea.KeyPressMsg) (tea.Cmd, bool) {
	d := m.cur.detail
	if d == nil || d.task == nil || d.steps == nil {
		return nil, false
	}
	next := func(ts []*task.Task, what string) (tea.Cmd, bool) {
		if len(ts) == 0 {
			m.setStatus("this task has no "+what, nil)
			return nil, true
		}
		d.hop = (d.hop + 1) % len(ts)
		return m.openDetail(ts[(d.hop+len(ts)-1)%len(ts)].ID), true
	}
	switch {
	case key.Matches(k, stepKeys.Parent):
		if d.task.ParentID == 0 {
			m.setStatus("this task has no parent", nil)
			return nil, true
		}
		return m.openDetail(d.task.ParentID), true
	case key.Matches(k, stepKeys.Child):
		return next(d.steps.Children, "children")
	case key.Matches(k, stepKeys.Failed):
		return next(d.steps.Failed, "failed batch members")
	}
	return nil, false
}

// locksPage lists the held locks.
type locksPage struct {
	held []lock.Held
	err  error
	at   time.Time // when read
	cur  cursor
}

// openLocks opens the locks page and reads the locks.
func (m *Model) openLocks() tea.Cmd {
	m.push()
	m.cur = page{locks: &locksPage{}}
	return m.loadLocks()
}

func (m *Model) loadLocks() tea.Cmd {
	ss, ok := m.opt.Source.(StepSource)
	if !ok {
		m.cur.locks.err = fmt.Errorf("this source lists no locks")
		return nil
	}
	return m.load(loadLocks, 0, func(ctx context.Context, msg *loadedMsg) (err error) {
		msg.locks, err = ss.Locks(ctx)
		return err
	})
}

var lockColumns = []column{
	{title: "LOCK", width: 14, flex: 30},
	{title: "BACKEND", width: 7, drop: 3},
	{title: "HOST", width: 10, flex: 20},
	{title: "PID", width: 7, right: true, drop: 2},
	{title: "SINCE", width: 8, right: true},
	{title: "TTL LEFT", width: 8, right: true},
	{title: "TOKEN", width: 16, right: true, drop: 1},
}

func (m *Model) locksView(width, height int) string {
	p := m.cur.locks
	switch {
	case p.err != nil:
		return m.empty(node.ErrorText(p.err), width, height)
	case p.held == nil:
		return m.empty("reading locks…", width, height)
	}
	if len(p.held) == 0 {
		return m.empty("no lock is held", width, height)
	}
	now := m.opt.Now()
	rows := make([]row, len(p.held))
	for i, h := range p.held {
		pid, since := "-", "-"
		if h.PID != 0 {
			pid = strconv.Itoa(h.PID)
		}
		if !h.Since.IsZero() {
			since = age(now.Sub(h.Since))
		}
		// The TTL left as read, less the time since: it counts down between
		// refreshes.
		left := max(0, h.TTLLeft-now.Sub(p.at))
		rows[i] = row{style: lipgloss.NewStyle(), cells: []string{h.Name, h.Backend, cellOr(h.Host), pid, since,
			left.Round(100 * time.Millisecond).String(), strconv.FormatUint(h.Token, 10)}}
	}
	return renderTable(&m.st, lockColumns, rows, &p.cur, width, height)
}

func cellOr(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (m *Model) locksKey(k tea.KeyPressMsg) (tea.Cmd, bool) {
	p := m.cur.locks
	switch {
	case p.cur.navigate(k, len(p.held)):
	case key.Matches(k, globalKeys.Back, globalKeys.Quit):
		return m.back(), true
	default:
		return nil, false
	}
	return nil, true
}

// nonNilHeld makes "read, none held" differ from "not read yet".
func nonNilHeld(h []lock.Held) []lock.Held {
	if h == nil {
		return []lock.Held{}
	}
	return h
}
