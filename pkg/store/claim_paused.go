package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/taskd/taskd/pkg/task"
)

// ClaimCursor is a keyset position (lane_at, id) in one priority's lane of
// idx_lane.
type ClaimCursor struct {
	Key string // lane_at as the database prints it
	ID  int64
}

// claimCursorStart is before every due time but the zero date of a
// seed-style INSERT (due now), which a window from the start reads
// apart: MySQL 8 under NO_ZERO_DATE refuses a zero date as a literal
// ("Incorrect DATETIME value") and failed every claim.
const claimCursorStart = "1000-01-01 00:00:00.000"

// ClaimFilter leaves the tasks of paused queues out of a claim, and those
// of queues whose Redis lists are full.
type ClaimFilter struct {
	// Paused reports whether a queue is paused.
	Paused func(queue string) bool
	// Room, when set, bounds the tasks of each queue the claim takes; a
	// queue with no room is left out like a paused one.
	Room Room
	// Grouped, when set, reports whether a queue claims its tasks with a
	// group group by group (TaskClaimGroups): those are left out like
	// paused ones, and their groups added to Groups (queue -> group keys,
	// as GroupKey makes them), for the caller to claim.
	Grouped func(queue string) bool
	Groups  map[string]map[string]bool
	// From is where each priority's window starts: the claims walk the
	// due rows with it, a window at a time. A window read whole moves it
	// past its last row, whatever was left of it (paused, full, or more
	// than its queue's room); a window read short leaves it at its end,
	// where it sees the rows that fall due after. Reset it (zero) when the
	// set of paused queues changes and now and then once it passed every
	// due row, for rows inserted with a due time before a cursor.
	From [10]ClaimCursor

	// head: the last claim read the lanes from their start. Once a cursor
	// has moved, at most every other claim does, for the tasks of queues
	// with room at the head, which the walk left behind while their queue
	// was full. So a queue that workers drain between claims keeps its
	// rows moving, and the walk goes on past its backlog to the tasks of
	// other queues due behind it.
	head bool
	// left are the queues whose rows a window read from the cursors
	// passed without taking them all: a read from the head is worth its
	// cost only while one of them has room (RoomLeft).
	left map[string]bool
	// passed: the last read from the cursors reached the end of every
	// lane's due rows.
	passed bool
	// behind holds, per queue and priority, when the priority's cursor
	// last passed rows of the queue that only its want of room left out
	// (zero: none). Until a read from the head takes them, the queue's
	// rows of lower priorities are not taken either: a full queue that
	// drains gets its priorities in order, not the rows its cursors happen
	// to be at. For at most behindFor: rows deeper in their lane than a
	// head read reaches (behind more than a claim's worth of other queues'
	// left-out rows) wait for the windows' reset, and the queue's lower
	// priorities must not wait with them.
	behind map[string]*[10]time.Time
	// Now is the clock of behindFor (nil: time.Now), read once a claim
	// into at.
	Now func() time.Time
	at  time.Time
	// span is the window each priority's next read from its cursor takes
	// (0: the claim's size). It doubles, up to walkSpanMax, after a
	// window whose every row was left out, so a walk past a backlog of N
	// rows takes about log2(N) reads more than N/walkSpanMax, not N over
	// the claim's size.
	span [10]int
}

// behindFor is how long rows passed for want of room hold back their
// queue's lower priorities.
const behindFor = 2 * time.Second

// walkSpanMax bounds a window of the walk: 8,192 index entries, about 7
// ms of the server's CPU and 300 KB to the client.
const walkSpanMax = 8192

// pass records a row of queue q in lane p that the walk moved past. A
// row left out only for want of room (free: its queue not paused, its
// group not held) holds back the queue's lower priorities until a read
// from the head takes it.
func (f *ClaimFilter) pass(q string, p int, free bool) {
	if f.left == nil {
		f.left = map[string]bool{}
	}
	f.left[q] = true
	if free {
		if f.behind == nil {
			f.behind = map[string]*[10]time.Time{}
		}
		if f.behind[q] == nil {
			f.behind[q] = &[10]time.Time{}
		}
		f.behind[q][p] = f.at
	}
}

// higherBehind reports whether queue q has rows of a priority higher than
// p that the walk passed for want of room, within behindFor.
func (f *ClaimFilter) higherBehind(q string, p int) bool {
	at := f.behind[q]
	if at == nil {
		return false
	}
	for h := range p {
		if !at[h].IsZero() {
			if f.at.Sub(at[h]) <= behindFor {
				return true
			}
			at[h] = time.Time{}
		}
	}
	return false
}

// RoomLeft reports whether a queue the cursors left rows of behind them
// may take some now.
func (f *ClaimFilter) RoomLeft() bool {
	for q := range f.left {
		if !f.Paused(q) && (f.Room == nil || f.Room(q) != 0) {
			return true
		}
	}
	return false
}

// Passed reports whether the cursors have walked past every due row: a
// reset then loses nothing of a walk still under way.
func (f *ClaimFilter) Passed() bool { return f.passed }

// TaskClaimDueFiltered claims like TaskClaimDue, leaving out tasks of
// paused queues (see qClaimWindow). more reports that a window was full:
// there may be more due rows to look at right away.
func (s *Store) TaskClaimDueFiltered(ctx context.Context, limit int, f *ClaimFilter) (msgs []*task.Message, more bool, err error) {
	if limit <= 0 {
		return nil, false, nil
	}
	f.at = time.Now()
	if f.Now != nil {
		f.at = f.Now()
	}
	head := !f.head && f.From != [10]ClaimCursor{} && f.RoomLeft()
	f.head = head
	var span [10]int
	args := make([]any, 0, 40)
	for p := range f.From {
		c := f.From[p]
		span[p] = max(limit, f.span[p])
		if head {
			c, span[p] = ClaimCursor{}, limit
		}
		fromStart := c.Key == ""
		if fromStart {
			c.Key = claimCursorStart
		}
		args = append(args, c.Key, c.Key, c.ID, fromStart, span[p])
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
	var grouped []int64 // candidates of grouped queues, whose group is read apart
	raws := map[int64]string{}
	for rows.Next() {
		var c cand
		var prio int
		var raw string
		if err := rows.Scan(&c.id, &prio, &c.key, &c.queue, &c.code, &raw); err != nil {
			rows.Close()
			return nil, false, fmt.Errorf("claim: select due tasks: %w", err)
		}
		c.queue = task.QueueOf(c.queue, c.code)
		c.paused = f.Paused(c.queue)
		if f.Grouped != nil && f.Grouped(c.queue) {
			grouped = append(grouped, c.id)
			raws[c.id] = raw
		}
		if prio >= 0 && prio < len(byPrio) {
			byPrio[prio] = append(byPrio[prio], c)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("claim: select due tasks: %w", err)
	}
	inGroup, err := s.groupsOf(ctx, grouped)
	if err != nil {
		return nil, false, fmt.Errorf("claim: read groups: %w", err)
	}
	for p := range byPrio {
		for i := range byPrio[p] {
			c := &byPrio[p][i]
			if group, ok := inGroup[c.id]; ok {
				c.paused = true
				if f.Groups == nil {
					f.Groups = map[string]map[string]bool{}
				}
				if f.Groups[c.queue] == nil {
					f.Groups[c.queue] = map[string]bool{}
				}
				f.Groups[c.queue][GroupKey(raws[c.id], c.code, group)] = true
			}
		}
	}
	skip := s.skip.snapshot(time.Now())
	taken := map[string]int{}
	fits := func(q string) bool {
		if f.Room == nil {
			return true
		}
		r := f.Room(q)
		return r < 0 || taken[q] < r
	}
	var ids []int64
	for p, cs := range byPrio {
		more = more || len(cs) == span[p]
		walked := !head && len(cs) == span[p]
		took := len(ids)
		if walked {
			f.From[p] = ClaimCursor{Key: cs[len(cs)-1].key, ID: cs[len(cs)-1].id + 1}
		}
		waits := map[string]bool{} // queues a head read left rows of this lane of
		for _, c := range cs {
			free := !c.paused && !skip[c.id]
			claimable := free && fits(c.queue) && !f.higherBehind(c.queue, p)
			switch {
			case claimable && len(ids) < limit:
				ids = append(ids, c.id)
				taken[c.queue]++
			case claimable && walked:
				// Only the claim's size left it out: the walk goes on
				// from here.
				f.From[p] = ClaimCursor{Key: c.key, ID: c.id}
				walked = false
			case walked:
				f.pass(c.queue, p, free)
			case head && free:
				waits[c.queue] = true
			}
		}
		if head && len(cs) < span[p] {
			// The head read saw the whole of the lane's due rows: a queue
			// with none of them left has no rows of it behind the cursor.
			for q, at := range f.behind {
				if !waits[q] {
					at[p] = time.Time{}
				}
			}
		}
		switch {
		case head:
		case walked && len(ids) == took:
			// A window of left-out rows only: the next goes twice as far.
			f.span[p] = min(2*span[p], max(limit, walkSpanMax))
		default:
			f.span[p] = 0
		}
	}
	if !head {
		f.passed = !more
	}
	if len(ids) == 0 {
		return nil, more, nil
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		msgs, err = s.claimIDs(ctx, tx, ids)
		return err
	})
	if err != nil {
		return nil, more, fmt.Errorf("claim: %w", err)
	}
	return msgs, more, nil
}

// groupsOf returns the groups of the tasks of ids that have one.
func (s *Store) groupsOf(ctx context.Context, ids []int64) (map[int64]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, fmt.Sprintf(qGroupsOf, placeholders(len(ids))), int64Args(ids)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var g string
		if err := rows.Scan(&id, &g); err != nil {
			return nil, err
		}
		out[id] = g
	}
	return out, rows.Err()
}

// claimIDs compare-and-sets, in tx, the due tasks of ids that no other
// transaction holds, and reads back those it won. The held ones back off.
func (s *Store) claimIDs(ctx context.Context, tx *sql.Tx, ids []int64) ([]*task.Message, error) {
	free, err := s.lockCandidates(ctx, tx, ids)
	if err != nil {
		return nil, err
	}
	if len(free) < len(ids) {
		ids = slices.DeleteFunc(slices.Clone(ids), func(id int64) bool { return !free[id] })
		if len(ids) == 0 {
			return nil, nil
		}
	}
	in := placeholders(len(ids))
	args := int64Args(ids)
	token := newToken()
	res, err := tx.ExecContext(ctx, fmt.Sprintf(qClaimIDs, in), append([]any{token}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("compare-and-set: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, nil
	}
	rs, err := tx.QueryContext(ctx, fmt.Sprintf(qClaimedRows, in), append(args, token)...)
	if err != nil {
		return nil, fmt.Errorf("read back: %w", err)
	}
	defer rs.Close()
	var msgs []*task.Message
	for rs.Next() {
		m, err := scanMessage(rs)
		if err != nil {
			return nil, fmt.Errorf("read back: %w", err)
		}
		msgs = append(msgs, m)
	}
	return msgs, rs.Err()
}
