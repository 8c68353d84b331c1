package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/taskd/taskd/pkg/task"
)

// Actor identifies who made an operator action.
type Actor struct {
	// User is the OS user, or the comment of the SSH key of a tasktop
	// serve session.
	User string
	// Origin is the SSH client's address ("ssh 203.0.113.7:51234"), the
	// host, or the program.
	Origin string
	// Key is the SHA256 fingerprint of the SSH key the operator logged in
	// with ("": not a tasktop serve session).
	Key string
}

// AuditEntry is one row of task_audit.
type AuditEntry struct {
	ID        int64     `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	Actor     string    `json:"actor"`
	Origin    string    `json:"origin"`
	Key       string    `json:"key,omitempty"` // Actor.Key
	Action    string    `json:"action"`
	Target    string    `json:"target"`
	Affected  int       `json:"affected"`
	// Detail is JSON: requested, ids, before (counts by status), after.
	Detail json.RawMessage `json:"detail,omitempty"`
}

// TaskAction is an operator action on tasks, for the audit log.
type TaskAction struct {
	Actor  Actor
	Action string // audit action name
	// Target says what the operator selected ("": the ids).
	Target string
	// Detail is added to the audit row's detail.
	Detail map[string]any
	// Also counts changes made outside this call (running tasks a kill
	// cancelled through their workers): they join the audit row, with
	// AlsoBefore their statuses before by name.
	Also       []int64
	AlsoBefore map[string]int
	// Requested is the number of tasks the operator asked for (0: the ids
	// of this call).
	Requested int
	// Attempts, when set, are the attempts the operator saw: a task whose
	// attempt is another now (it was retried, or ran again, meanwhile) is
	// left alone, as one in the wrong state is. A task absent from it is
	// not fenced.
	Attempts task.SeenAttempts
}

// TaskRetry moves dead, failed or cancelled tasks back to pending, due now.
func (s *Store) TaskRetry(ctx context.Context, a TaskAction, ids []int64) ([]int64, error) {
	return s.taskAction(ctx, a, "pending", ids, stmtAction(qRetry))
}

// TaskCancel cancels tasks that no worker holds (pending, dispatched or
// failed). A dispatched task's message is then stale and is dropped by the
// worker that takes it. Running tasks are killed through their worker.
func (s *Store) TaskCancel(ctx context.Context, a TaskAction, ids []int64) ([]int64, error) {
	return s.taskAction(ctx, a, "cancelled", ids, stmtAction(qCancel))
}

// TaskRunNow makes pending or failed tasks due now.
func (s *Store) TaskRunNow(ctx context.Context, a TaskAction, ids []int64) ([]int64, error) {
	return s.taskAction(ctx, a, "pending", ids, stmtAction(qRunNow))
}

// TaskDisable parks periodic tasks that no worker holds (pending, failed
// or dead) in cancelled, until TaskEnable.
func (s *Store) TaskDisable(ctx context.Context, a TaskAction, ids []int64) ([]int64, error) {
	return s.taskAction(ctx, a, "cancelled", ids, stmtAction(qDisable))
}

// TaskEnable puts disabled periodic tasks (cancelled, type 1) back to
// pending, each due at its next time in next. Requested tasks without one
// (not disabled periodic tasks) are counted in the audit row, unchanged.
func (s *Store) TaskEnable(ctx context.Context, a TaskAction, ids []int64, next map[int64]time.Time) ([]int64, error) {
	return s.taskAction(ctx, a, "pending", ids, func(ctx context.Context, tx *sql.Tx, token uint64, chunk []int64, _ map[int64]int) ([]int64, error) {
		var done []int64
		for _, id := range chunk {
			at, ok := next[id]
			if !ok {
				continue
			}
			res, err := tx.ExecContext(ctx, qEnable, unixArg(at), token, id)
			if err != nil {
				return nil, err
			}
			if n, _ := res.RowsAffected(); n > 0 {
				done = append(done, id)
			}
		}
		return done, nil
	})
}

// TaskDeleteUnheld deletes the tasks of ids that no worker holds (pending,
// failed, dead or cancelled); periodic ones too unless keepPeriodic.
func (s *Store) TaskDeleteUnheld(ctx context.Context, a TaskAction, ids []int64, keepPeriodic bool) ([]int64, error) {
	return s.taskAction(ctx, a, "deleted", ids, func(ctx context.Context, tx *sql.Tx, _ uint64, chunk []int64, before map[int64]int) ([]int64, error) {
		var done []int64
		for _, id := range chunk {
			if st, ok := before[id]; ok && (st == 0 || st == 4 || st == 5 || st == 6) {
				done = append(done, id)
			}
		}
		if keepPeriodic && len(done) > 0 {
			var err error
			if done, err = oneOffs(ctx, tx, done); err != nil {
				return nil, err
			}
		}
		if len(done) == 0 {
			return nil, nil
		}
		_, err := tx.ExecContext(ctx, fmt.Sprintf(qDelete, placeholders(len(done))), int64Args(done)...)
		return done, err
	})
}

// oneOffs returns the tasks of ids that are not periodic, in tx (whose
// rows ids are locked).
func oneOffs(ctx context.Context, tx *sql.Tx, ids []int64) ([]int64, error) {
	out, err := queryIDs(ctx, tx, fmt.Sprintf(`SELECT id FROM task_center WHERE id IN (%s) AND task_type <> 1 ORDER BY id`,
		placeholders(len(ids))), int64Args(ids)...)
	if err != nil {
		return nil, fmt.Errorf("read task types: %w", err)
	}
	return out, nil
}

// actionFunc changes one chunk of tasks inside the action's transaction and
// returns the ids it changed. before holds each locked task's status.
type actionFunc func(ctx context.Context, tx *sql.Tx, token uint64, chunk []int64, before map[int64]int) ([]int64, error)

// stmtAction is an action of one UPDATE marking the rows it changed with
// the token (q has the token first, then the id list).
func stmtAction(q string) actionFunc {
	return func(ctx context.Context, tx *sql.Tx, token uint64, chunk []int64, _ map[int64]int) ([]int64, error) {
		args := make([]any, 0, len(chunk)+1)
		args = append(args, token)
		for _, id := range chunk {
			args = append(args, id)
		}
		in := placeholders(len(chunk))
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(q, in), args...); err != nil {
			return nil, err
		}
		return queryIDs(ctx, tx, fmt.Sprintf(qChangedBy, in), append(args[1:len(args):len(args)], token)...)
	}
}

// auditIDsMax bounds the ids kept in an audit row's detail.
const auditIDsMax = 1000

// taskAction applies an action in chunks of 1000 tasks. Each chunk locks
// its rows (reading their status before), changes those in the right
// state, and writes the action's one audit row in the same transaction:
// inserted with the first chunk, brought up to date by the next ones, so it
// always says exactly what is committed. It returns the ids that changed.
func (s *Store) taskAction(ctx context.Context, a TaskAction, after string, ids []int64, act actionFunc) ([]int64, error) {
	changed := slices.Clone(a.Also)
	before := maps.Clone(a.AlsoBefore)
	if before == nil {
		before = map[string]int{}
	}
	target := a.Target
	if target == "" {
		target = IDsTarget(ids)
	}
	var auditID int64
	requested := cmp.Or(a.Requested, len(ids))
	for first := true; first || len(ids) > 0; first = false {
		chunk := ids[:min(len(ids), 1000)]
		ids = ids[len(chunk):]
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			was, attempts, err := lockStatus(ctx, tx, chunk)
			if err != nil {
				return err
			}
			var done []int64
			if fenced := a.fence(chunk, attempts); len(fenced) > 0 {
				if done, err = act(ctx, tx, newToken(), fenced, was); err != nil {
					return err
				}
			}
			counts := maps.Clone(before)
			for _, id := range done {
				counts[task.Status(was[id]).String()]++
			}
			all := append(append([]int64{}, changed...), done...) // [] in the audit row, not null
			detail := maps.Clone(a.Detail)
			if detail == nil {
				detail = map[string]any{}
			}
			detail["requested"], detail["before"], detail["after"] = requested, counts, after
			detail["ids"] = all[:min(len(all), auditIDsMax)]
			if len(all) > auditIDsMax {
				detail["ids_truncated"] = true
			}
			d, _ := json.Marshal(detail)
			if auditID == 0 {
				if auditID, err = insertAudit(ctx, tx, a.Actor, a.Action, target, len(all), string(d)); err != nil {
					return err
				}
			} else if _, err := tx.ExecContext(ctx, qAuditUpdate, len(all), string(d), auditID); err != nil {
				return fmt.Errorf("audit: %w", err)
			}
			changed, before = all, counts
			return nil
		})
		if err != nil {
			return changed, fmt.Errorf("%s %d tasks: %w", a.Action, len(chunk), err)
		}
	}
	return changed, nil
}

// fence returns the ids whose attempt now (attempts) is the one the
// operator saw, or who saw none.
func (a TaskAction) fence(ids []int64, attempts map[int64]int) []int64 {
	if len(a.Attempts) == 0 {
		return ids
	}
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		if a.Attempts.Current(id, attempts[id]) {
			out = append(out, id)
		}
	}
	return out
}

// lockStatus locks tasks and returns their status and attempt by id.
func lockStatus(ctx context.Context, tx *sql.Tx, ids []int64) (status, attempt map[int64]int, err error) {
	status, attempt = make(map[int64]int, len(ids)), make(map[int64]int, len(ids))
	if len(ids) == 0 {
		return status, attempt, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(qActionLock, placeholders(len(ids))), args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var st, at int
		if err := rows.Scan(&id, &st, &at); err != nil {
			return nil, nil, err
		}
		status[id], attempt[id] = st, at
	}
	return status, attempt, rows.Err()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// Audit records an action that changed nothing in the task center itself
// (a kill request carried by Redis, for example).
func (s *Store) Audit(ctx context.Context, a Actor, action, target string, affected int, detail any) error {
	d, _ := json.Marshal(detail)
	_, err := insertAudit(ctx, s.db, a, action, target, affected, string(d))
	return err
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insertAudit writes one task_audit row (the database clock stamps it) and
// returns its id.
func insertAudit(ctx context.Context, db execer, a Actor, action, target string, affected int, detail string) (int64, error) {
	q, args := qAuditInsert, []any{truncate(a.User, 128), truncate(a.Origin, 128), action, truncate(target, 255), affected, detail}
	if a.Key != "" {
		q, args = qAuditInsertKey, append(args, truncate(a.Key, 64))
	}
	res, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("audit %s: %w", action, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("audit %s: %w", action, err)
	}
	return id, nil
}

// AuditList returns audit rows newest first, before id beforeID (0: from
// the newest).
func (s *Store) AuditList(ctx context.Context, beforeID int64, limit int) ([]AuditEntry, error) {
	if beforeID <= 0 {
		beforeID = math.MaxInt64
	}
	out, err := s.audit(ctx, qAuditList, beforeID, limit)
	if err != nil {
		return nil, fmt.Errorf("list audit log: %w", err)
	}
	return out, nil
}

// AuditLast returns the latest audit entry of action on target ("queue
// mail"), or nil when there is none.
func (s *Store) AuditLast(ctx context.Context, action, target string) (*AuditEntry, error) {
	out, err := s.audit(ctx, qAuditLast, action, target)
	if err != nil {
		return nil, fmt.Errorf("read the last %s of %s: %w", action, target, err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return &out[0], nil
}

// audit reads the audit entries q selects (auditColumns).
func (s *Store) audit(ctx context.Context, q string, args ...any) ([]AuditEntry, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var at, detail string
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Origin, &e.Key, &e.Action, &e.Target, &e.Affected, &detail); err != nil {
			return nil, err
		}
		if json.Valid([]byte(detail)) {
			e.Detail = json.RawMessage(detail)
		}
		e.CreatedAt = parseUnix(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// IDsTarget names a set of task ids for the audit log, shortened.
func IDsTarget(ids []int64) string {
	var b strings.Builder
	b.WriteString("tasks ")
	for i, id := range ids {
		if i == 20 {
			fmt.Fprintf(&b, " and %d more", len(ids)-20)
			break
		}
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprint(&b, id)
	}
	return b.String()
}

// TaskState is what an action needs to know of a task to say why it did not
// apply to it.
type TaskState struct {
	Status  task.Status
	Type    task.Type
	Attempt int
	Queue   string // the queue its messages go to
}

// TaskStates returns the state of each of ids that exists.
func (s *Store) TaskStates(ctx context.Context, ids []int64) (map[int64]TaskState, error) {
	out := make(map[int64]TaskState, len(ids))
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), 1000)]
		ids = ids[len(chunk):]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := s.db.QueryContext(ctx, fmt.Sprintf(qTaskStates, placeholders(len(chunk))), args...)
		if err != nil {
			return nil, fmt.Errorf("read task states: %w", err)
		}
		for rows.Next() {
			var id int64
			var st TaskState
			if err := rows.Scan(&id, &st.Status, &st.Type, &st.Attempt, &st.Queue); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read task states: %w", err)
			}
			out[id] = st
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("read task states: %w", err)
		}
	}
	return out, nil
}

// CodeNamed reports whether the task center names task code code: a node
// recorded a route for it or a task of it is there, in any state.
func (s *Store) CodeNamed(ctx context.Context, code string) (bool, error) {
	var named bool
	if err := s.db.QueryRowContext(ctx, qCodeNamed, code, code, code).Scan(&named); err != nil {
		return false, fmt.Errorf("look up task code %s: %w", code, err)
	}
	return named, nil
}

// QueueNamed reports whether the task center names queue q: a node
// recorded a handler for it, a pause or reshard of it is in force, or a
// task of it waits, runs, is dead or cancelled. Finished tasks are not read (there can be millions).
func (s *Store) QueueNamed(ctx context.Context, q string) (bool, error) {
	var named bool
	if err := s.db.QueryRowContext(ctx, qQueueNamed, q, q, q, q, q).Scan(&named); err != nil {
		return false, fmt.Errorf("look up queue %s: %w", q, err)
	}
	return named, nil
}
