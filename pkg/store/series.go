package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// RunMinute counts the attempts of one queue that ended in one minute.
type RunMinute struct {
	Queue  string
	Minute int64 // unix time / 60, by the database clock
	Ended  int64 // attempts that ended (interrupted ones excluded)
	Failed int64
}

// qRunSeries counts ended attempts per queue and minute from a unix
// minute on, reading task_run by primary key from a first id (runIDFrom):
// its cost follows the throughput of the minutes asked for, not the size
// of task_run.
const qRunSeries = `SELECT queue, FLOOR(UNIX_TIMESTAMP(finished_at) / 60) m, COUNT(*),
	SUM(outcome IN ('failed', 'dead', 'timeout', 'crashed'))
	FROM task_run FORCE INDEX (PRIMARY)
	WHERE id >= ? AND finished_at >= FROM_UNIXTIME(? * 60) AND outcome <> 'interrupted'
	GROUP BY queue, m`

// seriesSlack is how much earlier than the series' first minute its
// first id is looked for: a run's id follows its end, except that runs
// end on several nodes and their results are written in batches.
const seriesSlack = time.Minute

// RunSeries returns the attempts that ended from unix minute from on, per
// queue and minute. tasktop asks for the last thirty minutes once, then
// for the last two at each refresh.
func (s *Store) RunSeries(ctx context.Context, from int64) ([]RunMinute, error) {
	first, err := s.runIDFrom(ctx, time.Unix(from*60, 0).Add(-seriesSlack))
	if err != nil {
		return nil, fmt.Errorf("run series: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, qRunSeries, first, from)
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

// qRunEndsFrom reports whether any of the runs at or after an id (a
// handful, so that a result written late among them does not mislead the
// search) ended at or after a time; NULL when no run is there.
const qRunEndsFrom = `SELECT MAX(finished_at) >= FROM_UNIXTIME(?) FROM
	(SELECT finished_at FROM task_run FORCE INDEX (PRIMARY) WHERE id >= ? ORDER BY id LIMIT 16) w`

// runIDFrom returns about the first id of task_run whose run ended at or
// after at (beyond the last id when none did): a binary search of the
// primary key, whose order is that of the runs' ends but for results
// written late (a worker that could not reach the task center, batches of
// several nodes), some forty reads of a few rows however large task_run
// is. task_run keeps no index on finished_at: every run row would pay for
// it (migration 17).
func (s *Store) runIDFrom(ctx context.Context, at time.Time) (int64, error) {
	var lo, hi int64
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MIN(id), 0), COALESCE(MAX(id), 0) + 1 FROM task_run`).Scan(&lo, &hi); err != nil {
		return 0, err
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		var later sql.NullBool
		if err := s.db.QueryRowContext(ctx, qRunEndsFrom, unixArg(at), mid).Scan(&later); err != nil {
			return 0, err
		}
		if later.Valid && later.Bool {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}
