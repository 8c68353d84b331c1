package worker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/taskd/taskd/pkg/startstop"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// markBatchMax bounds the attempts marked running per statement.
const markBatchMax = 500

// errMarkLost is the cancel cause of an attempt whose running mark the
// fence rejected: the task was recovered or cancelled meanwhile.
var errMarkLost = errors.New("the task was taken from this attempt")

// marker writes the running mark (dispatched -> running, fenced) of the
// attempts still running RunningMarkDelay after they started, many per
// statement. An attempt that ends sooner never gets one: its result is
// written straight over dispatched, which saves a durable write per task.
// The mark is what shows a long task as running (tasktop, stats) and what
// recovery judges a task by once its worker is gone.
type marker struct {
	store    Store
	workerID string
	log      *slog.Logger
	slots    *slotTable
	delay    time.Duration
	runner   startstop.Runner
	// fails says a failing mark once, not on every pass: passes come
	// several a second, and a task center that is down fails each.
	fails startstop.FailLog
}

// Start marks until Stop.
func (m *marker) Start(ctx context.Context) error {
	return m.runner.Start(ctx, func(ctx context.Context) {
		startstop.Every(ctx, max(m.delay/4, 5*time.Millisecond), func(ctx context.Context) { m.runOnce(ctx) })
	})
}

// Stop stops marking; attempts not marked yet end over dispatched.
func (m *marker) Stop() { m.runner.Stop() }

// abandon stops marking without waiting for a mark in flight, which waits
// up to markTimeout on a hung MySQL: the process is about to exit, and
// recovery takes the attempts over.
func (m *marker) abandon() { m.runner.Cancel() }

// runOnce marks the attempts due for a mark and returns how many it
// marked.
func (m *marker) runOnce(ctx context.Context) int {
	due := m.slots.clock.Now().Add(-m.delay)
	var batch []*job
	for _, j := range m.slots.running() {
		if len(batch) == markBatchMax {
			break
		}
		if !j.started.After(due) && j.mark.Load() == markUnmarked && j.claimMark() {
			batch = append(batch, j)
		}
	}
	if len(batch) == 0 {
		return 0
	}
	return m.mark(ctx, batch)
}

// mark writes one batch and settles each job's mark.
func (m *marker) mark(ctx context.Context, batch []*job) int {
	fences := make([]store.Fence, len(batch))
	for i, j := range batch {
		fences[i] = store.Fence{ID: j.msg.ID, Attempt: j.msg.Attempt}
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	defer cancel()
	ok, err := m.store.TaskMarkRunning(mctx, m.workerID, fences)
	locked := map[int]bool{}
	if idx := store.LockedEntries(err); idx != nil {
		// Rows held by another transaction: marked on a later pass.
		for _, i := range idx {
			locked[i] = !ok[i]
		}
		err = nil
	}
	if err != nil {
		m.fails.Fail(err)
	} else {
		m.fails.OK()
	}
	marked := 0
	for i, j := range batch {
		state := markWritten
		switch {
		case err != nil || locked[i]:
			j.markFailed = j.markFailed || err != nil
			state = markUnmarked
		case !ok[i] && j.markFailed && m.ownAlready(mctx, fences[i]):
		case !ok[i]:
			state = markLost
		}
		j.mark.Store(state)
		close(*j.marking.Load())
		switch state {
		case markWritten:
			marked++
		case markLost:
			// Counted stale once, where the attempt ends (pool.complete).
			m.log.Warn("running mark rejected by the fence; attempt cancelled",
				"task_id", j.msg.ID, "task_code", j.msg.Code, "attempt", j.msg.Attempt)
			j.kill(errMarkLost)
		}
	}
	return marked
}

// confirmAfter: an attempt whose message waited longer than this since
// its dispatch gets its running mark before its handler runs. Such a
// message may be of a task killed while it waited in a queue no worker
// took from, whose kill notice is gone (broker.KillKeep, KillMax): the
// fence tells, where the notice no longer can.
const confirmAfter = time.Hour

// confirm writes j's running mark now, ahead of its handler, and reports
// whether the fence rejected it: the task was cancelled or recovered
// while the message waited. A mark that fails to write (MySQL down)
// rejects nothing: the attempt runs, as any other does, and its result is
// fenced.
func (m *marker) confirm(ctx context.Context, j *job) (lost bool) {
	if j.claimMark() {
		m.mark(ctx, []*job{j})
	}
	return j.settledMark() == markLost // else a pass of the marker writes it now
}

// ownAlready reports whether a mark that lost after an earlier try failed
// did apply: that try committed although its reply was lost (MySQL
// restarted, or the connection was cut at COMMIT), and the task runs for
// this very worker and attempt.
func (m *marker) ownAlready(ctx context.Context, f store.Fence) bool {
	t, err := m.store.TaskGet(ctx, f.ID)
	return err == nil && t.Status == task.Running && t.Attempt == f.Attempt && t.WorkerID == m.workerID
}
