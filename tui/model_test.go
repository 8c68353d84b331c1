package tui

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/stats"
	"github.com/taskd/taskd/pkg/task"
)

type testBundle struct {
	src  *fakeSource
	acts *fakeActions
	quit bool
}

// setup returns a model on the fixture, loaded, at 80×24.
func setup(t *testing.T, readonly bool) (*Model, *testBundle) {
	t.Helper()
	b := &testBundle{src: fixture(), acts: &fakeActions{}}
	b.acts.src = b.src
	m := New(Options{Source: b.src, Actions: b.acts, ReadOnly: readonly, Now: func() time.Time { return now }})
	m.noTick = true
	b.settle(t, m, m.Init())
	return m, b
}

// settle runs cmd and feeds what it returns back to the model until
// nothing is left, as the program would.
func (b *testBundle) settle(t *testing.T, m *Model, cmd tea.Cmd) {
	t.Helper()
	if cmd == nil {
		return
	}
	switch msg := cmd().(type) {
	case tea.BatchMsg:
		for _, c := range msg {
			b.settle(t, m, c)
		}
	case tea.QuitMsg:
		b.quit = true
	case loadedMsg, actionMsg:
		_, next := m.Update(msg)
		b.settle(t, m, next)
	}
}

// press sends keys: names as tea.KeyPressMsg.String() spells them.
func (b *testBundle) press(t *testing.T, m *Model, keys ...string) {
	t.Helper()
	for _, k := range keys {
		_, cmd := m.Update(keyMsg(k))
		b.settle(t, m, cmd)
	}
}

func keyMsg(k string) tea.KeyPressMsg {
	switch k {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case "right":
		return tea.KeyPressMsg{Code: tea.KeyRight}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "pgdown":
		return tea.KeyPressMsg{Code: tea.KeyPgDown}
	case "ctrl+c":
		return tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	case "ctrl+r":
		return tea.KeyPressMsg{Code: 'r', Mod: tea.ModCtrl}
	}
	r := []rune(k)[0]
	return tea.KeyPressMsg{Code: r, Text: k}
}

// typeText types s into an open prompt.
func (b *testBundle) typeText(t *testing.T, m *Model, s string) {
	t.Helper()
	for _, r := range s {
		_, cmd := m.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
		b.settle(t, m, cmd)
	}
}

func screen(m *Model) string { return plain(m.render()) }

// The header counts the work waiting where it waits: due in the task
// center (a backlog INSERTed at once, past the queues' windows) and
// queued in Redis, and says when it drains at the last minute's rates,
// where the line has room.
func TestWaitingAndItsDrain(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.onlyQueues(t, m,
		stats.Queue{Name: "import", Pending: 47000, Due: 46000, Backlog: []int64{1000}, ProcessedPerMin: 2000, Shards: 1, LiveWorkers: 2},
		stats.Queue{Name: "mail", Pending: 3, Due: 3, Backlog: []int64{0}, ProcessedPerMin: 60, Shards: 1, LiveWorkers: 2},
		stats.Queue{Name: "held", Pending: 500, Due: 500, Backlog: []int64{0}, Paused: true, Shards: 1}, // paused: its tasks wait on purpose
	)
	require.Contains(t, screen(m), "paused 500 · ", "what the paused queue holds is said apart, first")
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 24})
	require.Contains(t, screen(m), "waiting 47.0k (~24m) · 2060/min") // the slowest queue's time: import's 47,000 at 2,000 a minute

	m.Update(tea.WindowSizeMsg{Width: 72, Height: 24})
	require.Contains(t, screen(m), "· waiting 47.0k · 2060/min · ok -\n", "no room for the time")

	// A queue that waits without a rate leaves the time unknown.
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 24})
	b.src.mu.Lock()
	b.src.ov.Stats.Queues[1].ProcessedPerMin = 0
	b.src.mu.Unlock()
	b.press(t, m, "ctrl+r")
	require.Contains(t, screen(m), "· waiting 47.0k · 2000/min ·")
}

// onlyQueues makes qs the only queues, without alerts, and refreshes.
func (b *testBundle) onlyQueues(t *testing.T, m *Model, qs ...stats.Queue) {
	t.Helper()
	b.src.mu.Lock()
	b.src.ov.Alerts = nil
	b.src.ov.Stats.Queues = qs
	b.src.mu.Unlock()
	b.press(t, m, "ctrl+r")
}

// TestLargeCountsWhole: a queue's counts past 9,999 read "12.3k", wider
// than the 4 columns RUN, FAIL and DEAD had: an incident's 12,345 failed
// tasks showed as "12.…" at 80 columns.
func TestLargeCountsWhole(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.onlyQueues(t, m, stats.Queue{Name: "import", Pending: 470000, Due: 46000, Running: 23456, Failed: 12345, Dead: 54321,
		Backlog: []int64{1000}, ProcessedPerMin: 123456, Shards: 1, LiveWorkers: 2})
	require.Regexp(t, `(?m)^  import +470.0k +1000 +23.5k +12.3k +54.3k +123.5k `, screen(m), "SH and the sparkline give up their room first")
}

func TestKeyNames(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"enter", "esc", "tab", "space", "right", "down", "ctrl+c", "ctrl+r", "x", "S", "]", "/", "?"} {
		require.Equal(t, k, keyMsg(k).String())
	}
}

func TestQueuesAtAGlance(t *testing.T) {
	t.Parallel()
	m, _ := setup(t, false)
	s := screen(m)
	require.Contains(t, s, "1 ALERT · 2 nodes up · 2/3 workers · 1 dead · waiting 60 · 420/min · ok 99.3%") // the queues' rate, by their attempts
	require.Regexp(t, `(?m)^! build_report .* ALERT, no consumer, lag…$`, s)                                // worst first: the least is cut at 80 columns
	require.Regexp(t, `(?m)^  send_email .* 20 .* 1 dead$`, s)
	require.Regexp(t, `(?m)^  reports_low .* PAUSED$`, s)
	require.Less(t, strings.Index(s, "build_report"), strings.Index(s, "send_email"), "the worst first")
	require.NotContains(t, s, "READ-ONLY")
}

func TestBacklogGrowing(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	for i := range 4 {
		b.src.mu.Lock()
		b.src.ov.Stats.Queues[2].Backlog = []int64{int64(10 * (i + 1))}
		b.src.mu.Unlock()
		b.press(t, m, "ctrl+r")
	}
	require.Regexp(t, `(?m)^  send_email .* growing, 1 dead$`, screen(m))
}

// A Redis at maxmemory refuses every push: no backlog shows in Redis while
// due tasks wait in the task center, and the header says why, after the
// alerts.
func TestRedisFullInHeader(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	memory := func(m *Model, used int64) string {
		b.src.mu.Lock()
		b.src.ov.Stats.RedisMemory = &broker.Memory{Used: used, Max: 100 << 20}
		b.src.mu.Unlock()
		b.press(t, m, "ctrl+r")
		return strings.SplitN(screen(m), "\n", 2)[0]
	}
	require.True(t, strings.HasPrefix(memory(m, 130<<20), "1 ALERT · REDIS FULL 130% · 2/3 workers"), screen(m))
	// A queue whose due tasks wait says why, in place of "lagging"; a
	// paused one does not.
	s := screen(m)
	require.Regexp(t, `(?m)^! send_email .* 1\.5s redis full, 1 dead$`, s)
	require.Regexp(t, `(?m)^! build_report .* ALERT, no consumer, red`, s)
	require.Regexp(t, `(?m)^  reports_low .* PAUSED$`, s)
	require.True(t, strings.HasPrefix(memory(m, 95<<20), "1 ALERT · redis 95% full · 2/3 workers"), screen(m))
	s = screen(m)
	require.Regexp(t, `(?m)^  send_email .* 1\.5s 1 dead$`, s)
	require.Regexp(t, `(?m)^! build_report .* ALERT, no consumer, lag`, s)
	require.True(t, strings.HasPrefix(memory(m, 50<<20), "1 ALERT · 2 nodes up"), screen(m))

	// The memory rule switched off: only a full Redis is shown.
	off := New(Options{Source: b.src, Actions: b.acts, Now: func() time.Time { return now }, RedisNear: -1})
	off.noTick = true
	b.settle(t, off, off.Init())
	require.True(t, strings.HasPrefix(memory(off, 99<<20), "1 ALERT · 2 nodes up"), screen(off))
	require.True(t, strings.HasPrefix(memory(off, 101<<20), "1 ALERT · REDIS FULL 101% · 2/3 workers"), screen(off))
}

func TestViewsSwitch(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "2")
	s := screen(m)
	require.Regexp(t, `(?m)^  node-a-w1 .* ok +#1003 \(\+1\) .* +1m15s$`, s)
	require.Regexp(t, `(?m)^  node-b-w1 .* idle`, s)
	require.Regexp(t, `(?m)^! node-c-w1 .* dead`, s)
	b.press(t, m, "tab")
	require.Contains(t, screen(m), "[3 Tasks]")
	b.press(t, m, "tab")
	s = screen(m)
	require.Regexp(t, `(?m)^! 09:58:00 FIRING +no_consumer build_report +40 queued`, s)
	require.Contains(t, s, "abandoned")
	b.press(t, m, "5")
	require.Regexp(t, `(?m)alice@ssh 10.0.0.7 +retry +tasks 1008`, screen(m))
	require.Regexp(t, `(?m)alice@ssh 10.0.0.7 +cron timezone +Asia/Shanghai`, screen(m), "an action's name whole at 80 columns")
	b.press(t, m, "tab")
	require.Contains(t, screen(m), "[1 Queues]")
}

func TestQueueOpensItsTasks(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "G", "enter") // send_email, the last row
	require.Equal(t, viewTasks, m.view)
	last := b.src.queries[len(b.src.queries)-1]
	require.Equal(t, "send_email", last.Queue)
	require.Contains(t, screen(m), "[3 Tasks] 4  5   queue:send_email")
	for _, r := range m.tasks.rows {
		require.Equal(t, "send_email", r.QueueName())
	}
}

func TestTaskFilterAndSearch(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3", "/")
	require.NotNil(t, m.input)
	b.typeText(t, m, "dead code:build_report")
	b.press(t, m, "enter")
	last := b.src.queries[len(b.src.queries)-1]
	require.NotNil(t, last.Status)
	require.Equal(t, task.Dead, *last.Status)
	require.Equal(t, "build_report", last.Code)
	require.NotEmpty(t, m.tasks.rows)
	for _, r := range m.tasks.rows {
		require.Equal(t, task.Dead, r.Status)
		require.Equal(t, "build_report", r.Code)
	}
	require.Contains(t, screen(m), "status:dead code:build_report")

	b.press(t, m, "esc")
	require.Empty(t, m.tasks.filterText())
	require.Len(t, m.tasks.rows, 20) // a screenful: 24 lines less header, tabs, footer and table head

	b.press(t, m, "s", "s", "s") // pending, dispatched, running
	require.Equal(t, "status:running", m.tasks.filterText())

	b.press(t, m, "esc", "/")
	require.Empty(t, m.input.ti.Value())
	b.typeText(t, m, "#1008")
	b.press(t, m, "enter")
	require.NotNil(t, m.cur.detail)
	require.Equal(t, int64(1008), m.cur.detail.id)

	b.press(t, m, "esc", "/")
	b.typeText(t, m, "status:bogus")
	b.press(t, m, "enter")
	require.Contains(t, screen(m), `unknown status "bogus"`)
}

// TestSubstringSearch: a bare word finds tasks whose code, queue, unique
// key or last result contains it.
func TestSubstringSearch(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3", "/")
	b.typeText(t, m, "mailbox")
	b.press(t, m, "enter")
	require.Equal(t, "mailbox", b.src.queries[len(b.src.queries)-1].Search)
	require.NotEmpty(t, m.tasks.rows)
	for _, r := range m.tasks.rows {
		require.Equal(t, task.Dead, r.Status, "only the dead tasks have that result")
	}
	require.Contains(t, screen(m), "[3 Tasks] 4  5   mailbox")
}

// TestApplyToAllMatching: A selects every task matching the filter, an
// action on it asks with the count and goes to the ops layer as one
// filter target; then the selection is gone.
func TestApplyToAllMatching(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3", "/")
	b.typeText(t, m, "dead")
	b.press(t, m, "enter", "A")
	require.Contains(t, screen(m), "ALL 6 matching selected")
	b.press(t, m, "r")
	require.Contains(t, screen(m), "Retry all 6 matching tasks status:dead?")
	b.press(t, m, "y")
	require.Equal(t, []string{"retry filter status=dead"}, b.acts.Calls())
	require.False(t, m.tasks.all)
	require.Contains(t, screen(m), "retry: 7 of 7 tasks retried")

	b.press(t, m, "esc", "/")
	b.typeText(t, m, "nothing-matches-this")
	b.press(t, m, "enter", "A", "r")
	require.Nil(t, m.dialog)
	require.Contains(t, screen(m), "no task matches the filter: nothing to do")
	require.Len(t, b.acts.Calls(), 1)
	b.press(t, m, "r") // no row under the cursor either
	require.Nil(t, m.dialog)
	require.Contains(t, screen(m), "retry: no task under the cursor")
	require.Len(t, b.acts.Calls(), 1)

	b.press(t, m, "esc", "esc", "A", "D") // no filter: it says so
	require.Contains(t, screen(m), "Delete all EVERY task (40 matching, no filter)?")
	b.press(t, m, "esc")
	require.False(t, m.tasks.all)
	require.Len(t, b.acts.Calls(), 1)
}

// TestAllMatchingChangedMeanwhile: when the tasks matching the filter are
// no longer as many as the dialog said, the action does nothing.
func TestAllMatchingChangedMeanwhile(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	// A task that comes to match while the dialog is open: the action
	// does nothing and says why, instead of acting on more than asked.
	b.press(t, m, "3", "/")
	b.typeText(t, m, "dead")
	b.press(t, m, "enter", "A", "r")
	require.Contains(t, screen(m), "Retry all 6 matching tasks status:dead?")
	b.src.mu.Lock()
	b.src.tasks = append([]*task.Task{{ID: 999, Code: "send_email", Queue: "send_email", Status: task.Dead}}, b.src.tasks...)
	b.src.mu.Unlock()
	b.press(t, m, "y")
	require.Empty(t, b.acts.Calls(), "nothing done")
	require.Contains(t, screen(m), "7 tasks match now, not the 6 confirmed")
}

func TestParseTaskFilter(t *testing.T) {
	t.Parallel()
	q, id, err := parseTaskFilter(" failed q:mail c:x ")
	require.NoError(t, err)
	require.Zero(t, id)
	require.Equal(t, task.Failed, *q.Status)
	require.Equal(t, "mail", q.Queue)
	require.Equal(t, "x", q.Code)
	_, id, err = parseTaskFilter("42")
	require.NoError(t, err)
	require.Equal(t, int64(42), id)
	q, _, err = parseTaskFilter("fail SMTP dead")
	require.NoError(t, err)
	require.Empty(t, q.Code, "a bare word is searched, not an exact code")
	require.Equal(t, "fail SMTP", q.Search)
	require.Equal(t, task.Dead, *q.Status)
	q, _, err = parseTaskFilter("search:dead")
	require.NoError(t, err)
	require.Equal(t, "dead", q.Search)
	require.Nil(t, q.Status)
	_, _, err = parseTaskFilter("owner:me")
	require.Error(t, err)
}

func TestKeysetPaging(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3")
	first := m.tasks.rows
	require.Len(t, first, 20)
	b.press(t, m, "]")
	last := b.src.queries[len(b.src.queries)-1]
	require.Equal(t, first[len(first)-1].ID, last.BeforeID)
	require.Equal(t, first[len(first)-1].ID-1, m.tasks.rows[0].ID)
	require.Contains(t, screen(m), "page 2")
	b.press(t, m, "]") // 40 tasks: page 2 was the last full one
	b.press(t, m, "]")
	require.Contains(t, screen(m), "page 2")
	b.press(t, m, "[")
	require.Equal(t, first[0].ID, m.tasks.rows[0].ID)
	require.Zero(t, b.src.queries[len(b.src.queries)-1].BeforeID)
}

// Pages follow ids: a sort orders the page shown, and says so, since an
// operator sorting by DUE on page 1 would take it for the whole list.
func TestSortSaysItIsThePage(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3")
	require.NotContains(t, screen(m), "sorted")
	b.press(t, m, "o")
	require.Contains(t, screen(m), "page 1+ sorted within it")
}

func TestConfirmDefaultsToCancel(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3", "x") // task 1010, running
	require.NotNil(t, m.dialog)
	require.Contains(t, screen(m), "Kill task 1010?")
	b.press(t, m, "enter")
	require.Nil(t, m.dialog)
	require.Empty(t, b.acts.Calls())
	require.Contains(t, screen(m), "cancelled: nothing changed")

	b.press(t, m, "x", "esc")
	require.Empty(t, b.acts.Calls())

	b.press(t, m, "x", "right", "enter")
	require.Equal(t, []string{"kill [1010]"}, b.acts.Calls())
	require.Contains(t, screen(m), "10:00:00 kill: 1 of 1 task killed (1010)")

	b.press(t, m, "down", "D", "y")
	require.Equal(t, []string{"kill [1010]", "delete [1009]"}, b.acts.Calls())
}

// TestActionOnTheTaskShown: the list refreshes under an open dialog (a
// new task on top, the task retried meanwhile): the action confirmed
// goes to the task the dialog named, fenced by the attempt shown then,
// not to the run begun since.
func TestActionOnTheTaskShown(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3", "x") // task 1010, running
	shown := m.tasks.rows[0].Attempt
	require.Contains(t, screen(m), "Kill task 1010?")
	b.src.mu.Lock()
	again := *b.src.tasks[0]
	again.Attempt++
	newer := again
	newer.ID = 1011
	b.src.tasks = append([]*task.Task{&newer, &again}, b.src.tasks[1:]...)
	b.src.mu.Unlock()
	b.settle(t, m, m.refresh())
	require.Equal(t, int64(1010), m.tasks.rows[m.tasks.cur.pos].ID, "the cursor stays on its task")
	b.press(t, m, "right", "enter")
	require.Equal(t, []string{"kill [1010]"}, b.acts.Calls())
	require.Equal(t, []map[int64]int{{1010: shown}}, b.acts.attempts, "fenced by the attempt the dialog was opened on")

	b.press(t, m, "r", "y") // 1010 now shown at its new attempt: a retry of what is shown
	require.Equal(t, map[int64]int{1010: shown + 1}, b.acts.attempts[1])
	b.press(t, m, "d", "y") // a periodic task's schedule, whatever its run
	require.Nil(t, b.acts.attempts[2], "disable is not fenced")
}

func TestMultiSelectBulkRetry(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3", "down", "down", "space", "space")
	require.Contains(t, screen(m), "2 selected")
	require.Regexp(t, `(?m)^\* +1008 dead`, screen(m))
	b.press(t, m, "r") // on a selection even retry asks, naming the tasks
	require.Contains(t, screen(m), "Retry 2 selected: 1008, 1007?")
	b.press(t, m, "y")
	require.Equal(t, []string{"retry [1008 1007]"}, b.acts.Calls())
	require.Empty(t, m.tasks.selected)

	b.press(t, m, "a", "d")
	require.Contains(t, screen(m), "Disable 20 selected: 1010, 1009, 1008, 1007, 1006 and 15 more?")
	b.press(t, m, "esc")
	require.Len(t, b.acts.Calls(), 1)
	require.Empty(t, m.tasks.selected, "a cancelled action used the selection too")
	b.press(t, m, "space", "esc") // esc clears a selection
	require.Empty(t, m.tasks.selected)
}

// TestStaleSelectionCannotHijack drives the sequence that once retried
// two just-killed tasks instead of the one under the cursor: select two,
// kill them, move to a third, retry. Then delete two and run a third.
func TestStaleSelectionCannotHijack(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3", "space", "space") // 1010, 1009
	b.press(t, m, "x")
	require.Contains(t, screen(m), "Kill 2 selected: 1010, 1009?")
	require.Contains(t, screen(m), "A periodic task not running is", "the dialog says a kill disables a periodic task")
	b.press(t, m, "right", "enter")
	b.press(t, m, "down", "down", "down") // the cursor was on 1008: now 1005
	b.press(t, m, "r")
	require.Contains(t, screen(m), "Retry task 1005?", "a retry asks too, naming the task under the cursor")
	b.press(t, m, "y")
	require.Equal(t, []string{"kill [1010 1009]", "retry [1005]"}, b.acts.Calls())

	b.press(t, m, "g", "space", "space", "D", "y") // delete 1010, 1009
	b.press(t, m, "down", "down", "R", "y")        // run 1006 now
	require.Equal(t, []string{"kill [1010 1009]", "retry [1005]", "delete [1010 1009]", "run [1006]"}, b.acts.Calls())
}

// TestPartialActionSaysWhatChanged: an action on a selection is lenient
// (a task deleted meanwhile is left, not fatal), and one that changed
// some tasks before it failed says both.
func TestPartialActionSaysWhatChanged(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.acts.partial = errors.New("publish kill of task 1009: connection refused")
	b.press(t, m, "3", "space", "space", "x", "y")
	require.Equal(t, []bool{true}, b.acts.lenient)
	require.Contains(t, screen(m), "kill: 1 of 2 tasks killed (1010): publish kill of ta") // cut at 80 columns
}

// TestLongStatusWraps: an outcome longer than two lines wraps over up to
// four, its end (the error, the warning) included; one longer still ends
// in an ellipsis, and the screen keeps its 24 lines.
func TestLongStatusWraps(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.acts.partial = errors.New("publish kill of task 1009: " + strings.Repeat("the worker's node did not answer, ", 5) + "END-OF-ERROR")
	b.press(t, m, "3", "space", "space", "x", "y")
	s := screen(m)
	require.Contains(t, s, "END-OF-ERROR", "the error's end is shown")
	require.Len(t, strings.Split(s, "\n"), 24)
	require.Regexp(t, `(?m)^\S.*END-OF-ERROR +updated \d\d:\d\d:\d\d$`, s, "the time of the update on the status's last line")

	b.acts.partial = errors.New("publish kill of task 1009: " + strings.Repeat("the worker's node did not answer, ", 20) + "END-OF-ERROR")
	b.press(t, m, "space", "space", "x", "y")
	s = screen(m)
	require.NotContains(t, s, "END-OF-ERROR")
	require.Regexp(t, `(?m)…\s+updated \d\d:\d\d:\d\d$`, s, "cut at four lines, and said to be")
	require.Len(t, strings.Split(s, "\n"), 24)
	require.Contains(t, s, "1004", "the table keeps the rest of the screen")
}

// TestSelectionOnlyWhileVisible: a selected task that leaves the page
// (its state changed past the filter, or the page was turned) no longer
// counts.
func TestSelectionOnlyWhileVisible(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3", "space") // 1010 selected, the cursor on 1009
	b.src.mu.Lock()
	b.src.tasks = b.src.tasks[1:] // 1010 is gone
	b.src.mu.Unlock()
	b.press(t, m, "ctrl+r")
	require.Empty(t, m.tasks.selected)
	require.NotContains(t, strings.Split(screen(m), "\n")[1], "selected", "no count of selected tasks")
	require.Contains(t, screen(m), "1 selected task unselected: no longer on this page", "it says so")
	b.press(t, m, "r")
	require.Contains(t, screen(m), "Retry task 1009?")
	b.press(t, m, "y")
	require.Equal(t, []string{"retry [1009]"}, b.acts.Calls())

	b.press(t, m, "space", "j", "space", "]") // a selection on page 1, then page 2
	require.Empty(t, m.tasks.selected)
	require.Contains(t, screen(m), "2 selected tasks unselected: the page turned")
	b.press(t, m, "r")
	require.Regexp(t, `Retry task \d+\?`, screen(m), "one task, not a selection")
	b.press(t, m, "y")
	require.Len(t, b.acts.Calls(), 2)
	require.NotContains(t, b.acts.Calls()[1], "1008")
}

// An action the task center does not answer (MySQL frozen) ends at its
// timeout saying so, and that it may have been done: the bare "context
// deadline exceeded" told the operator neither. One still waiting to
// connect says it was not done.
func TestActionWithoutAnswer(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.acts.stall = true
	m.opt.ActionTimeout = 50 * time.Millisecond
	b.press(t, m, "G", "p", "y")
	s := strings.Join(strings.Fields(screen(m)), " ")
	require.Contains(t, s, "pause send_email: no answer within 50ms, so it may or may not have been done: look once the view refreshes")

	// One that never reached the task center was not done, and says so.
	b.acts.unreached = true
	b.press(t, m, "p", "y")
	s = strings.Join(strings.Fields(screen(m)), " ")
	require.Contains(t, s, "pause send_email: no answer within 50ms: not done, the task center was not reached (MySQL: connect to mysql db:3306:")

	// A kill waits for its worker up to the kill grace: an action has longer.
	require.Equal(t, 30*time.Second, ActionTimeoutFor(7*time.Second))
	require.Equal(t, 72*time.Second, ActionTimeoutFor(62*time.Second))
}

func TestQueueActions(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "G", "p")
	require.Contains(t, screen(m), "Pause queue send_email?")
	b.press(t, m, "y")
	b.press(t, m, "k", "p") // reports_low is paused: resume asks too
	require.Contains(t, screen(m), "Resume queue reports_low?")
	b.press(t, m, "y")
	b.press(t, m, "j", "S")
	require.NotNil(t, m.input)
	b.typeText(t, m, "0")
	b.press(t, m, "enter")
	require.Contains(t, screen(m), "not a number of shards from 1 to 256")
	b.press(t, m, "S")
	b.typeText(t, m, "8")
	b.press(t, m, "enter")
	require.Contains(t, screen(m), "Reshard queue send_email from 4 to 8 shards?")
	b.press(t, m, "y")
	require.Equal(t, []string{"pause send_email", "resume reports_low", "reshard 8 send_email"}, b.acts.Calls())
	require.Contains(t, screen(m), "reshard: queue send_email shards 1 -> 8")
}

// The cursor stays on its queue when a refresh reorders the queues (the
// most troubled first): a key meant for one queue acts on it, not on the
// one that slid under the cursor.
func TestQueueCursorFollowsItsQueue(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "G") // send_email, last
	q, ok := m.selectedQueue()
	require.True(t, ok)
	require.Equal(t, "send_email", q.Name)
	b.src.mu.Lock()
	ov, st := *b.src.ov, *b.src.ov.Stats // the next snapshot, a new one as a loader's is
	st.Queues = slices.Clone(st.Queues)
	ov.Stats = &st
	sq := &st.Queues[2] // send_email
	sq.Dead, sq.SuccessRate10m = 14, rate(0)
	ov.Alerts = append(slices.Clone(ov.Alerts), Alert{Name: "success_rate send_email", Queue: "send_email", Firing: true, Since: now})
	b.src.ov = &ov
	b.src.mu.Unlock()
	b.press(t, m, "ctrl+r")
	s := screen(m)
	require.Less(t, strings.Index(s, "send_email"), strings.Index(s, "reports_low"), "send_email moved up")
	b.press(t, m, "p")
	require.Contains(t, screen(m), "Pause queue send_email?")
}

func TestReadOnly(t *testing.T) {
	t.Parallel()
	m, b := setup(t, true)
	require.Contains(t, screen(m), " READ-ONLY  1 ALERT · 2/3 workers · 1 dead · waiting 60 · 420/min · ok 99.3%", "at 80 columns the nodes up go before the rates")
	b.press(t, m, "3", "x", "space", "r")
	b.press(t, m, "1", "p", "S")
	require.Nil(t, m.dialog)
	require.Nil(t, m.input)
	require.Empty(t, b.acts.Calls())
	require.Contains(t, screen(m), "read-only: actions are disabled")
	b.press(t, m, "?")
	s := screen(m)
	require.Contains(t, s, "Read-only")
	require.NotContains(t, s, "kill")
	require.NotContains(t, s, "S reshard")

	// No Actions at all is read-only too.
	m2 := New(Options{Source: b.src})
	require.True(t, m2.opt.ReadOnly)
}

func TestErrorBarKeepsDataAndRecovers(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.src.fail(errors.New("MySQL: dial tcp 127.0.0.1:3306: connect: connection refused"))
	b.press(t, m, "ctrl+r")
	s := screen(m)
	require.Contains(t, s, "✖ MySQL: dial tcp 127.0.0.1:3306: connect: connection refused · retrying every\n2s · showing data of 10:00:00\n")
	require.Contains(t, s, "build_report", "the last data stays")
	require.Len(t, strings.Split(s, "\n"), 24)

	b.press(t, m, "3") // the tasks view cannot load either
	require.Contains(t, screen(m), "✖ MySQL")
	b.src.fail(nil)
	b.press(t, m, "ctrl+r")
	require.NotContains(t, screen(m), "✖")
	require.NotEmpty(t, m.tasks.rows)

	// An error whose own words do not say what to do gets what the
	// command line and the log say (node.ErrorText).
	b.src.fail(errors.New("Redis: NOAUTH Authentication required."))
	b.press(t, m, "ctrl+r")
	require.Contains(t, strings.Join(strings.Fields(screen(m)), " "),
		"✖ Redis: NOAUTH Authentication required. (Redis asks for a password this process does not give: set redis.password and restart it)")
}

// While Redis does not answer, tasktop still shows what the task center
// holds: the pending counts, the header says Redis is down, Redis's
// figures read "?", and no queue is blamed for having no consumer. The
// workers and events last read stay, dated; a tasktop started while Redis
// is down says they are unknown.
func TestRedisDownShowsTheTaskCenter(t *testing.T) {
	t.Parallel()
	redisDown := func(src *fakeSource) {
		src.mu.Lock()
		defer src.mu.Unlock()
		st := *src.ov.Stats
		st.Queues = slices.Clone(st.Queues)
		for i := range st.Queues {
			q := &st.Queues[i]
			q.Backlog, q.LiveWorkers, q.ProcessedPerMin, q.SuccessRate10m = []int64{}, 0, 0, nil
		}
		st.Workers = nil
		src.ov = &Overview{Stats: &st, Series: src.ov.Series,
			RedisErr: errors.New("Redis: dial tcp 127.0.0.1:6379: connect: connection refused")}
	}
	m, b := setup(t, false)
	redisDown(b.src)
	b.press(t, m, "ctrl+r")
	s := screen(m)
	require.Contains(t, s, "REDIS DOWN · 135 pending in the task center")
	require.Contains(t, s, "✖ Redis: dial tcp 127.0.0.1:6379: connect: connection refused · retrying every\n2s · queues from the task center alone; workers, alerts and events of 10:00:00")
	require.Regexp(t, `(?m)^! build_report +120 +\? +0 +2 +\? .* lagging, 2 dead$`, s, "Redis's figures unknown, no consumer not claimed")
	require.NotContains(t, s, "no consumer")
	b.press(t, m, "2")
	require.Contains(t, screen(m), "node-a-w1", "the workers last read stay")

	fresh := fixture()
	redisDown(fresh)
	m2 := New(Options{Source: fresh, Actions: &fakeActions{src: fresh}, Now: func() time.Time { return now }})
	m2.noTick = true
	b2 := &testBundle{src: fresh}
	b2.settle(t, m2, m2.Init())
	require.Contains(t, screen(m2), "build_report", "the queues from the task center")
	require.NotContains(t, screen(m2), "events of")
	b2.press(t, m2, "2")
	require.Contains(t, screen(m2), "workers unknown: Redis does not answer")
	b2.press(t, m2, "4")
	require.Contains(t, screen(m2), "alerts and events unknown: Redis does not answer")

	// Redis answers again: its figures are back, the bar is gone.
	b.src.mu.Lock()
	b.src.ov = fixture().ov
	b.src.mu.Unlock()
	b.press(t, m, "1", "ctrl+r")
	s = screen(m)
	require.NotContains(t, s, "✖")
	require.Contains(t, s, "waiting 60")
}

// While the task center does not answer, tasktop still shows what Redis
// holds: the workers, each queue's backlog and throughput, the header
// says MySQL is down, the task center's figures read "?", and a count
// unknown is not taken for dead tasks gone or come. The alerts last read
// stay, dated; a tasktop started while MySQL is down shows Redis's
// figures from its first refresh.
func TestMySQLDownShowsRedis(t *testing.T) {
	t.Parallel()
	mysqlDown := func(src *fakeSource) {
		src.mu.Lock()
		defer src.mu.Unlock()
		st := *src.ov.Stats
		st.Queues = slices.Clone(st.Queues)
		for i := range st.Queues {
			q := &st.Queues[i]
			q.Pending, q.Running, q.Failed, q.Dead, q.Due, q.OldestDueSeconds, q.Paused = 0, 0, 0, 0, 0, 0, false
		}
		src.ov = &Overview{Stats: &st, Workers: src.ov.Workers, NodesUp: src.ov.NodesUp, Events: src.ov.Events,
			MySQLErr: errors.New("MySQL: dial tcp 127.0.0.1:3306: connect: connection refused")}
		src.taskErr = src.ov.MySQLErr
	}
	m, b := setup(t, false)
	mysqlDown(b.src)
	b.press(t, m, "ctrl+r")
	s := screen(m)
	require.Contains(t, s, "1 ALERT · MYSQL DOWN · 2/3 workers · 1 dead · backlog 60 · 420/min · ok 99.3%")
	require.Contains(t, strings.Join(strings.Fields(s), " "), "✖ MySQL: dial tcp 127.0.0.1:3306: connect: connection refused · retrying every 2s · Redis's figures alone; alerts of 10:00:00")
	require.Regexp(t, `(?m)^ +send_email +\? +20 +\? +\? +\? +420 +99.3% +\? +ok$`, s, "the task center's figures unknown, Redis's shown")
	require.Regexp(t, `(?m)^ *reports_low .*PAUSED`, s, "the pause last read stays")
	require.NotContains(t, s, "dead +", "no dead count")
	b.press(t, m, "2")
	require.Contains(t, screen(m), "node-a-w1")
	b.press(t, m, "4")
	require.Contains(t, screen(m), "no_consumer build_report", "the alerts last read stay")

	// Back: the counts come back, and dead tasks that were there before
	// are not new.
	b.src.mu.Lock()
	b.src.ov, b.src.taskErr = fixture().ov, nil
	b.src.mu.Unlock()
	b.press(t, m, "1", "ctrl+r")
	s = screen(m)
	require.NotContains(t, s, "✖")
	require.NotContains(t, s, "dead +")
	require.Contains(t, s, "waiting 60")

	fresh := fixture()
	mysqlDown(fresh)
	m2 := New(Options{Source: fresh, Actions: &fakeActions{src: fresh}, Now: func() time.Time { return now }})
	m2.noTick = true
	b2 := &testBundle{src: fresh}
	b2.settle(t, m2, m2.Init())
	s = screen(m2)
	require.Contains(t, s, "MYSQL DOWN")
	require.Contains(t, s, "send_email")
	require.NotContains(t, s, "alerts of")
	// Views read from the task center alone say they are not read, not
	// "loading…" for as long as it is down.
	b2.press(t, m2, "3")
	require.Contains(t, screen(m2), "tasks not read: retrying every 2s (the error above says why)")
	b2.press(t, m2, "5")
	require.Contains(t, screen(m2), "the audit log not read: retrying every 2s")
	b2.press(t, m2, "1")
	fresh.mu.Lock()
	fresh.ov, fresh.taskErr = fixture().ov, nil
	fresh.mu.Unlock()
	b2.press(t, m2, "ctrl+r")
	require.Regexp(t, `(?m)^  send_email .* 1 dead$`, screen(m2))
	require.NotContains(t, screen(m2), "dead +", "dead tasks are not new because the first count was unknown")
}

// tasktop serve's sessions share one read of the overview: a session
// completing a partial read with what it read before must not hand its
// alerts and workers to another session, which never read them.
func TestPartialOverviewIsCompletedPerSession(t *testing.T) {
	t.Parallel()
	for _, down := range []string{"MySQL", "Redis"} {
		m, b := setup(t, false)
		b.src.mu.Lock()
		st := *b.src.ov.Stats
		ov := &Overview{Stats: &st}
		if down == "MySQL" {
			ov.MySQLErr, ov.Workers = errors.New("MySQL: connection refused"), b.src.ov.Workers
		} else {
			ov.RedisErr = errors.New("Redis: connection refused")
		}
		b.src.ov = ov
		b.src.mu.Unlock()
		b.press(t, m, "ctrl+r")
		require.Contains(t, screen(m), "1 ALERT", "%s down: the first session keeps the alerts it read", down)

		m2 := New(Options{Source: b.src, Actions: &fakeActions{src: b.src}, Now: func() time.Time { return now }})
		m2.noTick = true
		b.settle(t, m2, m2.Init())
		require.NotContains(t, screen(m2), "ALERT", "%s down: a session opened during the outage read no alert", down)
		require.Nil(t, ov.Alerts, "%s down: the shared read is left as read", down)
	}
}

// An action kept waiting (a row lock, a worker that does not answer a
// kill) says so in the footer until it ends, past the five seconds after
// which messages fade.
func TestWorkingStaysWhileActing(t *testing.T) {
	t.Parallel()
	clk := &testClock{at: now}
	b := &testBundle{src: fixture(), acts: &fakeActions{}}
	b.acts.src = b.src
	m := New(Options{Source: b.src, Actions: b.acts, Now: clk.now})
	m.noTick = true
	b.settle(t, m, m.Init())
	b.press(t, m, "3", "r")
	cmd := m.key(keyMsg("y")) // the retry runs off the screen's loop: held here
	require.NotNil(t, cmd)
	clk.at = clk.at.Add(12 * time.Second)
	require.Contains(t, screen(m), "10:00:00 working… 12s")
	b.settle(t, m, cmd)
	require.NotContains(t, screen(m), "working")
	require.Contains(t, screen(m), "retry")
}

// At 80 columns a queue's state and an event's detail are cut; v shows
// the row under the cursor whole, and esc goes back to the table.
func TestRowInFull(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	require.Contains(t, screen(m), "ALERT, no consumer, lag…", "cut at 80 columns")
	b.press(t, m, "v")
	s := screen(m)
	require.Contains(t, s, "STATE    ALERT, no consumer, lagging, 2 dead\n")
	require.Contains(t, s, "QUEUE    build_report\n")
	require.Contains(t, s, "BACKLOG  40\n")
	b.press(t, m, "esc")
	require.Contains(t, screen(m), "QUEUE ")
	require.Nil(t, m.cur.row)

	b.src.mu.Lock()
	b.src.ov.Events[0].Detail = strings.Repeat("handler ignored cancellation ", 8) + "END"
	b.src.mu.Unlock()
	b.press(t, m, "4", "ctrl+r")
	require.NotContains(t, screen(m), "END")
	b.press(t, m, "j", "j", "v") // the alert rows first, then the abandoned event
	s = screen(m)
	require.Contains(t, s, "DETAIL   handler ignored cancellation")
	require.Contains(t, s, "END", "wrapped, not cut")
	require.Equal(t, 24, len(strings.Split(s, "\n")))
	b.press(t, m, "q")
	require.Nil(t, m.cur.row)
	require.Equal(t, viewEvents, m.view)

	b.press(t, m, "3", "v") // the tasks view has its detail
	require.Nil(t, m.cur.row)
}

// The detail names a worker's node, as `taskd show` does: task 1010 runs
// on node-a-w1, which has no run yet, so the node is its registration's.
func TestDetailWorkerNode(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3", "enter")
	require.Contains(t, screen(m), "Task 1010  running")
	require.Regexp(t, `(?m)^worker +node-a-w1 \(node node-a\)`, screen(m))
}

func TestDetail(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3", "down", "down", "enter")
	s := screen(m)
	require.Contains(t, s, "Task 1008  dead")
	require.Contains(t, s, "  \"to\": \"user1008@example.com\",")
	b.press(t, m, "G")
	s = screen(m)
	require.Contains(t, s, "#3   dead")
	require.Contains(t, s, "exit status 1: SMTP 451 try later")
	require.Contains(t, s, "stack trace line")
	b.press(t, m, "r", "y")
	require.Equal(t, []string{"retry [1008]"}, b.acts.Calls())
	b.press(t, m, "q")
	require.Nil(t, m.cur.detail)
	require.False(t, b.quit, "q leaves the detail first")
	b.press(t, m, "q") // at the top q asks, Cancel first
	require.Contains(t, screen(m), "Quit tasktop?")
	b.press(t, m, "enter")
	require.False(t, b.quit)
	b.press(t, m, "q", "y")
	require.True(t, b.quit)
	b.quit = false

	// A task that is gone says so and goes back.
	b.press(t, m, "/")
	b.typeText(t, m, "99999")
	b.press(t, m, "enter")
	require.Nil(t, m.cur.detail)
	require.Contains(t, screen(m), "task 99999 not found")
}

func TestResize(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	for _, size := range [][2]int{{120, 40}, {80, 24}, {60, 12}} {
		m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		for _, v := range []string{"1", "2", "3", "4", "5"} {
			b.press(t, m, v)
			lines := strings.Split(m.render(), "\n")
			require.Len(t, lines, size[1], "view %s at %v", v, size)
			for _, l := range lines {
				require.LessOrEqual(t, ansi.StringWidth(l), size[0], "view %s at %v: %q", v, size, l)
			}
		}
	}
}

func TestCtrlCQuitsFromAnywhere(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3", "x") // a dialog is open
	b.press(t, m, "ctrl+c")
	require.True(t, b.quit)
	require.Empty(t, b.acts.Calls())
}

func TestHandlerOutputCannotEscape(t *testing.T) {
	t.Parallel()
	require.Equal(t, "red bell", clean("\x1b[31mred\x1b[0m\t\abell"))
	require.Equal(t, "a …", oneLine("a\n\x1b[2Jb"))
	// A run's result of megabytes on one line: its first KiB, marked cut
	// (the detail shows 50 runs, cleaned at every refresh).
	long := oneLine(strings.Repeat("错", 1<<20))
	require.Equal(t, strings.Repeat("错", 341)+" …", long)
}

func TestSparkline(t *testing.T) {
	t.Parallel()
	require.Equal(t, "  ▁ ▄█", sparkline([]int64{1, 0, 4, 8}, 6))
	require.Equal(t, "▄█", sparkline([]int64{1, 0, 4, 8}, 2))
	require.Equal(t, "   ", sparkline(nil, 3))
}

// testClock gives the model a clock the test moves.
type testClock struct{ at time.Time }

func (c *testClock) now() time.Time { return c.at }

// TestNavigationStack: esc and q go back where the operator came from;
// q at the top asks before quitting.
func TestNavigationStack(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "G", "enter") // send_email's tasks
	require.Equal(t, viewTasks, m.view)
	require.Equal(t, "queue:send_email", m.tasks.filterText())
	b.press(t, m, "enter")
	require.NotNil(t, m.cur.detail)
	b.press(t, m, "esc")
	require.Nil(t, m.cur.detail)
	require.Equal(t, "queue:send_email", m.tasks.filterText(), "back to the queue's tasks")
	b.press(t, m, "esc")
	require.Equal(t, viewQueues, m.view, "esc returns to Queues")
	require.Empty(t, m.tasks.filterText(), "the tasks view has its filter of before")
	b.press(t, m, "q")
	require.Contains(t, screen(m), "Quit tasktop?")
	b.press(t, m, "esc")
	require.Nil(t, m.dialog)
	require.False(t, b.quit)

	// Tasks opened from its tab: esc clears the filter, q asks.
	b.press(t, m, "3", "s", "esc")
	require.Empty(t, m.tasks.filterText())
	require.Equal(t, viewTasks, m.view)
	b.press(t, m, "q")
	require.NotNil(t, m.dialog)
}

// TestWorkerDetail lists every running task of a worker, with its node
// and full id; each opens, and esc comes back.
func TestWorkerDetail(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "2", "down", "enter") // the dead worker is first
	s := screen(m)
	require.Contains(t, s, "Worker node-a-w1")
	require.Contains(t, s, "node       node-a")
	require.Regexp(t, `1003 +send_email`, s)
	require.Regexp(t, `1004 +send_email`, s)
	b.press(t, m, "down", "enter")
	require.NotNil(t, m.cur.detail)
	require.Equal(t, int64(1004), m.cur.detail.id)
	b.press(t, m, "esc")
	require.NotNil(t, m.cur.worker)
	b.press(t, m, "q")
	require.Nil(t, m.cur.worker)
	require.Equal(t, viewWorkers, m.view)
	require.Nil(t, m.dialog)
}

// TestHelpFromBindings: the help lists every binding of every group, fits
// 80×24 by scrolling, and hides actions when read-only.
func TestHelpFromBindings(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "?")
	seen := screen(m)
	require.Contains(t, seen, "↓/j pgdn: more")
	for !m.help.vp.AtBottom() {
		b.press(t, m, "down")
		seen += screen(m)
	}
	for _, g := range helpGroups() {
		require.Contains(t, seen, g.title)
		for _, k := range g.keys {
			require.Contains(t, seen, k.Help().Key+strings.Repeat(" ", 15-ansi.StringWidth(k.Help().Key)+1)+k.Help().Desc)
		}
	}
	require.Len(t, strings.Split(screen(m), "\n"), 24)
	b.press(t, m, "esc")
	require.Nil(t, m.help)

	ro, rb := setup(t, true)
	rb.press(t, ro, "?", "G")
	require.NotContains(t, screen(ro), "retry")
}

// TestUnknownKeySaysSo: a key with no meaning in a view says so, and the
// message expires; an error stays until esc or another view.
func TestUnknownKeySaysSo(t *testing.T) {
	t.Parallel()
	clk := &testClock{at: now}
	b := &testBundle{src: fixture(), acts: &fakeActions{}}
	m := New(Options{Source: b.src, Actions: b.acts, Now: clk.now})
	m.noTick = true
	b.settle(t, m, m.Init())
	b.press(t, m, "z")
	require.Contains(t, screen(m), "z: no meaning in this view")
	clk.at = clk.at.Add(statusTTL + time.Second)
	require.NotContains(t, screen(m), "no meaning")
	require.Contains(t, screen(m), "? help", "the key hints are back")

	b.press(t, m, "3", "/")
	b.typeText(t, m, "foo:bar")
	b.press(t, m, "enter")
	require.Contains(t, screen(m), `unknown filter "foo"`)
	clk.at = clk.at.Add(10 * time.Minute)
	require.Contains(t, screen(m), `unknown filter "foo"`, "an error stays")
	b.press(t, m, "1")
	require.NotContains(t, screen(m), `unknown filter`, "but not in another view")
	b.press(t, m, "3", "/")
	b.typeText(t, m, "foo:bar")
	b.press(t, m, "enter", "esc")
	require.NotContains(t, screen(m), `unknown filter`, "esc dismisses it")
}

// TestQueueTrouble: STATE names every trouble, worst first, and the
// queues sort by trouble: dead tasks piling up and a failing success rate
// are not "ok".
func TestQueueTrouble(t *testing.T) {
	t.Parallel()
	clk := &testClock{at: now}
	b := &testBundle{src: fixture(), acts: &fakeActions{}}
	m := New(Options{Source: b.src, Actions: b.acts, Now: clk.now})
	m.noTick = true
	m.w = 120
	b.settle(t, m, m.Init())
	b.src.mu.Lock()
	q := &b.src.ov.Stats.Queues[2] // send_email
	q.Dead, q.SuccessRate10m = 14, rate(0)
	b.src.ov.Alerts = append(b.src.ov.Alerts, Alert{Name: "dead_tasks send_email", Queue: "send_email", Firing: true, Since: now},
		Alert{Name: "success_rate send_email", Queue: "send_email", Firing: true, Since: now})
	b.src.mu.Unlock()
	clk.at = clk.at.Add(time.Minute)
	b.press(t, m, "ctrl+r")
	s := screen(m)
	require.Regexp(t, `(?m)^! send_email .* 2 ALERTS, dead \+13, 0\.0% succeed$`, s)
	require.Contains(t, s, "ok 0.0%", "the header agrees with the queue and its alert")
	require.Less(t, strings.Index(s, "send_email"), strings.Index(s, "reports_low"))

	// o sorts by the next column (QUEUE: by name), O reverses.
	b.press(t, m, "o")
	s = screen(m)
	require.Contains(t, s, "QUEUE▲")
	require.Less(t, strings.Index(s, "build_report"), strings.Index(s, "reports_low"))
	require.Less(t, strings.Index(s, "reports_low"), strings.Index(s, "send_email"))
	b.press(t, m, "O")
	s = screen(m)
	require.Contains(t, s, "QUEUE▼")
	require.Less(t, strings.Index(s, "send_email"), strings.Index(s, "build_report"))
	q2, ok := m.selectedQueue()
	require.True(t, ok)
	require.Equal(t, "build_report", q2.Name, "the cursor stays on its queue through the sorts")
}

// TestTaskColumns: TRY reads attempt/max, only waiting tasks have a due
// time, a cancelled periodic task is disabled, and a page sorts by any
// column.
func TestTaskColumns(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.src.mu.Lock()
	b.src.tasks[6].Type = task.Periodic // 1004, cancelled
	b.src.tasks[6].CronExpr = "0 3 * * *"
	b.src.tasks[2].RetryCount, b.src.tasks[2].Attempt, b.src.tasks[2].MaxRetry = 6, 14, 6 // 1008, dead
	b.src.mu.Unlock()
	b.press(t, m, "3")
	s := screen(m)
	require.Regexp(t, `(?m)^ +1004 disabled `, s)
	require.Regexp(t, `(?m)^ +1008 dead +send_email +send_email +7/7 +- exit status 1`, s, "no future due, TRY of the budget")
	require.Regexp(t, `(?m)^ +1007 pending .* 17m00s ago`, s)
	for range 2 { // ID, STATUS
		b.press(t, m, "o")
	}
	require.Contains(t, screen(m), "STATUS▲")
	require.Equal(t, task.Pending, m.tasks.rows[0].Status)
	ids, _, _ := m.tasks.targets()
	require.Equal(t, []int64{1010}, ids, "the cursor stays on its task, wherever the sort put it")
	require.Equal(t, int64(1010), m.tasks.rows[m.tasks.cur.pos].ID)
}

// TestEventsHideNeverFired: rules that never fired are not listed as
// resolved.
func TestEventsHideNeverFired(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "4")
	s := screen(m)
	require.Contains(t, s, "success_rate send_email")
	require.NotContains(t, s, "dead_tasks reports_low")
}

// TestLiveTail: l opens the output the worker publishes for a running
// task, follows its end, and esc goes back.
func TestLiveTail(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3", "l") // 1010, running
	require.Contains(t, screen(m), "task 1010 published no output")
	b.src.mu.Lock()
	b.src.tails = map[int64]*broker.TaskTail{1010: {ID: 1010, Attempt: 1, Worker: "node-a-w1", At: now.Add(-time.Second),
		Output: strings.Repeat("line\n", 40) + "step 41 of 50\x1b[2J\n"}}
	b.src.mu.Unlock()
	b.press(t, m, "ctrl+r")
	s := screen(m)
	require.Contains(t, s, "Output of task 1010, attempt 1 on node-a-w1 · live, published 1.0s ago")
	require.Contains(t, s, "step 41 of 50", "it follows the end")
	require.NotContains(t, s, "\x1b[2J")
	b.press(t, m, "esc")
	require.Nil(t, m.cur.tail)
	require.Equal(t, viewTasks, m.view)

	b.press(t, m, "enter", "l") // from the detail too
	require.NotNil(t, m.cur.tail)
	b.press(t, m, "q")
	require.NotNil(t, m.cur.detail, "back to the detail")
}

// TestQueueLimited: a queue's limit shows in its LIMIT column, and while
// the limit holds tasks back STATE says LIMITED, by what and how long;
// at 80 columns STATE keeps it.
func TestQueueLimited(t *testing.T) {
	t.Parallel()
	clk := &testClock{at: now}
	b := &testBundle{src: fixture(), acts: &fakeActions{}}
	m := New(Options{Source: b.src, Actions: b.acts, Now: clk.now})
	m.noTick = true
	m.w = 120
	b.settle(t, m, m.Init())
	b.src.mu.Lock()
	q := &b.src.ov.Stats.Queues[1] // reports_low
	q.Paused = false
	q.Limit = limit.Limit{MaxRunning: 2, Per: limit.PerGroup}
	q.Limited = &stats.Limited{By: "group", Groups: 3, ForMS: 40_000}
	b.src.mu.Unlock()
	b.press(t, m, "ctrl+r")
	require.Regexp(t, `(?m)^  reports_low .* ≤2/g +LIMITED 3 groups 40s$`, screen(m))
	m.w, m.h = 80, 24
	require.Regexp(t, `(?m)^  reports_low .*LIMITED 3 groups 40s$`, screen(m))
}

// TestDetailWrapsWideText wraps the detail's long lines at the screen's
// edge, never inside a character: a payload and an error message in
// Chinese, two columns a character, were cut at 80 columns and the rest
// could not be seen.
func TestDetailWrapsWideText(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	msg := "a" + strings.Repeat("中文😀", 40) + "尾"
	b.src.mu.Lock()
	tk := b.src.tasks[2] // 1008, dead
	tk.Payload = json.RawMessage(`{"k":"` + msg + `"}`)
	tk.LastResult = "错误：" + msg
	b.src.mu.Unlock()
	b.press(t, m, "3", "down", "down", "enter")
	require.Contains(t, screen(m), "Task 1008  dead")
	b.press(t, m, "G")
	s := screen(m)
	lines := strings.Split(s, "\n")
	require.Len(t, lines, 24)
	for _, l := range lines {
		require.LessOrEqual(t, ansi.StringWidth(l), 80, "%q", l)
	}
	// The result's lines, joined, are the whole message.
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "错误：") })
	require.GreaterOrEqual(t, i, 0, s)
	var joined strings.Builder
	for _, l := range lines[i:] {
		if strings.TrimSpace(l) == "" || strings.Contains(l, "esc back") {
			break
		}
		joined.WriteString(strings.TrimRight(l, " "))
	}
	require.Equal(t, "错误："+msg, joined.String())
}

// TestDetailLongTextsMadeOnce: a payload and a result of megabytes are
// indented, cleaned and wrapped once per content and width, not at each
// refresh (which kept tasktop at a third of a CPU), and cut to what can
// be scrolled, saying where all of it is.
func TestDetailLongTextsMadeOnce(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	items := make([]string, 40000)
	for i := range items {
		items[i] = fmt.Sprintf(`{"id":%d,"name":"第%d项"}`, i, i)
	}
	b.src.mu.Lock()
	tk := b.src.tasks[2] // 1008, dead
	tk.Payload = json.RawMessage(`{"items":[` + strings.Join(items, ",") + `]}`)
	tk.LastResult = strings.Repeat("exit status 1: 错误 output line\n", 100000)
	b.src.mu.Unlock()
	b.press(t, m, "3", "down", "down", "enter")
	d := m.cur.detail
	require.Contains(t, screen(m), "Task 1008  dead")
	for range 5 {
		b.press(t, m, "ctrl+r")
	}
	require.Equal(t, 1, d.payload.renders, "the payload is made once")
	require.Equal(t, 1, d.result.renders, "the result is made once")
	require.Less(t, d.vp.TotalLineCount(), 2500, "the view holds what can be scrolled: 1,000 lines of each long text")
	cut := regexp.MustCompile(`✂ cut: the (\w+) is ([0-9.]+ MiB), more than is shown here; taskd show 1008 -o json\nprints all of it`)
	found := cut.FindAllStringSubmatch(plain(d.vp.GetContent()), -1)
	require.Len(t, found, 2, "the payload and the result each say they were cut")
	require.Equal(t, [][]string{{"payload", "1.3 MiB"}, {"result", "3.2 MiB"}}, [][]string{found[0][1:], found[1][1:]})
	b.press(t, m, "G")
	require.Contains(t, screen(m), "taskd show 1008 -o json\nprints all of it", "the end of the view says where the rest is")

	m.Update(tea.WindowSizeMsg{Width: 60, Height: 20})
	require.Equal(t, 2, d.payload.renders, "a new width makes it again")
	b.src.mu.Lock()
	done := *tk // each read is a new task, as from the task center
	done.LastResult = "ok"
	b.src.tasks[2] = &done
	b.src.mu.Unlock()
	b.press(t, m, "ctrl+r")
	require.Equal(t, []int{2, 3}, []int{d.payload.renders, d.result.renders}, "a new result makes the result only")
	require.Contains(t, screen(m), "ok")
}

// TestLongIDsWhole: a task id past 99,999,999 (a day and a half at 1,000
// tasks a second) was cut to "1234567…" at 80 columns, naming no task.
func TestLongIDsWhole(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.src.mu.Lock()
	for i := range b.src.tasks {
		b.src.tasks[i].ID += 12345678000
	}
	b.src.tasks[0].RetryCount, b.src.tasks[0].MaxRetry = 99, 127 // and a try count of max_retry's range
	b.src.mu.Unlock()
	b.press(t, m, "3")
	s := screen(m)
	require.Regexp(t, `(?m)^ +12345679010 running .* 100/128 `, s)
	require.Regexp(t, `(?m)^ +12345679009 running +`, s)
	require.Regexp(t, `(?m)^ +12345678991 succeeded +`, s)

	b.src.mu.Lock()
	for i := range b.src.ov.Workers[0].Heartbeat.Slots {
		b.src.ov.Workers[0].Heartbeat.Slots[i].TaskID += 12345678000
	}
	b.src.mu.Unlock()
	b.press(t, m, "ctrl+r", "2", "down", "enter") // node-a-w1, after the dead one
	require.Regexp(t, `(?m)^ +12345679003 send_email `, screen(m))
}

// TestLongNamesKeepTheirEnds: at 80 columns queue names that share a long
// prefix were all cut to the same "queue_with_…": the cut takes out the
// middle, so each row still names its queue.
func TestLongNamesKeepTheirEnds(t *testing.T) {
	t.Parallel()
	require.Equal(t, "queue…mber_4", cutMiddle("queue_with_a_rather_long_name_number_4", 12))
	require.Equal(t, "队列_…名称_3", cutMiddle("队列_中文名字_很长很长的队列名称_3", 12))
	require.Equal(t, "short", cutMiddle("short", 12))
	require.Equal(t, "队列_…称_30", cutMiddle("队列_中文名字_很长很长的队列名称_30", 12), "a wide character across the cut is left out")
	m, b := setup(t, false)
	b.src.mu.Lock()
	for _, n := range []string{"4", "5"} {
		b.src.ov.Stats.Queues = append(b.src.ov.Stats.Queues, stats.Queue{Name: "queue_with_a_rather_long_name_number_" + n})
	}
	b.src.mu.Unlock()
	b.press(t, m, "ctrl+r")
	s := screen(m)
	require.Regexp(t, `(?m)^  queue…mber_4 `, s)
	require.Regexp(t, `(?m)^  queue…mber_5 `, s)
}

// TestNarrowTableEndsInItsLastColumn: at 60 columns the queues' STATE
// column kept its 24 cells and every line ended cut, in "…"; it now
// gives up what it must, and the header names it whole.
func TestNarrowTableEndsInItsLastColumn(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	m.Update(tea.WindowSizeMsg{Width: 60, Height: 20})
	b.press(t, m, "1")
	lines := strings.Split(screen(m), "\n")
	require.Regexp(t, `STATE *$`, lines[2])
	for _, l := range lines[3 : len(lines)-1] {
		require.LessOrEqual(t, ansi.StringWidth(l), 60)
		require.NotRegexp(t, ` ok +…$`, l, "a short state, and the line cut at the screen's edge")
	}
}

// TestLongStatusTakesTwoLines: an action's outcome that says why a task
// was left alone was cut at 80 columns before the why; it takes two
// lines while it shows, and the screen stays 24 lines.
func TestLongStatusTakesTwoLines(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3")
	m.setStatus("retry: 0 of 1 task retried; 1010 not changed, dead: attempt 4 now, not the attempt 3 shown: it ran or was retried meanwhile", nil)
	lines := strings.Split(screen(m), "\n")
	require.Len(t, lines, 24)
	require.Equal(t, "10:00:00 retry: 0 of 1 task retried; 1010 not changed, dead: attempt 4 now, not", strings.TrimRight(lines[22], " "))
	require.Regexp(t, `^the attempt 3 shown: it ran or was retried meanwhile +updated 10:00:00$`, lines[23])
	for _, l := range lines {
		require.LessOrEqual(t, ansi.StringWidth(l), 80)
	}
}

// A failed task waiting for its retry shows the occurrence that retry
// repeats beside its due time.
func TestDetailScheduledTime(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	at := b.src.tasks[4].PlanNextRun.Add(-time.Hour)
	b.src.tasks[4].ScheduledAt = &at // 1006, failed
	b.press(t, m, "3", "down", "down", "down", "down", "enter")
	s := screen(m)
	require.Contains(t, s, "Task 1006  failed")
	require.Regexp(t, `(?m)^due +\S+`, s)
	require.Regexp(t, `(?m)^scheduled +`+regexp.QuoteMeta(stamp(at)), s)
}

// A worker whose results have waited ResultsStuckAfter to be written is
// in trouble (it takes no new work); results batched for a moment are not.
func TestWorkerUnsaved(t *testing.T) {
	t.Parallel()
	w := broker.WorkerStatus{ID: "w1", LastBeat: now, Heartbeat: &broker.Heartbeat{ID: "w1", ResultsWaitingMS: 300}}
	state, bad := workerState(&w, time.Second)
	require.Equal(t, "idle", state)
	require.Zero(t, bad)
	w.Heartbeat.ResultsWaitingMS = broker.ResultsStuckAfter.Milliseconds()
	state, bad = workerState(&w, time.Second)
	require.Equal(t, "unsaved", state)
	require.Equal(t, 2, bad)
}

// TestColumnsFitTheirCells: a column is as wide as its cells, not its
// room: at 80 columns, worker ids of 9 characters in a WORKER column of
// 28 left the task each worker runs cut ("#1003 (+1) …"). A ranked
// column's cells are whole before a column ranked below it is shown, and
// get the room they need before a long result takes the rest.
// A table's columns do not narrow again while the terminal keeps its
// width: a count going from 1,000 back to 999 left every column to its
// right shifting on the next refresh. A new width measures afresh.
func TestColumnsDoNotNarrowBetweenRefreshes(t *testing.T) {
	t.Parallel()
	cols := []column{{title: "Q", width: 20, flex: 20}, {title: "N", width: 8, right: true}, {title: "STATE", width: 10, flex: 30}}
	rows := func(q, n string) []row { return []row{{cells: []string{q, n, "ok"}}} }
	var seen widest
	widths := func(r []row, width int) []int { _, w := fit(cols, r, width, &seen); return w }
	require.Equal(t, []int{9, 5, 5}, widths(rows("mail_high", "1,000"), 80))
	require.Equal(t, []int{9, 5, 5}, widths(rows("mail", "999"), 80), "as wide as before")
	require.Equal(t, []int{4, 3, 5}, widths(rows("mail", "999"), 81), "a new width")
}

// A column narrows again once its cells have been narrower for
// relaxAfter: a state as long as the line, shown a moment while Redis was
// away, pushed SH out of tasktop's queue table until the terminal was
// resized.
func TestColumnsNarrowOnceSettled(t *testing.T) {
	t.Parallel()
	cols := []column{{title: "Q", width: 4}, {title: "SH", width: 2, right: true, drop: 1}, {title: "STATE", width: 24, flex: 40}}
	rows := func(state string) []row { return []row{{cells: []string{"mail", "4", state}}} }
	at := now
	seen := widest{now: func() time.Time { return at }}
	shown := func(state string) []int { idx, _ := fit(cols, rows(state), 28, &seen); return idx }
	require.Equal(t, []int{0, 1, 2}, shown("ok"))
	require.Equal(t, []int{0, 2}, shown("no consumer, lag 2s"), "a long state takes SH's room")
	at = at.Add(relaxAfter / 2)
	require.Equal(t, []int{0, 2}, shown("ok"), "kept a while: no column jumps back and forth")
	at = at.Add(relaxAfter)
	require.Equal(t, []int{0, 1, 2}, shown("ok"), "settled: SH is back")
}

func TestColumnsFitTheirCells(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "2")
	require.Regexp(t, `(?m)^  node-a-w1 +node-a .* ok +#1003 \(\+1\) send_email +1m15s *$`, screen(m))

	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	b.press(t, m, "3")
	s := screen(m)
	require.Regexp(t, `(?m)^ +ID STATUS +CODE +QUEUE +TYPE +TRY +DUE +UPDATED LAST RESULT`, s)
	require.Regexp(t, `(?m)^ +1009 running +build_report build_report `, s, "the queue whole, and UPDATED kept")

	// An id longer than its column is cut and takes no ranked column's
	// place; it gets what the task it runs leaves.
	rows := []row{{cells: []string{"ip-10-0-1-23.eu-west-1.compute.internal-12345-a1b2c3d4", "node-a", "ip-10-0-1-23", "12345",
		"mail", "2.0s", "10", "ok", "#1003 send_email", "1.0s"}}}
	idx, widths := fit(workerColumns, rows, 80, nil)
	var titles []string
	for k, i := range idx {
		titles = append(titles, fmt.Sprintf("%s:%d", workerColumns[i].title, widths[k]))
	}
	require.Equal(t, []string{"WORKER:33", "NODE:6", "BEAT:4", "/MIN:4", "STATE:5", "TASK:16", "FOR:4"}, titles)

	// A long list of queues is shown whole where the terminal has room:
	// at 200 columns it was cut at 30 cells.
	queues := strings.Repeat("queue_x,", 12) + "send_email"
	rows[0].cells[4] = queues
	idx, widths = fit(workerColumns, rows, 200, nil)
	k := slices.IndexFunc(idx, func(i int) bool { return workerColumns[i].title == "QUEUES" })
	require.GreaterOrEqual(t, k, 0)
	require.Equal(t, len(queues), widths[k])
}

// Esc and a key that arrive in one write read as alt+key: taken as the
// two, "esc 2" leaves the task detail for the workers view, where it said
// "alt+2: no meaning in this view".
func TestEscAndAKeyInOneWrite(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3", "enter")
	require.Contains(t, screen(m), "Payload")
	_, cmd := m.Update(tea.KeyPressMsg{Code: '2', Mod: tea.ModAlt})
	b.settle(t, m, cmd)
	s := screen(m)
	require.NotContains(t, s, "no meaning")
	require.Contains(t, s, "[2 Workers]")
	require.NotContains(t, s, "Payload")
}

// The help wraps each key's description between words under its own
// column: at 60 columns its lines were cut mid-word at the screen's edge
// ("go to queues, workers, tasks, events, audi").
func TestHelpWrapsAt60Columns(t *testing.T) {
	t.Parallel()
	var st Styles
	whole, narrow := helpText(&st, false, 0), helpText(&st, false, 60)
	for _, l := range strings.Split(narrow, "\n") {
		require.LessOrEqual(t, ansi.StringWidth(l), 60, "%q", l)
	}
	require.Equal(t, strings.Fields(whole), strings.Fields(narrow), "no word cut or lost")
	require.NotEqual(t, whole, narrow, "some lines wrapped")
}

// The next page asked for after the filter changed, before the filter's
// first page is read (MySQL slow, or failing), is not there to turn to:
// tasktop, or the operator's SSH session, ended with an index out of
// range.
func TestNextPageBeforeTheFilteredPageArrives(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3")
	require.True(t, m.tasks.more)
	m.Update(keyMsg("s")) // its read is not answered yet
	require.NotPanics(t, func() {
		m.Update(keyMsg("]"))
		m.Update(keyMsg("pgdown"))
	})
	require.Empty(t, m.tasks.pages)
}

// An error of a read the screen no longer makes (the tasks of a view
// left) is not shown as if that server still failed: nothing retries it.
func TestErrorOfAViewLeftIsNotShown(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3")
	b.src.fail(errors.New("MySQL: no answer within 5s"))
	b.press(t, m, "ctrl+r")
	require.Contains(t, screen(m), "✖ MySQL")
	b.src.fail(nil)
	b.press(t, m, "1")
	require.NotContains(t, screen(m), "✖", "the queues view reads the overview alone, which answers")
}

// A count of all matching tasks asked for while the count of an earlier
// filter still ran is made once that one answers: the selection said
// "counting…" for good, and every action key waited for it.
func TestCountAgainAfterTheFilterChanged(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3")
	_, first := m.Update(keyMsg("A")) // its count not answered yet
	b.press(t, m, "A", "s", "A")
	require.Contains(t, screen(m), "counting")
	b.settle(t, m, first)
	require.NotContains(t, screen(m), "counting")
	require.Regexp(t, `ALL \d+ matching selected`, screen(m))
}

// Pages follow ids whatever order the page is sorted in: the next page
// starts below the smallest id shown, not below the last row.
func TestPagesFollowIdsWhenSorted(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3", "o")
	least := m.tasks.rows[0].ID
	for _, r := range m.tasks.rows {
		least = min(least, r.ID)
	}
	require.NotEqual(t, least, m.tasks.rows[len(m.tasks.rows)-1].ID, "sorted: the last row is not the smallest id")
	b.press(t, m, "]")
	require.Equal(t, least, b.src.queries[len(b.src.queries)-1].BeforeID)
}

// When the task under the cursor leaves the page, the cursor is on
// another task: the status line says so before an action key acts on it.
func TestCursorTaskLeavingSaysSo(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3", "down")
	gone := m.tasks.rows[m.tasks.cur.pos].ID
	b.src.mu.Lock()
	b.src.tasks = slices.DeleteFunc(b.src.tasks, func(t *task.Task) bool { return t.ID == gone })
	b.src.mu.Unlock()
	b.press(t, m, "ctrl+r")
	now := m.tasks.rows[m.tasks.cur.pos].ID
	require.NotEqual(t, gone, now)
	require.Contains(t, strings.Join(strings.Fields(screen(m)), " "),
		fmt.Sprintf("task %d is no longer on this page (changed past the filter, deleted, or the screen got shorter): the cursor is on task %d now", gone, now))
}

// When the queue under the cursor leaves the list, the status line names
// the queue the cursor is on now, before a key meant for the other acts.
func TestQueueCursorQueueLeavingSaysSo(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	q, ok := m.selectedQueue() // the first
	require.True(t, ok)
	b.src.mu.Lock()
	ov, st := *b.src.ov, *b.src.ov.Stats
	st.Queues = slices.DeleteFunc(slices.Clone(st.Queues), func(s stats.Queue) bool { return s.Name == q.Name })
	ov.Stats = &st
	b.src.ov = &ov
	b.src.mu.Unlock()
	b.press(t, m, "ctrl+r")
	now, ok := m.selectedQueue()
	require.True(t, ok)
	require.Contains(t, strings.Join(strings.Fields(screen(m)), " "),
		"queue "+q.Name+" is no longer listed: the cursor is on queue "+now.Name+" now")
}

// A task that leaves the page because of the action just taken on it
// leaves the action's result on the status line: it says why.
func TestActedTaskLeavingKeepsTheResult(t *testing.T) {
	t.Parallel()
	m, b := setup(t, false)
	b.press(t, m, "3", "x")
	require.Contains(t, screen(m), "Kill task 1010?")
	b.src.mu.Lock()
	b.src.tasks = slices.DeleteFunc(b.src.tasks, func(t *task.Task) bool { return t.ID == 1010 }) // killed past the filter
	b.src.mu.Unlock()
	b.press(t, m, "right", "enter")
	require.Contains(t, screen(m), "kill: 1 of 1 task killed (1010)")
	require.NotContains(t, screen(m), "no longer on this page")
}
