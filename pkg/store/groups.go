package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/task"
)

// A grouped queue (per-group limits, serial order; limit.Limit.Grouped)
// dispatches its tasks that have a group group by group: the due-time
// claim leaves them out (ClaimFilter.Grouped) and names their groups, and
// TaskClaimGroups claims, for each group with room, its next tasks, oldest
// first. What a group has in flight comes from the task center itself
// (idx_group_status), so a task of a dead worker holds its group's room until
// recovery puts it back, and a crash never loses or leaks any.

// GroupKey is the group_open value of a task of group in the queue
// written as raw (its queue column, empty for the code's) of code.
func GroupKey(raw, code, group string) string {
	if raw == "" {
		raw = code
	}
	return raw + "\x1f" + group
}

// GroupOf is the group of a GroupKey.
func GroupOf(key string) string {
	_, g, _ := strings.Cut(key, "\x1f")
	return g
}

// GroupClaim asks for the next tasks of some groups of one grouped queue.
type GroupClaim struct {
	Queue string
	Limit limit.Limit
	// Keys are the groups to look at (GroupKey).
	Keys []string
	// Max bounds the tasks claimed (the room the queue has in Redis).
	Max int
	// Allow, when set, is asked how many of the tasks wanted per group may
	// go now (a per-group rate), and returns that.
	Allow func(want map[string]int) (map[string]int, error)
}

// GroupClaimResult is what TaskClaimGroups did.
type GroupClaimResult struct {
	Msgs []*task.Message
	// Gone are the keys with no task left (the caller forgets them).
	Gone []string
	// Full counts the groups at their limit: as many in flight as they
	// may have, held by a failed task (serial), or out of rate.
	Full int
}

// groupKeysMax bounds the groups one statement names.
const groupKeysMax = 500

// qGroupLock serialises the group claims of one queue over every
// scheduler: two claims reading a group as free at once would otherwise
// both dispatch one of its tasks.
const qGroupLock = `SELECT name FROM task_queue WHERE name = ? FOR UPDATE`

const qGroupRow = `INSERT IGNORE INTO task_queue (name) VALUES (?)`

// qGroupBusy reads the tasks of groups in flight or failed waiting for a
// retry, and whether each is due.
const qGroupBusy = `SELECT group_open, group_status, id, status IN (0, 4) AND plan_next_run_at <= NOW(3)
	FROM task_center FORCE INDEX (idx_group_status) WHERE group_open IN (%s) AND group_status IN (1, 2, 4)`

// qGroupNext is one group's first pending tasks that are due, oldest
// first: a branch of a UNION ALL.
const qGroupNext = `(SELECT group_open, id FROM task_center FORCE INDEX (idx_group_status)
	WHERE group_open = ? AND group_status = 0 AND plan_next_run_at <= NOW(3) ORDER BY id LIMIT ?)`

// qGroupAny is whether a group has any task not ended: a branch of a
// UNION ALL.
const qGroupAny = `(SELECT ? FROM DUAL WHERE EXISTS (SELECT 1 FROM task_center FORCE INDEX (idx_group_status) WHERE group_open = ?))`

// groupState is what one group has now.
type groupState struct {
	inflight int
	failed   []groupTask // waiting for a retry, oldest first
}

type groupTask struct {
	id  int64
	due bool
}

// TaskClaimGroups claims the next tasks of gc's groups: for each group
// with room (limit.Limit.GroupRoom; serial: none in flight and, unless
// failed tasks are skipped, none failed waiting for a retry but the one
// due), its failed tasks due and its oldest pending tasks due, by id (the
// order they were submitted in), the groups served in turns so that a
// group with thousands waiting takes no more than its share of Max.
//
// A group of the queue is one group whatever its tasks' queue column
// says: a task written with the queue's name (the Go producer, the CLI)
// and one written with none and routed there (a seed-style INSERT, the
// PHP library) have different group_open keys (GroupKey), read here as
// one.
func (s *Store) TaskClaimGroups(ctx context.Context, gc GroupClaim) (GroupClaimResult, error) {
	var res GroupClaimResult
	if len(gc.Keys) == 0 || gc.Max <= 0 {
		return res, nil
	}
	if _, err := s.db.ExecContext(ctx, qGroupRow, gc.Queue); err != nil {
		return res, fmt.Errorf("claim groups of %s: %w", gc.Queue, err)
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res = GroupClaimResult{}
		var name string
		if err := tx.QueryRowContext(ctx, qGroupLock, gc.Queue).Scan(&name); err != nil {
			return fmt.Errorf("lock queue: %w", err)
		}
		aliases, err := groupAliases(ctx, tx, gc.Queue, gc.Keys)
		if err != nil {
			return err
		}
		groups := slices.Sorted(maps.Keys(aliases))
		states, err := groupStates(ctx, tx, aliases)
		if err != nil {
			return err
		}
		picks := map[string][]int64{} // per group, oldest first
		pending := map[string]int{}   // how many pending tasks to read
		room, serial := gc.Limit.GroupRoom(), gc.Limit.Serial
		share := max(1, gc.Max/len(groups))
		for _, g := range groups {
			st := states[g]
			free := share
			if room > 0 {
				free = room - st.inflight
			}
			if free <= 0 {
				res.Full++
				continue
			}
			if serial == limit.SerialOn && len(st.failed) > 0 {
				// A failed task holds its group until it ends: only it
				// may go, once its retry is due.
				if st.failed[0].due {
					picks[g] = []int64{st.failed[0].id}
				} else {
					res.Full++
				}
				continue
			}
			for _, f := range st.failed {
				if f.due && len(picks[g]) < free {
					picks[g] = append(picks[g], f.id)
				}
			}
			if serial == limit.SerialSkip {
				pending[g] = 1 // the older of it and a failed task goes
			} else if n := free - len(picks[g]); n > 0 {
				pending[g] = n
			}
		}
		next, err := groupNext(ctx, tx, aliases, pending)
		if err != nil {
			return err
		}
		for g, ids := range next {
			picks[g] = mergeIDs(picks[g], ids)
			if serial != limit.SerialOff {
				picks[g] = picks[g][:1]
			}
		}
		if gc.Allow != nil {
			want := map[string]int{}
			for g, ids := range picks {
				if len(ids) > 0 {
					want[g] += len(ids)
				}
			}
			if len(want) > 0 {
				allowed, err := gc.Allow(want)
				if err != nil {
					return err
				}
				for g, ids := range picks {
					n := min(len(ids), allowed[g])
					if n < len(ids) {
						res.Full++
					}
					picks[g] = ids[:n]
				}
			}
		}
		ids := roundRobin(groups, picks, gc.Max)
		for _, k := range gc.Keys {
			g := GroupOf(k)
			if len(picks[g]) == 0 && states[g].inflight == 0 && len(states[g].failed) == 0 {
				if _, ok := next[g]; !ok {
					res.Gone = append(res.Gone, k)
				}
			}
		}
		if len(res.Gone) > 0 {
			// Gone only if nothing of it is left at all (not due yet).
			left, err := groupsLeft(ctx, tx, res.Gone)
			if err != nil {
				return err
			}
			res.Gone = slices.DeleteFunc(res.Gone, func(k string) bool { return left[k] })
		}
		if len(ids) == 0 {
			return nil
		}
		msgs, err := s.claimIDs(ctx, tx, ids)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			m.Grouped = true
		}
		res.Msgs = msgs
		return nil
	})
	if err != nil {
		return GroupClaimResult{}, fmt.Errorf("claim groups of %s: %w", gc.Queue, err)
	}
	return res, nil
}

// qRoutedHere is the task codes whose tasks written with no queue go to
// a queue (task_route; names compare exactly since migration 15).
const qRoutedHere = `SELECT task_code FROM task_route WHERE queue = ?`

// groupAliases returns, for each group of keys, every group_open key its
// tasks in queue q can have: q's own and that of each code routed to q.
// A key of a code routed elsewhere since it was learnt reads nothing
// here: its tasks are another queue's now, and it is forgotten once they
// end.
func groupAliases(ctx context.Context, tx *sql.Tx, q string, keys []string) (map[string][]string, error) {
	routed, err := names(ctx, tx, "the codes routed to "+q, qRoutedHere, q)
	if err != nil {
		return nil, err
	}
	routed[q] = true
	prefixes := slices.Sorted(maps.Keys(routed))
	out := map[string][]string{}
	for _, k := range keys {
		g := GroupOf(k)
		if _, ok := out[g]; ok {
			continue
		}
		for _, p := range prefixes {
			out[g] = append(out[g], GroupKey(p, "", g))
		}
	}
	return out, nil
}

// groupStates reads what each group has in flight and failed, over all
// its keys (aliases: group -> keys).
func groupStates(ctx context.Context, tx *sql.Tx, aliases map[string][]string) (map[string]*groupState, error) {
	out := make(map[string]*groupState, len(aliases))
	var keys []string
	for g, ks := range aliases {
		out[g] = &groupState{}
		keys = append(keys, ks...)
	}
	slices.Sort(keys)
	for chunk := range slices.Chunk(keys, groupKeysMax) {
		rows, err := tx.QueryContext(ctx, fmt.Sprintf(qGroupBusy, placeholders(len(chunk))), stringArgs(chunk)...)
		if err != nil {
			return nil, fmt.Errorf("read groups: %w", err)
		}
		for rows.Next() {
			var k string
			var st task.Status
			var t groupTask
			if err := rows.Scan(&k, &st, &t.id, &t.due); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read groups: %w", err)
			}
			g := out[GroupOf(k)]
			if g == nil {
				continue
			}
			if st == task.Failed {
				g.failed = append(g.failed, t)
			} else {
				g.inflight++
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read groups: %w", err)
		}
	}
	for _, g := range out {
		slices.SortFunc(g.failed, func(a, b groupTask) int { return cmp.Compare(a.id, b.id) })
	}
	return out, nil
}

// groupNext reads each group's first n pending tasks that are due, over
// all its keys (aliases), oldest first.
func groupNext(ctx context.Context, tx *sql.Tx, aliases map[string][]string, n map[string]int) (map[string][]int64, error) {
	out := map[string][]int64{}
	want := map[string]int{} // per key
	keys := make([]string, 0, len(n))
	for g, c := range n {
		for _, k := range aliases[g] {
			want[k] = c
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for chunk := range slices.Chunk(keys, groupKeysMax) {
		branches := make([]string, len(chunk))
		args := make([]any, 0, 2*len(chunk))
		for i, k := range chunk {
			branches[i] = qGroupNext
			args = append(args, k, want[k])
		}
		rows, err := tx.QueryContext(ctx, strings.Join(branches, " UNION ALL "), args...)
		if err != nil {
			return nil, fmt.Errorf("read groups' next tasks: %w", err)
		}
		for rows.Next() {
			var k string
			var id int64
			if err := rows.Scan(&k, &id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read groups' next tasks: %w", err)
			}
			g := GroupOf(k)
			out[g] = append(out[g], id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read groups' next tasks: %w", err)
		}
	}
	for g, ids := range out {
		slices.Sort(ids)
		out[g] = ids[:min(len(ids), n[g])]
	}
	return out, nil
}

// groupsLeft reports which of keys still have a task not ended.
func groupsLeft(ctx context.Context, tx *sql.Tx, keys []string) (map[string]bool, error) {
	out := map[string]bool{}
	for chunk := range slices.Chunk(keys, groupKeysMax) {
		branches := make([]string, len(chunk))
		args := make([]any, 0, 2*len(chunk))
		for i, k := range chunk {
			branches[i] = qGroupAny
			args = append(args, k, k)
		}
		rows, err := tx.QueryContext(ctx, strings.Join(branches, " UNION ALL "), args...)
		if err != nil {
			return nil, fmt.Errorf("read groups left: %w", err)
		}
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read groups left: %w", err)
			}
			out[k] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read groups left: %w", err)
		}
	}
	return out, nil
}

// roundRobin takes one task of each group in turn, in keys order, until
// max are taken or none is left.
func roundRobin(keys []string, picks map[string][]int64, max int) []int64 {
	var out []int64
	for i := 0; len(out) < max; i++ {
		took := false
		for _, k := range keys {
			if i < len(picks[k]) && len(out) < max {
				out = append(out, picks[k][i])
				took = true
			}
		}
		if !took {
			break
		}
	}
	return out
}

// mergeIDs merges two ascending id lists.
func mergeIDs(a, b []int64) []int64 {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

func stringArgs(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
