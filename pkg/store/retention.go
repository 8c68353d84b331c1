package store

import (
	"context"
	"fmt"
	"time"

	"github.com/taskd/taskd/pkg/task"
)

// TaskPurgeFinished deletes up to limit succeeded or cancelled tasks that
// finished more than age ago, and returns how many it deleted. Each call
// is one short statement.
func (s *Store) TaskPurgeFinished(ctx context.Context, age time.Duration, limit int) (int, error) {
	total := 0
	for _, st := range []task.Status{task.Succeeded, task.Cancelled} {
		res, err := s.db.ExecContext(ctx, qPurgeTasks, int(st), age.Microseconds(), limit-total)
		if err != nil {
			return total, fmt.Errorf("purge finished tasks: %w", err)
		}
		n, _ := res.RowsAffected()
		total += int(n)
		if total >= limit {
			break
		}
	}
	return total, nil
}

// RunPurge deletes up to limit task_run rows older than age.
func (s *Store) RunPurge(ctx context.Context, age time.Duration, limit int) (int, error) {
	res, err := s.db.ExecContext(ctx, qPurgeRuns, age.Microseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("purge runs: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}
