package store

import (
	"context"
	"fmt"
	"time"
)

// TaskPurgeFinished deletes up to limit succeeded or cancelled tasks that
// finished more than age ago, and returns how many it deleted. Each call
// is one short statement.
func (s *Store) TaskPurgeFinished(ctx context.Context, age time.Duration, limit int) (int, error) {
	res, err := s.db.ExecContext(ctx, qPurgeTasks, age.Microseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("purge finished tasks: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// RunPurge deletes the task_run rows older than age among the limit
// oldest by id; fewer than limit deleted means it reached the runs to
// keep.
func (s *Store) RunPurge(ctx context.Context, age time.Duration, limit int) (int, error) {
	res, err := s.db.ExecContext(ctx, qPurgeRuns, limit, age.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("purge runs: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}
