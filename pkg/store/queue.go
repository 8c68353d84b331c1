package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/taskd/taskd/pkg/limit"
)

// Queue is the state of one queue in the task center.
type Queue struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused"`
	// Shards is the number of lists new messages are spread over, Span the
	// number workers consume (0: as configured / as Shards).
	Shards int `json:"shards"`
	Span   int `json:"span"`
	// Limit is the queue's flow control, and LimitSource where it came
	// from: "config" (a node's configuration), "operator" (taskd limit)
	// or "" (none).
	Limit       limit.Limit `json:"limit"`
	LimitSource string      `json:"limit_source,omitempty"`
	UpdatedAt   time.Time   `json:"updated_at,omitzero"` // zero: the queue has no row yet
}

// Limit sources.
const (
	LimitFromConfig   = "config"
	LimitFromOperator = "operator"
)

// queueScanner is a row of queueColumns (after the name).
type queueScanner interface{ Scan(dest ...any) error }

// scanQueue reads queueColumns into q, plus extra.
func scanQueue(r queueScanner, q *Queue, head []any, tail ...any) error {
	var rate, periodMS int
	dest := append(head, &q.Paused, &q.Shards, &q.Span, &rate, &periodMS, &q.Limit.Burst, &q.Limit.MaxRunning,
		&q.Limit.Per, &q.Limit.Serial, &q.LimitSource)
	if err := r.Scan(append(dest, tail...)...); err != nil {
		return err
	}
	q.Limit.Rate = limit.Rate{N: rate, Period: time.Duration(periodMS) * time.Millisecond}
	return nil
}

// limitArgs are the arguments of a limit's columns, rate to serial.
func limitArgs(l limit.Limit) []any {
	return []any{l.Rate.N, l.Rate.Period.Milliseconds(), l.Burst, l.MaxRunning, l.Per, l.Serial}
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
		if err := scanQueue(rows, &q, []any{&q.Name}, &at); err != nil {
			return nil, fmt.Errorf("list queues: %w", err)
		}
		q.UpdatedAt = parseUnix(at)
		out = append(out, q)
	}
	return out, rows.Err()
}

// QueueSeed records the configured shard counts of queues that have none
// recorded yet, so that nodes whose configurations differ still agree on
// one layout: the first node to start sets it, `taskd reshard` changes
// it. A row a limit or a pause wrote first records none.
//
// Each seed (this and LimitSeed) is one statement however many queues a
// node configures (a queue per task code, as PHP teams lay them out, is
// hundreds), and takes its rows in name order, as every node does, so
// that nodes starting together do not deadlock.
func (s *Store) QueueSeed(ctx context.Context, shards map[string]int) error {
	var rows []string
	var args []any
	for _, name := range slices.Sorted(maps.Keys(shards)) {
		if n := shards[name]; n > 1 {
			rows, args = append(rows, "(?, ?, ?)"), append(args, name, n, n)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, fmt.Sprintf(qQueueSeed, strings.Join(rows, ", ")), args...); err != nil {
		return fmt.Errorf("record the shards of %d queues: %w", len(rows), err)
	}
	return nil
}

// LimitSeed records the configured limits of the queues a node
// configures (configured: every queue of its configuration; limits: those
// that set one), unless an operator set a queue's limit: nodes follow
// the task center, so every scheduler and worker agrees whatever its own
// configuration says. A queue configured without a limit loses the one a
// configuration recorded before.
func (s *Store) LimitSeed(ctx context.Context, configured []string, limits map[string]limit.Limit) error {
	var rows []string
	var seed, unseed []any
	for _, name := range slices.Sorted(slices.Values(configured)) {
		if l, ok := limits[name]; ok {
			rows, seed = append(rows, "(?, ?, ?, ?, ?, ?, ?, 'config')"), append(append(seed, name), limitArgs(l)...)
		} else {
			unseed = append(unseed, name)
		}
	}
	if len(rows) > 0 {
		if _, err := s.db.ExecContext(ctx, fmt.Sprintf(qLimitSeed, strings.Join(rows, ", ")), seed...); err != nil {
			return fmt.Errorf("record the limits of %d queues: %w", len(rows), err)
		}
	}
	if len(unseed) > 0 {
		if _, err := s.db.ExecContext(ctx, fmt.Sprintf(qLimitUnseed, placeholders(len(unseed))), unseed...); err != nil {
			return fmt.Errorf("clear the configured limits of %d queues: %w", len(unseed), err)
		}
	}
	return nil
}

// QueueChange is a change of one queue's state, with the state before.
type QueueChange struct {
	Before, After Queue
}

// QueueDefaults are a queue's configured state, in force while the task
// center records none: its shard count, and its limit.
type QueueDefaults struct {
	Shards int
	Limit  limit.Limit
}

// QueueUpdate changes one queue's state with fn in a transaction that also
// writes the audit row. configured is in force where the queue has no row
// (or no limit recorded). It reports whether anything changed.
func (s *Store) QueueUpdate(ctx context.Context, a Actor, action, name string, configured QueueDefaults,
	fn func(q *Queue) error) (QueueChange, bool, error) {
	var c QueueChange
	var changed bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		q := Queue{Name: name}
		err := scanQueue(tx.QueryRowContext(ctx, qQueueLock, name), &q, nil)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		// Resolve the defaults, so before and after say what was in force.
		if q.Shards == 0 {
			q.Shards = max(1, configured.Shards)
		}
		if q.LimitSource == "" && !configured.Limit.IsZero() {
			q.Limit, q.LimitSource = configured.Limit, LimitFromConfig
		}
		q.Span = max(q.Span, q.Shards)
		c.Before, c.After = q, q
		if err := fn(&c.After); err != nil {
			return err
		}
		changed = c.After != c.Before
		if changed {
			args := append([]any{name, c.After.Paused, c.After.Shards, c.After.Span}, limitArgs(c.After.Limit)...)
			if _, err := tx.ExecContext(ctx, qQueueUpsert, append(args, c.After.LimitSource)...); err != nil {
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
