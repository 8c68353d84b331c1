package store

import (
	"context"
	"fmt"
	"time"

	"github.com/taskd/taskd/pkg/task"
)

// StuckDispatched is a task in dispatched for longer than a window.
type StuckDispatched struct {
	ID           int64
	Attempt      int
	Queue        string
	DispatchedAt time.Time
}

// TaskListStuckDispatched lists up to limit tasks dispatched longer than
// window ago by the database clock, oldest first after cursor after.
func (s *Store) TaskListStuckDispatched(ctx context.Context, window time.Duration, after InFlightCursor, limit int) ([]StuckDispatched, error) {
	return s.listDispatched(ctx, qStuckDispatched, window.Microseconds(), after, limit)
}

// TaskListDispatchedBefore lists up to limit tasks still dispatched whose
// dispatch was before the instant before (the database clock), oldest
// first after cursor after.
func (s *Store) TaskListDispatchedBefore(ctx context.Context, before time.Time, after InFlightCursor, limit int) ([]StuckDispatched, error) {
	return s.listDispatched(ctx, qDispatchedBefore, unixArg(before), after, limit)
}

func (s *Store) listDispatched(ctx context.Context, query string, bound any, after InFlightCursor, limit int) ([]StuckDispatched, error) {
	from := unixArg(after.from())
	rows, err := s.db.QueryContext(ctx, query, bound, from, from, after.ID, limit)
	if err != nil {
		return nil, fmt.Errorf("list stuck dispatched tasks: %w", err)
	}
	defer rows.Close()
	var out []StuckDispatched
	for rows.Next() {
		var d StuckDispatched
		var code, disp string
		if err := rows.Scan(&d.ID, &d.Attempt, &code, &d.Queue, &disp); err != nil {
			return nil, fmt.Errorf("list stuck dispatched tasks: %w", err)
		}
		d.Queue = task.QueueOf(d.Queue, code)
		d.DispatchedAt = parseUnix(disp)
		out = append(out, d)
	}
	return out, rows.Err()
}

// UndatedTask is a task in flight without a dispatch time.
type UndatedTask struct {
	ID      int64
	Attempt int
	Status  task.Status
}

// TaskListUndatedInFlight lists up to limit tasks dispatched or running
// without a dispatch time (INSERTed so from outside).
func (s *Store) TaskListUndatedInFlight(ctx context.Context, limit int) ([]UndatedTask, error) {
	rows, err := s.db.QueryContext(ctx, qUndatedInFlight, limit)
	if err != nil {
		return nil, fmt.Errorf("list undated tasks in flight: %w", err)
	}
	defer rows.Close()
	var out []UndatedTask
	for rows.Next() {
		var u UndatedTask
		if err := rows.Scan(&u.ID, &u.Attempt, &u.Status); err != nil {
			return nil, fmt.Errorf("list undated tasks in flight: %w", err)
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// RunningTask is a task in running, as recovery sees it.
type RunningTask struct {
	ID           int64
	Attempt      int
	Code         string
	Queue        string
	Type         task.Type
	CronExpr     string
	Timezone     string
	WorkerID     string
	CrashCount   int
	PlanNextRun  time.Time
	DispatchedAt time.Time
	// StartedAt is when its attempt started, by the worker's running mark.
	StartedAt time.Time
	// Overdue is true past started_at + timeout + the grace given.
	Overdue bool
}

// InFlightCursor is a keyset position (dispatch time, id) in the
// in-flight lane, where recovery's scans go on from: the zero cursor is
// the lane's start. A scan that went back to the start after each batch
// read the same rows again when all of them were skipped (messages
// waiting behind a slow queue's backlog, rows locked elsewhere), and
// never reached a lost one behind them.
type InFlightCursor struct {
	DispatchedAt time.Time
	ID           int64
}

// from is the cursor's dispatch time; the zero cursor's is before any.
func (c InFlightCursor) from() time.Time {
	if c.DispatchedAt.IsZero() {
		return time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return c.DispatchedAt
}

// TaskListRunning lists up to limit running tasks after cursor, in
// dispatch order.
func (s *Store) TaskListRunning(ctx context.Context, grace time.Duration, after InFlightCursor, limit int) ([]RunningTask, error) {
	from := after.from()
	rows, err := s.db.QueryContext(ctx, qRunning, grace.Microseconds(), unixArg(from), unixArg(from), after.ID, limit)
	if err != nil {
		return nil, fmt.Errorf("list running tasks: %w", err)
	}
	defer rows.Close()
	var out []RunningTask
	for rows.Next() {
		var r RunningTask
		var plan, disp, started string
		if err := rows.Scan(&r.ID, &r.Attempt, &r.Code, &r.Queue, &r.Type, &r.CronExpr, &r.Timezone,
			&r.WorkerID, &r.CrashCount, &plan, &disp, &started, &r.Overdue); err != nil {
			return nil, fmt.Errorf("list running tasks: %w", err)
		}
		r.Queue = task.QueueOf(r.Queue, r.Code)
		r.PlanNextRun, r.DispatchedAt = parseUnix(plan), parseUnix(disp)
		if started != "" {
			r.StartedAt = parseUnix(started)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
