package tui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/task"
)

// actionFn runs one operator action and says what changed.
type actionFn func(ctx context.Context) (string, error)

// actionMsg is the outcome of an action, for the status line.
type actionMsg struct {
	text string
	err  error
}

// canAct reports whether actions are allowed, and says so when not.
func (m *Model) canAct() bool {
	if m.opt.ReadOnly {
		m.setStatus("read-only: actions are disabled", nil)
		return false
	}
	return true
}

// act runs fn off the UI goroutine.
func (m *Model) act(fn actionFn) tea.Cmd {
	parent, timeout := m.opt.Context, m.opt.ActionTimeout
	m.setStatus("working…", nil)
	if m.acting == 0 {
		m.actingSince = m.opt.Now()
	}
	m.acting++
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(parent, timeout)
		defer cancel()
		text, err := fn(ctx)
		var unsent notSent
		switch {
		case !errors.Is(err, context.DeadlineExceeded):
		case errors.As(err, &unsent):
			err = fmt.Errorf("no answer within %s: not done, the task center was not reached (%w)", timeout, err)
		default:
			// A write sent may have been done: the operator must look
			// before doing it again.
			err = fmt.Errorf("no answer within %s, so it may or may not have been done: look once the view refreshes (%w)", timeout, err)
		}
		return actionMsg{text: text, err: err}
	}
}

// queueAction is a pause or resume of queue q.
func (m *Model) queueAction(fn func(Actions, context.Context, string) (ops.Change, error), verb, q string) actionFn {
	return func(ctx context.Context) (string, error) {
		c, err := fn(m.opt.Actions, ctx, q)
		if err != nil {
			return cmp.Or(c.Action, verb) + " " + q, err
		}
		return c.Sentence(), nil
	}
}

// taskAction is one of the task actions on ids, fenced by the attempts
// shown: a task that ran again or was retried since the operator saw it
// (between a key and its confirmation, or a refresh) is left alone, and
// the status line says so.
func (m *Model) taskAction(a taskActionKey, ids []int64, attempts task.SeenAttempts) actionFn {
	return func(ctx context.Context) (string, error) {
		c, err := a.fn(m.opt.Actions, ctx, ops.Target{IDs: ids, Lenient: true, Attempts: attempts})
		return outcome(a, c, err)
	}
}

// outcome is what a task action's status line says: what changed, and
// the error that stopped the rest (a kill that cancelled one task and
// could not reach the worker of another did change something). An
// action that never reached the task center is named by its key.
func outcome(a taskActionKey, c ops.Change, err error) (string, error) {
	if err != nil && c.Changed == 0 {
		return cmp.Or(c.Action, strings.ToLower(a.name)), err
	}
	return c.Sentence(), err
}

// taskAction is one task action key: its name, the ops call and what its
// confirmation says it does. Every one asks first, as the taskd commands
// do on a terminal: a retry or a run now starts work again (a payment, a
// mail) that no key takes back, and an operator's key can land on the
// wrong row.
type taskActionKey struct {
	key     key.Binding
	name    string
	fn      func(Actions, context.Context, ops.Target) (ops.Change, error)
	explain string
	// fenced: the action is about the run shown, and leaves a task that
	// ran again since. Enable and disable are about a periodic task's
	// schedule, whatever run it is at.
	fenced bool
}

var taskActions = []taskActionKey{
	{actionKeys.Retry, "Retry", Actions.Retry, "Dead, failed and cancelled tasks run again now, their retries counted anew; tasks in other states are left alone.", true},
	{actionKeys.RunNow, "Run now", Actions.RunNow, "Pending and failed tasks are due now; a periodic task then goes on with its schedule.", true},
	{actionKeys.Enable, "Enable", Actions.Enable, "Disabled periodic tasks run again, next at their next time.", false},
	{actionKeys.Kill, "Kill", Actions.Kill, "A running task is stopped wherever it runs; the others are cancelled. A periodic task not running is disabled until enabled (e); a running one goes on to its next run.", true},
	{actionKeys.Delete, "Delete", Actions.Delete, "Pending, failed, dead and cancelled tasks are deleted; dispatched, running and succeeded ones are left alone.", true},
	{actionKeys.Disable, "Disable", Actions.Disable, "Periodic tasks stop running until enabled.", false},
}

// actionOf returns the task action of key k.
func actionOf(k tea.KeyPressMsg) (taskActionKey, bool) {
	for _, a := range taskActions {
		if key.Matches(k, a.key) {
			return a, true
		}
	}
	return taskActionKey{}, false
}

// taskKey asks to run the task action of key k on ids; it reports whether
// k is one. The question names the task, or for a selection how many
// tasks and the first of them, so a key never acts on more than the
// operator meant.
func (m *Model) taskKey(k tea.KeyPressMsg, ids []int64, attempts task.SeenAttempts, selected bool) (tea.Cmd, bool) {
	a, ok := actionOf(k)
	if !ok {
		return nil, false
	}
	if len(ids) == 0 {
		// Rows still loading, or a filter that matches nothing: a key that
		// did nothing says so, rather than look lost.
		m.setStatus(strings.ToLower(a.name)+": no task under the cursor", nil)
		return nil, true
	}
	if !m.canAct() {
		return nil, true
	}
	if !a.fenced {
		attempts = nil
	}
	fn := m.taskAction(a, ids, attempts)
	what := fmt.Sprintf("task %d", ids[0])
	if selected {
		what = fmt.Sprintf("%d selected: %s", len(ids), listIDs(ids, 5))
	}
	m.confirm(fmt.Sprintf("%s %s?", a.name, what), a.explain, a.name, fn)
	return nil, true
}

// listIDs writes the first most ids, "and N more" for the rest.
func listIDs(ids []int64, most int) string {
	s := strings.ReplaceAll(joinIDs(ids[:min(len(ids), most)], most), ",", ", ")
	if len(ids) > most {
		s += fmt.Sprintf(" and %d more", len(ids)-most)
	}
	return s
}
