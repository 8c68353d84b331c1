package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/taskd/taskd/pkg/task"
)

// qChildHead and qChildRow insert the children of parents whose success is
// being written. A child's unique key names its parent's attempt and its
// place among the parent's children, so the task center itself refuses a
// second copy (ON DUPLICATE KEY: nothing happens), whatever wrote it.
const qChildHead = `INSERT INTO task_center (task_code, task_type, queue, payload, priority, timeout, max_retry,
	unique_key, parent_id, then_spec, plan_next_run_at, status, last_result, finished_at) VALUES `

const qChildRow = `(?, 0, ?, ?, ?, ?, ?, ?, ?, ?, NOW(3) + INTERVAL ? MICROSECOND, ?, ?, IF(? = 0, NULL, NOW(3)))`

const qChildTail = ` ON DUPLICATE KEY UPDATE id = id`

// childRowsMax bounds one insert of children (13 arguments a row).
const childRowsMax = 1000

// cutParent is why a child is dead from the start: its payload would be
// its parent's result, which was cut to the output limit.
func cutParent(parent int64, dropped int) string {
	return fmt.Sprintf("not run: the result of parent task %d, which is this task's payload, lost its first %d bytes to "+
		"worker.output_limit; raise the limit or make the parent's result smaller, and submit the parent again", parent, dropped)
}

// lostParent is the reason of a child whose parent's result, its
// payload, the task center refused to store.
func lostParent(parent int64, why string) string {
	return fmt.Sprintf("not run: the result of parent task %d, which is this task's payload, was not stored (%s); "+
		"submit the parent again once its result can be stored", parent, why)
}

// ChildUniqueKey is the unique key of the k-th child (from 0) created by
// attempt of task parent.
func ChildUniqueKey(parent int64, attempt, k int) string {
	return fmt.Sprintf("then:%d:%d:%d", parent, attempt, k)
}

// insertChildren creates, in tx, the children of the transitions that
// applied and carry Then. It runs in the transaction of the fenced write:
// a parent whose success is written has its children, one whose write the
// fence rejected (it ran twice) or that failed has none.
//
// A then_spec that does not parse (written by hand) creates no children
// rather than holding back the batch's results.
func insertChildren(ctx context.Context, tx *sql.Tx, ts []Transition, applied []bool, bytes int) error {
	var args []any
	rows, size := 0, 0
	flush := func() error {
		if rows == 0 {
			return nil
		}
		q := []byte(qChildHead)
		for i := range rows {
			if i > 0 {
				q = append(q, ", "...)
			}
			q = append(q, qChildRow...)
		}
		q = append(q, qChildTail...)
		if _, err := tx.ExecContext(ctx, string(q), args...); err != nil {
			return fmt.Errorf("insert %d children: %w", rows, err)
		}
		args, rows, size = args[:0], 0, 0
		return nil
	}
	for i := range ts {
		t := &ts[i]
		if !applied[i] || len(t.Then) == 0 {
			continue
		}
		cs, err := task.DecodeChildren(t.Then)
		if err != nil {
			continue
		}
		value := t.Result
		switch {
		case t.Value != nil:
			value = *t.Value
		case t.Lost != "":
			value = "" // the note is no payload
		}
		payload := string(task.ChildPayload(value))
		// A cut result is no payload: the child is dead from the start,
		// saying why, rather than run with the result's tail.
		status, why := task.Pending, ""
		switch dropped := task.TruncatedBytes(value); {
		case t.Lost != "":
			status, why = task.Dead, lostParent(t.ID, t.Lost)
		case dropped > 0:
			status, why = task.Dead, cutParent(t.ID, dropped)
		}
		for k := range cs {
			c := &cs[k]
			then, err := task.EncodeChildren(c.Then)
			if err != nil {
				return err
			}
			n := len(payload) + len(then)
			if overBytes(size, n, bytes) {
				if err := flush(); err != nil {
					return err
				}
			}
			size += n
			args = append(args, c.Code, c.Queue, payload, c.Priority, c.Timeout, c.MaxRetry,
				ChildUniqueKey(t.ID, t.Attempt, k), t.ID, nullString(string(then)), c.DelayMS*1000,
				int(status), nullString(why), int(status))
			if rows++; rows == childRowsMax {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}
