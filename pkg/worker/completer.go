package worker

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/store"
)

// completerBatchMax bounds the transitions written per transaction.
const completerBatchMax = 500

// completion is one finished attempt waiting to be written.
type completion struct {
	tr    store.Transition
	code  string
	queue string
	raw   string
}

// attrs are the log fields of the completion's task.
func (cp *completion) attrs(more ...any) []any {
	return append([]any{"task_id", cp.tr.ID, "task_code", cp.code, "attempt", cp.tr.Attempt}, more...)
}

// completer writes results in batches: whatever has finished since the last
// write goes out in one transaction, so under load many results share a
// commit and when idle a result is written at once. A message is removed
// from the processing list only after its result is durable.
type completer struct {
	store    *store.Store
	broker   *broker.Broker
	workerID string
	log      *slog.Logger
	stale    *atomic.Int64
	// written is told which results of a batch were applied (metrics).
	written func(batch []completion, applied []bool)
	// now is the clock of the queues' per-minute counters (the database
	// clock).
	now func() time.Time

	in      chan completion
	quit    chan struct{} // closed by stop: flush and exit
	done    chan struct{}
	giveUp  time.Time
	stopped atomic.Bool
	once    sync.Once
}

func newCompleter(s *store.Store, b *broker.Broker, workerID string, log *slog.Logger, stale *atomic.Int64) *completer {
	return &completer{
		store: s, broker: b, workerID: workerID, log: log, stale: stale, now: time.Now,
		in: make(chan completion, 4*completerBatchMax), quit: make(chan struct{}), done: make(chan struct{}),
	}
}

// completerWriters is the number of transactions writing results at once:
// while one waits for its commit, the next batch is already on its way.
const completerWriters = 2

func (c *completer) start() {
	var wg sync.WaitGroup
	for range completerWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.loop()
		}()
	}
	go func() {
		wg.Wait()
		close(c.done)
	}()
}

// add queues a completion. After stop it is dropped: the task was handed
// back already, or recovery will find it.
func (c *completer) add(cp completion) {
	select {
	case c.in <- cp:
	case <-c.done:
		c.log.Warn("result dropped after shutdown; recovery will re-run the task", cp.attrs()...)
	}
}

// stop flushes what is queued, retrying failed writes for at most wait.
func (c *completer) stop(wait time.Duration) {
	c.once.Do(func() {
		c.giveUp = time.Now().Add(wait)
		close(c.quit)
	})
	<-c.done
}

func (c *completer) loop() {
	batch := make([]completion, 0, completerBatchMax)
	for {
		batch = batch[:0]
		select {
		case cp := <-c.in:
			batch = append(batch, cp)
		case <-c.quit:
			// Drain and flush what is left, then exit.
			for {
				batch = batch[:0]
				batch = c.drain(batch)
				if len(batch) == 0 {
					return
				}
				c.write(batch)
			}
		}
		batch = c.drain(batch)
		c.write(batch)
	}
}

func (c *completer) drain(batch []completion) []completion {
	for len(batch) < completerBatchMax {
		select {
		case cp := <-c.in:
			batch = append(batch, cp)
		default:
			return batch
		}
	}
	return batch
}

// write makes the batch durable, retrying while the task center is
// unreachable (until the shutdown deadline), then acknowledges the
// messages.
func (c *completer) write(batch []completion) {
	ts := make([]store.Transition, len(batch))
	for i := range batch {
		ts[i] = batch[i].tr
	}
	delay := 100 * time.Millisecond
	var applied []bool
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		var err error
		applied, err = c.store.TaskTransition(ctx, ts)
		cancel()
		if err == nil {
			break
		}
		if store.IsRejected(err) {
			c.rejected(batch, err)
			return
		}
		select {
		case <-c.quit:
			if time.Now().After(c.giveUp) {
				c.log.Error("giving up writing results at shutdown; recovery will re-run these tasks", "tasks", len(batch), "err", err)
				return
			}
		default:
		}
		c.log.Error("write results failed; retrying", "tasks", len(batch), "err", err, "in", delay)
		time.Sleep(delay)
		delay = min(delay*2, 5*time.Second)
	}
	acks := map[string][]string{}
	// Attempts whose result was applied, for the queues' per-minute
	// counters: a result the fence rejected is no run.
	ended := map[string]broker.Ended{}
	for i, ok := range applied {
		if !ok {
			c.stale.Add(1)
			c.log.Warn("stale result rejected by the fence", batch[i].attrs("status", ts[i].To.String())...)
		} else if run := ts[i].Run; run != nil {
			broker.CountEnded(ended, batch[i].queue, run.Outcome)
		}
		acks[batch[i].queue] = append(acks[batch[i].queue], batch[i].raw)
	}
	if c.written != nil {
		c.written(batch, applied)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.broker.AckEnded(ctx, c.workerID, acks, c.now(), ended); err != nil {
		// The results are durable; leftover messages are dropped by the
		// fence when recovery looks at them (and the counters miss them).
		c.log.Warn("ack finished messages", "err", err)
	}
}

// rejected handles a batch the server refused outright: retrying it as is
// cannot succeed, and must not hold back the other results. A batch is split
// to find the culprit; the culprit is written once more with a short result
// in place of its output, and given up on (recovery re-runs its task) if even
// that is refused.
func (c *completer) rejected(batch []completion, err error) {
	if len(batch) > 1 {
		for _, cp := range batch {
			c.write([]completion{cp})
		}
		return
	}
	cp := batch[0]
	note := "result not stored: " + handler.Truncate(err.Error(), 500)
	if cp.tr.Result == note {
		c.log.Error("result refused by the task center; recovery will re-run the task", cp.attrs("err", err)...)
		return
	}
	c.log.Warn("result refused by the task center; storing a note instead", cp.attrs("err", err)...)
	cp.tr.Result = note
	if cp.tr.Run != nil {
		run := *cp.tr.Run
		run.Result = note
		cp.tr.Run = &run
	}
	c.write([]completion{cp})
}
