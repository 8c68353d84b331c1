package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/taskd/taskd/pkg/task"
)

// A batch is N member tasks plus a callback task that the task center
// creates once, when the last member has ended (succeeded, dead or
// cancelled), with the counts in its payload. Nothing is counted as it
// happens: a member has ended when its status says so, whichever path
// wrote it (a worker, recovery, the watchdog, an operator, a hand-written
// UPDATE), so retries, kills and crashes cannot make the counts drift.
// BatchFinish turns a batch whose members have all ended into its
// callback; TaskTransition calls it after writing members' ends, and the
// batch finisher (pkg/batch) calls it for every open batch it finds
// finished, so a missed call only delays a callback.

// BatchMembersMax bounds one batch.
const BatchMembersMax = 100000

// batchRowsMax bounds one insert of members.
const batchRowsMax = 1000

// BatchCallback is the task a batch creates when its last member ends.
// Payload is a JSON object; the callback's payload is it plus a "batch"
// key with the counts (see BatchCounts).
type BatchCallback struct {
	Code     string          `json:"code"`
	Queue    string          `json:"queue,omitempty"`
	Priority int             `json:"priority"`
	Timeout  int             `json:"timeout"` // seconds
	MaxRetry int             `json:"max_retry"`
	Payload  json.RawMessage `json:"payload"`
}

// BatchCounts is the "batch" key of a callback's payload: how the members
// ended.
type BatchCounts struct {
	ID        int64 `json:"id"`
	Total     int   `json:"total"`
	Succeeded int   `json:"succeeded"`
	Dead      int   `json:"dead"`
	// Cancelled counts members cancelled or deleted before they ended.
	Cancelled int `json:"cancelled"`
}

// BatchInsertParams describes a batch to insert. Members must have no
// unique key: a member that already existed would not be the batch's.
type BatchInsertParams struct {
	Members  []TaskInsertParams
	Callback BatchCallback
}

// BatchInsertResult is the new batch and its members' ids, in order.
type BatchInsertResult struct {
	ID        int64   `json:"batch_id"`
	MemberIDs []int64 `json:"member_ids"`
	// Dispatched are the messages of the members inserted dispatched
	// (TaskInsertParams.Claim), for the caller to push.
	Dispatched []*task.Message `json:"-"`
}

// BatchInsert inserts a batch and its members in one transaction.
func (s *Store) BatchInsert(ctx context.Context, p BatchInsertParams) (BatchInsertResult, error) {
	var out BatchInsertResult
	if len(p.Members) == 0 || len(p.Members) > BatchMembersMax {
		return out, task.Invalidf("a batch has 1 to %d members, not %d", BatchMembersMax, len(p.Members))
	}
	cb := p.Callback
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, qBatchInsert, len(p.Members), cb.Code, cb.Queue, cb.Priority, cb.Timeout,
			cb.MaxRetry, string(cb.Payload))
		if err != nil {
			return err
		}
		if out.ID, err = res.LastInsertId(); err != nil {
			return err
		}
		out.MemberIDs = make([]int64, 0, len(p.Members))
		all := make([]int, len(p.Members))
		for i := range p.Members {
			p.Members[i].BatchID = out.ID
			all[i] = i
		}
		for _, idx := range insertParts(p.Members, all, batchRowsMax, s.stmtBytes) {
			ids, err := insertRowsOn(ctx, tx, p.Members, idx)
			if err != nil {
				return err
			}
			for k, i := range idx {
				r := ids.result(&p.Members[i], k)
				out.MemberIDs = append(out.MemberIDs, r.ID)
				if r.Message != nil {
					out.Dispatched = append(out.Dispatched, r.Message)
				}
			}
		}
		return nil
	})
	if err != nil {
		return BatchInsertResult{}, fmt.Errorf("insert a batch of %d: %w", len(p.Members), err)
	}
	return out, nil
}

// BatchCallbackKey is the unique key of batch id's callback task: a second
// callback for one batch is refused by the task center itself.
func BatchCallbackKey(id int64) string { return fmt.Sprintf("batch:%d", id) }

// BatchFinish creates the callback of each batch in ids whose members have
// all ended and that has none yet, and returns the ids it finished. Each
// batch is one short transaction holding the batch row's lock, so any
// number of nodes may call it at once: one creates the callback, the
// others find the batch finished.
func (s *Store) BatchFinish(ctx context.Context, ids []int64) ([]int64, error) {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var done []int64
	var refused []error
	for _, id := range ids {
		ok, err := s.batchFinish(ctx, id)
		if err != nil {
			err = fmt.Errorf("finish batch %d: %w", id, err)
			if !IsRejected(err) {
				return done, errors.Join(append(refused, err)...) // the server's: the next would fail too
			}
			// This batch's own (its callback refused: a task of the
			// callback's code took its unique key): the others go on.
			refused = append(refused, err)
			continue
		}
		if ok {
			done = append(done, id)
		}
	}
	return done, errors.Join(refused...)
}

func (s *Store) batchFinish(ctx context.Context, id int64) (bool, error) {
	finished := false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var cb BatchCallback
		var payload []byte
		c := BatchCounts{ID: id}
		err := tx.QueryRowContext(ctx, qBatchLockOpen, id).Scan(&c.Total, &cb.Code, &cb.Queue, &cb.Priority,
			&cb.Timeout, &cb.MaxRetry, &payload)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // finished already, or no such batch
		}
		if err != nil {
			return err
		}
		// The batch row is locked: the reads below see every member end
		// committed before, and a concurrent finisher waits for us.
		var open bool
		if err := tx.QueryRowContext(ctx, qBatchHasOpen, id).Scan(&open); err != nil {
			return err
		}
		if open {
			return nil
		}
		if _, err := countMembers(ctx, tx, &c); err != nil {
			return err
		}
		cbPayload, err := callbackPayload(payload, c)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, qBatchCallbackInsert, cb.Code, cb.Queue, string(cbPayload), cb.Priority,
			cb.Timeout, cb.MaxRetry, BatchCallbackKey(id))
		if err != nil {
			return fmt.Errorf("insert callback: %w", err)
		}
		cbID, err := res.LastInsertId()
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, qBatchFinished, cbID, c.Succeeded, c.Dead, c.Cancelled, id); err != nil {
			return err
		}
		finished = true
		return nil
	})
	return finished, err
}

// countMembers counts how the members of c.ID stand: ended ones in c
// (members gone, deleted before they ran, as cancelled), and returns how
// many have not ended.
func countMembers(ctx context.Context, db queryer, c *BatchCounts) (open int, err error) {
	rows, err := db.QueryContext(ctx, qBatchCounts, c.ID)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	present := 0
	for rows.Next() {
		var st task.Status
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return 0, err
		}
		present += n
		switch st {
		case task.Succeeded:
			c.Succeeded += n
		case task.Dead:
			c.Dead += n
		case task.Cancelled:
			c.Cancelled += n
		default:
			open += n
		}
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	c.Cancelled += max(0, c.Total-present)
	return open, nil
}

// callbackPayload is the callback's own payload (an object) with the
// counts under "batch".
func callbackPayload(own []byte, c BatchCounts) ([]byte, error) {
	obj := map[string]json.RawMessage{}
	if len(own) > 0 {
		if err := json.Unmarshal(own, &obj); err != nil || obj == nil {
			obj = map[string]json.RawMessage{} // not an object (written by hand): counts only
		}
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	obj["batch"] = b
	return json.Marshal(obj)
}

// BatchListFinishable returns up to limit open batches whose members have
// all ended: one index dive per open batch.
func (s *Store) BatchListFinishable(ctx context.Context, limit int) ([]int64, error) {
	ids, err := queryIDs(ctx, s.db, qBatchFinishable, limit)
	if err != nil {
		return nil, fmt.Errorf("list finishable batches: %w", err)
	}
	return ids, nil
}

// Batch is a batch as `show` and tasktop present it. While it is open the
// counts are live (members ended so far), Open is the number not ended yet;
// once finished they are those its callback got.
type Batch struct {
	BatchCounts
	Open       int           `json:"open"`
	Callback   BatchCallback `json:"callback"`
	CallbackID int64         `json:"callback_id,omitempty"`
	CreatedAt  time.Time     `json:"created_at"`
	FinishedAt *time.Time    `json:"finished_at,omitempty"`
}

// BatchGet reads batch id with its progress.
func (s *Store) BatchGet(ctx context.Context, id int64) (*Batch, error) {
	var b Batch
	var payload []byte
	var created string
	var cbID sql.NullInt64
	var finished sql.NullString
	err := s.db.QueryRowContext(ctx, qBatchGet, id).Scan(&b.ID, &b.Total, &b.Callback.Code, &b.Callback.Queue,
		&b.Callback.Priority, &b.Callback.Timeout, &b.Callback.MaxRetry, &payload, &cbID,
		&b.Succeeded, &b.Dead, &b.Cancelled, &created, &finished)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, task.NotFoundf("batch %d not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("read batch %d: %w", id, err)
	}
	b.Callback.Payload = payload
	b.CallbackID = cbID.Int64
	b.CreatedAt = parseUnix(created)
	b.FinishedAt = nullUnix(finished)
	if b.FinishedAt == nil {
		live := BatchCounts{ID: id, Total: b.Total}
		if b.Open, err = countMembers(ctx, s.db, &live); err != nil {
			return nil, fmt.Errorf("read batch %d: %w", id, err)
		}
		b.BatchCounts = live
	}
	return &b, nil
}

// BatchOfCallback is the batch whose callback has unique key key, or 0.
func BatchOfCallback(key string) int64 {
	var id int64
	if n, err := fmt.Sscanf(key, "batch:%d", &id); n != 1 || err != nil || BatchCallbackKey(id) != key {
		return 0
	}
	return id
}

// Steps are a task's links to its chain and its batch.
type Steps struct {
	Parent   *task.Task   `json:"parent,omitempty"`
	Children []*task.Task `json:"children,omitempty"`
	// Batch is the batch the task is a member or the callback of, and
	// Failed its dead and cancelled members.
	Batch  *Batch       `json:"batch,omitempty"`
	Failed []*task.Task `json:"failed,omitempty"`
}

// TaskSteps reads t's parent, its first limit children and its batch
// with up to limit failed members.
func (s *Store) TaskSteps(ctx context.Context, t *task.Task, limit int) (*Steps, error) {
	st := &Steps{}
	var err error
	if t.ParentID != 0 {
		if st.Parent, err = s.TaskGet(ctx, t.ParentID); err != nil && task.ErrorCode(err) != task.CodeNotFound {
			return nil, err // a parent removed by retention is no error
		}
	}
	if st.Children, err = s.TaskList(ctx, &TaskListParams{ParentID: t.ID, Limit: limit}); err != nil {
		return nil, err
	}
	bid := t.BatchID
	if bid == 0 {
		bid = BatchOfCallback(t.UniqueKey)
	}
	if bid == 0 {
		return st, nil
	}
	if st.Batch, err = s.BatchGet(ctx, bid); err != nil {
		return nil, err
	}
	if st.Failed, err = s.BatchFailed(ctx, bid, limit); err != nil {
		return nil, err
	}
	return st, nil
}

// BatchFailed returns up to limit of batch id's dead and cancelled
// members, newest first.
func (s *Store) BatchFailed(ctx context.Context, id int64, limit int) ([]*task.Task, error) {
	var out []*task.Task
	for _, st := range []task.Status{task.Dead, task.Cancelled} {
		ts, err := s.TaskList(ctx, &TaskListParams{BatchID: id, Status: &st, Limit: limit})
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	slices.SortFunc(out, func(a, b *task.Task) int { return cmp.Compare(b.ID, a.ID) })
	return out[:min(len(out), limit)], nil
}
