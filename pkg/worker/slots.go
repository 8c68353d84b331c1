package worker

import (
	"context"
	"errors"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/task"
)

// errKilled is the cancel cause of an attempt killed by an operator.
var errKilled = errors.New("killed by operator")

// ErrShutdown is the cause (context.Cause) of an attempt cancelled because
// its worker stops: the task is handed back, and runs again elsewhere.
var ErrShutdown = errors.New("the worker is shutting down: the task is handed back")

// errAbandoned is the cancel cause of an attempt the watchdog gave up on.
var errAbandoned = errors.New("abandoned by the watchdog")

// job is one message being run.
type job struct {
	msg   *task.Message
	raw   string
	queue string
	// lease is the attempt's lease of its queue's limit ("" none): renewed
	// by the heartbeat while it runs, released once its result is written.
	lease   string
	started time.Time
	// startedDB is the start by the database clock's upper bound,
	// recorded with a result written before the running mark.
	startedDB time.Time
	// ctx is cancelled with errKilled when an operator kills the task.
	ctx  context.Context
	kill context.CancelCauseFunc
	done atomic.Bool // its result was handed to the completer
	// freed: the job's slot was given back (pool.free), when its handler
	// returned or earlier when the watchdog abandoned it.
	freed     atomic.Bool
	abandoned atomic.Bool
	returned  chan struct{} // closed when the handler returned
	// mark is where the attempt's running mark stands (markUnmarked...);
	// marking is closed when a mark in flight is decided.
	mark    atomic.Int32
	marking atomic.Pointer[chan struct{}]
	// markFailed: a mark of it failed (no answer): a later loss may be a
	// commit whose reply was lost.
	markFailed bool
	span       trace.Span // of the attempt (trace.go)
}

// States of a job's running mark.
const (
	markUnmarked int32 = iota // not written (yet)
	markInFlight              // in a mark the marker writes now
	markWritten               // the task is running for this attempt
	markSkipped               // the attempt ended first: no mark is written
	markLost                  // the fence rejected it: the attempt was taken away
)

// claimMark takes j's unwritten mark for a write about to start: one
// writer at a time, the marker's pass or a confirmation (marker.confirm).
func (j *job) claimMark() bool {
	if !j.mark.CompareAndSwap(markUnmarked, markInFlight) {
		return false
	}
	ch := make(chan struct{})
	j.marking.Store(&ch)
	return true
}

// settledMark is j's mark once no write of it is in flight: a write in
// flight is waited for.
func (j *job) settledMark() int32 {
	for {
		m := j.mark.Load()
		if m != markInFlight {
			return m
		}
		if ch := j.marking.Load(); ch != nil {
			<-*ch
		} else {
			runtime.Gosched() // claimed, its channel not stored yet
		}
	}
}

// endMark settles the mark as the attempt ends: it returns the status the
// result is fenced on, and false when the mark was lost. A mark in flight
// is waited for.
func (j *job) endMark() (task.Status, bool) {
	for {
		switch j.settledMark() {
		case markUnmarked:
			if j.mark.CompareAndSwap(markUnmarked, markSkipped) {
				return task.Dispatched, true
			}
		case markWritten:
			return task.Running, true
		case markSkipped:
			return task.Dispatched, true
		default:
			return task.Running, false
		}
	}
}

// slotTable knows what every slot runs: the pool fills it, the kill
// listener, the heartbeat and the watchdog read it.
type slotTable struct {
	queues map[string]int
	clock  clock.Clock
	busy   atomic.Int64
	// progress holds, per queue, when a result of it was last written
	// (unix ns): the watchdog's measure of an alive but idle worker. A
	// start is no progress: attempts start without the task center, and
	// a worker whose task center hangs keeps starting them for a while.
	progress map[string]*atomic.Int64

	mu        sync.Mutex
	inflight  map[int64]*job
	abandoned map[*job]struct{} // given up on, handler not returned yet
}

func newSlotTable(queues map[string]int, c clock.Clock) *slotTable {
	t := &slotTable{queues: queues, clock: c, progress: map[string]*atomic.Int64{},
		inflight: map[int64]*job{}, abandoned: map[*job]struct{}{}}
	for q := range queues {
		t.progress[q] = &atomic.Int64{}
	}
	return t
}

func (t *slotTable) resetProgress(at time.Time) {
	for _, p := range t.progress {
		p.Store(at.UnixNano())
	}
}

func (t *slotTable) markProgress(q string) {
	if p, ok := t.progress[q]; ok {
		p.Store(t.clock.Now().UnixNano())
	}
}

// queueCapacity is the number of slots of queue q (0: not consumed).
func (t *slotTable) queueCapacity(q string) int {
	c, ok := t.queues[q]
	if !ok {
		return 0
	}
	return max(1, c)
}

func (t *slotTable) capacity() int {
	n := 0
	for q := range t.queues {
		n += t.queueCapacity(q)
	}
	return n
}

// add records a started job; false if a slot runs that attempt already.
func (t *slotTable) add(j *job) bool {
	t.mu.Lock()
	if o := t.inflight[j.msg.ID]; o != nil && o.msg.Attempt == j.msg.Attempt {
		t.mu.Unlock()
		return false
	}
	t.inflight[j.msg.ID] = j
	t.mu.Unlock()
	t.busy.Add(1)
	return true
}

// remove forgets a job whose slot is released.
func (t *slotTable) remove(j *job) {
	t.mu.Lock()
	if t.inflight[j.msg.ID] == j {
		delete(t.inflight, j.msg.ID)
	}
	t.mu.Unlock()
	t.busy.Add(-1)
}

// running returns the jobs the slots run (abandoned ones not included).
func (t *slotTable) running() []*job {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*job, 0, len(t.inflight))
	for _, j := range t.inflight {
		out = append(out, j)
	}
	return out
}

// kill cancels attempt (id, attempt) if a slot runs it, and reports whether
// one did.
func (t *slotTable) kill(id int64, attempt int) *job {
	t.mu.Lock()
	j := t.inflight[id]
	t.mu.Unlock()
	if j == nil || j.msg.Attempt != attempt {
		return nil
	}
	j.kill(errKilled)
	return j
}

// Running is one attempt a slot runs, as the watchdog sees it.
type Running struct {
	broker.Slot
	Timeout time.Duration
	// Returned is closed when the attempt's handler returned.
	Returned <-chan struct{}
	raw      string
	lease    string
}

// QueueSlots is one consumed queue as the watchdog sees it.
type QueueSlots struct {
	Name     string
	Capacity int
	// Progress is when a result of the queue was last written (the start
	// of the worker when none was yet).
	Progress time.Time
}

// QueueSlots lists the consumed queues, sorted by name.
func (w *Worker) QueueSlots() []QueueSlots {
	out := make([]QueueSlots, 0, len(w.cfg.Queues))
	for _, q := range w.Queues() {
		out = append(out, QueueSlots{Name: q, Capacity: w.slots.queueCapacity(q),
			Progress: time.Unix(0, w.slots.progress[q].Load())})
	}
	return out
}

// Running lists the attempts whose handlers the worker's slots run,
// abandoned ones included while their handlers have not returned. A slot
// whose handler returned, waiting for its result to be written, runs
// nothing.
func (w *Worker) Running() []Running {
	t := w.slots
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Running, 0, len(t.inflight)+len(t.abandoned))
	add := func(j *job) {
		out = append(out, Running{
			Slot: broker.Slot{Queue: j.queue, TaskID: j.msg.ID, Code: j.msg.Code, Attempt: j.msg.Attempt,
				Since: j.started, Abandoned: j.abandoned.Load()},
			Timeout:  task.EffectiveTimeout(j.msg.Timeout),
			Returned: j.returned, raw: j.raw, lease: j.lease,
		})
	}
	for _, j := range t.inflight {
		if !j.done.Load() {
			add(j)
		}
	}
	for j := range t.abandoned {
		add(j)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TaskID < out[j].TaskID })
	return out
}

// busySlots is what the busy slots do, for the heartbeat.
func (w *Worker) busySlots() []broker.Slot {
	rs := w.Running()
	out := make([]broker.Slot, len(rs))
	for i, r := range rs {
		out[i] = r.Slot
	}
	return out
}

// Abandon gives up on an attempt whose handler does not return: its
// context is cancelled and its slot is freed at once for a new task. The
// caller recovers the task in the task center; the handler's late result,
// if it ever comes, is rejected by the fence. It returns false when the
// attempt no longer runs here.
func (w *Worker) Abandon(r Running) bool {
	t := w.slots
	t.mu.Lock()
	j := t.inflight[r.TaskID]
	if j == nil || j.msg.Attempt != r.Attempt || !j.abandoned.CompareAndSwap(false, true) {
		t.mu.Unlock()
		return false
	}
	delete(t.inflight, r.TaskID)
	t.abandoned[j] = struct{}{}
	t.mu.Unlock()
	j.kill(errAbandoned)
	endAttemptAbandoned(j)
	w.pool.free(j)
	go func() {
		<-j.returned
		t.mu.Lock()
		delete(t.abandoned, j)
		t.mu.Unlock()
	}()
	w.log.Error("slot abandoned: its handler ignored cancellation; the slot is replaced",
		"task_id", j.msg.ID, "task_code", j.msg.Code, "attempt", j.msg.Attempt, "queue", j.queue,
		"held", w.clock.Now().Sub(j.started))
	return true
}

// AckAbandoned removes an abandoned attempt's message from the processing
// list once its task was recovered.
func (w *Worker) AckAbandoned(ctx context.Context, r Running) error {
	if err := w.broker.Ack(ctx, w.cfg.ID, map[string][]string{r.Queue: {r.raw}}); err != nil {
		return err
	}
	w.held.drop(r.raw)
	return w.releaseLeases(ctx, r.Queue, r.lease)
}

// releaseLeases gives back leases of queue q ("" ones are none).
func (w *Worker) releaseLeases(ctx context.Context, q string, leases ...string) error {
	var ls []string
	for _, l := range leases {
		if l != "" {
			ls = append(ls, l)
		}
	}
	if len(ls) == 0 {
		return nil
	}
	return w.broker.ReleaseLeases(ctx, map[string][]string{q: ls})
}

// leases are the leases of the attempts the slots run, per queue.
func (w *Worker) leases() map[string][]string {
	var out map[string][]string
	for _, j := range w.slots.running() {
		if j.lease != "" && !j.done.Load() {
			if out == nil {
				out = map[string][]string{}
			}
			out[j.queue] = append(out[j.queue], j.lease)
		}
	}
	return out
}

// leaseLock serializes the renewal of the running attempts' leases with
// the release of ended ones. A renewal adds back a lease it does not find
// (Redis restarted, or the lease expired while Redis was out of reach): a
// release landing between its read of the running attempts and its write
// would be undone, and hold the capacity until the lease's TTL.
type leaseLock struct {
	Broker
	mu sync.Mutex
}

func (l *leaseLock) ReleaseLeases(ctx context.Context, leases map[string][]string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.Broker.ReleaseLeases(ctx, leases)
}

// renew renews the leases of running(), read under the lock.
func (l *leaseLock) renew(ctx context.Context, running func() map[string][]string, ttl time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls := running()
	if ls == nil {
		return nil
	}
	return l.Broker.RenewLeases(ctx, ls, ttl)
}
