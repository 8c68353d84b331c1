package scheduler

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// A grouped queue (per-group limits, serial order) dispatches its tasks
// with a group through TaskClaimGroups, group by group. The due-time claim
// leaves those tasks out and names their groups; the scheduler remembers
// the groups until the task center has nothing left of them, and claims,
// at every round, the next tasks of those with room. A worker that ends a
// grouped task wakes the schedulers, so a serial group's next task follows
// at once.

// groupSet is the groups a scheduler knows, per grouped queue.
type groupSet struct {
	mu    sync.Mutex
	known map[string]map[string]bool // queue -> group keys
}

// add remembers the groups a claim named.
func (g *groupSet) add(found map[string]map[string]bool) {
	if len(found) == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.known == nil {
		g.known = map[string]map[string]bool{}
	}
	for q, ks := range found {
		if g.known[q] == nil {
			g.known[q] = map[string]bool{}
		}
		maps.Copy(g.known[q], ks)
	}
}

// keys returns the groups known of queue q, sorted.
func (g *groupSet) keys(q string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, 0, len(g.known[q]))
	for k := range g.known[q] {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// forget drops groups of queue q that have nothing left, and every group
// of a queue that is no longer grouped.
func (g *groupSet) forget(q string, gone []string, grouped map[string]limit.Limit) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, k := range gone {
		delete(g.known[q], k)
	}
	for name := range g.known {
		if _, ok := grouped[name]; !ok {
			delete(g.known, name)
		}
	}
}

// grouped returns the grouped queues and their limits.
func (s *Scheduler) grouped() map[string]limit.Limit {
	if gl, ok := s.broker.Layout().(interface{ Grouped() map[string]limit.Limit }); ok {
		return gl.Grouped()
	}
	return nil
}

// claimGroups claims the next tasks of the known groups of every grouped
// queue, within the room each queue has in Redis and the batch size.
func (s *Scheduler) claimGroups(ctx context.Context, grouped map[string]limit.Limit) ([]*task.Message, error) {
	var out []*task.Message
	names := make([]string, 0, len(grouped))
	for q := range grouped {
		names = append(names, q)
	}
	slices.Sort(names)
	for _, q := range names {
		l := grouped[q]
		keys := s.groups.keys(q)
		if s.broker.Layout().Paused(q) {
			continue
		}
		if len(keys) == 0 {
			s.setGroupsFull(ctx, q, 0)
			continue
		}
		room := s.cfg.BatchSize - len(out)
		if r := s.win.room(q); r >= 0 {
			room = min(room, r)
		}
		gc := store.GroupClaim{Queue: q, Limit: l, Keys: keys, Max: room}
		if l.Per == limit.PerGroup && !l.Rate.IsZero() {
			gc.Allow = func(want map[string]int) (map[string]int, error) {
				return s.broker.GroupRate(ctx, q, l.Rate, l.EffectiveBurst(), want)
			}
		}
		res, err := s.store.TaskClaimGroups(ctx, gc)
		if err != nil {
			return out, err
		}
		s.groups.forget(q, res.Gone, grouped)
		s.setGroupsFull(ctx, q, res.Full)
		out = append(out, res.Msgs...)
	}
	return out, nil
}

// setGroupsFull records, for stats and tasktop, how many groups of q are
// at their limit; a failure only leaves the figure stale.
func (s *Scheduler) setGroupsFull(ctx context.Context, q string, full int) {
	if err := s.broker.SetGroupsFull(ctx, q, full); err != nil {
		s.log.Warn("record groups at their limit", "queue", q, "err", err)
	}
}
