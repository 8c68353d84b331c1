package tui

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/taskd/taskd/pkg/alert"
	"github.com/taskd/taskd/pkg/recovery"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/watchdog"
)

// eventsView lists the alerts, firing ones first, then the watchdog's
// events, newest first.
type eventsView struct {
	cur    cursor
	sort   sorting
	filter string
}

func (m *Model) eventsKey(k tea.KeyPressMsg) (tea.Cmd, bool) {
	switch {
	case m.events.cur.navigate(k, len(m.eventRows())), m.events.sort.key(k, len(eventColumns)):
	case key.Matches(k, globalKeys.Back) && m.events.filter != "":
		m.events.filter = ""
	default:
		return nil, false
	}
	return nil, true
}

var eventColumns = []column{
	{title: "TIME", width: 8},
	{title: "KIND", width: 14}, // "slot_abandoned", "redispatched" whole
	{title: "WHERE", width: 24, flex: 40},
	{title: "TASK", width: 20, right: true, drop: 2}, // as wide as its ids
	{title: "DETAIL", width: 20, flex: 120},
}

func (m *Model) eventsTable(width, height int) string {
	rows := m.eventRows()
	if len(rows) == 0 {
		if m.redisDown() {
			return m.empty("alerts and events unknown: Redis does not answer", width, height)
		}
		return m.empty("no alerts and no watchdog events", width, height)
	}
	return renderTable(&m.st, m.events.sort.titled(eventColumns), rows, &m.events.cur, width, height)
}

// eventRows are the alerts, firing first, then the events of recovery,
// the watchdog and the locks, newest first (or as sorted). Rules that
// never fired are not shown: they say nothing.
func (m *Model) eventRows() []row {
	var rows []row
	match := func(parts ...string) bool {
		return m.events.filter == "" || strings.Contains(strings.Join(parts, " "), m.events.filter)
	}
	if m.ov != nil {
		for _, firing := range []bool{true, false} {
			for _, a := range m.ov.Alerts {
				if a.Firing != firing || !match(a.Name, a.Summary) || (!a.Firing && !a.Pending && a.Since.IsZero()) {
					continue
				}
				r := row{style: m.st.Dim, cells: []string{clock(a.Since), "resolved", a.Name, "", clean(a.Summary)}}
				if a.Pending {
					r = row{style: m.st.Warn, cells: []string{clock(a.Since), "pending", a.Name, "", clean(a.Summary)}}
				}
				if firing {
					r = row{style: m.st.Bad, mark: "!", cells: []string{clock(a.Since), "FIRING", a.Name, "", clean(a.Summary)}}
				}
				r.keys = []any{a.Since, r.cells[1], a.Name, int64(0), a.Summary}
				rows = append(rows, r)
			}
		}
		for _, e := range m.ov.Events {
			where := strings.TrimSpace(cmp.Or(e.WorkerID, e.Node) + " " + e.Queue)
			if e.WorkerID != "" && e.Node != "" && !strings.HasPrefix(e.WorkerID, e.Node) {
				where = strings.TrimSpace(e.Node + " " + e.WorkerID + " " + e.Queue)
			}
			if !match(e.Kind, where, e.Code, e.Detail) {
				continue
			}
			id := ""
			if e.TaskID > 0 {
				id = strconv.FormatInt(e.TaskID, 10)
			}
			style := m.st.Warn
			if eventBad[e.Kind] {
				style = m.st.Bad
			}
			rows = append(rows, row{style: style, cells: []string{clock(e.At), e.Kind, where, id, oneLine(e.Detail)},
				keys: []any{e.At, e.Kind, where, e.TaskID, e.Detail}})
		}
	}
	rows, _ = sortBy[int](m.events.sort, rows, nil)
	return rows
}

// eventBad are the event kinds that mean work was lost or stuck.
var eventBad = map[string]bool{watchdog.KindAbandoned: true, recovery.KindDrained: true, recovery.KindPoisoned: true,
	alert.KindLockLost: true}

// auditView lists the audit log, newest first, one page at a time.
type auditView struct {
	cur    cursor
	sort   sorting
	filter string
	rows   []store.AuditEntry
	loaded bool
	pages  []int64
}

func (v *auditView) before() int64 {
	if len(v.pages) == 0 {
		return 0
	}
	return v.pages[len(v.pages)-1]
}

func (m *Model) auditKey(k tea.KeyPressMsg) (tea.Cmd, bool) {
	v := &m.audit
	switch {
	case key.Matches(k, auditKeys.NextPage):
		if len(v.rows) > 0 {
			v.pages = append(v.pages, v.rows[len(v.rows)-1].ID)
			v.cur = cursor{}
			return m.refresh(), true
		}
	case key.Matches(k, auditKeys.PrevPage):
		if len(v.pages) > 0 {
			v.pages = v.pages[:len(v.pages)-1]
			v.cur = cursor{}
			return m.refresh(), true
		}
	case key.Matches(k, globalKeys.Back) && v.filter != "":
		v.filter = ""
	case v.cur.navigate(k, len(m.auditRows())), v.sort.key(k, len(auditColumns)):
	default:
		return nil, false
	}
	return nil, true
}

var auditColumns = []column{
	{title: "ID", width: 20, right: true, drop: 3},
	{title: "TIME", width: 14, drop: 4},
	{title: "WHO", width: 18, flex: 28},
	{title: "ACTION", width: 8, flex: 16}, // "cron timezone" whole
	{title: "TARGET", width: 18, flex: 60},
	{title: "CHANGED", width: 7, right: true},
}

func (m *Model) auditTable(width, height int) string {
	rows := m.auditRows()
	if len(rows) == 0 {
		msg := m.notYet(loadAudit, "the audit log")
		if m.audit.loaded {
			msg = "no operator actions recorded"
		}
		return m.empty(msg, width, height)
	}
	return renderTable(&m.st, m.audit.sort.titled(auditColumns), rows, &m.audit.cur, width, height)
}

func (m *Model) auditRows() []row {
	var rows []row
	for _, e := range m.audit.rows {
		who := e.Actor
		if e.Origin != "" {
			who += "@" + e.Origin
		}
		if m.audit.filter != "" && !strings.Contains(strings.Join([]string{who, e.Action, e.Target}, " "), m.audit.filter) {
			continue
		}
		rows = append(rows, row{style: lipgloss.NewStyle(), cells: []string{strconv.FormatInt(e.ID, 10), e.CreatedAt.Local().Format("01-02 15:04:05"),
			clean(who), e.Action, clean(e.Target), fmt.Sprint(e.Affected)},
			keys: []any{e.ID, e.CreatedAt, who, e.Action, e.Target, e.Affected}})
	}
	rows, _ = sortBy[int](m.audit.sort, rows, nil)
	return rows
}
