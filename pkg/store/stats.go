package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/taskd/taskd/pkg/task"
)

// QueueCounts are the task center's figures of one queue.
type QueueCounts struct {
	ByStatus [7]int64
	// Due is the number of pending or failed tasks due now: work that
	// waits for the scheduler, not yet in Redis. OldestDueSeconds is how
	// long the oldest of them has waited (0: none).
	Due              int64
	OldestDueSeconds float64
}

// WorkerCounts are the task center's figures of one worker.
type WorkerCounts struct {
	Running []int64 // ids of the tasks it runs
}

// StatsCounts returns per-queue and per-worker figures. Its cost follows
// the number of tasks waiting, in flight, dead or cancelled, not the size
// of the task center nor the throughput: attempts per minute and success
// rates come from Redis's per-minute counters (broker.QueueRuns).
func (s *Store) StatsCounts(ctx context.Context) (map[string]*QueueCounts, map[string]*WorkerCounts, error) {
	qs := map[string]*QueueCounts{}
	ws := map[string]*WorkerCounts{}
	queue := func(q string) *QueueCounts {
		if qs[q] == nil {
			qs[q] = &QueueCounts{}
		}
		return qs[q]
	}
	worker := func(w string) *WorkerCounts {
		if ws[w] == nil {
			ws[w] = &WorkerCounts{}
		}
		return ws[w]
	}
	err := scanRows(ctx, s.db, qStatsWaiting, func(r *sql.Rows) error {
		var q string
		var st int
		var n, due int64
		var age sql.NullFloat64
		if err := r.Scan(&q, &st, &n, &due, &age); err != nil {
			return err
		}
		c := queue(q)
		c.ByStatus[st&7] += n
		c.Due += due
		if age.Valid && age.Float64 > c.OldestDueSeconds {
			c.OldestDueSeconds = age.Float64
		}
		return nil
	})
	if err == nil {
		err = scanRows(ctx, s.db, qStatsInflight, func(r *sql.Rows) error {
			var q, w string
			var st int
			var id int64
			if err := r.Scan(&q, &st, &w, &id); err != nil {
				return err
			}
			queue(q).ByStatus[st&7]++
			if st == int(task.Running) && w != "" {
				worker(w).Running = append(worker(w).Running, id)
			}
			return nil
		})
	}
	if err == nil {
		err = scanRows(ctx, s.db, qStatsHeld, func(r *sql.Rows) error {
			var q string
			var st int
			var n int64
			if err := r.Scan(&q, &st, &n); err != nil {
				return err
			}
			queue(q).ByStatus[st&7] += n
			return nil
		})
	}
	if err != nil {
		return nil, nil, fmt.Errorf("stats: %w", err)
	}
	return qs, ws, nil
}

func scanRows(ctx context.Context, db queryer, q string, each func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
