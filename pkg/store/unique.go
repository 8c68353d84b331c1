package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/taskd/taskd/pkg/task"
)

// ConflictMode is what a submit does when a task of its code already
// holds its unique key.
type ConflictMode int

const (
	// Reject creates nothing and returns the task holding the key.
	Reject ConflictMode = iota
	// Replace gives a waiting task (pending, or failed waiting for its
	// retry) the new payload and due time.
	Replace
	// Debounce gives a waiting task the new payload and moves its due
	// time out to now + Debounce, but never past MaxWait after the task
	// was created.
	Debounce
	// UntilDone treats the key as free once the task holding it has ended
	// (succeeded, dead, cancelled): a new task takes it over.
	UntilDone
)

// Conflict says what a submit does about a task holding its unique key.
type Conflict struct {
	Mode ConflictMode
	// Debounce and MaxWait shape Debounce.
	Debounce, MaxWait time.Duration
}

// String names the mode as --on-conflict takes it.
func (m ConflictMode) String() string {
	switch m {
	case Replace:
		return "replace"
	case Debounce:
		return "debounce"
	case UntilDone:
		return "until-done"
	}
	return "reject"
}

// qReplaceWaiting gives a waiting task a new payload and due time; a task
// already dispatched or running is never changed (the fence on status).
const qReplaceWaiting = `UPDATE task_center SET payload = ?, scheduled_at = NULL,
	plan_next_run_at = COALESCE(FROM_UNIXTIME(?), NOW(3) + INTERVAL ? MICROSECOND)
	WHERE id = ? AND status IN (0, 4)`

// qDebounceWaiting moves a waiting task's due time out to now + the
// debounce (never earlier than it was), up to its creation + the maximum
// wait, and gives it the new payload.
var qDebounceWaiting = `UPDATE task_center SET payload = ?, scheduled_at = NULL,
	plan_next_run_at = GREATEST(` + zeroAsNow("plan_next_run_at") + `, LEAST(NOW(3) + INTERVAL ? MICROSECOND, ` + zeroAsNow("created_at") + ` + INTERVAL ? MICROSECOND))
	WHERE id = ? AND status IN (0, 4)`

// qReleaseKey moves the unique key of an ended task to released_key.
const qReleaseKey = `UPDATE task_center SET released_key = unique_key, unique_key = NULL
	WHERE id = ? AND unique_key = ? AND status IN (3, 5, 6)`

const qTaskStatus = `SELECT status FROM task_center WHERE id = ?`

// onConflict is the outcome of p, whose unique key task id holds (0: a
// task held it a moment ago, and was deleted since).
func (s *Store) onConflict(ctx context.Context, p *TaskInsertParams, id int64) (TaskInsertResult, error) {
	if p.OnConflict.Mode == Reject {
		return TaskInsertResult{ID: id, Existing: true}, nil
	}
	return s.resolveConflict(ctx, p, id)
}

// resolveConflict applies p's conflict mode to the task id holding its
// unique key, and returns the outcome of p.
func (s *Store) resolveConflict(ctx context.Context, p *TaskInsertParams, id int64) (TaskInsertResult, error) {
	c := p.OnConflict
	var res sql.Result
	var err error
	switch c.Mode {
	case Replace:
		var runAt any
		if !p.RunAt.IsZero() {
			runAt = unixArg(p.RunAt)
		}
		res, err = s.db.ExecContext(ctx, qReplaceWaiting, string(p.Payload), runAt, p.Delay.Microseconds(), id)
	case Debounce:
		res, err = s.db.ExecContext(ctx, qDebounceWaiting, string(p.Payload), c.Debounce.Microseconds(), c.MaxWait.Microseconds(), id)
	case UntilDone:
		return s.takeOverKey(ctx, p, id)
	}
	if err != nil {
		return TaskInsertResult{}, fmt.Errorf("%s task %d: %w", c.Mode, id, err)
	}
	if res != nil {
		if n, _ := res.RowsAffected(); n > 0 {
			return TaskInsertResult{ID: id, Existing: true, Changed: true}, nil
		}
	}
	return s.unchanged(ctx, p, id)
}

// unchanged reports the task holding p's key, left as it is, and why.
func (s *Store) unchanged(ctx context.Context, p *TaskInsertParams, id int64) (TaskInsertResult, error) {
	r := TaskInsertResult{ID: id, Existing: true}
	var st task.Status
	err := s.db.QueryRowContext(ctx, qTaskStatus, id).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		r.Reason = "it was deleted meanwhile"
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("read task %d: %w", id, err)
	}
	r.Status = st
	switch {
	case p.OnConflict.Mode == Reject:
		r.Reason = fmt.Sprintf("a task with unique key %q exists", p.UniqueKey)
	case st == task.Dispatched || st == task.Running:
		r.Reason = fmt.Sprintf("a task with unique key %q is %s: a task already dispatched or running is never changed", p.UniqueKey, st)
	case p.OnConflict.Mode == UntilDone:
		r.Reason = fmt.Sprintf("a task with unique key %q has not ended", p.UniqueKey)
	default:
		r.Reason = fmt.Sprintf("a task with unique key %q has ended (%s); --on-conflict until-done submits anew after that", p.UniqueKey, st)
	}
	return r, nil
}

// takeOverKey inserts p in place of the ended task id, which gives up its
// key, in one transaction. A task that has not ended keeps it; of two
// submits racing for an ended task's key, one inserts and the other finds
// the new task.
func (s *Store) takeOverKey(ctx context.Context, p *TaskInsertParams, id int64) (TaskInsertResult, error) {
	var me *mysql.MySQLError
	for attempt := 0; attempt < takeOverTries; attempt++ {
		var out TaskInsertResult
		retry := false
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, qReleaseKey, id, p.UniqueKey)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				retry = true // not ended, or someone else took it over
				return nil
			}
			ids, err := insertRowsOn(ctx, tx, []TaskInsertParams{*p}, []int{0})
			if err != nil {
				return err
			}
			out = ids.result(p, 0)
			return nil
		})
		if errors.As(err, &me) && (me.Number == 1062 || me.Number == 1213) {
			retry = true
		} else if err != nil {
			return TaskInsertResult{}, fmt.Errorf("until-done: take over the key of task %d: %w", id, err)
		}
		if !retry {
			return out, nil
		}
		// The key holder changed: look it up again.
		holder, err := s.taskIDByUnique(ctx, p.Code, p.UniqueKey)
		if err != nil {
			return TaskInsertResult{}, err
		}
		if holder == 0 {
			rs, err := s.insertRows(ctx, []TaskInsertParams{*p}, []int{0})
			if errors.As(err, &me) && me.Number == 1062 {
				continue
			}
			if err != nil {
				return TaskInsertResult{}, err
			}
			return rs[0], nil
		}
		if holder != id {
			id = holder
			continue
		}
		break
	}
	return s.unchanged(ctx, p, id)
}

// takeOverTries bounds the lookups of a key whose holder keeps changing
// under an until-done submit.
const takeOverTries = 5
