package store

import (
	"context"
	"fmt"
)

// RunMinute counts the attempts of one queue that ended in one minute.
type RunMinute struct {
	Queue  string
	Minute int64 // unix time / 60, by the database clock
	Ended  int64 // attempts that ended (interrupted ones excluded)
	Failed int64
}

// qRunSeries counts ended attempts per queue and minute from a unix
// minute on. It reads the idx_run_finished range only: its cost follows
// the throughput of the minutes asked for, not the size of task_run.
const qRunSeries = `SELECT queue, FLOOR(UNIX_TIMESTAMP(finished_at) / 60) m, COUNT(*),
	SUM(outcome IN ('failed', 'dead', 'timeout', 'crashed'))
	FROM task_run FORCE INDEX (idx_run_finished)
	WHERE finished_at >= FROM_UNIXTIME(? * 60) AND outcome <> 'interrupted'
	GROUP BY queue, m`

// RunSeries returns the attempts that ended from unix minute from on, per
// queue and minute. tasktop asks for the last thirty minutes once, then
// for the last two at each refresh.
func (s *Store) RunSeries(ctx context.Context, from int64) ([]RunMinute, error) {
	rows, err := s.db.QueryContext(ctx, qRunSeries, from)
	if err != nil {
		return nil, fmt.Errorf("run series: %w", err)
	}
	defer rows.Close()
	var out []RunMinute
	for rows.Next() {
		var r RunMinute
		if err := rows.Scan(&r.Queue, &r.Minute, &r.Ended, &r.Failed); err != nil {
			return nil, fmt.Errorf("run series: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("run series: %w", err)
	}
	return out, nil
}
