package worker

import (
	"cmp"
	"context"
	"errors"
	"sort"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/metrics"
	"github.com/taskd/taskd/pkg/task"
)

// errAbandoned is the cancel cause of an attempt the watchdog gave up on.
var errAbandoned = errors.New("abandoned by the watchdog")

// Running is one attempt a slot runs, as the watchdog sees it.
type Running struct {
	broker.Slot
	Timeout time.Duration
	// Returned is closed when the attempt's handler returned.
	Returned <-chan struct{}
	raw      string
}

// Capacity is the number of slots over all queues.
func (w *Worker) Capacity() int {
	n := 0
	for _, c := range w.cfg.Queues {
		n += max(1, c)
	}
	return n
}

// QueueCapacity is the number of slots of queue q.
func (w *Worker) QueueCapacity(q string) int {
	c, ok := w.cfg.Queues[q]
	if !ok {
		return 0
	}
	return max(1, c)
}

// Queues returns the queues the worker consumes, sorted.
func (w *Worker) Queues() []string {
	out := make([]string, 0, len(w.cfg.Queues))
	for q := range w.cfg.Queues {
		out = append(out, q)
	}
	sort.Strings(out)
	return out
}

// Progress is when a task of queue q last started or ended (the start of
// the worker when none did yet).
func (w *Worker) Progress(q string) time.Time {
	p, ok := w.progress[q]
	if !ok {
		return time.Time{}
	}
	return time.Unix(0, p.Load())
}

func (w *Worker) markProgress(q string) {
	if p, ok := w.progress[q]; ok {
		p.Store(time.Now().UnixNano())
	}
}

// RunningAttempts lists the attempts the worker's slots run, abandoned ones
// included while their handlers have not returned.
func (w *Worker) RunningAttempts() []Running {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Running, 0, len(w.inflight)+len(w.abandoned))
	add := func(j *job) {
		out = append(out, Running{
			Slot: broker.Slot{Queue: j.queue, TaskID: j.msg.ID, Code: j.msg.Code, Attempt: j.msg.Attempt,
				Since: j.started, Abandoned: j.abandoned.Load()},
			Timeout:  time.Duration(cmp.Or(j.msg.Timeout, task.DefaultTimeout)) * time.Second,
			Returned: j.returned, raw: j.raw,
		})
	}
	for _, j := range w.inflight {
		add(j)
	}
	for j := range w.abandoned {
		add(j)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TaskID < out[j].TaskID })
	return out
}

// Slots is what the busy slots do, for the heartbeat.
func (w *Worker) Slots() []broker.Slot {
	rs := w.RunningAttempts()
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
	w.mu.Lock()
	j := w.inflight[r.TaskID]
	if j == nil || j.msg.Attempt != r.Attempt || !j.abandoned.CompareAndSwap(false, true) {
		w.mu.Unlock()
		return false
	}
	delete(w.inflight, r.TaskID)
	w.abandoned[j] = struct{}{}
	w.mu.Unlock()
	j.kill(errAbandoned)
	j.release()
	go func() {
		<-j.returned
		w.mu.Lock()
		delete(w.abandoned, j)
		w.mu.Unlock()
	}()
	w.log.Error("slot abandoned: its handler ignored cancellation; the slot is replaced",
		"task_id", j.msg.ID, "task_code", j.msg.Code, "attempt", j.msg.Attempt, "queue", j.queue, "held", time.Since(j.started))
	return true
}

// AckAbandoned removes an abandoned attempt's message from the processing
// list once its task was recovered.
func (w *Worker) AckAbandoned(ctx context.Context, r Running) error {
	return w.broker.Ack(ctx, w.cfg.ID, map[string][]string{r.Queue: {r.raw}})
}

// Abort is the watchdog's last resort before the process exits: the
// heartbeat is withdrawn at once (recovery elsewhere takes the running
// tasks without waiting for the TTL), no more work is taken, running
// attempts are cancelled (exec handlers' process groups are killed) and
// given up to wait to return. Results are not waited for: recovery re-runs
// what was not written. Stop after Abort returns at once.
func (w *Worker) Abort(wait time.Duration) {
	if !w.beginStop() {
		return
	}
	w.beatCancel()
	<-w.beatDone
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	if err := w.broker.Client().Del(ctx, w.broker.Keys.Worker(w.cfg.ID)).Err(); err != nil {
		w.log.Warn("withdraw heartbeat", "err", err)
	}
	cancel()
	w.stopFetch()
	w.stopRuns()
	waitTimeout(&w.runs, wait)
	<-w.killsDone
}

// beginStop reports whether the caller is the one to stop the worker: it
// was started and nobody stopped it yet.
func (w *Worker) beginStop() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started || w.stopped {
		return false
	}
	w.stopped = true
	return true
}

// written tallies a written batch: results by outcome for the metrics, and
// dead ones for the per-minute counters.
func (w *Worker) written(batch []completion, applied []bool) {
	rs := make([]metrics.Result, 0, len(batch))
	for i, ok := range applied {
		r := batch[i].tr.Run
		if !ok || r == nil {
			continue
		}
		if r.Outcome == task.OutcomeDead {
			w.dead.Add(1)
		}
		rs = append(rs, metrics.Result{Queue: batch[i].queue, Outcome: r.Outcome, Retry: batch[i].tr.To == task.Failed, Duration: r.Duration})
	}
	w.cfg.Metrics.Completed(rs)
}
