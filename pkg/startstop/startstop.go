// Package startstop is the one lifecycle of taskd's background components:
// Start runs a loop in a goroutine, Stop cancels it and waits for it to
// return. Stop is safe to call twice or without Start.
package startstop

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrStarted is returned by a second Start.
var ErrStarted = errors.New("already started")

// Runner runs one loop.
type Runner struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs loop(ctx) in a goroutine until Stop or until ctx is done.
func (r *Runner) Start(ctx context.Context, loop func(ctx context.Context)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done != nil {
		return ErrStarted
	}
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		loop(ctx)
	}()
	return nil
}

// Stop cancels the loop and waits for it to return.
func (r *Runner) Stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// Cancel cancels the loop without waiting for it to return: for a process
// about to exit, which must not wait on a loop stuck in a call.
func (r *Runner) Cancel() {
	r.mu.Lock()
	cancel := r.cancel
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Every calls pass now and then every interval until ctx is done.
func Every(ctx context.Context, interval time.Duration, pass func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sleep waits for d or until ctx is done, and reports whether the whole d
// passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
