package store

import (
	"context"
	"fmt"
	"time"

	"github.com/taskd/taskd/pkg/task"
)

// QueueDepth is how many tasks of one queue are in each unfinished state,
// by the database clock.
type QueueDepth struct {
	Queue      string
	Pending    int64 // status 0, due or not
	Failed     int64 // status 4, waiting for their retry
	Due        int64 // pending or failed and due now: the backlog
	Dispatched int64
	Running    int64
	// Dead tasks (status 5) wait for an operator.
	Dead int64
	// OldestDue is how long the longest-waiting due task has been due (0
	// when none is).
	OldestDue time.Duration
}

// qQueueDepth reads idx_lane's waiting lanes alone (qWaiting), its
// in-flight lane and the held index (dead tasks): its cost follows the
// unfinished and dead tasks, never the finished ones, and a waiting task
// costs no row lookup.
var qQueueDepth = routedGroups(`SELECT MIN(queue) queue, MIN(task_code) task_code, status, SUM(n) n, SUM(due) due,
	COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(first_due), NOW(3)), 0) waited FROM (`+qWaiting+` UNION ALL
SELECT queue, task_code, status, 1, 0, NULL FROM task_center WHERE lane = 10 AND lane_at IS NOT NULL UNION ALL
SELECT queue, task_code, status, 1, 0, NULL FROM task_center FORCE INDEX (idx_held) WHERE held_status = 5
) t GROUP BY `+exactly("queue", "task_code")+`, status`, "g.task_code, g.status, g.n, g.due, g.waited")

// QueueDepths returns the depth of every queue that has unfinished or dead
// tasks, and the highest task id (how many tasks were ever submitted,
// deleted ones included).
func (s *Store) QueueDepths(ctx context.Context) (map[string]*QueueDepth, int64, error) {
	rows, err := s.db.QueryContext(ctx, qQueueDepth)
	if err != nil {
		return nil, 0, fmt.Errorf("queue depths: %w", err)
	}
	defer rows.Close()
	out := map[string]*QueueDepth{}
	for rows.Next() {
		var q, code string
		var st task.Status
		var n, due, waitedUS int64
		if err := rows.Scan(&q, &code, &st, &n, &due, &waitedUS); err != nil {
			return nil, 0, fmt.Errorf("queue depths: %w", err)
		}
		q = task.QueueOf(q, code)
		d := out[q]
		if d == nil {
			d = &QueueDepth{Queue: q}
			out[q] = d
		}
		switch st {
		case task.Pending:
			d.Pending += n
		case task.Failed:
			d.Failed += n
		case task.Dispatched:
			d.Dispatched += n
		case task.Running:
			d.Running += n
		case task.Dead:
			d.Dead += n
		}
		d.Due += due
		d.OldestDue = max(d.OldestDue, time.Duration(waitedUS)*time.Microsecond)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("queue depths: %w", err)
	}
	var maxID int64
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM task_center`).Scan(&maxID); err != nil {
		return nil, 0, fmt.Errorf("highest task id: %w", err)
	}
	return out, maxID, nil
}
