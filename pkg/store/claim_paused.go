package store

import (
	"context"
	"fmt"

	"github.com/taskd/taskd/pkg/task"
)

// ClaimCursor is a keyset position (claim_key, id) in one priority's range
// of idx_claim.
type ClaimCursor struct {
	Key string // claim_key as the database prints it
	ID  int64
}

// claimCursorStart is before every due time.
const claimCursorStart = "1000-01-01 00:00:00.000"

// ClaimFilter leaves the tasks of paused queues out of a claim.
type ClaimFilter struct {
	// Paused reports whether a queue is paused.
	Paused func(queue string) bool
	// From is where each priority's window starts; the claim moves it past
	// a leading run of paused rows. Reset it (zero) when the set of paused
	// queues changes and now and then, for rows inserted with a due time
	// before a cursor.
	From [10]ClaimCursor
}

// TaskClaimDueFiltered claims like TaskClaimDue, leaving out tasks of
// paused queues (see qClaimWindow). more reports that a window was full:
// there may be more due rows to look at right away.
func (s *Store) TaskClaimDueFiltered(ctx context.Context, claimID string, limit int, f *ClaimFilter) (msgs []*task.Message, more bool, err error) {
	if limit <= 0 {
		return nil, false, nil
	}
	args := make([]any, 0, 40)
	for p := range f.From {
		c := f.From[p]
		if c.Key == "" {
			c.Key = claimCursorStart
		}
		args = append(args, c.Key, c.Key, c.ID, limit)
	}
	rows, err := s.db.QueryContext(ctx, qClaimWindow, args...)
	if err != nil {
		return nil, false, fmt.Errorf("claim: select due tasks: %w", err)
	}
	type cand struct {
		id          int64
		key         string
		paused      bool
		queue, code string
	}
	var byPrio [10][]cand
	for rows.Next() {
		var c cand
		var prio int
		if err := rows.Scan(&c.id, &prio, &c.key, &c.queue, &c.code); err != nil {
			rows.Close()
			return nil, false, fmt.Errorf("claim: select due tasks: %w", err)
		}
		c.paused = f.Paused(task.QueueOf(c.queue, c.code))
		if prio >= 0 && prio < len(byPrio) {
			byPrio[prio] = append(byPrio[prio], c)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("claim: select due tasks: %w", err)
	}
	var ids []any
	for p, cs := range byPrio {
		more = more || len(cs) == limit
		lead := 0
		for lead < len(cs) && cs[lead].paused {
			lead++
		}
		switch {
		case lead < len(cs):
			f.From[p] = ClaimCursor{Key: cs[lead].key, ID: cs[lead].id}
		case lead > 0:
			f.From[p] = ClaimCursor{Key: cs[lead-1].key, ID: cs[lead-1].id + 1}
		}
		for _, c := range cs[lead:] {
			if !c.paused && len(ids) < limit {
				ids = append(ids, c.id)
			}
		}
	}
	if len(ids) == 0 {
		return nil, more, nil
	}
	in := placeholders(len(ids))
	res, err := s.db.ExecContext(ctx, fmt.Sprintf(qClaimIDs, in), append([]any{claimID}, ids...)...)
	if err != nil {
		return nil, more, fmt.Errorf("claim: compare-and-set: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, more, nil
	}
	rs, err := s.db.QueryContext(ctx, fmt.Sprintf(qClaimedRows, in), append(ids, claimID)...)
	if err != nil {
		// Claimed but unread: recovery re-dispatches them after the window.
		return nil, more, fmt.Errorf("claim: read back: %w", err)
	}
	defer rs.Close()
	for rs.Next() {
		var m task.Message
		var payload []byte
		var due, disp string
		if err := rs.Scan(&m.ID, &m.Attempt, &m.Code, &m.Type, &m.Queue, &payload, &m.CronExpr,
			&m.Timezone, &m.Priority, &m.Timeout, &m.MaxRetry, &m.RetryCount, &m.UniqueKey, &due, &disp); err != nil {
			return nil, more, fmt.Errorf("claim: read back: %w", err)
		}
		m.Payload = payload
		m.Queue = task.QueueOf(m.Queue, m.Code)
		m.DueUnixMS = parseUnix(due).UnixMilli()
		m.DispatchedUnixMS = parseUnix(disp).UnixMilli()
		msgs = append(msgs, &m)
	}
	return msgs, more, rs.Err()
}
