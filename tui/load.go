package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/lock"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/stats"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

type loadKind int

const (
	loadOverview loadKind = iota
	loadTasks
	loadDetail
	loadAudit
	loadCount
	loadTail
	loadLocks
)

// loadedMsg carries the result of one load.
type loadedMsg struct {
	kind loadKind
	seq  int // tasks: the query it answers
	err  error

	ov    *Overview
	tasks []*task.Task
	task  *task.Task
	runs  []*task.Run
	audit []store.AuditEntry
	count int
	tail  *broker.TaskTail
	steps *store.Steps
	locks []lock.Held
}

// load runs fn off the UI goroutine with the refresh deadline. A load of
// a kind still in flight is not started again, so a slow server never
// piles up queries.
func (m *Model) load(kind loadKind, seq int, fn func(ctx context.Context, msg *loadedMsg) error) tea.Cmd {
	if m.loading[kind] {
		return nil
	}
	m.loading[kind] = true
	parent, timeout := m.opt.Context, m.opt.Timeout
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(parent, timeout)
		defer cancel()
		msg := loadedMsg{kind: kind, seq: seq}
		msg.err = fn(ctx, &msg)
		if errors.Is(msg.err, context.DeadlineExceeded) {
			msg.err = fmt.Errorf("no answer within %s: %w", timeout, msg.err)
		}
		return msg
	}
}

// refresh reloads the overview and what the current view shows.
func (m *Model) refresh() tea.Cmd {
	src := m.opt.Source
	cmds := []tea.Cmd{m.load(loadOverview, 0, func(ctx context.Context, msg *loadedMsg) (err error) {
		msg.ov, err = src.Overview(ctx)
		return err
	})}
	switch m.screenLoad() {
	case loadLocks:
		cmds = append(cmds, m.loadLocks())
	case loadTail:
		id := m.cur.tail.id
		cmds = append(cmds, m.load(loadTail, int(id), func(ctx context.Context, msg *loadedMsg) (err error) {
			msg.tail, err = src.Tail(ctx, id)
			return err
		}))
	case loadDetail:
		id := m.cur.detail.id
		cmds = append(cmds, m.load(loadDetail, int(id), func(ctx context.Context, msg *loadedMsg) (err error) {
			if msg.task, msg.runs, err = src.Task(ctx, id); err != nil {
				return err
			}
			return loadSteps(ctx, src, msg)
		}))
	case loadTasks:
		q, seq := m.tasks.query(m.tableHeight()), m.tasks.seq
		cmds = append(cmds, m.load(loadTasks, seq, func(ctx context.Context, msg *loadedMsg) (err error) {
			msg.tasks, err = src.Tasks(ctx, q)
			return err
		}))
		if m.tasks.all && m.tasks.allCount < 0 {
			// A count refused while another ran, or failed: again.
			cmds = append(cmds, m.count())
		}
	case loadAudit:
		before, limit := m.audit.before(), max(m.tableHeight(), 50)
		cmds = append(cmds, m.load(loadAudit, 0, func(ctx context.Context, msg *loadedMsg) (err error) {
			msg.audit, err = src.Audit(ctx, before, limit)
			return err
		}))
	}
	return tea.Batch(cmds...)
}

// screenLoad is what the current screen reads besides the overview
// (loadOverview: nothing else).
func (m *Model) screenLoad() loadKind {
	switch {
	case m.cur.locks != nil:
		return loadLocks
	case m.cur.tail != nil:
		return loadTail
	case m.cur.detail != nil:
		return loadDetail
	case m.view == viewTasks:
		return loadTasks
	case m.view == viewAudit:
		return loadAudit
	}
	return loadOverview
}

// reads tells whether the current screen reads kind k at its refreshes.
// An error of a read it no longer makes is not retried: shown, it would
// say a server still fails that answers again.
func (m *Model) reads(k loadKind) bool {
	s := m.screenLoad()
	return k == loadOverview || k == s || (k == loadCount && s == loadTasks && m.tasks.all)
}

// loaded applies a load's result. On an error the last data stays.
func (m *Model) loaded(msg loadedMsg) tea.Cmd {
	m.loading[msg.kind] = false
	if msg.err != nil {
		if task.ErrorCode(msg.err) == task.CodeNotFound && msg.kind == loadDetail {
			m.setStatus("", msg.err)
			if m.cur.detail != nil && m.canGoBack() {
				return m.back()
			}
			m.cur = page{}
			return nil
		}
		m.errs[msg.kind] = msg.err
		return nil
	}
	delete(m.errs, msg.kind)
	switch msg.kind {
	case loadOverview:
		ov := msg.ov
		if ov.RedisErr != nil || ov.MySQLErr != nil {
			// Completed below with what this screen read before; tasktop
			// serve's sessions share one read.
			ov = ov.partialCopy()
		}
		if ov.RedisErr != nil {
			m.errs[loadOverview] = ov.RedisErr
			m.redisPartial(ov)
		} else {
			m.redisAt = time.Time{}
		}
		if ov.MySQLErr != nil {
			m.errs[loadOverview] = ov.MySQLErr
			m.mysqlPartial(ov)
		} else {
			m.mysqlAt = time.Time{}
		}
		m.keepQueue(func() {
			m.ov, m.ovAt = ov, m.opt.Now()
			m.queues.observe(ov, m.opt.Now())
		})
	case loadTasks:
		if msg.seq != m.tasks.seq {
			return m.refresh() // the filter or page changed meanwhile
		}
		n := pageSize(m.tableHeight())
		const gone = "no longer on this page (changed past the filter, deleted, or the screen got shorter)"
		d, left := m.tasks.setRows(msg.tasks[:min(n, len(msg.tasks))], len(msg.tasks) > n)
		acted := m.tasks.acted
		m.tasks.acted = false
		switch {
		case d > 0:
			m.setStatus(unselectedText(d, gone), nil)
		case left != 0 && !acted:
			// The cursor now names another task: an action key would act
			// on it.
			text := fmt.Sprintf("task %d is %s", left, gone)
			if v := &m.tasks; v.cur.pos < len(v.rows) {
				text += fmt.Sprintf(": the cursor is on task %d now", v.rows[v.cur.pos].ID)
			}
			m.setStatus(text, nil)
		}
	case loadDetail:
		if d := m.cur.detail; d != nil && int64(msg.seq) == d.id {
			d.set(m, msg.task, msg.runs, msg.steps)
		}
	case loadAudit:
		m.audit.rows, m.audit.loaded = msg.audit, true
	case loadLocks:
		if p := m.cur.locks; p != nil {
			p.held, p.err, p.at = nonNilHeld(msg.locks), nil, m.opt.Now()
		}
	case loadTail:
		if v := m.cur.tail; v != nil && int64(msg.seq) == v.id {
			v.set(msg.tail)
		}
	case loadCount:
		switch {
		case msg.seq == m.tasks.seq && m.tasks.all:
			m.tasks.allCount = msg.count
		case m.tasks.all && m.tasks.allCount < 0:
			return m.count() // the filter changed while it counted
		}
	}
	return nil
}

// redisPartial completes an overview read while Redis did not answer
// with the workers, nodes, events and alerts last read from Redis, which
// the error bar dates (redisAt).
func (m *Model) redisPartial(ov *Overview) {
	if m.ov == nil {
		return
	}
	if m.ov.RedisErr == nil {
		m.redisAt = m.ovAt
	}
	ov.Workers, ov.NodesUp, ov.Events, ov.Alerts = m.ov.Workers, m.ov.NodesUp, m.ov.Events, m.ov.Alerts
}

// partialCopy copies what redisPartial and mysqlPartial change.
func (ov *Overview) partialCopy() *Overview {
	c := *ov
	if ov.Stats != nil {
		st := *ov.Stats
		st.Queues = slices.Clone(st.Queues)
		c.Stats = &st
	}
	return &c
}

// mysqlPartial completes an overview read while the task center did not
// answer with the series, alerts and queue states last read from it,
// which the error bar dates (mysqlAt). Counts of tasks are not kept: they
// show as unknown.
func (m *Model) mysqlPartial(ov *Overview) {
	if m.ov == nil {
		return
	}
	if m.ov.MySQLErr == nil {
		m.mysqlAt = m.ovAt
	}
	ov.Series, ov.Alerts = m.ov.Series, m.ov.Alerts
	if m.ov.Stats == nil {
		return
	}
	was := map[string]stats.Queue{}
	for _, q := range m.ov.Stats.Queues {
		was[q.Name] = q
	}
	for i := range ov.Stats.Queues {
		q := &ov.Stats.Queues[i]
		if w, ok := was[q.Name]; ok {
			q.Paused, q.Shards, q.Limit = w.Paused, w.Shards, w.Limit
		}
	}
}

// notYet is what a view shows until its first read of what arrives:
// "loading…", or, while that read fails (MySQL down), that it is not
// read yet, not a blank that looks like nothing to show.
func (m *Model) notYet(kind loadKind, what string) string {
	if m.errs[kind] == nil {
		return "loading…"
	}
	return what + " not read: retrying every " + m.opt.Refresh.String() + " (the error above says why)"
}

// errorText is the error bar's text ("" when everything answers).
func (m *Model) errorText() string {
	for _, k := range []loadKind{loadOverview, loadTasks, loadDetail, loadAudit, loadCount, loadTail, loadLocks} {
		if err := m.errs[k]; err != nil && m.reads(k) {
			s := node.ErrorText(err) + " · retrying every " + m.opt.Refresh.String()
			switch {
			case k == loadOverview && m.ov != nil && m.ov.MySQLErr != nil:
				s += " · Redis's figures alone"
				if !m.mysqlAt.IsZero() {
					s += "; alerts of " + clock(m.mysqlAt)
				}
			case k == loadOverview && m.ov != nil && m.ov.RedisErr != nil:
				s += " · queues from the task center alone"
				if !m.redisAt.IsZero() {
					s += "; workers, alerts and events of " + clock(m.redisAt)
				}
			case !m.ovAt.IsZero():
				s += " · showing data of " + clock(m.ovAt)
			}
			return s
		}
	}
	return ""
}
