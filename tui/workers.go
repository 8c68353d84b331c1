package tui

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/stats"
)

// lateBeat is the heartbeat age past which a live worker is shown late
// (three default heartbeat intervals).
const lateBeat = 15 * time.Second

// idleMinutes is how long a worker with nothing to do is ok before idle.
const idleMinutes = 5

type workersView struct {
	cur    cursor
	sort   sorting
	filter string
}

func (v *workersView) shown(ov *Overview) []broker.WorkerStatus {
	if ov == nil {
		return nil
	}
	var out []broker.WorkerStatus
	for _, w := range ov.Workers {
		if v.filter == "" || strings.Contains(w.ID, v.filter) ||
			(w.Heartbeat != nil && (strings.Contains(w.Heartbeat.Host, v.filter) || slices.Contains(w.Heartbeat.Queues, v.filter))) {
			out = append(out, w)
		}
	}
	return out
}

// workerState is ok, idle, late, unsaved (its results wait to be
// written), hung or dead, with how bad it is.
func workerState(w *broker.WorkerStatus, beat time.Duration) (string, int) {
	switch {
	case !w.Alive():
		return "dead", 2
	case slices.ContainsFunc(w.Heartbeat.Slots, func(s broker.Slot) bool { return s.Abandoned }):
		return "hung", 2
	case w.Heartbeat.ResultsStuck() > 0:
		return "unsaved", 2
	case beat > lateBeat:
		return "late", 1
	}
	if w.Heartbeat.Busy == 0 {
		var recent int64
		for _, mi := range w.Series[max(0, len(w.Series)-idleMinutes):] {
			recent += mi.Processed
		}
		if recent == 0 {
			return "idle", 0
		}
	}
	return "ok", 0
}

// workerColumns: worker ids are host-pid-random, so HOST and PID go
// first when narrow and WORKER keeps room for a whole id.
var workerColumns = []column{
	{title: "WORKER", width: 28, flex: 40},
	{title: "NODE", width: 8, flex: 16, drop: 2},
	{title: "HOST", width: 10, drop: 6},
	{title: "PID", width: 7, right: true, drop: 5},   // pid_max is 4194304 on 64-bit hosts
	{title: "QUEUES", width: 10, flex: 160, drop: 4}, // a wide terminal shows a long list whole
	{title: "BEAT", width: 6, right: true},
	{title: "/MIN", width: 6, right: true}, // "123.4k"
	{title: "STATE", width: 7},
	{title: "TASK", width: 12, flex: 30, drop: 3},
	{title: "FOR", width: 6, right: true},
}

// workerRows are the workers shown, as rows and in the rows' order: dead
// and hung ones first, or as sorted.
func (m *Model) workerRows() ([]row, []broker.WorkerStatus) {
	ws := m.workers.shown(m.ov)
	perMin := map[string]int64{}
	if m.ov != nil && m.ov.Stats != nil {
		for _, w := range m.ov.Stats.Workers {
			perMin[w.ID] = w.ProcessedPerMin
		}
	}
	now := m.opt.Now()
	rows := make([]row, len(ws))
	for i := range ws {
		w := &ws[i]
		beat := now.Sub(w.LastBeat)
		state, bad := workerState(w, beat)
		r := row{style: lipgloss.NewStyle()}
		switch bad {
		case 2:
			r.style, r.mark = m.st.Bad, "!"
		case 1:
			r.style = m.st.Warn
		}
		host, pid, queues, task, since := "-", "-", "-", "", ""
		var running time.Duration
		if hb := w.Heartbeat; hb != nil {
			host, pid, queues = hb.Host, strconv.Itoa(hb.PID), strings.Join(hb.Queues, ",")
			if ss := slots(w); len(ss) > 0 {
				task = fmt.Sprintf("#%d %s", ss[0].TaskID, ss[0].Code)
				if len(ss) > 1 {
					task = fmt.Sprintf("#%d (+%d) %s", ss[0].TaskID, len(ss)-1, ss[0].Code)
				}
				running = now.Sub(ss[0].Since)
				since = age(running)
			}
		}
		n, ok := perMin[w.ID]
		if !ok && len(w.Series) > 1 {
			n = w.Series[len(w.Series)-2].Processed // the last whole minute
		}
		r.cells = []string{w.ID, cmp.Or(w.Node, "-"), host, pid, queues, age(beat), count(n), state, task, since}
		r.keys = []any{w.ID, w.Node, host, pid, queues, beat, n, bad, task, running}
		rows[i] = r
	}
	rows, ws = sortBy(sorting{col: 7, desc: true}, rows, ws) // dead and hung first
	return sortBy(m.workers.sort, rows, ws)
}

func (m *Model) workersTable(width, height int) string {
	rows, _ := m.workerRows()
	if len(rows) == 0 {
		if m.redisDown() {
			return m.empty("workers unknown: Redis does not answer", width, height)
		}
		return m.empty("no workers have a heartbeat: is `taskd run` running?", width, height)
	}
	return renderTable(&m.st, m.workers.sort.titled(workerColumns), rows, &m.workers.cur, width, height)
}

func (m *Model) workersKey(k tea.KeyPressMsg) (tea.Cmd, bool) {
	_, ws := m.workerRows()
	switch {
	case m.workers.cur.navigate(k, len(ws)), m.workers.sort.key(k, len(workerColumns)):
	case key.Matches(k, globalKeys.Back) && m.workers.filter != "":
		m.workers.filter = ""
	case key.Matches(k, workerKeys.Open):
		if p := m.workers.cur.pos; p < len(ws) {
			m.push()
			m.cur = page{worker: &workerDetail{id: ws[p].ID}}
		}
	case key.Matches(k, stepKeys.Locks):
		return m.openLocks(), true
	default:
		return nil, false
	}
	return nil, true
}

// workerDetail shows one worker: its full id, node, host and every task
// it runs, each of which opens.
type workerDetail struct {
	id  string
	cur cursor
}

// worker returns the worker shown, from the last overview.
func (m *Model) worker(id string) (broker.WorkerStatus, bool) {
	if m.ov != nil {
		for _, w := range m.ov.Workers {
			if w.ID == id {
				return w, true
			}
		}
	}
	return broker.WorkerStatus{}, false
}

// slots are a worker's running tasks, longest running first.
func slots(w *broker.WorkerStatus) []broker.Slot {
	if w.Heartbeat == nil {
		return nil
	}
	s := slices.Clone(w.Heartbeat.Slots)
	slices.SortFunc(s, func(a, b broker.Slot) int { return a.Since.Compare(b.Since) })
	return s
}

func (m *Model) workerDetailKey(k tea.KeyPressMsg) (tea.Cmd, bool) {
	d := m.cur.worker
	w, _ := m.worker(d.id)
	ss := slots(&w)
	switch {
	case d.cur.navigate(k, len(ss)):
	case key.Matches(k, globalKeys.Back, globalKeys.Quit):
		return m.back(), true
	case key.Matches(k, workerKeys.Open):
		if d.cur.pos < len(ss) {
			return m.openDetail(ss[d.cur.pos].TaskID), true
		}
	case key.Matches(k, tailKey):
		if d.cur.pos < len(ss) {
			return m.openTail(ss[d.cur.pos].TaskID), true
		}
	default:
		return nil, false
	}
	return nil, true
}

var slotColumns = []column{
	{title: "TASK", width: 20, right: true}, // as wide as its ids
	{title: "CODE", width: 12, flex: 30, middle: true},
	{title: "QUEUE", width: 10, flex: 24, drop: 2, middle: true},
	{title: "ATT", width: 3, right: true, drop: 1}, // the attempt: the fencing token, not the retry budget of TRY in Tasks
	{title: "FOR", width: 7, right: true},
	{title: "STATE", width: 9},
}

func (m *Model) workerDetailView(width, height int) string {
	d := m.cur.worker
	w, ok := m.worker(d.id)
	if !ok {
		return m.empty("worker "+d.id+" is no longer listed", width, height)
	}
	now := m.opt.Now()
	state, _ := workerState(&w, now.Sub(w.LastBeat))
	var b strings.Builder
	b.WriteString(m.st.Title.Render("Worker "+w.ID) + "  " + state + "\n")
	kv := func(k, v string) { fmt.Fprintf(&b, "%-10s %s\n", k, v) }
	node, host := cmp.Or(w.Node, "-"), "-"
	if hb := w.Heartbeat; hb != nil {
		host = fmt.Sprintf("%s (pid %d)", hb.Host, hb.PID)
		kv("node", node)
		kv("host", host)
		kv("queues", strings.Join(hb.Queues, ", "))
		busy := fmt.Sprintf("%d busy", len(hb.Slots))
		if hb.Capacity > 0 {
			busy += fmt.Sprintf(" of %d", hb.Capacity)
		}
		kv("slots", busy)
		if d := hb.ResultsStuck(); d > 0 {
			// Two short lines: the detail is read at 80 columns.
			kv("results", m.st.Bad.Render("waiting "+stats.Roughly(d)+" to be written; it takes no new work"))
			kv("", "the task center refuses them or does not answer: see its node's log")
		}
	} else {
		kv("node", node)
		if w.Drained {
			kv("recovery", "drained: its unfinished work was handed back")
		}
	}
	kv("heartbeat", stamp(w.LastBeat)+" ("+age(now.Sub(w.LastBeat))+" ago)")
	ss := slots(&w)
	head := strings.Count(b.String(), "\n") + 1
	b.WriteString("\n")
	if len(ss) == 0 {
		b.WriteString(m.st.Dim.Render("no running task"))
		return b.String()
	}
	rows := make([]row, len(ss))
	for i, sl := range ss {
		st := "running"
		style := m.st.Good
		if sl.Abandoned {
			st, style = "abandoned", m.st.Bad
		}
		rows[i] = row{style: style, cells: []string{strconv.FormatInt(sl.TaskID, 10), sl.Code, sl.Queue,
			strconv.Itoa(sl.Attempt), age(now.Sub(sl.Since)), st}}
	}
	return b.String() + renderTable(&m.st, slotColumns, rows, &d.cur, width, max(2, height-head))
}
