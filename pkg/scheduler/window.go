package scheduler

import (
	"context"
	"sync"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/clock"
)

// Redis holds a bounded window of each queue: the scheduler claims for a
// queue only while its lists hold fewer messages than the window. The rest
// of the backlog stays pending in the task center, where it costs nothing
// and is still counted (the seed's incident 6.2 had 200,000 messages in one
// Redis list; at maxmemory Redis refuses every push). A paused queue or a
// reshard then moves little, and recovery after a Redis loss re-pushes
// little.

// WindowPerSlotDefault is the window of a queue, per consumer slot, when
// Config.Window is 0: each slot has a few messages waiting for it. The
// window is at least two claim batches.
const WindowPerSlotDefault = 4

// WindowBytesDefault bounds the payloads a queue's window holds in Redis
// when Config.WindowBytes is 0. A window counts messages: a thousand of
// 1 MiB are a gigabyte of Redis for a queue whose ten slots start ten a
// second. The window shrinks to what this many bytes hold at the mean
// payload the scheduler pushed to the queue lately, but never below one
// message per consumer slot.
const WindowBytesDefault = 32 << 20

// WindowBytes is the bound a Config.WindowBytes of v sets: the default
// for 0, none (0) for a negative v.
func WindowBytes(v int64) int64 {
	switch {
	case v == 0:
		return WindowBytesDefault
	case v < 0:
		return 0
	}
	return v
}

const (
	// consumersRefresh is how often the live consumers' slots are reread.
	consumersRefresh = 2 * time.Second
	// queueTrack is how long an empty queue the scheduler pushed to is
	// still measured; a queue it never pushed to counts as empty until it
	// does, so an idle scheduler reads no lengths at all.
	queueTrack = time.Minute
	// fullRecheck is how soon a scheduler whose due tasks all belong to
	// full queues looks again: workers drain a window quickly.
	fullRecheck = 25 * time.Millisecond
	// fullMemory is how long a queue that filled its window counts as
	// full when the claims choose whether to walk past its backlog:
	// workers drain it between claims, so it is seldom full at the moment
	// a claim starts.
	fullMemory = time.Second
	// refillWait: a queue that filled its window gets room for claims
	// again once a quarter of it is free, or this long after it was last
	// seen full. A slow queue draining a task at a time is then claimed
	// for in steps, not a claim per completion (each a read of the due
	// rows and a transaction); a task of higher priority for it waits at
	// most this much longer.
	refillWait = 250 * time.Millisecond
)

// FullRedisWait is how long a queue's window stays capped at the length
// its list had when Redis refused a push for lack of memory (refused), and
// how long a submitter leaves a queue to the schedulers after such a
// refusal: then the whole window is tried again, in case memory was freed
// elsewhere or maxmemory raised.
const FullRedisWait = 10 * time.Second

// windows tracks each queue's window and the room its lists have left.
type windows struct {
	fixed int   // Config.Window; 0: derived from the consumers' slots
	min   int   // the least derived window
	bytes int64 // the payloads a window holds (WindowBytesDefault); 0: no bound
	clock clock.Clock

	mu      sync.Mutex
	slots   map[string]int // live consumer slots per queue
	slotsAt time.Time
	pushed  map[string]time.Time // queues pushed to, when last
	queued  map[string]int64     // messages in Redis per queue, as last read
	payload map[string]int64     // mean payload pushed per queue, lately (bytes)
	fullAt  map[string]time.Time // when each queue last filled its window
	filled  map[string]bool      // full queues waiting for room since fullAt (refillWait)
	// capped: queues whose window is, for FullRedisWait from at, the
	// length their lists had when Redis was found at maxmemory.
	capped  map[string]windowCap
	anyFull bool
}

// windowCap is a queue's window capped by a full Redis.
type windowCap struct {
	n  int
	at time.Time
}

// newWindows returns the windows of queues for Config's Window and
// WindowBytes and a claim batch.
func newWindows(fixed int, bytes int64, batch int, clk clock.Clock) *windows {
	return &windows{fixed: fixed, min: 2 * batch, bytes: WindowBytes(bytes), clock: clk, pushed: map[string]time.Time{},
		payload: map[string]int64{}, fullAt: map[string]time.Time{}, filled: map[string]bool{}, capped: map[string]windowCap{}}
}

// window is queue q's window.
func (w *windows) window(q string) int {
	win := w.min
	if w.fixed > 0 {
		win = w.fixed
	} else {
		win = max(win, WindowPerSlotDefault*w.slots[q])
	}
	if mean := w.payload[q]; w.bytes > 0 && mean > 0 {
		win = min(win, max(w.slots[q], 1, int(w.bytes/mean)))
	}
	if c, ok := w.capped[q]; ok {
		if w.clock.Now().Sub(c.at) < FullRedisWait {
			return min(win, c.n)
		}
		delete(w.capped, q)
	}
	return win
}

// refused records that Redis refused pushes to queues for lack of memory:
// each one's window becomes what its lists hold now, so that claims for
// it wait until workers drain it (each ack frees a message's memory)
// instead of claiming, failing and handing back the same tasks many times
// a second. It returns the queues that were not capped already.
func (w *windows) refused(queues []string) (fresh []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	for _, q := range queues {
		if _, ok := w.capped[q]; !ok {
			fresh = append(fresh, q)
		}
		w.capped[q] = windowCap{n: int(w.queued[q]), at: now}
		w.fill(q, now)
	}
	return fresh
}

// refresh reads what the room depends on: the consumers' slots (every
// consumersRefresh) and the length of every queue the scheduler pushed to
// lately or found not empty.
func (w *windows) refresh(ctx context.Context, b *broker.Broker) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	if now.Sub(w.slotsAt) >= consumersRefresh {
		ws, err := b.Workers(ctx, 0)
		if err != nil {
			return err
		}
		w.slots, w.slotsAt = consumerSlots(ws), now
	}
	queues := make([]string, 0, len(w.pushed))
	for q, at := range w.pushed {
		if now.Sub(at) > queueTrack && w.queued[q] == 0 {
			delete(w.pushed, q)
			continue
		}
		queues = append(queues, q)
	}
	lens, err := b.QueueLens(ctx, queues)
	if err != nil {
		return err
	}
	w.queued = lens
	w.renewCaps(ctx, b, now)
	w.anyFull = false
	for q, n := range lens {
		if n >= int64(w.window(q)) {
			w.fill(q, now)
		}
		if w.roomLocked(q, now) == 0 {
			w.anyFull = true
		}
	}
	return nil
}

// renewCaps keeps the caps of a Redis still past its maxmemory when one
// ran its FullRedisWait, at what each queue's lists hold now: a whole
// window claimed then is refused as surely, and each such round spends an
// attempt of every task it took (an hour of a full Redis made the same
// tasks' attempt 361). Once the queues' workers or an operator freed
// memory, the caps run out as before. mu is held.
func (w *windows) renewCaps(ctx context.Context, b *broker.Broker, now time.Time) {
	expiring := false
	for _, c := range w.capped {
		expiring = expiring || now.Sub(c.at) >= FullRedisWait
	}
	if !expiring {
		return
	}
	m, err := b.Memory(ctx)
	if err != nil || !m.Full() {
		return // unknown: the window is tried, as it was before this check
	}
	for q, c := range w.capped {
		w.capped[q] = windowCap{n: min(c.n, int(w.queued[q])), at: now}
	}
}

// walk reports whether the claims should walk past the backlog of queues
// that filled their window lately: some queue with live consumers has
// room and has not filled its window, and its tasks may be due behind
// that backlog, out of reach of a claim reading from the head. A queue
// without consumers waits for its first worker's heartbeat (a few
// seconds).
func (w *windows) walk() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	lagging := false
	for q, at := range w.fullAt {
		if now.Sub(at) > fullMemory {
			delete(w.fullAt, q)
			continue
		}
		lagging = true
	}
	if !lagging {
		return false
	}
	for q, n := range w.slots {
		if _, full := w.fullAt[q]; !full && n > 0 && w.roomLocked(q, now) > 0 {
			return true
		}
	}
	return false
}

// consumerSlots adds up the slots of the live workers, per queue they
// consume.
func consumerSlots(ws []broker.WorkerStatus) map[string]int {
	out := map[string]int{}
	for _, s := range ws {
		hb := s.Heartbeat
		if hb == nil {
			continue
		}
		for _, q := range hb.Queues {
			n, ok := hb.QueueSlots[q]
			if !ok && len(hb.Queues) > 0 { // a worker of an older taskd
				n = hb.Capacity / len(hb.Queues)
			}
			out[q] += n
		}
	}
	return out
}

// room is how many more messages queue q may take (a Room for claims).
func (w *windows) room(q string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.roomLocked(q, w.clock.Now())
}

// roomLocked is room, with w.mu held. Once a full queue's room opened
// (refillWait), the claims fill it up to its window.
func (w *windows) roomLocked(q string, now time.Time) int {
	win := w.window(q)
	r := max(0, win-int(w.queued[q]))
	if w.filled[q] {
		if r < win/4 && now.Sub(w.fullAt[q]) < refillWait {
			return 0
		}
		delete(w.filled, q)
	}
	return r
}

// fill records that queue q filled its window at now.
func (w *windows) fill(q string, now time.Time) {
	w.fullAt[q] = now
	w.filled[q] = true
}

// full reports whether some queue had no room at the last refresh.
func (w *windows) full() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.anyFull
}

// blocked returns the queues with no room at the last refresh.
func (w *windows) blocked() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out map[string]bool
	now := w.clock.Now()
	for q := range w.queued {
		if w.roomLocked(q, now) == 0 {
			if out == nil {
				out = map[string]bool{}
			}
			out[q] = true
		}
	}
	return out
}

// pushes is what one push put in a queue: messages and their payloads'
// bytes.
type pushes struct{ n, bytes int64 }

// pushedTo records messages pushed: they fill the queues' windows until
// the next refresh reads the lengths. Each push moves the queue's mean
// payload a quarter of the way to its own, so that a queue whose payloads
// grow gets a smaller window within a few claims.
func (w *windows) pushedTo(perQueue map[string]pushes) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	for q, p := range perQueue {
		w.pushed[q] = now
		if w.queued == nil {
			w.queued = map[string]int64{}
		}
		w.queued[q] += p.n
		if mean, ok := w.payload[q]; ok {
			w.payload[q] = (3*mean + p.bytes/p.n) / 4
		} else {
			w.payload[q] = p.bytes / p.n
		}
		if w.queued[q] >= int64(w.window(q)) {
			w.fill(q, now)
		}
	}
}
