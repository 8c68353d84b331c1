package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/startstop"
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
	// lease is the attempt's lease of its queue's limit, released once
	// the result is written; grouped: its end may free its group.
	lease   string
	grouped bool
	queued  time.Duration // when it was handed to the completer, since its epoch
}

// attrs are the log fields of the completion's task.
func (cp *completion) attrs(more ...any) []any {
	return taskAttrs(cp.tr.ID, cp.code, cp.tr.Attempt, more...)
}

// taskAttrs are the log fields of an attempt, then more.
func taskAttrs(id int64, code string, attempt int, more ...any) []any {
	return append([]any{"task_id", id, "task_code", code, "attempt", attempt}, more...)
}

// completer writes results in batches: whatever has finished since the last
// write goes out in one transaction, so under load many results share a
// commit, and a result that ends alone waits a few milliseconds for
// others (completerLinger). A message is removed from the processing list
// only after its result is durable.
type completer struct {
	store    Store
	broker   Broker
	workerID string
	log      *slog.Logger
	stale    *atomic.Int64
	// written is told which results of a batch were applied (metrics).
	written func(batch []completion, applied []bool)
	// now is the clock of the queues' per-minute counters: the database
	// clock's upper bound, so that an attempt is not counted in a minute
	// before the finished_at the database stamped on its result.
	now func() time.Time

	in chan completion
	// collecting is held by the writer gathering a batch, so that one
	// gathers while the other writes, and a lingering batch is not split.
	collecting sync.Mutex
	linger     time.Duration
	// writing holds, per writer, when the oldest completion of the batch
	// it writes was queued, plus one (0: it writes none). Times are since
	// epoch, on the monotonic clock.
	writing [completerWriters]atomic.Int64
	// refused is why the task center turned down the last try of a write
	// being retried: the server's refusal (read-only, too many
	// connections) or no server to connect to (unreachable). Nil when the
	// last try got no answer on a connection, or a write succeeded since.
	refused atomic.Pointer[refusal]
	// failing is set while a write is being retried after it failed: the
	// attempts that end meanwhile can only wait behind it.
	failing atomic.Bool
	// fails logs the writes that fail: a task center down or refusing
	// this node fails every try of every writer for as long as it lasts.
	fails *startstop.FailLog
	// wrote wakes the writer gathering a batch when a write ended.
	wrote  chan struct{}
	epoch  time.Time
	runner startstop.Runner
	done   chan struct{} // closed when the writers exited
	// giveUp is when a stopping completer stops retrying (unix ns);
	// discard drops what is queued (abort).
	giveUp  atomic.Int64
	discard atomic.Bool
	// retries are the goroutines writing again the results whose rows
	// another transaction held (see later).
	retries sync.WaitGroup
}

func newCompleter(s Store, b Broker, workerID string, log *slog.Logger, stale *atomic.Int64) *completer {
	return &completer{
		store: s, broker: b, workerID: workerID, log: log, stale: stale, now: time.Now, epoch: time.Now(),
		in: make(chan completion, 4*completerBatchMax), done: make(chan struct{}), linger: completerLinger,
		wrote: make(chan struct{}, 1),
		fails: &startstop.FailLog{Log: log, Level: slog.LevelError, Failed: "write results failed; retrying", Again: "results written again"},
	}
}

// completerWriters is the number of transactions writing results at once:
// while one waits for its commit, the next batches are already on their
// way. Under a burn-down a write of a full batch takes tens of
// milliseconds while the claims share the server's cores, and with two
// writers the results queued behind them held the slots back: four ran
// 7-31% more tasks a second than two in 13 of 17 alternating rounds
// (docs/benchmarks.md, 2026-12-06), and six or eight no more than four.
const completerWriters = 4

// When no write is in flight, a batch of fewer than lingerEnough results
// waits up to completerLinger after its first for more. A result that
// ends alone costs the server a transaction of its own (about 0.8 ms of
// MySQL CPU here, four round trips and a commit), and a queue whose
// tasks end one at a time (a slot of a slow queue every few milliseconds)
// would write each so; past about a hundred rows a statement the cost per
// row hardly falls. The slot is free meanwhile: only the result's write
// waits.
const (
	completerLinger = 10 * time.Millisecond
	lingerEnough    = 100
)

// Start runs the writers until stop.
func (c *completer) Start(ctx context.Context) error {
	return c.runner.Start(ctx, func(ctx context.Context) {
		defer close(c.done)
		var wg sync.WaitGroup
		for i := range completerWriters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.loop(ctx, &c.writing[i])
			}()
		}
		wg.Wait()
		c.retries.Wait() // only writers start retries: none starts now
	})
}

// add queues a completion. After stop it is dropped: the task was handed
// back already, or recovery will find it.
func (c *completer) add(cp completion) {
	cp.queued = time.Since(c.epoch)
	if c.discard.Load() {
		c.log.Warn("result dropped on abort; recovery will re-run the task", cp.attrs()...)
		return
	}
	select {
	case c.in <- cp:
	case <-c.done:
		c.log.Warn("result dropped after shutdown; recovery will re-run the task", cp.attrs()...)
	}
}

// stop flushes what is queued, retrying failed writes for at most wait.
func (c *completer) stop(wait time.Duration) {
	c.giveUp.Store(time.Now().Add(wait).UnixNano())
	c.runner.Stop()
}

// abandon drops what is queued, and what is added later, and returns
// without waiting for writes in flight: the process is about to exit, and
// recovery re-runs what was not written.
func (c *completer) abandon() {
	c.discard.Store(true)
	c.runner.Cancel()
}

// loop writes batches until ctx is done, then flushes what is left. It
// keeps in writing when the oldest result of the batch it writes waits
// since.
func (c *completer) loop(ctx context.Context, writing *atomic.Int64) {
	batch := make([]completion, 0, completerBatchMax)
	write := func() {
		oldest := batch[0].queued
		for _, cp := range batch[1:] {
			oldest = min(oldest, cp.queued)
		}
		writing.Store(int64(oldest) + 1)
		held := c.write(ctx, batch)
		writing.Store(0)
		select {
		case c.wrote <- struct{}{}:
		default:
		}
		c.later(ctx, held)
	}
	for {
		batch = batch[:0]
		c.collecting.Lock()
		select {
		case cp := <-c.in:
			batch = append(batch, cp)
		case <-ctx.Done():
			c.collecting.Unlock()
			for !c.discard.Load() {
				batch = c.drain(batch[:0])
				if len(batch) == 0 {
					return
				}
				write()
			}
			return
		}
		batch = c.gather(ctx, batch)
		c.collecting.Unlock()
		write()
	}
}

// gather adds to batch what is queued, then what comes while other
// writers write, up to completerBatchMax: under load a write of a few
// rows beside one in flight costs the server more per row than the full
// statement it could have been, and its results would wait for the
// server all the same. Once no write is in flight, a batch of fewer than
// lingerEnough waits for more until c.linger after its first was queued.
func (c *completer) gather(ctx context.Context, batch []completion) []completion {
	batch = c.drain(batch)
	t := time.NewTimer(c.linger - (time.Since(c.epoch) - batch[0].queued))
	defer t.Stop()
	lingered := false
	for len(batch) < completerBatchMax {
		busy := c.writingNow()
		if !busy && (len(batch) >= lingerEnough || lingered) {
			return batch
		}
		select {
		case cp := <-c.in:
			batch = c.drain(append(batch, cp))
		case <-c.wrote:
		case <-t.C:
			lingered = true
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}

// writingNow reports whether a writer is writing a batch.
func (c *completer) writingNow() bool {
	for i := range c.writing {
		if c.writing[i].Load() != 0 {
			return true
		}
	}
	return false
}

// waiting is how long the oldest result a writer is writing has waited
// since it was queued (0: no writer writes one). A batch retried while
// the task center does not answer keeps its age.
func (c *completer) waiting() time.Duration {
	var oldest int64
	for i := range c.writing {
		if at := c.writing[i].Load(); at != 0 && (oldest == 0 || at < oldest) {
			oldest = at
		}
	}
	if oldest == 0 {
		return 0
	}
	return time.Since(c.epoch) - time.Duration(oldest-1)
}

// backedUp reports whether results wait behind the writers: a full
// batch of them (writing is slower than the attempts end), or any while a
// write is being retried (the task center refuses or does not answer).
func (c *completer) backedUp() bool { return len(c.in) >= completerBatchMax || c.failing.Load() }

// later writes again, beside the writers, the completions whose rows
// another transaction held, until they are written (when stopping, until
// the flush deadline): after lockedRetryFirst, then every lockedRetry.
// Rows still held after the first try are someone's long transaction (the
// seed's incident), worth a line; a claim's race for a row is not.
func (c *completer) later(ctx context.Context, held []completion) {
	if len(held) == 0 {
		return
	}
	held = slices.Clone(held)
	c.retries.Add(1)
	go func() {
		defer c.retries.Done()
		for tries := 0; len(held) > 0; tries++ {
			wait := lockedRetryFirst
			if tries > 0 {
				wait = lockedRetry
			}
			if tries == 1 {
				c.log.Warn("results of tasks locked by another transaction; writing them later", "tasks", len(held))
			}
			time.Sleep(wait)
			if c.givingUp(ctx) {
				c.log.Error("giving up writing results of locked tasks at shutdown; recovery will re-run these tasks", "tasks", len(held))
				return
			}
			held = c.write(ctx, held)
		}
	}()
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

// refusal is why the task center turned a write down (see refused).
type refusal struct{ err error }

// refusalOf is err as a refusal: the server's own error, or a connection
// that could not be opened because nothing listens or no route leads to
// the server (down, restarting, cut off). Those hold for every node
// alike, and a restart would not get past them. A connection that was
// open and stopped answering is no refusal: a fresh process may get
// through, and so may one that ran out of descriptors.
func refusalOf(err error) *refusal {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return &refusal{me}
	}
	var dns *net.DNSError
	var op *net.OpError
	if errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.As(err, &op) && op.Op == "dial" && op.Timeout() {
		return &refusal{fmt.Errorf("unreachable: %w", err)}
	}
	return nil
}

// givingUp reports whether a failed write is to be given up: the completer
// stops (ctx is done) and its flush deadline passed, or it aborts.
func (c *completer) givingUp(ctx context.Context) bool {
	return ctx.Err() != nil && (c.discard.Load() || time.Now().UnixNano() > c.giveUp.Load())
}

// write makes the batch durable, retrying while the task center is
// unreachable (until the shutdown deadline), then acknowledges the
// messages. It returns the completions whose rows another transaction
// held: neither written nor acknowledged.
func (c *completer) write(ctx context.Context, batch []completion) (held []completion) {
	ts := make([]store.Transition, len(batch))
	for i := range batch {
		ts[i] = batch[i].tr
	}
	delay := retryFirst
	var applied []bool
	for {
		wctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		var err error
		applied, err = c.store.TaskTransition(wctx, ts)
		cancel()
		if locked := store.LockedEntries(err); locked != nil {
			var rest []completion
			batch, rest, applied = splitHeld(batch, applied, locked)
			held = append(held, rest...)
			ts, err = ts[:0], nil
			for i := range batch {
				ts = append(ts, batch[i].tr)
			}
		}
		if err == nil {
			c.refused.Store(nil)
			c.failing.Store(false)
			c.fails.OK()
			break
		}
		c.refused.Store(refusalOf(err))
		// A batch stopped at the server's time limit (or by a KILL) is
		// split as a refused one is, so that one too big to write in
		// time gets through; a single result so stopped is tried again.
		if store.IsRejected(err) || store.IsStopped(err) && len(batch) > 1 {
			c.failing.Store(false)
			c.rejected(ctx, batch, err)
			return held
		}
		if c.givingUp(ctx) {
			c.log.Error("giving up writing results at shutdown; recovery will re-run these tasks", "tasks", len(batch), "err", err)
			return held
		}
		c.failing.Store(true)
		c.fails.Fail(err, "tasks", len(batch))
		time.Sleep(delay)
		delay = min(delay*2, retryMax)
	}
	if len(batch) == 0 {
		return held
	}
	acks := map[string][]string{}
	var leases map[string][]string
	wake := false
	// Attempts whose result was applied, for the queues' per-minute
	// counters: a result the fence rejected is no run.
	ended := map[string]broker.Ended{}
	var fenced []int // results the fence rejected
	for i, ok := range applied {
		if l := batch[i].lease; l != "" {
			if leases == nil {
				leases = map[string][]string{}
			}
			leases[batch[i].queue] = append(leases[batch[i].queue], l)
		}
		wake = wake || batch[i].grouped
		if !ok {
			c.stale.Add(1)
			fenced = append(fenced, i)
		} else if run := ts[i].Run; run != nil {
			broker.CountEnded(ended, batch[i].queue, run.Outcome)
		}
		acks[batch[i].queue] = append(acks[batch[i].queue], batch[i].raw)
	}
	if len(fenced) > 0 {
		c.fenced(batch, ts, fenced)
	}
	if c.written != nil {
		c.written(batch, applied)
	}
	actx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	if err := c.broker.AckEnded(actx, c.workerID, acks, c.now(), ended); err != nil {
		// The results are durable; leftover messages are dropped by the
		// fence when recovery looks at them (and the counters miss them).
		c.log.Warn("ack finished messages", "err", err)
	}
	// After the write: capacity held by a lease or a group comes back
	// only once the attempt's end is durable. A lease whose release fails
	// expires with the heartbeat TTL.
	if err := c.broker.ReleaseLeases(actx, leases); err != nil {
		c.log.Warn("release leases", "err", err)
	}
	if wake {
		if err := c.broker.Wake(actx, 0); err != nil {
			c.log.Warn("wake the schedulers for the groups freed", "err", err)
		}
	}
	return held
}

// splitHeld separates the completions at the locked indexes of batch from
// the others, whose applied results it keeps.
func splitHeld(batch []completion, applied []bool, locked []int) (rest, held []completion, restApplied []bool) {
	isHeld := make([]bool, len(batch))
	for _, i := range locked {
		isHeld[i] = true
	}
	for i := range batch {
		if isHeld[i] {
			held = append(held, batch[i])
		} else {
			rest, restApplied = append(rest, batch[i]), append(restApplied, applied[i])
		}
	}
	return rest, held, restApplied
}

// fenced logs the results (indexes into batch) the fence turned down, with
// one read of their tasks' states: a frozen worker's resumed batch may be
// hundreds. A task deleted while it ran (taskd cron remove of a periodic
// task mid-run, or a delete) is said so, not as a stale result, which
// reads as a run twice.
func (c *completer) fenced(batch []completion, ts []store.Transition, idx []int) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	ids := make([]int64, len(idx))
	for k, i := range idx {
		ids[k] = ts[i].ID
	}
	states, err := c.store.TaskStates(ctx, ids)
	for _, i := range idx {
		if _, ok := states[ts[i].ID]; err == nil && !ok {
			c.log.Info("result dropped: the task was deleted while it ran (taskd cron remove, or delete)", batch[i].attrs()...)
			continue
		}
		c.log.Warn("stale result rejected by the fence", batch[i].attrs("status", ts[i].To.String())...)
	}
}

// rejected handles a batch the server refused outright (or, of more than
// one result, stopped at its time limit): retrying it as is cannot
// succeed, and must not hold back the other results. A batch is split
// in halves, each written on its own, to find the culprit in a few writes
// (one result per statement, a refused batch of 500 cost 500 transactions);
// the culprit is written once more with a short result in place of its
// output, and given up on (recovery re-runs its task) if even that is
// refused.
func (c *completer) rejected(ctx context.Context, batch []completion, err error) {
	if len(batch) > 1 {
		half := len(batch) / 2
		c.later(ctx, c.write(ctx, batch[:half]))
		c.later(ctx, c.write(ctx, batch[half:]))
		return
	}
	cp := batch[0]
	note := "result not stored: " + handler.Truncate(err.Error(), 500)
	if cp.tr.Result == note {
		c.log.Error("result refused by the task center; recovery will re-run the task", cp.attrs("err", err)...)
		return
	}
	c.log.Warn("result refused by the task center; storing a note instead", cp.attrs("err", err)...)
	cp.tr.Result, cp.tr.Value, cp.tr.Lost = note, nil, handler.Truncate(err.Error(), 200)
	if cp.tr.Run != nil {
		run := *cp.tr.Run
		run.Result = note
		cp.tr.Run = &run
	}
	c.later(ctx, c.write(ctx, []completion{cp}))
}
