package lock

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Lease is a held lock. It renews itself every TTL/3 in one goroutine until
// Release, or until it is lost; see the package documentation for when it
// trusts itself.
type Lease struct {
	b     backend
	name  string
	token string
	ttl   time.Duration

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	trustEnd time.Time // the lock is surely ours before this instant

	stop        chan struct{} // closed by Release
	done        chan struct{} // closed when keepAlive returns
	releaseOnce sync.Once
	releaseErr  error
}

// newLease starts the renewal of a lock acquired by a request sent at
// start. The lease's Context keeps parent's values, not its cancellation.
func newLease(parent context.Context, b backend, name, token string, ttl time.Duration, start time.Time) *Lease {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	l := &Lease{
		b: b, name: name, token: token, ttl: ttl,
		ctx: ctx, cancel: cancel,
		trustEnd: start.Add(ttl - Margin(ttl)),
		stop:     make(chan struct{}), done: make(chan struct{}),
	}
	go l.keepAlive()
	return l
}

// Name is the lock's name.
func (l *Lease) Name() string { return l.name }

// Token is the random owner token of this acquisition.
func (l *Lease) Token() string { return l.token }

// TTL is the time each acquire or renewal holds the lock for.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Context is cancelled when the lease is lost (cause wraps ErrLost) or
// released (cause ErrReleased). Work that needs the lock runs under it.
func (l *Lease) Context() context.Context { return l.ctx }

// Valid reports whether the lock is still surely held: not lost, not
// released, and inside the trust window of the last confirmed renewal.
func (l *Lease) Valid() bool {
	return l.ctx.Err() == nil && time.Now().Before(l.until())
}

// Err is nil while the lease is held; afterwards, why it ended (an error
// wrapping ErrLost, or ErrReleased).
func (l *Lease) Err() error {
	if l.ctx.Err() == nil {
		return nil
	}
	return context.Cause(l.ctx)
}

// Release stops the renewal, cancels the Context and deletes the lock if
// this lease still owns it (compare-and-delete: it never removes another
// owner's lock). It is idempotent: later calls return the first result.
// When it returns, the lease's goroutines have ended. The delete is
// bounded by ctx and CallTimeout; pass a context that is not already
// cancelled (e.g. context.WithoutCancel) so the lock is freed at shutdown.
func (l *Lease) Release(ctx context.Context) error {
	l.releaseOnce.Do(func() {
		close(l.stop)
		<-l.done
		l.cancel(ErrReleased)
		rctx, cancel := context.WithTimeout(ctx, CallTimeout)
		defer cancel()
		if err := l.b.release(rctx, l.name, l.token); err != nil {
			l.releaseErr = fmt.Errorf("release lock %s: %w", l.name, err)
		}
	})
	return l.releaseErr
}

func (l *Lease) until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.trustEnd
}

// retryDelay is the pause between failed renewal attempts.
func retryDelay(ttl time.Duration) time.Duration {
	return min(max(ttl/10, 50*time.Millisecond), time.Second)
}

// renewal is the outcome of one renew request.
type renewal struct {
	ok  bool
	err error
}

// keepAlive renews the lock every TTL/3 (sooner after a failed attempt)
// until Release, a refused renewal, or the end of the trust window.
//
// Each request runs in its own goroutine so that the trust window closes
// on time even if a client ignores its context; keepAlive always waits for
// that goroutine before returning.
func (l *Lease) keepAlive() {
	defer close(l.done)
	expiry := time.NewTimer(time.Until(l.until()))
	defer expiry.Stop()
	next := time.NewTimer(l.ttl / 3)
	defer next.Stop()
	var lastErr error
	for {
		select {
		case <-l.stop:
			return
		case <-expiry.C:
			l.cancel(l.windowErr(lastErr))
			return
		case <-next.C:
		}
		start := time.Now()
		trustEnd := l.until()
		if !start.Before(trustEnd) { // e.g. the process was paused
			l.cancel(l.windowErr(lastErr))
			return
		}
		rctx, cancel := context.WithDeadline(context.Background(), earliest(start.Add(min(CallTimeout, l.ttl/3)), trustEnd))
		res := make(chan renewal, 1)
		go func() {
			ok, err := l.b.renew(rctx, l.name, l.token, l.ttl)
			res <- renewal{ok, err}
		}()
		var r renewal
		select {
		case r = <-res:
			cancel()
		case <-expiry.C:
			cancel()
			<-res
			l.cancel(l.windowErr(lastErr))
			return
		case <-l.stop:
			cancel()
			<-res
			return
		}
		switch {
		case r.err != nil:
			lastErr = r.err
			next.Reset(retryDelay(l.ttl))
		case !r.ok:
			l.cancel(fmt.Errorf("%w: %s: renewal refused: another owner holds it or it expired", ErrLost, l.name))
			return
		case !time.Now().Before(trustEnd):
			// Confirmed, but after the window closed: Valid has already
			// reported false, and a lost lease stays lost.
			l.cancel(l.windowErr(nil))
			return
		default:
			l.mu.Lock()
			l.trustEnd = start.Add(l.ttl - Margin(l.ttl))
			l.mu.Unlock()
			expiry.Reset(time.Until(l.until()))
			next.Reset(l.ttl / 3)
			lastErr = nil
		}
	}
}

// windowErr is the cause of a loss by the end of the trust window.
func (l *Lease) windowErr(last error) error {
	if last != nil {
		return fmt.Errorf("%w: %s: no renewal confirmed within %s (last error: %v)", ErrLost, l.name, l.ttl-Margin(l.ttl), last)
	}
	return fmt.Errorf("%w: %s: no renewal confirmed within %s", ErrLost, l.name, l.ttl-Margin(l.ttl))
}
