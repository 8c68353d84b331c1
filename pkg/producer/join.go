package producer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// Concurrent Submit calls share their INSERT. Each commit waits for a
// flush of the redo log, so calls that each insert alone are bound by the
// disk's flushes, and the web requests of a busy service submit
// concurrently. A lone call is written at once; the calls that come while
// a write is in flight are written together by the next one, which waits
// for company only as long as joinLinger.
const (
	// joinRows and joinBytes bound one shared INSERT; a submission larger
	// than joinBytes goes alone.
	joinRows  = 500
	joinBytes = 1 << 20
	// joinLinger: a write waits this long at most for the callers of the
	// write before it to come back. Callers in a loop (a worker draining a
	// list, a benchmark) come back within microseconds; without it their
	// writes alternate between all of them and the one that was left out.
	joinLinger = 200 * time.Microsecond
)

// joined is one Submit waiting for its part of a shared write.
type joined struct {
	ctx  context.Context
	sub  Submission
	p    store.TaskInsertParams
	res  Result
	err  error
	done chan struct{} // closed once res and err are set
}

// joiner gathers the waiting calls. One writer runs while calls wait and
// ends when none does.
type joiner struct {
	mu      sync.Mutex
	waiting []*joined
	arrived chan struct{} // a call was added to waiting (buffered: 1)
	writing bool
	writes  atomic.Int64 // INSERTs tried, for tests
}

// submitJoined writes j with the calls that wait beside it, and returns its
// result, or the context's error when ctx ends first. A call that ends
// before its write started wrote nothing; one that ends during it may
// have been written, as a cancelled INSERT may have been.
func (c *Client) submitJoined(ctx context.Context, j *joined) (Result, error) {
	jn := &c.join
	j.ctx, j.done = ctx, make(chan struct{})
	jn.mu.Lock()
	jn.waiting = append(jn.waiting, j)
	if jn.arrived == nil {
		jn.arrived = make(chan struct{}, 1)
	}
	select {
	case jn.arrived <- struct{}{}:
	default:
	}
	if !jn.writing {
		jn.writing = true
		go c.writeJoined()
	}
	jn.mu.Unlock()
	select {
	case <-j.done:
		return j.res, j.err
	case <-ctx.Done():
		jn.mu.Lock()
		for i, w := range jn.waiting {
			if w == j {
				jn.waiting = append(jn.waiting[:i], jn.waiting[i+1:]...)
				break
			}
		}
		jn.mu.Unlock()
		return Result{}, ctx.Err()
	}
}

// writeJoined writes the waiting calls, a shared INSERT at a time, until
// none waits.
func (c *Client) writeJoined() {
	jn := &c.join
	last := 0
	for {
		jn.linger(last)
		jn.mu.Lock()
		n, size := 0, 0
		for n < len(jn.waiting) && n < joinRows {
			size += len(jn.waiting[n].p.Payload)
			if n > 0 && size > joinBytes {
				break
			}
			n++
		}
		if n == 0 {
			jn.writing = false
			jn.mu.Unlock()
			return
		}
		batch := append([]*joined(nil), jn.waiting[:n]...)
		jn.waiting = append(jn.waiting[:0], jn.waiting[n:]...)
		jn.mu.Unlock()
		c.writeBatch(batch)
		last = n
	}
}

// linger waits up to joinLinger until as many calls wait as the last
// write had.
func (jn *joiner) linger(last int) {
	var deadline <-chan time.Time
	for {
		jn.mu.Lock()
		enough := len(jn.waiting) >= last
		jn.mu.Unlock()
		if enough {
			return
		}
		if deadline == nil {
			t := time.NewTimer(joinLinger)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-jn.arrived:
		case <-deadline:
			return
		}
	}
}

// writeBatch writes the batch in one INSERT, under a context that ends
// when every caller's has. When the server refuses the shared write for
// what it holds (a trigger, a constraint: IsRejected), or one row is
// invalid (a unique key held by a code spelt otherwise), each call is
// written alone, so that one caller's row fails only that caller; so
// does a row that failed after others were written (PartialError). Any
// other error (the server unreachable, a lock held elsewhere, a
// deadline) is every caller's: written alone, one after another, each
// would only wait for it again.
func (c *Client) writeBatch(batch []*joined) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	defer cancel()
	left := atomic.Int64{}
	left.Store(int64(len(batch)))
	for _, j := range batch {
		stop := context.AfterFunc(j.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	subs := make([]Submission, len(batch))
	ps := make([]store.TaskInsertParams, len(batch))
	for i, j := range batch {
		subs[i], ps[i] = j.sub, j.p
	}
	c.join.writes.Add(1)
	res, err := c.write(ctx, subs, ps)
	if err != nil && len(batch) > 1 && (store.IsRejected(err) || task.ErrorCode(err) == task.CodeInvalid) {
		for _, j := range batch {
			c.join.writes.Add(1)
			if r, err := c.write(j.ctx, []Submission{j.sub}, []store.TaskInsertParams{j.p}); err != nil {
				j.err = err
			} else {
				j.res = r[0]
			}
			close(j.done)
		}
		return
	}
	var partial *PartialError
	errors.As(err, &partial)
	for i, j := range batch {
		switch {
		case partial != nil && partial.Errs[i] != nil:
			j.err = partial.Errs[i]
		case partial != nil:
			j.res = res[i]
		case err != nil:
			j.err = err
		default:
			j.res = res[i]
		}
		close(j.done)
	}
}
