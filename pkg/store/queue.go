package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Queue is the state of one queue in the task center.
type Queue struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused"`
	// Shards is the number of lists new messages are spread over, Span the
	// number workers consume (0: as configured / as Shards).
	Shards    int       `json:"shards"`
	Span      int       `json:"span"`
	UpdatedAt time.Time `json:"updated_at"`
}

// QueueList returns every queue that has a row.
func (s *Store) QueueList(ctx context.Context) ([]Queue, error) {
	rows, err := s.db.QueryContext(ctx, qQueueList)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	defer rows.Close()
	var out []Queue
	for rows.Next() {
		var q Queue
		var at string
		if err := rows.Scan(&q.Name, &q.Paused, &q.Shards, &q.Span, &at); err != nil {
			return nil, fmt.Errorf("list queues: %w", err)
		}
		q.UpdatedAt = parseUnix(at)
		out = append(out, q)
	}
	return out, rows.Err()
}

// QueueSeed records the configured shard counts of queues that have no
// row yet, so that nodes whose configurations differ still agree on one
// layout: the first node to start sets it, `taskd reshard` changes it.
func (s *Store) QueueSeed(ctx context.Context, shards map[string]int) error {
	for name, n := range shards {
		if n <= 1 {
			continue
		}
		if _, err := s.db.ExecContext(ctx, qQueueSeed, name, n, n); err != nil {
			return fmt.Errorf("record shards of queue %s: %w", name, err)
		}
	}
	return nil
}

// QueueChange is a change of one queue's state, with the state before.
type QueueChange struct {
	Before, After Queue
}

// QueueUpdate changes one queue's state with fn in a transaction that also
// writes the audit row. configured is the queue's configured shard count,
// used when it has no row. It reports whether anything changed.
func (s *Store) QueueUpdate(ctx context.Context, a Actor, action, name string, configured int,
	fn func(q *Queue) error) (QueueChange, bool, error) {
	var c QueueChange
	var changed bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		q := Queue{Name: name}
		err := tx.QueryRowContext(ctx, qQueueLock, name).Scan(&q.Paused, &q.Shards, &q.Span)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		// Resolve the defaults, so before and after say what was in force.
		if q.Shards == 0 {
			q.Shards = max(1, configured)
		}
		q.Span = max(q.Span, q.Shards)
		c.Before, c.After = q, q
		if err := fn(&c.After); err != nil {
			return err
		}
		changed = c.After != c.Before
		if changed {
			if _, err := tx.ExecContext(ctx, qQueueUpsert, name, c.After.Paused, c.After.Shards, c.After.Span); err != nil {
				return err
			}
		}
		affected := 0
		if changed {
			affected = 1
		}
		d, _ := json.Marshal(map[string]any{"before": c.Before, "after": c.After})
		_, err = insertAudit(ctx, tx, a, action, "queue "+name, affected, string(d))
		return err
	})
	if err != nil {
		return c, false, fmt.Errorf("%s queue %s: %w", action, name, err)
	}
	return c, changed, nil
}

// QueueShrinkSpan lowers a queue's span to its shards once the reshard
// that left them apart is older than grace. The caller has emptied the
// retired lists. It reports whether it changed the row.
func (s *Store) QueueShrinkSpan(ctx context.Context, q Queue, grace time.Duration) (bool, error) {
	res, err := s.db.ExecContext(ctx, qQueueShrinkSpan, q.Name, q.Span, q.Shards, grace.Microseconds())
	if err != nil {
		return false, fmt.Errorf("retire shards of queue %s: %w", q.Name, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}
