package scheduler

import (
	"container/heap"
	"sync"
	"time"

	"github.com/taskd/taskd/pkg/task"
)

// A claim takes several round trips and a commit: tens of milliseconds
// when the server is busy, which would all be lateness if tasks were
// claimed at their due time. So the loop claims the tasks due within
// Config.ClaimAhead and holds the messages of those not yet due here; the
// releaser pushes each once the database clock has certainly reached its
// due time (store.Clock's Earliest, a lower bound). A task is
// still claimed by one compare-and-set, its message is pushed only after
// the claim committed, and never before the database clock reached its
// plan_next_run_at: a worker cannot start it early.

// ClaimAheadDefault is Config.ClaimAhead when it is 0: several times a
// busy claim's duration, and far below recovery's dispatch window.
const ClaimAheadDefault = 250 * time.Millisecond

// dbSyncEvery is how old the releaser's reading of the database clock
// may be while it holds messages: it reads NOW(3) again when it is older.
const dbSyncEvery = time.Second

// held are the messages claimed ahead of their due time, by due time.
type held struct {
	mu      sync.Mutex
	msgs    dueHeap
	byQueue map[string]int
	kick    chan struct{} // an earlier message came in
}

func newHeld() *held {
	return &held{byQueue: map[string]int{}, kick: make(chan struct{}, 1)}
}

// add holds msgs until they are due.
func (h *held) add(msgs []*task.Message) {
	if len(msgs) == 0 {
		return
	}
	h.mu.Lock()
	for _, m := range msgs {
		heap.Push(&h.msgs, m)
		h.byQueue[m.Queue]++
	}
	h.mu.Unlock()
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// takeDue removes and returns the messages due at or before dueMS (Unix
// milliseconds), earliest first.
func (h *held) takeDue(dueMS int64) []*task.Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*task.Message
	for len(h.msgs) > 0 && h.msgs[0].DueUnixMS <= dueMS {
		out = append(out, h.take())
	}
	return out
}

// takeAll removes and returns every held message.
func (h *held) takeAll() []*task.Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*task.Message, 0, len(h.msgs))
	for len(h.msgs) > 0 {
		out = append(out, h.take())
	}
	return out
}

func (h *held) take() *task.Message {
	m := heap.Pop(&h.msgs).(*task.Message)
	if h.byQueue[m.Queue]--; h.byQueue[m.Queue] <= 0 {
		delete(h.byQueue, m.Queue)
	}
	return m
}

// next is the due time of the earliest held message, in Unix milliseconds.
func (h *held) next() (int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.msgs) == 0 {
		return 0, false
	}
	return h.msgs[0].DueUnixMS, true
}

// in is the number of held messages of queue q: they count against its
// window as if they were in Redis.
func (h *held) in(q string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.byQueue[q]
}

// dueHeap is a min-heap of messages by due time.
type dueHeap []*task.Message

func (d dueHeap) Len() int           { return len(d) }
func (d dueHeap) Less(i, j int) bool { return d[i].DueUnixMS < d[j].DueUnixMS }
func (d dueHeap) Swap(i, j int)      { d[i], d[j] = d[j], d[i] }
func (d *dueHeap) Push(x any)        { *d = append(*d, x.(*task.Message)) }
func (d *dueHeap) Pop() any {
	old := *d
	m := old[len(old)-1]
	old[len(old)-1] = nil
	*d = old[:len(old)-1]
	return m
}
