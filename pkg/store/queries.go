package store

import (
	"fmt"
	"strings"

	"github.com/taskd/taskd/pkg/task"
)

// All SQL of the task center. Every due or expiry comparison uses NOW(3).

const qNow = `SELECT UNIX_TIMESTAMP(NOW(3))`

const qAutoIncStep = `SELECT @@auto_increment_increment`

// taskColumns is the select list for a whole task; scanTask reads it.
const taskColumns = `id, task_code, task_type, queue, payload, COALESCE(cron_expr, ''), timezone,
	priority, delay, timeout, max_retry, retry_count, status, COALESCE(unique_key, ''), attempt,
	crash_count, worker_id, UNIX_TIMESTAMP(plan_next_run_at), UNIX_TIMESTAMP(last_run_at),
	UNIX_TIMESTAMP(dispatched_at), UNIX_TIMESTAMP(started_at), COALESCE(last_result, ''),
	UNIX_TIMESTAMP(created_at), UNIX_TIMESTAMP(updated_at)`

const qTaskGet = `SELECT ` + taskColumns + ` FROM task_center WHERE id = ?`

const qTaskByUnique = `SELECT ` + taskColumns + ` FROM task_center WHERE task_code = ? AND unique_key = ?`

// qInsertRow is one VALUES tuple of an insert. plan_next_run_at is an
// absolute instant when the second-to-last argument is set, else NOW(3) plus
// a delay in microseconds.
const qInsertHead = `INSERT INTO task_center (task_code, task_type, queue, payload, cron_expr, timezone,
	priority, delay, timeout, max_retry, unique_key, plan_next_run_at) VALUES `

const qInsertRow = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
	COALESCE(FROM_UNIXTIME(?), NOW(3) + INTERVAL ? MICROSECOND))`

// qClaimCandidates selects due tasks in priority, then due-time order. It is
// a union of one branch per (status, priority) so that each branch reads one
// bounded range of idx_claim: the cost is proportional to the batch, never
// to the number of future or finished rows.
var qClaimCandidates = func() string {
	var b strings.Builder
	b.WriteString("SELECT id FROM (")
	first := true
	for _, st := range []int{0, 4} {
		for p := 0; p <= 9; p++ {
			if !first {
				b.WriteString(" UNION ALL ")
			}
			first = false
			fmt.Fprintf(&b, "(SELECT id, priority, plan_next_run_at FROM task_center FORCE INDEX (idx_claim)"+
				" WHERE status = %d AND priority = %d AND plan_next_run_at <= NOW(3)"+
				" ORDER BY plan_next_run_at LIMIT ?)", st, p)
		}
	}
	b.WriteString(") c ORDER BY priority, plan_next_run_at LIMIT ?")
	return b.String()
}()

// claimCandidateArgs is the number of LIMIT placeholders in qClaimCandidates
// before the outer one.
const claimCandidateArgs = 20

// qClaimUpdate is the compare-and-set that claims candidates: only rows
// still pending (or failed and due) move, so of several schedulers racing
// for a row exactly one wins. attempt + 1 is the new fencing token.
//
// FORCE INDEX (PRIMARY): with few due rows the optimizer prefers a range
// of a status index, whose next-key locks (REPEATABLE READ) reach the
// first dispatched row beyond the range. A worker's open mark-running
// transaction on that row then blocks every claim for the lock wait
// timeout, and recovery's hand-backs queue behind the claim: one stalled
// worker (SIGSTOP, GC pause, slow network) froze dispatch for the whole
// fleet. By primary key the claim locks only its candidates.
const qClaimUpdate = `UPDATE task_center FORCE INDEX (PRIMARY) SET status = 1, attempt = attempt + 1, dispatched_at = NOW(3), worker_id = ?
	WHERE id IN (%s) AND status IN (0, 4) AND plan_next_run_at <= NOW(3)`

// qClaimed reads back the rows a claim won, by its claim id.
const qClaimed = `SELECT id, attempt, task_code, task_type, queue, payload, COALESCE(cron_expr, ''), timezone,
	priority, timeout, max_retry, retry_count, COALESCE(unique_key, ''), UNIX_TIMESTAMP(plan_next_run_at),
	UNIX_TIMESTAMP(dispatched_at)
	FROM task_center WHERE id IN (%s) AND status = 1 AND worker_id = ?
	ORDER BY priority, plan_next_run_at, id`

// qNextDue returns seconds until the earliest pending or failed task is due
// (negative when overdue, NULL when none): one index dive per (status,
// priority) of idx_claim.
var qNextDue = func() string {
	var b strings.Builder
	b.WriteString("SELECT UNIX_TIMESTAMP(MIN(t)) - UNIX_TIMESTAMP(NOW(3)) FROM (")
	for i, st := range []int{0, 4} {
		for p := 0; p <= 9; p++ {
			if i+p > 0 {
				b.WriteString(" UNION ALL ")
			}
			fmt.Fprintf(&b, "(SELECT MIN(plan_next_run_at) AS t FROM task_center WHERE status = %d AND priority = %d)", st, p)
		}
	}
	b.WriteString(") m")
	return b.String()
}()

// qMarkRunningHead is the fenced 1 -> 2 transition of a batch of tasks:
// one statement whatever the batch size (per-statement overhead, not row
// work, dominates the cost of single-row updates). Arguments: worker id,
// claim token; then qFenceWhere.
const qMarkRunningHead = `UPDATE task_center SET status = 2, worker_id = ?, claim_token = ?,
	started_at = NOW(3), last_run_at = NOW(3) WHERE `

// fenceWhere matches rows still at their fence: id IN (...) bounds the
// statement to primary-key lookups, and the CASEs are the compare-and-set
// on (id, attempt, status). (A row-constructor IN says the same but costs
// MariaDB's range optimizer a second for 500 rows.) fenceArgs gives its
// arguments.
func fenceWhere(n int) string {
	when := strings.Repeat(" WHEN ? THEN ?", n)
	return "id IN (" + placeholders(n) + ") AND attempt = CASE id" + when + " END AND status = CASE id" + when + " END"
}

func fenceArgs(args []any, fences []Fence, from func(i int) task.Status) []any {
	for _, f := range fences {
		args = append(args, f.ID)
	}
	for _, f := range fences {
		args = append(args, f.ID, f.Attempt)
	}
	for i, f := range fences {
		args = append(args, f.ID, int(from(i)))
	}
	return args
}

// qWonBy reads back which rows of a batch a write with a claim token won.
const qWonBy = `SELECT id, attempt FROM task_center WHERE id IN (%s) AND claim_token = ?`

// qChangedBy reads back the ids an operator action changed.
const qChangedBy = `SELECT id FROM task_center WHERE id IN (%s) AND claim_token = ? ORDER BY id`

// transitionSQL builds the one statement that applies a batch of fenced
// transitions with distinct task ids: every column is a CASE on id.
func transitionSQL(ts []Transition, token uint64) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, 12*len(ts))
	col := func(name string, expr func(t *Transition) (string, []any)) {
		fmt.Fprintf(&b, "%s = CASE id", name)
		for i := range ts {
			e, a := expr(&ts[i])
			b.WriteString(" WHEN ? THEN ")
			b.WriteString(e)
			args = append(args, ts[i].ID)
			args = append(args, a...)
		}
		fmt.Fprintf(&b, " ELSE %s END,\n", name)
	}
	b.WriteString("UPDATE task_center SET\n")
	col("status", func(t *Transition) (string, []any) { return "?", []any{int(t.To)} })
	col("retry_count", func(t *Transition) (string, []any) { return counterSQL("retry_count", t.Retry, 127), nil })
	col("crash_count", func(t *Transition) (string, []any) { return counterSQL("crash_count", t.Crash, 1<<31), nil })
	col("plan_next_run_at", func(t *Transition) (string, []any) {
		switch {
		case !t.NextAt.IsZero():
			return "FROM_UNIXTIME(?)", []any{unixArg(t.NextAt)}
		case t.NextIn != nil:
			return "NOW(3) + INTERVAL ? MICROSECOND", []any{t.NextIn.Microseconds()}
		}
		return "plan_next_run_at", nil
	})
	col("last_result", func(t *Transition) (string, []any) {
		if t.SetResult {
			return "?", []any{t.Result}
		}
		return "last_result", nil
	})
	col("finished_at", func(t *Transition) (string, []any) {
		if t.To == task.Succeeded || t.To == task.Dead || t.To == task.Cancelled {
			return "NOW(3)", nil
		}
		return "finished_at", nil
	})
	col("worker_id", func(t *Transition) (string, []any) {
		if t.To == task.Pending || t.To == task.Failed {
			return "''", nil
		}
		return "worker_id", nil
	})
	b.WriteString("claim_token = ?\nWHERE ")
	args = append(args, token)
	b.WriteString(fenceWhere(len(ts)))
	fences := make([]Fence, len(ts))
	for i := range ts {
		fences[i] = Fence{ID: ts[i].ID, Attempt: ts[i].Attempt}
	}
	return b.String(), fenceArgs(args, fences, func(i int) task.Status { return ts[i].From })
}

// counterSQL is the new value of a counter column for a mode.
func counterSQL(colName string, m RetryMode, limit int) string {
	switch m {
	case RetryReset:
		return "0"
	case RetryInc:
		return fmt.Sprintf("LEAST(%s + 1, %d)", colName, limit)
	}
	return colName
}

const qRunInsertHead = `INSERT INTO task_run (task_id, attempt, task_code, queue, worker_id, node,
	started_at, finished_at, outcome, result, duration_ms) VALUES `

const qRunInsertRow = `(?, ?, ?, ?, ?, ?, NOW(3) - INTERVAL ? MICROSECOND, NOW(3), ?, ?, ?)`

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

// qStuckDispatched lists tasks dispatched before a cutoff, oldest first.
const qStuckDispatched = `SELECT id, attempt, task_code, queue, UNIX_TIMESTAMP(dispatched_at)
	FROM task_center WHERE status = 1 AND dispatched_at < NOW(3) - INTERVAL ? MICROSECOND
	ORDER BY dispatched_at LIMIT ?`

// qRunning lists running tasks in dispatch order after a keyset position,
// with whether each is past its timeout plus a grace.
const qRunning = `SELECT id, attempt, task_code, queue, task_type, COALESCE(cron_expr, ''), timezone,
	worker_id, crash_count, UNIX_TIMESTAMP(plan_next_run_at), UNIX_TIMESTAMP(dispatched_at),
	started_at + INTERVAL timeout SECOND + INTERVAL ? MICROSECOND < NOW(3)
	FROM task_center WHERE status = 2 AND (dispatched_at, id) > (FROM_UNIXTIME(?), ?)
	ORDER BY dispatched_at, id LIMIT ?`

// qPurgeTasks deletes one batch of finished tasks (succeeded or cancelled)
// older than a cutoff, along idx_finished. Dead tasks wait for an operator
// and are kept.
const qPurgeTasks = `DELETE FROM task_center WHERE finished_at < NOW(3) - INTERVAL ? MICROSECOND AND status IN (3, 6)
	ORDER BY finished_at LIMIT ?`

// qPurgeRuns deletes one batch of run rows older than a cutoff.
const qPurgeRuns = `DELETE FROM task_run WHERE finished_at < NOW(3) - INTERVAL ? MICROSECOND
	ORDER BY finished_at LIMIT ?`

// qRetry moves a dead, failed or cancelled task back to pending, due now,
// with its retry and crash counts reset.
const qRetry = `UPDATE task_center SET status = 0, retry_count = 0, crash_count = 0, plan_next_run_at = NOW(3),
	worker_id = '', finished_at = NULL, claim_token = ? WHERE id IN (%s) AND status IN (4, 5, 6)`

// qCancel cancels a task that no worker holds yet.
const qCancel = `UPDATE task_center SET status = 6, finished_at = NOW(3), worker_id = '',
	last_result = 'cancelled by operator', claim_token = ? WHERE id IN (%s) AND status IN (0, 1, 4)`

const qAuditInsert = `INSERT INTO task_audit (actor, origin, action, target, affected, detail) VALUES (?, ?, ?, ?, ?, ?)`

const qAuditList = `SELECT id, UNIX_TIMESTAMP(created_at), actor, origin, action, target, affected, COALESCE(detail, '')
	FROM task_audit WHERE id < ? ORDER BY id DESC LIMIT ?`
