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
// when the attempt ends (done true). A failing publish is not retried:
// the next interval publishes the newer output anyway.
type Tail struct {
	publish  func(ctx context.Context, output string, done bool) error
	interval time.Duration

	mu    sync.Mutex
	buf   tailBuffer
	dirty bool

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
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
	t := &Tail{publish: publish, interval: interval, buf: tailBuffer{limit: limit},
		stop: make(chan struct{}), done: make(chan struct{})}
	go t.loop()
	return t
}

// Write keeps p in the tail. It never blocks on Redis: publishing runs on
// its own goroutine.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dirty = true
	return t.buf.Write(p)
}

func (t *Tail) loop() {
	defer close(t.done)
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

// Close publishes the last output, marked done, and stops. Safe to call
// twice.
func (t *Tail) Close() {
	t.stopOnce.Do(func() { close(t.stop) })
	<-t.done
}
