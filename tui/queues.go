package tui

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/taskd/taskd/pkg/stats"
)

// histKeep is the number of backlog samples kept per queue to tell a
// growing backlog.
const histKeep = 4

// lagAfter is the wait of the oldest due task past which a queue lags.
const lagAfterSeconds = 60

// queuesView lists queues.
type queuesView struct {
	cur    cursor
	filter string
	// hist holds each queue's last total backlogs, oldest first.
	hist map[string][]int64
}

// observe records a snapshot's backlogs.
func (v *queuesView) observe(ov *Overview) {
	if ov == nil || ov.Stats == nil {
		return
	}
	for _, q := range ov.Stats.Queues {
		h := append(v.hist[q.Name], total(q.Backlog))
		v.hist[q.Name] = h[max(0, len(h)-histKeep):]
	}
}

func total(ns []int64) int64 {
	var t int64
	for _, n := range ns {
		t += n
	}
	return t
}

// problems says what is wrong with a queue, if anything.
func (v *queuesView) problems(q *stats.Queue) []string {
	var out []string
	backlog := total(q.Backlog)
	if !q.Paused && q.LiveWorkers == 0 && (backlog > 0 || q.OldestDueSeconds > 0) {
		out = append(out, "no worker")
	}
	if q.OldestDueSeconds > lagAfterSeconds {
		out = append(out, "lagging")
	}
	if h := v.hist[q.Name]; len(h) == histKeep && backlog > 0 {
		growing := true
		for i := 1; i < len(h); i++ {
			growing = growing && h[i] > h[i-1]
		}
		if growing {
			out = append(out, "growing")
		}
	}
	return out
}

// shown returns the queues that pass the filter.
func (v *queuesView) shown(ov *Overview) []stats.Queue {
	if ov == nil || ov.Stats == nil {
		return nil
	}
	var out []stats.Queue
	for _, q := range ov.Stats.Queues {
		if v.filter == "" || strings.Contains(q.Name, v.filter) {
			out = append(out, q)
		}
	}
	return out
}

// selectedQueue returns the queue under the cursor ("" when none).
func (m *Model) selectedQueue() (stats.Queue, bool) {
	qs := m.queues.shown(m.ov)
	if m.queues.cur.pos < len(qs) {
		return qs[m.queues.cur.pos], true
	}
	return stats.Queue{}, false
}

var queueColumns = []column{
	{title: "QUEUE", width: 12, flex: 24},
	{title: "SH", width: 2, right: true, drop: 6},
	{title: "PEND", width: 6, right: true},
	{title: "BACKLOG", width: 7, right: true},
	{title: "RUN", width: 4, right: true},
	{title: "FAIL", width: 4, right: true, drop: 4},
	{title: "DEAD", width: 4, right: true},
	{title: "/MIN", width: 5, right: true},
	{title: "30 MIN", width: 8, flex: SeriesMinutes, drop: 2},
	{title: "OK 10M", width: 6, right: true, drop: 5},
	{title: "OLDEST", width: 6, right: true, drop: 3},
	{title: "STATE", width: 14, flex: 24},
}

func (m *Model) queuesTable(width, height int) string {
	qs := m.queues.shown(m.ov)
	idx, widths := fit(queueColumns, width)
	sparkW := 10
	for k, i := range idx {
		if queueColumns[i].title == "30 MIN" {
			sparkW = widths[k]
		}
	}
	rows := make([]row, len(qs))
	for i := range qs {
		q := &qs[i]
		state := m.queues.problems(q)
		style := lipgloss.NewStyle()
		mark := ""
		if len(state) > 0 {
			style, mark = m.st.Bad, "!"
		}
		if q.Paused {
			state = append([]string{"PAUSED"}, state...)
			if mark == "" {
				style = m.st.Warn
			}
		}
		if len(state) == 0 {
			state = []string{"ok"}
		}
		backlog := count(total(q.Backlog))
		if len(q.Backlog) > 1 {
			backlog += "/" + strconv.Itoa(len(q.Backlog))
		}
		rows[i] = row{mark: mark, style: style, cells: []string{
			q.Name, strconv.Itoa(q.Shards), count(q.Pending), backlog, count(q.Running), count(q.Failed),
			count(q.Dead), count(q.ProcessedPerMin), sparkline(m.ov.Series[q.Name], sparkW),
			percent(q.SuccessRate10m), ageOrDash(q.OldestDueSeconds), strings.Join(state, ", "),
		}}
	}
	if len(rows) == 0 {
		return m.empty("no queues yet", width, height)
	}
	return renderTable(&m.st, queueColumns, rows, &m.queues.cur, width, height)
}

func ageOrDash(s float64) string {
	if s <= 0 {
		return "-"
	}
	return age(seconds(s))
}

func (m *Model) queuesKey(k tea.KeyPressMsg) (tea.Cmd, bool) {
	if m.queues.cur.navigate(k, len(m.queues.shown(m.ov))) {
		return nil, true
	}
	q, ok := m.selectedQueue()
	qk := queueKeys
	switch {
	case key.Matches(k, globalKeys.Back) && m.queues.filter != "":
		m.queues.filter = ""
	case key.Matches(k, qk.Open):
		if ok {
			before := m.tasks.q
			m.stack = append(m.stack, frame{view: viewQueues, page: m.cur, tasks: &before})
			m.tasks.setQuery(TaskQuery{Queue: q.Name})
			m.view = viewTasks
			return m.refresh(), true
		}
	case key.Matches(k, qk.Pause):
		if !ok || !m.canAct() {
			return nil, true
		}
		if q.Paused {
			return m.act(m.queueAction(Actions.Resume, q.Name)), true
		}
		m.confirm(fmt.Sprintf("Pause queue %s?", q.Name),
			"No task of it is dispatched or started until it is resumed; running tasks finish.",
			"Pause", m.queueAction(Actions.Pause, q.Name))
	case key.Matches(k, qk.Reshard):
		if ok && m.canAct() {
			m.askShards(q)
		}
	default:
		return nil, false
	}
	return nil, true
}

// askShards opens the reshard prompt, then its confirmation.
func (m *Model) askShards(q stats.Queue) {
	m.openPrompt(fmt.Sprintf("Shards for queue %s (now %d, 1-256): ", q.Name, q.Shards), "", func(val string) tea.Cmd {
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil || n < 1 || n > 256 {
			m.setStatus("", fmt.Errorf("reshard: %q is not a number of shards from 1 to 256", val))
			return nil
		}
		name := q.Name
		m.confirm(fmt.Sprintf("Reshard queue %s from %d to %d shards?", name, q.Shards, n),
			"Messages already queued are moved; none is lost or taken twice.", "Reshard",
			func(ctx context.Context) (string, error) {
				c, err := m.opt.Actions.Reshard(ctx, name, n)
				return queueChangeText(c), err
			})
		return nil
	})
}

// sortedNames returns the map's keys sorted.
func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
