package handler

import (
	"context"
	"sync"
	"time"
)

// Defaults of the live output tail.
const (
	// TailBytesDefault is how much of a running attempt's latest output
	// is published.
	TailBytesDefault = 8 << 10
	// TailIntervalDefault is the most often the tail is published, and
	// only when output came since the last time.
	TailIntervalDefault = time.Second
	// tailPublishTimeout bounds one publication.
	tailPublishTimeout = 2 * time.Second
)

// Tail publishes the latest output of a running attempt while it runs,
// so an operator can watch it (tasktop's live output). Exec, HTTP and Pool
// handlers write what the attempt prints to Request.Tail; Tail keeps the
// last bytes and hands them to publish at most every interval, once more
// when the attempt ends (done true) if it published before. A failing
// publish is not retried: the next interval publishes the newer output
// anyway. The publishing
// goroutine starts with the first Write: an attempt that prints nothing
// (most Go handlers) costs no goroutine, no ticker and no publication.
type Tail struct {
	publish  func(ctx context.Context, output string, done bool) error
	interval time.Duration
	started  time.Time // publications fall on started + k × interval

	mu      sync.Mutex
	buf     tailBuffer
	dirty   bool
	running bool // the publishing goroutine was started
	closed  bool

	stop chan struct{}
	done chan struct{}
}

// StartTail starts publishing; Close ends it. limit and interval 0 take
// the defaults.
func StartTail(publish func(ctx context.Context, output string, done bool) error, limit int, interval time.Duration) *Tail {
	if limit <= 0 {
		limit = TailBytesDefault
	}
	if interval <= 0 {
		interval = TailIntervalDefault
	}
	return &Tail{publish: publish, interval: interval, started: time.Now(), buf: tailBuffer{limit: limit}}
}

// Write keeps p in the tail. It never blocks on Redis: publishing runs on
// its own goroutine, started by the first Write.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.running && !t.closed {
		t.running = true
		t.stop, t.done = make(chan struct{}), make(chan struct{})
		go t.loop()
	}
	t.dirty = true
	return t.buf.Write(p)
}

func (t *Tail) loop() {
	defer close(t.done)
	// The first publication comes when it would have had the goroutine
	// run since the start, then one every interval.
	first := time.NewTimer(t.interval - time.Since(t.started)%t.interval)
	defer first.Stop()
	select {
	case <-t.stop:
		// An attempt that ended before its first publication had no
		// live output to follow, and its output is in its result: a key
		// in Redis for each quick task that prints would only fill it.
		return
	case <-first.C:
		t.flush(false)
	}
	tick := time.NewTicker(t.interval)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			t.flush(true)
			return
		case <-tick.C:
			t.flush(false)
		}
	}
}

// flush publishes the tail if it changed (or, at the end, if anything was
// ever written).
func (t *Tail) flush(final bool) {
	t.mu.Lock()
	dirty := t.dirty
	t.dirty = false
	out := t.buf.String()
	t.mu.Unlock()
	if !dirty && (!final || out == "") {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tailPublishTimeout)
	defer cancel()
	_ = t.publish(ctx, out, final)
}

// Close publishes the last output, marked done, and stops; a tail never
// written to has nothing to publish. Safe to call twice; a Write after
// Close is kept but not published.
func (t *Tail) Close() {
	t.mu.Lock()
	running, closed := t.running, t.closed
	t.closed = true
	t.mu.Unlock()
	if !running {
		return
	}
	if !closed {
		close(t.stop)
	}
	<-t.done
}
