package tui

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/taskd/taskd/pkg/broker"
)

// lateBeat is the heartbeat age past which a live worker is shown late
// (three default heartbeat intervals).
const lateBeat = 15 * time.Second

// idleMinutes is how long a worker with nothing to do is ok before idle.
const idleMinutes = 5

type workersView struct {
	cur    cursor
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

// workerState is ok, idle, late, hung or dead, with how bad it is.
func workerState(w *broker.WorkerStatus, beat time.Duration) (string, int) {
	switch {
	case !w.Alive():
		return "dead", 2
	case slices.ContainsFunc(w.Heartbeat.Slots, func(s broker.Slot) bool { return s.Abandoned }):
		return "hung", 2
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

var workerColumns = []column{
	{title: "WORKER", width: 14, flex: 30},
	{title: "HOST", width: 10, drop: 4},
	{title: "PID", width: 6, right: true, drop: 5},
	{title: "QUEUES", width: 10, flex: 30, drop: 3},
	{title: "BEAT", width: 6, right: true},
	{title: "/MIN", width: 5, right: true},
	{title: "STATE", width: 5},
	{title: "TASK", width: 12, flex: 30},
	{title: "FOR", width: 6, right: true},
}

func (m *Model) workersTable(width, height int) string {
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
		if hb := w.Heartbeat; hb != nil {
			host, pid, queues = hb.Host, strconv.Itoa(hb.PID), strings.Join(hb.Queues, ",")
			slots := slices.Clone(hb.Slots)
			slices.SortFunc(slots, func(a, b broker.Slot) int { return a.Since.Compare(b.Since) })
			if len(slots) > 0 {
				task = fmt.Sprintf("#%d %s", slots[0].TaskID, slots[0].Code)
				if len(slots) > 1 {
					task = fmt.Sprintf("#%d (+%d) %s", slots[0].TaskID, len(slots)-1, slots[0].Code)
				}
				since = age(now.Sub(slots[0].Since))
			}
		}
		n, ok := perMin[w.ID]
		if !ok && len(w.Series) > 1 {
			n = w.Series[len(w.Series)-2].Processed // the last whole minute
		}
		r.cells = []string{w.ID, host, pid, queues, age(beat), count(n), state, task, since}
		rows[i] = r
	}
	if len(rows) == 0 {
		return m.empty("no workers have a heartbeat: is `taskd run` running?", width, height)
	}
	return renderTable(&m.st, workerColumns, rows, &m.workers.cur, width, height)
}

func (m *Model) workersKey(s string) tea.Cmd {
	if m.workers.cur.navigate(s, len(m.workers.shown(m.ov))) {
		return nil
	}
	switch s {
	case "esc":
		m.workers.filter = ""
	case "enter":
		ws := m.workers.shown(m.ov)
		if p := m.workers.cur.pos; p < len(ws) && ws[p].Heartbeat != nil && len(ws[p].Heartbeat.Slots) > 0 {
			return m.openDetail(ws[p].Heartbeat.Slots[0].TaskID)
		}
	}
	return nil
}
