package store

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/taskd/taskd/pkg/task"
)

// All SQL of the task center. Every due or expiry comparison uses NOW(3).

// queueOf is the queue a row of task_center (as alias t) goes to: its own
// queue, else the one the nodes running its code's handler recorded
// (task_route: rows INSERTed with no queue go where their consumers
// are), else its code. One primary-key lookup of a small table per row.
func queueOf(t string) string {
	return routed(t, routeOf(t+".task_code"))
}

// routeOf is the queue task_route holds for the task code code (NULL when
// none). The table's collation ignores case and trailing spaces; task
// codes do not (a handler of send_email does not run SEND_EMAIL), so the
// route's own code is compared byte for byte outside the subquery: MariaDB
// caches a correlated subquery's result by the outer value under the
// column's collation, so a comparison inside it would answer for
// SEND_EMAIL what it answered for send_email.
func routeOf(code string) string {
	return "IF(BINARY (SELECT r.task_code FROM task_route r WHERE r.task_code = " + code + ") = BINARY " + code +
		", (SELECT r.queue FROM task_route r WHERE r.task_code = " + code + "), NULL)"
}

// zoneOf is the time zone a periodic task of task_center (as alias t)
// runs in: its own, else the cluster's default (task_setting
// cron_timezone), so that every node computes its runs alike. The
// subquery is not correlated: read once per statement.
func zoneOf(t string) string {
	return "IF(" + t + ".timezone = '', COALESCE((SELECT s.value FROM task_setting s WHERE s.name = '" +
		SettingCronTimezone + "'), ''), " + t + ".timezone)"
}

// routed is the queue of row t given route, the queue task_route holds for
// its code (NULL when none).
func routed(t, route string) string {
	return "IF(" + t + ".queue = '', COALESCE(" + route + ", " + t + ".task_code), " + t + ".queue)"
}

// routedGroups makes the queue of each row of grouped, a query grouped by
// queue and task_code, the queue its tasks go to (queueOf), as column q
// before cols: one lookup of task_route per group instead of one per task.
func routedGroups(grouped, cols string) string {
	return "SELECT " + routed("g", "r.queue") + " AS q, " + cols + " FROM (" + grouped +
		") g LEFT JOIN task_route r ON r.task_code = g.task_code AND BINARY r.task_code = BINARY g.task_code"
}

const qNow = `SELECT UNIX_TIMESTAMP(NOW(3))`

const qAutoIncStep = `SELECT @@auto_increment_increment`

// qAutoIncStepNow is qAutoIncStep and the database clock.
const qAutoIncStepNow = `SELECT @@auto_increment_increment, UNIX_TIMESTAMP(NOW(3))`

// unixOf reads DATETIME column col as Unix seconds, or as zero when the
// row holds a date UNIX_TIMESTAMP cannot convert: a seed-style INSERT may
// write '0000-00-00 00:00:00' where the server's sql_mode lets it, and
// one such row must not fail every claim or listing that reads it. In a
// claim, zero is due now.
func unixOf(col, zero string) string {
	return "COALESCE(UNIX_TIMESTAMP(" + col + "), " + zero + ")"
}

// zeroAsNow is DATETIME column col where a write reads it back into a
// NOT NULL column: NOW(3) in place of a zero date a seed-style INSERT
// stored, as unixOf makes such a task due now. Under NO_ZERO_DATE (MySQL
// 8's default sql_mode) an expression over a zero date reads as NULL,
// and a strict server refused the whole write ("Column
// 'plan_next_run_at' cannot be null"): the task's result was never
// written and recovery ran it again and again. COALESCE does not catch
// it (it passes the zero date on as it is); the comparison does, under
// either mode.
func zeroAsNow(col string) string {
	return "IF(" + col + " >= '1000-01-01', " + col + ", NOW(3))"
}

// taskColumns is the select list for a whole task; scanTask reads it.
var taskColumns = `id, task_code, task_type, ` + queueOf("task_center") + `, payload, COALESCE(cron_expr, ''), ` + zoneOf("task_center") + `,
	priority, delay, timeout, max_retry, retry_count, status, COALESCE(unique_key, ''), attempt,
	crash_count, worker_id, ` + unixOf("plan_next_run_at", "''") + `, UNIX_TIMESTAMP(last_run_at),
	UNIX_TIMESTAMP(dispatched_at), UNIX_TIMESTAMP(started_at), COALESCE(last_result, ''),
	` + unixOf("created_at", "''") + `, ` + unixOf("updated_at", "''") + `, COALESCE(parent_id, 0), COALESCE(then_spec, ''),
	COALESCE(batch_id, 0), group_key, COALESCE(released_key, ''), UNIX_TIMESTAMP(scheduled_at)`

var qTaskGet = `SELECT ` + taskColumns + ` FROM task_center WHERE id = ?`

// qTaskGetStill reads a task and whether its row has not changed for
// stillFor (TaskGetStill); qTaskGetStillBrief leaves out the payload and
// the last result.
var (
	qTaskGetStill      = `SELECT ` + taskColumns + `, ` + stillCol + ` FROM task_center WHERE id = ?`
	qTaskGetStillBrief = `SELECT ` + briefColumns("''") + `, ` + stillCol + ` FROM task_center WHERE id = ?`
	// stillCol compares in DATETIME, the session's zone, as updated_at is
	// written: no conversion to tell apart.
	stillCol = fmt.Sprintf(`updated_at <= NOW(3) - INTERVAL %d MICROSECOND`, stillFor.Microseconds())
)

// qByUniqueKeys finds the tasks of one code holding any of a set of unique
// keys: one range of uk_code_unique.
const qByUniqueKeys = `SELECT unique_key, id, task_code FROM task_center WHERE task_code = ? AND unique_key IN (%s)`

// exactCode matches one task code exactly, as workers and Redis keys take
// it (two arguments, the code twice): the column's collation folds case
// and trailing spaces, so its own comparison, which uk_code_unique
// serves, is kept beside a byte-for-byte one. "cron remove HELLO" is not
// hello's.
const exactCode = `task_code = ? AND task_code = BINARY ?`

var qTaskByUnique = `SELECT ` + taskColumns + ` FROM task_center WHERE ` + exactCode + ` AND unique_key = ?`

// qInsertRow is one VALUES tuple of an insert. plan_next_run_at is an
// absolute instant when the second-to-last argument is set, else NOW(3) plus
// a delay in microseconds. A row inserted dispatched (status 1) is set as
// claimSQL sets a claimed one: attempt 1, dispatched_at NOW(3).
const qInsertHead = `INSERT INTO task_center (task_code, task_type, queue, payload, cron_expr, timezone,
	priority, delay, timeout, max_retry, unique_key, then_spec, batch_id, trace_parent, group_key,
	status, attempt, dispatched_at, plan_next_run_at) VALUES `

const qInsertRow = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
	?, ?, IF(? = 1, NOW(3), NULL), COALESCE(FROM_UNIXTIME(?), NOW(3) + INTERVAL ? MICROSECOND))`

// qClaimCandidates selects due tasks in priority, then due-time order, with
// everything a message needs and the database clock. The inner union has one
// branch per priority so that each branch reads one bounded range of
// idx_lane, the priority's lane: the cost is proportional to the batch,
// never to the number of future rows (later in the lane) or of the rows in
// other lanes. Only the chosen ids are then read by primary key.
var qClaimCandidates = claimCandidatesSQL(0)

// claimCandidatesSQL is qClaimCandidates for tasks due within ahead of
// now (a claim ahead of the due time, see TaskClaimDueIn).
func claimCandidatesSQL(ahead time.Duration) string {
	var b strings.Builder
	b.WriteString(`SELECT t.id, t.attempt, t.task_code, t.task_type, ` + queueOf("t") + `, t.payload, COALESCE(t.cron_expr, ''),
	` + zoneOf("t") + `, t.priority, t.timeout, t.max_retry, t.retry_count, COALESCE(t.unique_key, ''), t.trace_parent,
	` + unixOf("t.plan_next_run_at", "0") + `, UNIX_TIMESTAMP(NOW(3)), COALESCE(t.then_spec, ''), COALESCE(t.batch_id, 0), t.group_key,
	UNIX_TIMESTAMP(t.scheduled_at) FROM (SELECT id FROM (`)
	for p := 0; p <= 9; p++ {
		if p > 0 {
			b.WriteString(" UNION ALL ")
		}
		fmt.Fprintf(&b, "(SELECT id, lane, lane_at FROM task_center FORCE INDEX (idx_lane)"+
			" WHERE lane = %d AND lane_at <= "+dueBy(ahead)+" ORDER BY lane_at, id LIMIT ?)", p)
	}
	b.WriteString(") u ORDER BY lane, lane_at, id LIMIT ?) c STRAIGHT_JOIN task_center t ON t.id = c.id")
	return b.String()
}

// dueBy is the latest due time a claim takes: now, or ahead of now. It is
// written into the statement, not bound, so that the argument lists stay
// those of a claim at the due time.
func dueBy(ahead time.Duration) string {
	if ahead <= 0 {
		return "NOW(3)"
	}
	return fmt.Sprintf("NOW(3) + INTERVAL %d MICROSECOND", ahead.Microseconds())
}

// claimCandidateArgs is the number of LIMIT placeholders in qClaimCandidates
// before the outer one.
const claimCandidateArgs = 10

// claimSQL is the compare-and-set that claims candidates, fenced on the
// attempt each was read at: only rows still pending (or failed and due) at
// that attempt move, so of several schedulers racing for a row exactly one
// wins, and attempt + 1 is the new fencing token. When every candidate
// moved, the caller knows each new attempt without reading the rows back.
//
// By primary key (see batchSQL): with few due rows the optimizer may
// otherwise prefer a range of a status index, whose next-key locks
// (REPEATABLE READ) reach the first dispatched row beyond the range. A
// worker's open mark-running transaction on that row then blocks every
// claim for the lock wait timeout, and recovery's hand-backs queue behind
// the claim: one stalled worker (SIGSTOP, GC pause, slow network) froze
// dispatch for the whole fleet. By primary key the claim locks only its
// candidates; the index is forced because on a small table the optimizer
// prefers a scan, which locks every row it reads and so waits on any row
// someone else holds (see locked.go).
func claimSQL(fences []Fence, token uint64, perRow bool, ahead time.Duration) []stmt {
	return batchSQL(fenceIDs(fences), perRow, nil, func(b *byID, _ bool) {
		b.sql("UPDATE task_center FORCE INDEX (PRIMARY) SET status = 1, attempt = attempt + 1, dispatched_at = NOW(3), worker_id = '', claim_token = ")
		b.arg(token)
		b.sql(" WHERE ")
		b.in()
		b.sql(" AND attempt = ")
		b.col(func(i int) any { return fences[i].Attempt })
		b.sql(" AND status IN (0, 4) AND plan_next_run_at <= " + dueBy(ahead))
	})
}

// qClaimed reads back the rows a claim won, by its claim token, when some
// candidates were lost to another scheduler.
const qClaimed = `SELECT id, attempt FROM task_center WHERE id IN (%s) AND status = 1 AND claim_token = ?`

// qNextDue returns seconds until the earliest pending or failed task is due
// (negative when overdue, NULL when none): one index dive per waiting lane
// of idx_lane.
// qNewestID reads the end of the primary key: no row is scanned.
const qNewestID = `SELECT COALESCE(MAX(id), 0) FROM task_center`

var qNextDue = nextDue("")

// qNextFutureDue is qNextDue for the tasks not due yet: when the next
// falls due, past those due now that a claim leaves (a paused queue's, a
// row another transaction holds).
var qNextFutureDue = nextDue(" AND lane_at > NOW(3)")

func nextDue(cond string) string {
	var b strings.Builder
	b.WriteString("SELECT UNIX_TIMESTAMP(MIN(t)) - UNIX_TIMESTAMP(NOW(3)) FROM (")
	for p := 0; p <= 9; p++ {
		if p > 0 {
			b.WriteString(" UNION ALL ")
		}
		fmt.Fprintf(&b, "(SELECT MIN(lane_at) AS t FROM task_center WHERE lane = %d%s)", p, cond)
	}
	b.WriteString(") m")
	return b.String()
}

// maxBatchRows is the most entries one batched write statement carries:
// MariaDB reads an IN list of in_predicate_conversion_threshold (1,000)
// values or more as a join with a temporary table.
const maxBatchRows = 500

// sizeBudget bounds the bytes of the text values (results, payloads) one
// statement carries, so that a batch of large ones is written in several
// statements instead of one the server refuses: a statement longer than
// its max_allowed_packet (16 MiB by default) has the connection reset. 500
// results of a 64 KiB output each are 32 MiB.
type sizeBudget struct {
	bytes int           // at most this many bytes of values a statement
	size  func(int) int // the bytes of values of entry i
}

// sizeOf is the size of entry i (0 without a budget).
func (b *sizeBudget) sizeOf(i int) int {
	if b == nil {
		return 0
	}
	return b.size(i)
}

// over reports whether an entry of n bytes does not fit beside used bytes
// (an entry alone always fits).
func (b *sizeBudget) over(used, n int) bool { return b != nil && overBytes(used, n, b.bytes) }

// overBytes reports whether n more bytes of values do not fit beside used
// ones in a statement of at most limit: what every write split by its
// values' size starts a new statement on (an entry alone always fits).
func overBytes(used, n, limit int) bool { return used > 0 && used+n > limit }

// packetBytes is the statement budget for a server's max_allowed_packet: a
// quarter, as escaping can double a value and the statement's own text
// comes on top.
func packetBytes(maxAllowedPacket int64) int { return int(max(maxAllowedPacket/4, 64<<10)) }

// stmt is one statement and its arguments.
type stmt struct {
	q    string
	args []any
}

// byID renders one statement of a batched write: a single-table UPDATE of
// task_center over distinct ids, read by primary key, with each entry's
// values looked up by its row's id. It is not a multi-table UPDATE joining
// the batch (JSON_TABLE, a derived table) to task_center: MariaDB can
// update only the first table of a join on the fly, so it buffers every
// new row in a temporary table, created and dropped per statement, and on
// disk (Aria) when a blob such as last_result is written; MariaDB 10.11
// has crashed in that path.
type byID struct {
	ids []int64 // distinct, ascending
	at  []int   // at[k]: the entry of ids[k]
	// idList is ids as SQL: the statement repeats it in every lookup.
	idList string
	// perRow renders every column as a lookup, even when the entries
	// agree (tests).
	perRow bool
	sqlText
	vals []any // col's scratch
}

// sqlText is a statement being written and its arguments.
type sqlText struct {
	b    []byte
	args []any
}

func (t *sqlText) sql(s string) { t.b = append(t.b, s...) }

// arg writes v: an integer, a boolean, NULL or a string with nothing to
// escape as its literal, anything else as a placeholder. The driver
// interpolates parameters (InterpolateParams), so the server gets the
// same text either way; the literals spare database/sql and the driver
// two conversions per value, for the hundreds of ids, attempts, codes,
// queues and instants of a batch.
func (t *sqlText) arg(v any) {
	switch v := v.(type) {
	case string:
		t.str(v)
	case nil:
		t.b = append(t.b, "NULL"...)
	case int:
		t.int(int64(v))
	case int64:
		t.int(v)
	case uint64:
		t.b = strconv.AppendUint(t.b, v, 10)
	case bool:
		if v {
			t.b = append(t.b, '1')
		} else {
			t.b = append(t.b, '0')
		}
	default:
		t.b = append(t.b, '?')
		t.args = append(t.args, v)
	}
}

func (t *sqlText) int(n int64) { t.b = strconv.AppendInt(t.b, n, 10) }

// str writes s as a literal when it is plain, else as a placeholder.
func (t *sqlText) str(s string) {
	if !plain(s) {
		t.b = append(t.b, '?')
		t.args = append(t.args, s)
		return
	}
	t.b = append(append(append(t.b, '\''), s...), '\'')
}

// plain reports whether s is printable ASCII without a quote, a
// backslash or a question mark: what the driver writes between quotes
// unchanged, whatever the server's escaping mode, and that its
// interpolation cannot take for a placeholder.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' || c == '\'' || c == '"' || c == '\\' || c == '?' {
			return false
		}
	}
	return true
}

// stmt is the statement written; t's buffer goes back to sqlBufs, so
// that t is not to be used after.
func (t *sqlText) stmt() stmt {
	st := stmt{string(t.b), t.args}
	if t.b != nil {
		b := t.b[:0]
		sqlBufs.Put(&b)
		t.b = nil
	}
	return st
}

// newSQLText starts a statement in a buffer that earlier statements grew:
// batches of hundreds of rows write tens of kilobytes each.
func newSQLText() sqlText { return sqlText{b: (*sqlBufs.Get().(*[]byte))[:0]} }

var sqlBufs = sync.Pool{New: func() any { return new([]byte) }}

// in writes the range the statement reads: its ids.
func (b *byID) in() {
	b.sql("id IN (")
	b.sql(b.idList)
	b.sql(")")
}

// col writes the value v(i) of each row's entry i (nil for NULL, else an
// integer or a string): one value when every entry has the same, else
// ELT(INTERVAL(id, firsts...), values...) over the runs of equal values
// in id order, firsts being the id each run starts at. INTERVAL finds the
// row's run among the sorted constant ids by binary search (exactly, for
// integers); ids between a batch's own belong to no row the statement
// reads. ELT returns the run's value as a string, which the server
// converts back exactly for the integers, decimal instants and text given
// here; so a row costs a lookup per column, and the statement grows
// linearly with the batch (CASE id WHEN ... is quadratic), or less: the
// starts of a batch of results, in id order, come in runs of tasks
// started in the same millisecond (about 8 runs in 340 results in a
// burn-down).
func (b *byID) col(v func(i int) any) {
	b.vals = b.vals[:0]
	runs := 1
	for k, i := range b.at {
		b.vals = append(b.vals, v(i))
		if k > 0 && b.vals[k] != b.vals[k-1] {
			runs++
		}
	}
	if runs == 1 && !b.perRow {
		b.arg(b.vals[0])
		return
	}
	b.sql("ELT(INTERVAL(id, ")
	if runs == len(b.ids) {
		b.sql(b.idList)
	} else {
		for k, id := range b.ids {
			if k == 0 || b.vals[k] != b.vals[k-1] {
				if k > 0 {
					b.sql(", ")
				}
				b.int(id)
			}
		}
	}
	b.sql(")")
	for k, x := range b.vals {
		if k == 0 || x != b.vals[k-1] {
			b.sql(", ")
			b.arg(x)
		}
	}
	b.sql(")")
}

// batchSQL renders a batched write of entries, entry i for the task ids[i],
// as statements over at most maxBatchRows distinct ids, each built by
// build. A task's repeated entry goes into a statement after that of its
// previous one; later is true for every statement after the first, whose
// fence must then skip rows an earlier statement of the batch changed, so
// that, as in one statement, the first entry that matches a row is the
// one applied. With a budget, the sizes of a statement's entries add up
// to at most its bytes (an entry larger than that goes alone).
func batchSQL(ids []int64, perRow bool, budget *sizeBudget, build func(b *byID, later bool)) []stmt {
	var groups [][]int
	var sizes []int
	last := make(map[int64]int, len(ids))
	for i, id := range ids {
		g := 0
		if p, ok := last[id]; ok {
			g = p + 1
		}
		n := budget.sizeOf(i)
		for g < len(groups) && (len(groups[g]) >= maxBatchRows || budget.over(sizes[g], n)) {
			g++
		}
		if g == len(groups) {
			groups, sizes = append(groups, nil), append(sizes, 0)
		}
		groups[g] = append(groups[g], i)
		sizes[g] += n
		last[id] = g
	}
	out := make([]stmt, len(groups))
	for g, at := range groups {
		slices.SortFunc(at, func(x, y int) int { return cmp.Compare(ids[x], ids[y]) })
		b := &byID{sqlText: newSQLText(), at: at, perRow: perRow, ids: make([]int64, len(at))}
		list := make([]byte, 0, len(at)*8)
		for k, i := range at {
			b.ids[k] = ids[i]
			if k > 0 {
				list = append(list, ", "...)
			}
			list = strconv.AppendInt(list, ids[i], 10)
		}
		b.idList = string(list)
		build(b, g > 0)
		out[g] = b.stmt()
	}
	return out
}

// fenceIDs returns the task of each fence.
func fenceIDs(fences []Fence) []int64 {
	ids := make([]int64, len(fences))
	for i, f := range fences {
		ids[i] = f.ID
	}
	return ids
}

// markRunningSQL is the fenced 1 -> 2 transition of a batch of tasks.
func markRunningSQL(fences []Fence, workerID string, token uint64, perRow bool) []stmt {
	return batchSQL(fenceIDs(fences), perRow, nil, func(b *byID, later bool) {
		b.sql("UPDATE task_center FORCE INDEX (PRIMARY) SET status = 2, worker_id = ")
		b.arg(workerID)
		b.sql(", claim_token = ")
		b.arg(token)
		b.sql(", started_at = NOW(3), last_run_at = NOW(3) WHERE ")
		b.in()
		b.sql(" AND attempt = ")
		b.col(func(i int) any { return fences[i].Attempt })
		b.sql(" AND status = 1")
		if later {
			b.sql(" AND claim_token <> ")
			b.arg(token)
		}
	})
}

// transitionSQL applies a batch of fenced transitions. Each assignment
// reads only its own column, but scheduled_at's, which reads
// plan_next_run_at before the assignment after it changes it (MySQL and
// MariaDB assign left to right).
func transitionSQL(ts []Transition, token uint64, perRow bool, bytes int) []stmt {
	ids := make([]int64, len(ts))
	for i := range ts {
		ids[i] = ts[i].ID
	}
	// Counter modes: 0 keep, 1 increment, 2 reset.
	mode := map[RetryMode]int{RetryKeep: 0, "": 0, RetryInc: 1, RetryReset: 2}
	// ran: an attempt that ended before its running mark records its
	// worker and start with its result.
	ran := func(i int) bool { return ts[i].From == task.Dispatched && ts[i].Run != nil && ts[i].Run.WorkerID != "" }
	budget := &sizeBudget{bytes: bytes, size: func(i int) int { return len(ts[i].Result) }}
	return batchSQL(ids, perRow, budget, func(b *byID, later bool) {
		col := func(name string, v func(t *Transition, i int) any) {
			b.sql(name)
			b.col(func(i int) any { return v(&ts[i], i) })
		}
		b.sql("UPDATE task_center FORCE INDEX (PRIMARY) SET ")
		col("status = ", func(t *Transition, _ int) any { return int(t.To) })
		col(", retry_count = CASE ", func(t *Transition, _ int) any { return mode[t.Retry] })
		b.sql(" WHEN 2 THEN 0 WHEN 1 THEN LEAST(retry_count + 1, 127) ELSE retry_count END")
		col(", crash_count = CASE ", func(t *Transition, _ int) any { return mode[t.Crash] })
		b.sql(" WHEN 2 THEN 0 WHEN 1 THEN crash_count + 1 ELSE crash_count END")
		nextAt := func(t *Transition, _ int) any {
			if t.NextAt.IsZero() {
				return nil
			}
			return unixArg(t.NextAt)
		}
		nextIn := func(t *Transition, _ int) any {
			if !t.NextAt.IsZero() || t.NextIn == nil {
				return nil
			}
			return t.NextIn.Microseconds()
		}
		if slices.ContainsFunc(ts, func(t Transition) bool { return !t.NextAt.IsZero() || t.NextIn != nil }) {
			// A new occurrence (NextAt: a periodic task's next time) has no
			// scheduled time apart from its plan; a retry or a recovery
			// (NextIn) keeps that of the run it repeats.
			col(", scheduled_at = CASE WHEN ", nextAt)
			col(" IS NOT NULL THEN NULL WHEN ", nextIn)
			b.sql(" IS NOT NULL THEN COALESCE(scheduled_at, plan_next_run_at) ELSE scheduled_at END")
		}
		col(", plan_next_run_at = CASE WHEN ", nextAt)
		col(" IS NOT NULL THEN FROM_UNIXTIME(", nextAt)
		col(") WHEN ", nextIn)
		col(" IS NOT NULL THEN NOW(3) + INTERVAL ", nextIn)
		b.sql(" MICROSECOND ELSE " + zeroAsNow("plan_next_run_at") + " END")
		if slices.ContainsFunc(ts, func(t Transition) bool { return t.SetResult }) {
			col(", last_result = IF(", func(t *Transition, _ int) any { return t.SetResult })
			col(", ", func(t *Transition, _ int) any { return t.Result })
			b.sql(", last_result)")
		}
		col(", finished_at = IF(", func(t *Transition, _ int) any {
			return t.To == task.Succeeded || t.To == task.Dead || t.To == task.Cancelled
		})
		b.sql(", NOW(3), finished_at)")
		// The start, by the worker's clock when it sent one (the upper
		// bound of the database clock), else its duration before now; NULL
		// keeps the row's. Either is held between the attempt's
		// dispatched_at and NOW(3): a worker clock that drifted since its
		// sync cannot put it outside the attempt.
		stAt := func(t *Transition, i int) any {
			if !ran(i) || t.StartedAt.IsZero() {
				return nil
			}
			return unixArg(t.StartedAt)
		}
		dur := func(t *Transition, i int) any {
			if !ran(i) || !t.StartedAt.IsZero() {
				return nil
			}
			return t.Run.Duration.Microseconds()
		}
		for _, c := range []string{"started_at", "last_run_at"} {
			col(", "+c+" = COALESCE(GREATEST(COALESCE(LEAST(FROM_UNIXTIME(", stAt)
			col("), NOW(3)), NOW(3) - INTERVAL ", dur)
			b.sql(" MICROSECOND), COALESCE(dispatched_at, FROM_UNIXTIME(0))), " + c + ")")
		}
		// Every transition ends its attempt: no worker holds the task
		// after it (the attempt's worker is in its run row).
		b.sql(", worker_id = '', claim_token = ")
		b.arg(token)
		b.sql(" WHERE ")
		b.in()
		col(" AND attempt = ", func(t *Transition, _ int) any { return t.Attempt })
		col(" AND status = ", func(t *Transition, _ int) any { return int(t.From) })
		if later {
			b.sql(" AND claim_token <> ")
			b.arg(token)
		}
	})
}

// qWonBy reads back which rows of a batch a write with a claim token won.
const qWonBy = `SELECT id, attempt FROM task_center WHERE id IN (%s) AND claim_token = ?`

// qChangedBy reads back the ids an operator action changed.
const qChangedBy = `SELECT id FROM task_center WHERE id IN (%s) AND claim_token = ? ORDER BY id`

const qRunInsertHead = `INSERT INTO task_run (task_id, attempt, task_code, queue, worker_id, node,
	started_at, finished_at, outcome, result, duration_ms) VALUES `

// runRow writes the task_run row of attempt of task id after
// qRunInsertHead: its values typed, not boxed, for hundreds of rows.
func runRow(t *sqlText, id int64, attempt int, r *RunRecord) {
	t.sql("(")
	t.int(id)
	t.sql(", ")
	t.int(int64(attempt))
	for _, s := range [...]string{r.Code, r.Queue, r.WorkerID, r.Node} {
		t.sql(", ")
		t.str(s)
	}
	t.sql(", NOW(3) - INTERVAL ")
	t.int(r.Duration.Microseconds())
	t.sql(" MICROSECOND, NOW(3), ")
	t.str(string(r.Outcome))
	t.sql(", ")
	if r.Result == "" {
		t.sql("NULL")
	} else {
		t.str(r.Result)
	}
	t.sql(", ")
	t.int(r.Duration.Milliseconds())
	t.sql(")")
}

const qRunsForTask = `SELECT id, task_id, attempt, worker_id, node, UNIX_TIMESTAMP(started_at),
	UNIX_TIMESTAMP(finished_at), outcome, COALESCE(result, ''), duration_ms
	FROM task_run WHERE task_id = ? ORDER BY id DESC LIMIT ?`

// placeholders returns "?, ?, ..." with n marks.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

// qStuckDispatched and qDispatchedBefore list tasks dispatched before a
// cutoff, oldest first after a keyset position (lane_at, id): the cutoff
// is NOW(3) minus a window, or an instant. They read the in-flight lane of
// idx_lane up to the cutoff (running tasks among them are skipped by their
// row).
var (
	qStuckDispatched  = dispatchedBefore("NOW(3) - INTERVAL ? MICROSECOND")
	qDispatchedBefore = dispatchedBefore("FROM_UNIXTIME(?)")
)

// qUndatedInFlight lists tasks dispatched or running without a dispatch
// time: only an INSERT from outside writes them (taskd dates every
// dispatch), and no scan of the in-flight lane by age ever reaches them.
const qUndatedInFlight = `SELECT id, attempt, status FROM task_center
	WHERE lane = 10 AND lane_at IS NULL ORDER BY id LIMIT ?`

func dispatchedBefore(cutoff string) string {
	return `SELECT id, attempt, task_code, ` + queueOf("task_center") + `, UNIX_TIMESTAMP(dispatched_at)
	FROM task_center WHERE lane = 10 AND lane_at < ` + cutoff + `
	AND lane_at >= FROM_UNIXTIME(?) AND (lane_at, id) > (FROM_UNIXTIME(?), ?)
	AND status = 1 ORDER BY lane_at, id LIMIT ?`
}

// qRunning lists running tasks in dispatch order after a keyset position
// (lane_at, id) of the in-flight lane, with whether each is past its
// timeout plus a grace: counted from its start, or from its dispatch for a
// row written running without a start (an UPDATE or INSERT from outside;
// a NULL there failed the scan of every pass).
var qRunning = `SELECT id, attempt, task_code, ` + queueOf("task_center") + `, task_type, COALESCE(cron_expr, ''), ` + zoneOf("task_center") + `,
	worker_id, crash_count, ` + unixOf("plan_next_run_at", "0") + `, UNIX_TIMESTAMP(dispatched_at), COALESCE(UNIX_TIMESTAMP(started_at), ''),
	COALESCE(started_at, dispatched_at) + INTERVAL ` + task.TimeoutSQL("") + ` SECOND + INTERVAL ? MICROSECOND < NOW(3)
	FROM task_center WHERE lane = 10 AND lane_at >= FROM_UNIXTIME(?) AND (lane_at, id) > (FROM_UNIXTIME(?), ?)
	AND status = 2 ORDER BY lane_at, id LIMIT ?`

// qPurgeTasks deletes one batch of finished tasks (succeeded or cancelled)
// older than a cutoff, oldest first along the finished lane of idx_lane:
// it reads only the rows it deletes, and those of open batches. Dead tasks
// wait for an operator and are kept (they have no lane), as are disabled
// periodic ones (no finished_at) and the members of a batch still open:
// its callback counts them when the last one ends, and counted a member
// deleted before as cancelled.
const qPurgeTasks = `DELETE FROM task_center WHERE lane = 11 AND lane_at < NOW(3) - INTERVAL ? MICROSECOND AND status IN (3, 6)
	AND (batch_id IS NULL OR NOT EXISTS (SELECT 1 FROM task_batch b WHERE b.id = task_center.batch_id AND b.finished_at IS NULL))
	ORDER BY lane_at LIMIT ?`

// qPurgeRuns deletes the run rows older than a cutoff among the oldest
// ids, a batch of them: by primary key, as a run's id follows its end (a
// result written late waits until those before it go). The derived table
// is materialized first, which MySQL requires of a read of the table a
// DELETE changes.
const qPurgeRuns = `DELETE FROM task_run WHERE id <= (SELECT MAX(id) FROM
	(SELECT id FROM task_run FORCE INDEX (PRIMARY) ORDER BY id LIMIT ?) w)
	AND finished_at < NOW(3) - INTERVAL ? MICROSECOND`

// qRetry moves a dead, failed or cancelled task back to pending, due now,
// with its retry and crash counts reset. A disabled periodic task (a
// cancelled one) is left to enable: retried, it was switched back on by a
// retry --status cancelled meant for killed one-off tasks, and ran at once.
const qRetry = `UPDATE task_center SET status = 0, retry_count = 0, crash_count = 0,
	scheduled_at = COALESCE(scheduled_at, plan_next_run_at), plan_next_run_at = NOW(3),
	worker_id = '', finished_at = NULL, claim_token = ? WHERE id IN (%s) AND status IN (4, 5, 6)
	AND NOT (task_type = 1 AND status = 6)`

// qCancel cancels a task that no worker holds yet. A periodic task gets
// no finished_at: it is disabled (qDisable), kept by retention until an
// operator enables it or removes it, not purged with finished tasks.
const qCancel = `UPDATE task_center SET status = 6, finished_at = IF(task_type = 1, NULL, NOW(3)), worker_id = '',
	last_result = 'cancelled by operator', claim_token = ? WHERE id IN (%s) AND status IN (0, 1, 4)`

const qAuditInsert = `INSERT INTO task_audit (actor, origin, action, target, affected, detail) VALUES (?, ?, ?, ?, ?, ?)`

// qAuditInsertKey is qAuditInsert with the SSH key of a tasktop serve
// session. Rows without a key use the other, so the CLI keeps working
// between installing a release and running its migrations.
const qAuditInsertKey = `INSERT INTO task_audit (actor, origin, action, target, affected, detail, key_fingerprint) VALUES (?, ?, ?, ?, ?, ?, ?)`

const auditColumns = `id, UNIX_TIMESTAMP(created_at), actor, origin, key_fingerprint, action, target, affected, COALESCE(detail, '')`

const qAuditList = `SELECT ` + auditColumns + ` FROM task_audit WHERE id < ? ORDER BY id DESC LIMIT ?`

// qAuditLast is the latest entry of an action on a target (a scan: the
// log is read by doctor, not by the hot path).
const qAuditLast = `SELECT ` + auditColumns + ` FROM task_audit WHERE action = ? AND target = ? ORDER BY id DESC LIMIT 1`

// qClaimWindow is the claim's candidate select while some queue is paused
// or full: per priority, one bounded window of its lane in idx_lane
// starting at a keyset cursor (lane_at, id), with each row's queue so the
// caller drops the rows of queues left out. It reads the index alone: a
// waiting row's wait_queue and wait_code are its queue and code, so a
// window costs its index entries and no row lookup, and a walk past a
// backlog of 100,000 rows costs the server about 0.1 s. Filtering in SQL
// instead would make the range scan walk the whole backlog at every claim
// (the routed queue is not in the index); reading a window and moving the
// cursor past a leading run of left-out rows keeps every claim bounded,
// and a paused or full backlog cannot starve the queues due behind it.
// Unpaused claims keep the index-only qClaimCandidates.
var qClaimWindow = func() string {
	var b strings.Builder
	for p := 0; p <= 9; p++ {
		if p > 0 {
			b.WriteString(" UNION ALL ")
		}
		fmt.Fprintf(&b, "(SELECT id, lane, CAST(lane_at AS CHAR), "+
			"IF(wait_queue = '', COALESCE("+routeOf("task_center.wait_code")+", wait_code), wait_queue), "+
			"wait_code, wait_queue FROM task_center FORCE INDEX (idx_lane)"+
			" WHERE lane = %d AND lane_at <= NOW(3) AND (lane_at > ? OR (lane_at = ? AND id >= ?) OR (? AND lane_at < '1000-01-01'))"+
			" ORDER BY lane_at, id LIMIT ?)", p)
	}
	return b.String()
}()

// qGroupsOf reads the groups of a window's rows of grouped queues, which
// idx_lane does not hold.
const qGroupsOf = `SELECT id, group_key FROM task_center WHERE id IN (%s) AND group_key <> ''`

// qActionLock locks the tasks of an operator action and reads their state
// before it.
const qActionLock = `SELECT id, status, attempt FROM task_center WHERE id IN (%s) FOR UPDATE`

// qRunNow makes pending or failed tasks due now; one overdue already
// keeps its due time, and so its place in the backlog.
var qRunNow = `UPDATE task_center SET status = 0,
	scheduled_at = IF(status = 4, COALESCE(scheduled_at, plan_next_run_at), scheduled_at),
	plan_next_run_at = LEAST(` + zeroAsNow("plan_next_run_at") + `, NOW(3)), claim_token = ?
	WHERE id IN (%s) AND status IN (0, 4)`

// qDelete deletes tasks no worker holds: pending, failed, dead or
// cancelled (their rows are locked by qActionLock, so exactly those read
// in these states go).
const qDelete = `DELETE FROM task_center WHERE id IN (%s) AND status IN (0, 4, 5, 6)`

// qDisable parks periodic tasks that no worker holds in cancelled. Their
// finished_at is NULL, so retention keeps them until they are enabled: a
// dead one has one (its end), which put the disabled task in the finished
// lane, and retention deleted its schedule a week later.
const qDisable = `UPDATE task_center SET status = 6, finished_at = NULL, worker_id = '', last_result = 'disabled by operator', claim_token = ?
	WHERE id IN (%s) AND task_type = 1 AND status IN (0, 4, 5)`

// qEnable puts a disabled periodic task back on its schedule; its last
// result no longer says it is disabled.
const qEnable = `UPDATE task_center SET status = 0, retry_count = 0, crash_count = 0, finished_at = NULL,
	last_result = IF(last_result = 'disabled by operator', 'enabled by operator', last_result),
	scheduled_at = NULL, plan_next_run_at = FROM_UNIXTIME(?), claim_token = ? WHERE id = ? AND task_type = 1 AND status = 6`

const qAuditUpdate = `UPDATE task_audit SET affected = ?, detail = ? WHERE id = ?`

// queueColumns are a task_queue row's state; scanQueue reads them.
const queueColumns = `paused, shards, span, rate, rate_period_ms, burst, max_running, per, serial, limit_source`

const qQueueList = `SELECT name, ` + queueColumns + `, UNIX_TIMESTAMP(updated_at) FROM task_queue ORDER BY name`

const qQueueLock = `SELECT ` + queueColumns + ` FROM task_queue WHERE name = ? FOR UPDATE`

const qQueueUpsert = `INSERT INTO task_queue (name, ` + queueColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON DUPLICATE KEY UPDATE paused = VALUES(paused), shards = VALUES(shards), span = VALUES(span),
	rate = VALUES(rate), rate_period_ms = VALUES(rate_period_ms), burst = VALUES(burst), max_running = VALUES(max_running),
	per = VALUES(per), serial = VALUES(serial), limit_source = VALUES(limit_source)`

// qLimitSeed records a node's configured limit of a queue, unless an
// operator set the queue's limit (taskd limit): the last node to start
// wins among configurations.
const qLimitSeed = `INSERT INTO task_queue (name, rate, rate_period_ms, burst, max_running, per, serial, limit_source)
	VALUES %s
	ON DUPLICATE KEY UPDATE
	rate = IF(limit_source = 'operator', rate, VALUES(rate)),
	rate_period_ms = IF(limit_source = 'operator', rate_period_ms, VALUES(rate_period_ms)),
	burst = IF(limit_source = 'operator', burst, VALUES(burst)),
	max_running = IF(limit_source = 'operator', max_running, VALUES(max_running)),
	per = IF(limit_source = 'operator', per, VALUES(per)),
	serial = IF(limit_source = 'operator', serial, VALUES(serial)),
	limit_source = IF(limit_source = 'operator', 'operator', 'config')`

// qLimitUnseed clears the configured limit a node recorded for a queue
// whose configuration now has none (an operator's stays).
const qLimitUnseed = `UPDATE task_queue SET rate = 0, rate_period_ms = 0, burst = 0, max_running = 0, per = '', serial = 0,
	limit_source = '' WHERE name IN (%s) AND limit_source = 'config'`

// qQueueSeed records configured shards where a queue has none recorded:
// no row, or a row written for its limit or its group claims (shards
// 0). span is assigned first, while shards still holds what the
// row had.
const qQueueSeed = `INSERT INTO task_queue (name, shards, span) VALUES %s
	ON DUPLICATE KEY UPDATE span = IF(shards = 0, VALUES(span), span), shards = IF(shards = 0, VALUES(shards), shards)`

// qQueueShrinkSpan retires the shard lists beyond shards once a reshard is
// older than a grace (every node's cache has followed it); the caller has
// emptied them.
const qQueueShrinkSpan = `UPDATE task_queue SET span = shards
	WHERE name = ? AND span = ? AND shards = ? AND updated_at < NOW(3) - INTERVAL ? MICROSECOND`

// qClaimIDs is the compare-and-set of a filtered claim, by primary key (so
// it locks only its candidates).
const qClaimIDs = `UPDATE task_center FORCE INDEX (PRIMARY) SET status = 1, attempt = attempt + 1, dispatched_at = NOW(3), worker_id = '', claim_token = ?
	WHERE id IN (%s) AND status IN (0, 4) AND plan_next_run_at <= NOW(3)`

// qClaimedRows reads back the messages a filtered claim won.
var qClaimedRows = `SELECT id, attempt, task_code, task_type, ` + queueOf("task_center") + `, payload, COALESCE(cron_expr, ''), ` + zoneOf("task_center") + `,
	priority, timeout, max_retry, retry_count, COALESCE(unique_key, ''), trace_parent, ` + unixOf("plan_next_run_at", "0") + `,
	UNIX_TIMESTAMP(dispatched_at), COALESCE(then_spec, ''), COALESCE(batch_id, 0), group_key, UNIX_TIMESTAMP(scheduled_at)
	FROM task_center WHERE id IN (%s) AND status = 1 AND claim_token = ?
	ORDER BY priority, plan_next_run_at, id`

// unionPriorities joins one branch per priority (0-9) of format, which
// takes the priority: a range per priority stays a bounded index range,
// where one range over all priorities would read every row's entry.
func unionPriorities(format string) string {
	var b strings.Builder
	for p := 0; p <= 9; p++ {
		if p > 0 {
			b.WriteString(" UNION ALL ")
		}
		fmt.Fprintf(&b, format, p)
	}
	return b.String()
}

// qWaiting counts the waiting tasks (pending or failed, due or not) by queue
// as written, task code and status, as columns queue, task_code, status, n
// (tasks), due (those due now) and first_due (the earliest due time among
// them, NULL when none is due): one group per branch, and branches for one
// group add up. It reads idx_lane alone, one waiting lane (priority) at a
// time: wait_status, wait_queue and wait_code are in the index (migrations
// 0009, 0010), so no waiting task costs a row lookup.
var qWaiting = unionPriorities(`(SELECT MIN(wait_queue) queue, MIN(wait_code) task_code, wait_status status, COUNT(*) n,
	SUM(lane_at <= NOW(3)) due, MIN(IF(lane_at <= NOW(3), lane_at, NULL)) first_due
	FROM task_center FORCE INDEX (idx_lane) WHERE lane = %d
	GROUP BY ` + exactly("wait_queue", "wait_code") + `, wait_status)`)

// exactly groups by queue and task code columns as workers tell them
// apart: the table's collation folds case, so that a pending HELLO would
// count as hello's. Its groups' names are read with MIN, which MySQL's
// ONLY_FULL_GROUP_BY accepts, and which is the name itself, every row of
// a group having the same bytes.
func exactly(queue, code string) string {
	return "BINARY " + queue + ", BINARY " + code
}

// Stats queries read only the index entries of tasks in the states they
// count (idx_lane's waiting lanes 0-9 and its in-flight lane 10; idx_held:
// dead and cancelled), never the succeeded rows that make up most of the
// table. A row in flight without a dispatch time (adopted from the seed
// design) is not counted in flight, as recovery does not see it either.
var qStatsWaiting = routedGroups(`SELECT MIN(queue) queue, MIN(task_code) task_code, status, SUM(n) n, SUM(due) due,
	UNIX_TIMESTAMP(NOW(3)) - UNIX_TIMESTAMP(MIN(first_due)) age
	FROM (`+qWaiting+`) w GROUP BY `+exactly("queue", "task_code")+`, status`, "g.status, g.n, g.due, g.age")

var qStatsInflight = `SELECT ` + queueOf("task_center") + ` q, status, worker_id, id FROM task_center FORCE INDEX (idx_lane)
	WHERE lane = 10 AND lane_at IS NOT NULL`

var qStatsHeld = routedGroups(`SELECT MIN(queue) queue, MIN(task_code) task_code, held_status, COUNT(*) n FROM task_center FORCE INDEX (idx_held)
	WHERE held_status IS NOT NULL GROUP BY `+exactly("queue", "task_code")+`, held_status`, "g.held_status, g.n")

// qTaskStates reads the status, type, attempt and queue of a set of tasks:
// the queue their messages go to (queueOf), not the column, which is empty
// for a task in its code's own queue.
var qTaskStates = `SELECT id, status, task_type, attempt, ` + queueOf("task_center") + ` FROM task_center WHERE id IN (%s)`

// qQueueNamed tells whether anything in the task center names a queue: a
// node's handler configuration (task_route), a row that pauses or reshards
// it, or a task waiting, in flight, dead or cancelled in it (each read
// through its own bounded index, like stats). Names compare exactly
// (task_route and task_queue since migration 15, BINARY for task_center).
var qQueueNamed = `SELECT EXISTS (SELECT 1 FROM task_route WHERE queue = ?)
	OR EXISTS (SELECT 1 FROM task_queue WHERE name = ? AND (paused OR shards > 1 OR span > 1 OR limit_source <> ''))
	OR EXISTS (SELECT 1 FROM task_center FORCE INDEX (idx_lane) WHERE lane = 10 AND lane_at IS NOT NULL AND ` + queueOf("task_center") + ` = BINARY ?)
	OR EXISTS (SELECT 1 FROM task_center FORCE INDEX (idx_held) WHERE held_status IS NOT NULL AND ` + queueOf("task_center") + ` = BINARY ?)
	OR EXISTS (SELECT 1 FROM (` + qWaiting + `) w WHERE ` + queueOf("w") + ` = BINARY ?)`

// qCodeNamed tells whether anything in the task center names a task code:
// a node's route for it or a task of it in any state (uk_code_unique
// starts with task_code).
var qCodeNamed = `SELECT EXISTS (SELECT 1 FROM task_route WHERE task_code = ?)
	OR EXISTS (SELECT 1 FROM task_center WHERE ` + exactCode + `)`

const qBatchInsert = `INSERT INTO task_batch (total, callback_code, callback_queue, callback_priority,
	callback_timeout, callback_max_retry, callback_payload) VALUES (?, ?, ?, ?, ?, ?, ?)`

// qBatchLockOpen locks an open batch's row and reads its callback.
const qBatchLockOpen = `SELECT total, callback_code, callback_queue, callback_priority, callback_timeout,
	callback_max_retry, callback_payload FROM task_batch WHERE id = ? AND finished_at IS NULL FOR UPDATE`

// qBatchHasOpen tells whether a batch has a member that has not ended.
const qBatchHasOpen = `SELECT EXISTS (SELECT 1 FROM task_center WHERE batch_open = ?)`

// qBatchCounts counts a batch's members by status, along idx_batch.
const qBatchCounts = `SELECT status, COUNT(*) FROM task_center WHERE batch_id = ? GROUP BY status`

// qBatchCallbackInsert creates a batch's callback, due now. Its unique key
// (BatchCallbackKey) makes a second one fail loudly rather than run twice.
const qBatchCallbackInsert = `INSERT INTO task_center (task_code, task_type, queue, payload, priority, timeout,
	max_retry, unique_key, plan_next_run_at) VALUES (?, 0, ?, ?, ?, ?, ?, ?, NOW(3))`

const qBatchFinished = `UPDATE task_batch SET callback_id = ?, succeeded = ?, dead = ?, cancelled = ?,
	finished_at = NOW(3) WHERE id = ?`

// qBatchFinishable lists open batches without an open member.
const qBatchFinishable = `SELECT b.id FROM task_batch b FORCE INDEX (idx_batch_finished)
	WHERE b.finished_at IS NULL AND NOT EXISTS (SELECT 1 FROM task_center t WHERE t.batch_open = b.id)
	ORDER BY b.id LIMIT ?`

const qBatchGet = `SELECT id, total, callback_code, callback_queue, callback_priority, callback_timeout,
	callback_max_retry, callback_payload, callback_id, succeeded, dead, cancelled, UNIX_TIMESTAMP(created_at),
	UNIX_TIMESTAMP(finished_at) FROM task_batch WHERE id = ?`

// Locking a batch without waiting (locked.go).

// qLockRows locks rows by primary key. The index is forced: on a small
// table an IN list is read by a scan, which would lock (or skip) every row.
const qLockRows = `SELECT id FROM task_center FORCE INDEX (PRIMARY) WHERE id IN (%s) FOR UPDATE`

// zeroWaitPrefix runs a statement with no lock wait (probeZeroWait).
const zeroWaitPrefix = `SET STATEMENT innodb_lock_wait_timeout = 0 FOR `

// qRowsExist reads which of a set of tasks have a row.
const qRowsExist = `SELECT id FROM task_center WHERE id IN (%s)`

// qProbeSkipLocked and qProbeNoWait tell which locking clauses the server
// parses.
const (
	qProbeSkipLocked = `SELECT 1 FROM (SELECT 1 AS x) d FOR UPDATE SKIP LOCKED`
	qProbeNoWait     = `SELECT 1 FROM (SELECT 1 AS x) d FOR UPDATE NOWAIT`
	// qProbeZeroWait answers 0 where a statement's lock wait can be zero.
	qProbeZeroWait = `SET STATEMENT innodb_lock_wait_timeout = 0 FOR SELECT @@innodb_lock_wait_timeout`
	// qMaxAllowedPacket reads the longest statement the server takes.
	qMaxAllowedPacket = `SELECT @@max_allowed_packet`
)

// Routes and settings (routes.go, settings.go).

const qRouteUpsert = `INSERT INTO task_route (task_code, queue, node, seen_at) VALUES (?, ?, ?, NOW(3))
	ON DUPLICATE KEY UPDATE queue = VALUES(queue), node = VALUES(node), seen_at = NOW(3)`

const qRouteList = `SELECT task_code, queue, node, UNIX_TIMESTAMP(seen_at) FROM task_route ORDER BY task_code`

const (
	qSettingGet  = `SELECT value FROM task_setting WHERE name = ?`
	qSettingInit = `INSERT IGNORE INTO task_setting (name, value) VALUES (?, ?)`
	qSettingSet  = `INSERT INTO task_setting (name, value) VALUES (?, ?) ON DUPLICATE KEY UPDATE value = VALUES(value)`
	qSettingSwap = `UPDATE task_setting SET value = ? WHERE name = ? AND value = ?`
)
