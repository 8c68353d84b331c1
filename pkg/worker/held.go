package worker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// held counts the messages this worker took and holds: running in a slot,
// or ended and waiting for their result's write. Recovery leaves the
// processing lists of a live worker alone (its tasks may wait there for a
// rate or run unmarked), so a message there that the worker does not hold
// would stay until the worker stops: one moved by a take whose reply was
// lost (the connection reset, a failover). After a failed take the worker
// hands back what its lists hold beyond what it holds (reconcile). (A
// message whose result the task center refused twice stays held: handed
// back, it would run and be refused again and again.)
type held struct {
	mu sync.Mutex
	n  map[string]int // raw message -> copies held
	// suspect: a take failed: the lists may hold messages the worker
	// does not.
	suspect atomic.Bool
}

func newHeld() *held { return &held{n: map[string]int{}} }

// add records messages a take returned.
func (h *held) add(raws []string) {
	h.mu.Lock()
	for _, r := range raws {
		h.n[r]++
	}
	h.mu.Unlock()
}

// drop forgets messages the worker is done with: their end durable,
// acked or quarantined.
func (h *held) drop(raws ...string) {
	h.mu.Lock()
	for _, r := range raws {
		if h.n[r] <= 1 {
			delete(h.n, r)
		} else {
			h.n[r]--
		}
	}
	h.mu.Unlock()
}

func (h *held) snapshot() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.n))
	for r, k := range h.n {
		out[r] = k
	}
	return out
}

// reconcile hands back the messages of this worker's processing lists
// that it does not hold, and removes them. The hand-back is fenced on the
// dispatch: a message whose task moved on (its result written, its ack
// lost) is only removed. Run where no take is in flight: a message taken
// meanwhile would not be held yet.
func (w *Worker) reconcile(ctx context.Context) error {
	// What is held before the lists are read: a message dropped after
	// this was acked, or its task's end is durable.
	holds := w.held.snapshot()
	lists, err := w.broker.Orphans(ctx, w.cfg.ID)
	if err != nil {
		return fmt.Errorf("read processing lists: %w", err)
	}
	var ts []store.Transition
	extra := map[string][]string{}
	for q, raws := range lists {
		for _, raw := range raws {
			if holds[raw] > 0 {
				holds[raw]--
				continue
			}
			m, err := task.DecodeMessage([]byte(raw))
			if err != nil {
				continue // a poison message: the take that returns it quarantines it
			}
			ts = append(ts, store.HandBack(m.ID, m.Attempt))
			extra[q] = append(extra[q], raw)
		}
	}
	if len(ts) == 0 {
		return nil
	}
	applied, err := w.store.TaskTransition(ctx, ts)
	if err != nil {
		return fmt.Errorf("hand back %d messages not held: %w", len(ts), err)
	}
	if err := w.broker.Ack(ctx, w.cfg.ID, extra); err != nil {
		return fmt.Errorf("remove %d messages not held: %w", len(ts), err)
	}
	back := 0
	for _, ok := range applied {
		if ok {
			back++
		}
	}
	w.log.Warn("messages in this worker's lists that it did not hold removed (a take's reply was lost)",
		"removed", len(ts), "handed_back", back)
	return nil
}
