package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/taskd/taskd/pkg/task"
)

// TaskClaimDue claims up to limit due tasks for one dispatch and returns
// their messages. claimID must be unique per call (node id and a counter):
// it marks the rows this claim won so they can be read back.
//
// Three short statements, no transaction and no row lock held across a
// network call: select candidates, compare-and-set them 0/4 -> 1 with
// attempt + 1, read back the winners.
func (s *Store) TaskClaimDue(ctx context.Context, claimID string, limit int) ([]*task.Message, error) {
	if limit <= 0 {
		return nil, nil
	}
	args := make([]any, 0, claimCandidateArgs+1)
	for range claimCandidateArgs {
		args = append(args, limit)
	}
	args = append(args, limit)
	ids, err := s.queryIDs(ctx, qClaimCandidates, args...)
	if err != nil {
		return nil, fmt.Errorf("claim: select due tasks: %w", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	idArgs := make([]any, 0, len(ids)+1)
	idArgs = append(idArgs, claimID)
	for _, id := range ids {
		idArgs = append(idArgs, id)
	}
	res, err := s.db.ExecContext(ctx, fmt.Sprintf(qClaimUpdate, placeholders(len(ids))), idArgs...)
	if err != nil {
		return nil, fmt.Errorf("claim: compare-and-set: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, nil
	}
	readArgs := append(idArgs[1:len(idArgs):len(idArgs)], claimID)
	rows, err := s.db.QueryContext(ctx, fmt.Sprintf(qClaimed, placeholders(len(ids))), readArgs...)
	if err != nil {
		// The rows are claimed but unread: recovery re-dispatches them
		// after the dispatch window.
		return nil, fmt.Errorf("claim: read back: %w", err)
	}
	defer rows.Close()
	var out []*task.Message
	for rows.Next() {
		var m task.Message
		var payload []byte
		var due, disp string
		if err := rows.Scan(&m.ID, &m.Attempt, &m.Code, &m.Type, &m.Queue, &payload, &m.CronExpr,
			&m.Timezone, &m.Priority, &m.Timeout, &m.MaxRetry, &m.RetryCount, &m.UniqueKey, &due, &disp); err != nil {
			return nil, fmt.Errorf("claim: read back: %w", err)
		}
		m.Payload = payload
		m.Queue = task.QueueOf(m.Queue, m.Code)
		m.DueUnixMS = parseUnix(due).UnixMilli()
		m.DispatchedUnixMS = parseUnix(disp).UnixMilli()
		out = append(out, &m)
	}
	return out, rows.Err()
}

func (s *Store) queryIDs(ctx context.Context, q string, args ...any) ([]int64, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// NextDue returns how long until the earliest pending or failed task is due
// by the database clock (zero or negative when one is due now), and false
// when there is none.
func (s *Store) NextDue(ctx context.Context) (time.Duration, bool, error) {
	var secs sql.NullFloat64
	if err := s.db.QueryRowContext(ctx, qNextDue).Scan(&secs); err != nil {
		return 0, false, fmt.Errorf("next due time: %w", err)
	}
	if !secs.Valid {
		return 0, false, nil
	}
	return time.Duration(secs.Float64 * float64(time.Second)), true, nil
}

// Fence identifies one dispatch of a task.
type Fence struct {
	ID      int64
	Attempt int
}

// TaskMarkRunning moves dispatched tasks to running for workerID, each a
// compare-and-set on (id, attempt, status 1), in one transaction and one
// round trip. ok[i] reports whether fences[i] won; a loser is a stale or
// duplicate message.
func (s *Store) TaskMarkRunning(ctx context.Context, workerID string, fences []Fence) ([]bool, error) {
	stmts := make([]string, len(fences))
	args := make([]any, 0, 3*len(fences))
	for i, f := range fences {
		stmts[i] = qMarkRunning
		args = append(args, workerID, f.ID, f.Attempt)
	}
	var ok []bool
	err := s.withConn(ctx, func(c *sql.Conn) error {
		n, err := execTx(ctx, c, stmts, args, true)
		if err != nil {
			return err
		}
		ok = affectedOne(n)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mark %d tasks running: %w", len(fences), err)
	}
	return ok, nil
}

// RetryMode says what a transition does to retry_count.
type RetryMode string

const (
	RetryKeep  RetryMode = "keep"
	RetryInc   RetryMode = "inc"
	RetryReset RetryMode = "reset"
)

// Transition is one fenced change of a task's state, with the run row that
// records it. It applies only if the task is still at (ID, Attempt, From).
type Transition struct {
	ID      int64
	Attempt int
	From    task.Status
	To      task.Status
	Retry   RetryMode
	// Crash says what happens to crash_count, the number of times the task
	// was found held by a dead worker.
	Crash RetryMode
	// NextAt sets plan_next_run_at to an instant; NextIn to NOW(3) plus a
	// delay. Neither: unchanged. NextAt wins when both are set.
	NextAt time.Time
	NextIn *time.Duration
	// Result replaces last_result when SetResult is true.
	SetResult bool
	Result    string
	// Run, when set, is inserted into task_run if the transition applies.
	Run *RunRecord
}

// RunRecord is the task_run row of a transition. FinishedAt is the
// database's NOW(3); StartedAt is derived from Duration.
type RunRecord struct {
	Code     string
	Queue    string
	WorkerID string
	Node     string
	Outcome  task.Outcome
	Result   string
	Duration time.Duration
}

// TaskTransition applies transitions in one transaction and reports which
// applied. Run rows are written only for transitions that applied, so the
// run log and the task center never disagree. Two round trips whatever the
// batch size: the fenced updates, then the run rows and the commit.
func (s *Store) TaskTransition(ctx context.Context, ts []Transition) ([]bool, error) {
	stmts := make([]string, len(ts))
	args := make([]any, 0, 14*len(ts))
	for i := range ts {
		t := &ts[i]
		var nextAt, nextIn any
		if !t.NextAt.IsZero() {
			nextAt = unixArg(t.NextAt)
		} else if t.NextIn != nil {
			nextIn = t.NextIn.Microseconds()
		}
		stmts[i] = qTransition
		args = append(args, int(t.To), string(cmpOr(t.Retry, RetryKeep)), string(cmpOr(t.Crash, RetryKeep)),
			nextAt, nextAt, nextIn, nextIn, t.SetResult, t.Result, int(t.To), int(t.To),
			t.ID, t.Attempt, int(t.From))
	}
	var applied []bool
	err := s.withConn(ctx, func(c *sql.Conn) error {
		n, err := execTx(ctx, c, stmts, args, false)
		if err != nil {
			return err
		}
		applied = affectedOne(n)
		runQ := []byte(qRunInsertHead)
		var runArgs []any
		for i := range ts {
			if !applied[i] || ts[i].Run == nil {
				continue
			}
			if len(runArgs) > 0 {
				runQ = append(runQ, ", "...)
			}
			runQ = append(runQ, qRunInsertRow...)
			r := ts[i].Run
			runArgs = append(runArgs, ts[i].ID, ts[i].Attempt, r.Code, r.Queue, r.WorkerID, r.Node,
				r.Duration.Microseconds(), string(r.Outcome), nullString(r.Result), r.Duration.Milliseconds())
		}
		tail := []string{"COMMIT"}
		if len(runArgs) > 0 {
			tail = []string{string(runQ), "COMMIT"}
		}
		if _, err := execMulti(ctx, c, tail, runArgs); err != nil {
			rollback(c)
			return fmt.Errorf("insert runs: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("write %d task transitions: %w", len(ts), err)
	}
	return applied, nil
}

func cmpOr(a, b RetryMode) RetryMode {
	if a != "" {
		return a
	}
	return b
}

func (s *Store) withConn(ctx context.Context, fn func(*sql.Conn) error) error {
	c, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}
