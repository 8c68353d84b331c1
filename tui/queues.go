package tui

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/stats"
)

// histKeep is the number of backlog samples kept per queue to tell a
// growing backlog.
const histKeep = 4

// lagAfterSeconds is the wait of the oldest due task past which a queue
// lags.
const lagAfterSeconds = 60

// deadWindow is how far back dead tasks count as growth.
const deadWindow = 10 * time.Minute

// Success rates over ten minutes below these are bad, then poor.
const (
	badSuccess  = 0.90
	poorSuccess = 0.99
)

// queuesView lists queues, the most troubled first.
type queuesView struct {
	cur    cursor
	sort   sorting
	filter string
	// hist holds each queue's last total backlogs, oldest first.
	hist map[string][]int64
	// dead holds each queue's dead counts over deadWindow, oldest first.
	dead map[string][]deadSample
}

type deadSample struct {
	at time.Time
	n  int64
}

// observe records a snapshot's backlogs and dead counts.
func (v *queuesView) observe(ov *Overview, now time.Time) {
	if ov == nil || ov.Stats == nil {
		return
	}
	for _, q := range ov.Stats.Queues {
		if ov.RedisErr != nil {
			delete(v.hist, q.Name) // the backlog is unknown: growth starts over
		} else {
			h := append(v.hist[q.Name], q.BacklogTotal())
			v.hist[q.Name] = h[max(0, len(h)-histKeep):]
		}
		if ov.MySQLErr != nil {
			continue // the dead count is unknown: not a drop to zero
		}
		d := append(v.dead[q.Name], deadSample{now, q.Dead})
		for len(d) > 1 && now.Sub(d[0].at) > deadWindow {
			d = d[1:]
		}
		v.dead[q.Name] = d
	}
}

func total(ns []int64) int64 {
	var t int64
	for _, n := range ns {
		t += n
	}
	return t
}

// trouble is one thing wrong with a queue, and how bad it is.
type trouble struct {
	text string
	sev  int // 3 bad, 2 worrying, 1 worth knowing
}

// troubles says what is wrong with a queue, worst first: a firing alert,
// dead tasks piling up, failing runs, no consumer, a full Redis or lag, a growing
// backlog, dead tasks waiting, a pause.
func (m *Model) troubles(q *stats.Queue) []trouble {
	v := &m.queues
	var out []trouble
	if m.ov != nil {
		n := 0
		for _, a := range m.ov.Alerts {
			if a.Firing && a.Queue == q.Name {
				n++
			}
		}
		switch {
		case n == 1:
			out = append(out, trouble{"ALERT", 3})
		case n > 1:
			out = append(out, trouble{fmt.Sprintf("%d ALERTS", n), 3})
		}
	}
	if d := v.dead[q.Name]; len(d) > 1 && q.Dead > d[0].n {
		out = append(out, trouble{fmt.Sprintf("dead +%d", q.Dead-d[0].n), 3})
	}
	if r := q.SuccessRate10m; r != nil && *r < poorSuccess {
		sev := 2
		if *r < badSuccess {
			sev = 3
		}
		out = append(out, trouble{fmt.Sprintf("%s succeed", percent(r)), sev}) // not "0.0% ok", which ends in ok
	}
	backlog := q.BacklogTotal()
	// Without Redis, consumers and backlog are unknown: not "no consumer".
	if !m.redisDown() && q.NoConsumer() {
		out = append(out, trouble{"no consumer", 3})
	}
	switch {
	case q.OldestDueSeconds > 0 && !q.Paused && m.redisFull():
		// Its due tasks wait because pushes are refused: say why, not
		// just that it lags.
		out = append(out, trouble{"redis full", 3})
	case q.OldestDueSeconds > lagAfterSeconds && !q.Paused:
		out = append(out, trouble{"lagging", 2})
	}
	if h := v.hist[q.Name]; len(h) == histKeep && backlog > 0 {
		growing := true
		for i := 1; i < len(h); i++ {
			growing = growing && h[i] > h[i-1]
		}
		if growing {
			out = append(out, trouble{"growing", 2})
		}
	}
	if q.Dead > 0 && !slices.ContainsFunc(out, func(t trouble) bool { return strings.HasPrefix(t.text, "dead") }) {
		out = append(out, trouble{fmt.Sprintf("%d dead", q.Dead), 1})
	}
	if q.Paused {
		out = append(out, trouble{"PAUSED", 1})
	}
	if q.Limited != nil {
		out = append(out, trouble{stats.LimitedText(q.Limited), 1})
	}
	slices.SortStableFunc(out, func(a, b trouble) int { return b.sev - a.sev })
	return out
}

// redisMemory is Redis's memory use as the overview on screen read it,
// nil when unknown.
func (m *Model) redisMemory() *broker.Memory {
	if ov := m.ov; ov != nil && ov.RedisErr == nil && ov.Stats != nil {
		return ov.Stats.RedisMemory
	}
	return nil
}

// redisFull reports whether the overview on screen found Redis at its
// maxmemory, refusing every push.
func (m *Model) redisFull() bool {
	r := m.redisMemory()
	return r != nil && r.Full()
}

// redisDown reports whether the overview on screen was read while Redis
// did not answer: its queues hold the task center's figures alone.
func (m *Model) redisDown() bool { return m.ov != nil && m.ov.RedisErr != nil }

// mysqlDown reports whether the overview on screen was read while the
// task center did not answer: its queues hold Redis's figures alone.
func (m *Model) mysqlDown() bool { return m.ov != nil && m.ov.MySQLErr != nil }

// worst is the severity of the worst trouble (0: none).
func worst(ts []trouble) int {
	if len(ts) == 0 {
		return 0
	}
	return ts[0].sev
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

// keepQueue runs change, which may reorder the queues (most troubled
// first), and keeps the cursor on the queue it was on: a `p` meant for one
// queue must not pause or resume the one that slid under the cursor.
func (m *Model) keepQueue(change func()) {
	q, ok := m.selectedQueue()
	change()
	if !ok {
		return
	}
	_, qs := m.queueRows(0)
	for i := range qs {
		if qs[i].Name == q.Name {
			m.queues.cur.pos = i
			return
		}
	}
	if m.view == viewQueues && m.queues.cur.pos < len(qs) {
		// Another queue is under the cursor now: say so before a key
		// meant for the one that left acts on it.
		m.setStatus(fmt.Sprintf("queue %s is no longer listed: the cursor is on queue %s now", q.Name, qs[m.queues.cur.pos].Name), nil)
	}
}

// selectedQueue returns the queue under the cursor.
func (m *Model) selectedQueue() (stats.Queue, bool) {
	_, qs := m.queueRows(0)
	if m.queues.cur.pos < len(qs) {
		return qs[m.queues.cur.pos], true
	}
	return stats.Queue{}, false
}

// queueColumns: at 80 columns STATE keeps its room, the sparkline and
// the finer figures go first.
var queueColumns = []column{
	{title: "QUEUE", width: 12, flex: 24, middle: true},
	{title: "SH", width: 2, right: true, drop: 7},
	// The counts as wide as count's longest, "999.9k": cut, 12.3k read "12.…".
	{title: "PEND", width: 6, right: true},
	{title: "BACKLOG", width: 7, right: true},
	{title: "RUN", width: 6, right: true},
	{title: "FAIL", width: 6, right: true, drop: 5},
	{title: "DEAD", width: 6, right: true},
	{title: "/MIN", width: 6, right: true},
	{title: "30 MIN", width: 8, flex: SeriesMinutes, drop: 6, fill: true},
	{title: "OK 10M", width: 6, right: true, drop: 4},
	{title: "OLDEST", width: 6, right: true, drop: 3},
	{title: "LIMIT", width: 6, flex: 16, drop: 8},
	{title: "STATE", width: 24, flex: 48},
}

// queueRows are the queues shown, as rows and in the rows' order: the
// most troubled first, or as sorted.
func (m *Model) queueRows(sparkW int) ([]row, []stats.Queue) {
	qs := m.queues.shown(m.ov)
	rows := make([]row, len(qs))
	for i := range qs {
		q := &qs[i]
		ts := m.troubles(q)
		sev := worst(ts)
		r := row{style: lipgloss.NewStyle()}
		switch {
		case sev >= 3:
			r.style, r.mark = m.st.Bad, "!"
		case sev > 0:
			r.style = m.st.Warn
		}
		state := make([]string, len(ts))
		for k, t := range ts {
			state[k] = t.text
		}
		if len(state) == 0 {
			state = []string{"ok"}
		}
		rate := -1.0
		if q.SuccessRate10m != nil {
			rate = *q.SuccessRate10m
		}
		backlog, perMin := count(q.BacklogTotal()), count(q.ProcessedPerMin)
		if m.redisDown() {
			backlog, perMin = "?", "?" // Redis's figures
		}
		pending, running, failed, dead, oldest := count(q.Pending), count(q.Running), count(q.Failed), count(q.Dead),
			ageOrDash(q.OldestDueSeconds)
		if m.mysqlDown() {
			pending, running, failed, dead, oldest = "?", "?", "?", "?", "?" // the task center's
		}
		r.cells = []string{
			q.Name, strconv.Itoa(q.Shards), pending, backlog, running, failed,
			dead, perMin, sparkline(m.ov.Series[q.Name], sparkW),
			percent(q.SuccessRate10m), oldest, limitCell(q.Limit), strings.Join(state, ", "),
		}
		r.keys = []any{q.Name, q.Shards, q.Pending, q.BacklogTotal(), q.Running, q.Failed, q.Dead, q.ProcessedPerMin,
			total(m.ov.Series[q.Name]), rate, q.OldestDueSeconds, q.Limit.Short(), sev}
		rows[i] = r
	}
	// By trouble first: the worst queue is the first row.
	rows, qs = sortBy(sorting{col: 12, desc: true}, rows, qs)
	return sortBy(m.queues.sort, rows, qs)
}

func (m *Model) queuesTable(width, height int) string {
	// The sparkline is drawn as wide as its column, which the other
	// columns' cells decide (its own are not measured: fill).
	cols := m.queues.sort.titled(queueColumns)
	rows, qs := m.queueRows(0)
	if len(rows) == 0 {
		return m.empty("no queues yet", width, height)
	}
	idx, widths := fit(cols, rows, width, &m.queues.cur.cols)
	for k, i := range idx {
		if cols[i].fill {
			for r := range rows {
				rows[r].cells[i] = sparkline(m.ov.Series[qs[r].Name], widths[k])
			}
		}
	}
	return renderTable(&m.st, cols, rows, &m.queues.cur, width, height)
}

// limitCell is a queue's limit in its column: "100/s ≤3/g serial", "-".
func limitCell(l limit.Limit) string {
	if l.IsZero() {
		return "-"
	}
	return l.Short()
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
	sorted := false
	m.keepQueue(func() { sorted = m.queues.sort.key(k, len(queueColumns)) })
	if sorted {
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
			m.confirm(fmt.Sprintf("Resume queue %s?", q.Name),
				"Its tasks are dispatched and started again, a backlog included.",
				"Resume", m.queueAction(Actions.Resume, "resume", q.Name))
			return nil, true
		}
		m.confirm(fmt.Sprintf("Pause queue %s?", q.Name),
			"No task of it is dispatched or started until it is resumed; running tasks finish.",
			"Pause", m.queueAction(Actions.Pause, "pause", q.Name))
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
				if err != nil {
					return "reshard " + name, err
				}
				return c.Sentence(), nil
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
