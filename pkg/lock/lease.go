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
	owner string // random id of this acquisition: the compare-and-set key
	token uint64 // fencing token
	ttl   time.Duration

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	trustEnd time.Time     // the lock is surely ours before this instant
	trip     time.Duration // round trip of the request that set trustEnd

	stop        chan struct{} // closed by Release
	done        chan struct{} // closed when keepAlive returns
	releaseOnce sync.Once
	releaseErr  error
}

// newLease starts the renewal of a lock acquired by a request sent at
// start. The lease's Context keeps parent's values, not its cancellation.
func newLease(parent context.Context, b backend, name, owner string, token uint64, ttl time.Duration, start time.Time) *Lease {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	l := &Lease{
		b: b, name: name, owner: owner, token: token, ttl: ttl,
		ctx: ctx, cancel: cancel,
		trustEnd: start.Add(ttl - Margin(ttl)), trip: time.Since(start),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go l.keepAlive()
	return l
}

// Name is the lock's name.
func (l *Lease) Name() string { return l.name }

// Owner is the random id that owns the lock in the backend for this
// acquisition.
func (l *Lease) Owner() string { return l.owner }

// Token is the fencing token of this acquisition: greater than the token
// of every earlier acquisition of the name. Resources the holder writes can
// refuse writes carrying a token lower than one they have seen.
func (l *Lease) Token() uint64 { return l.token }

// TTL is the time each acquire or renewal holds the lock for.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Context is cancelled when the lease is lost (cause wraps ErrLost) or
// released (cause ErrReleased). Work that needs the lock runs under it.
func (l *Lease) Context() context.Context { return l.ctx }

// Valid reports whether the lock is still surely held: not lost, not
// released, and inside the trust window of the last confirmed renewal.
func (l *Lease) Valid() bool {
	return l.ctx.Err() == nil && l.inWindow(time.Now())
}

// Check ends the lease at once (cause wrapping ErrLost) when its trust
// window has passed, and reports whether it is still valid. The lease
// checks itself every checkInterval; a caller that knows its process was
// just resumed (SIGCONT) calls Check so it does not wait even that long.
func (l *Lease) Check() bool { return l.checkAt(time.Now()) }

func (l *Lease) checkAt(now time.Time) bool {
	if l.ctx.Err() != nil {
		return false
	}
	if !l.inWindow(now) {
		l.cancel(l.windowErr(nil))
		return false
	}
	return true
}

// inWindow reports whether now is inside the trust window by both the
// monotonic clock (immune to clock steps) and the wall clock: the
// monotonic clock stops while the host is suspended, and a host resumed
// from a suspend must not trust a lock that expired meanwhile on the
// server. A forward step of the wall clock only ends the lease early.
func (l *Lease) inWindow(now time.Time) bool {
	end := l.until()
	return now.Before(end) && now.Round(0).Before(end.Round(0))
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
		if err := l.b.release(rctx, l.name, l.owner); err != nil {
			l.releaseErr = fmt.Errorf("release lock %s: %w", l.name, err)
		}
	})
	return l.releaseErr
}

func (l *Lease) until() time.Time {
	end, _ := l.window()
	return end
}

// window is the end of the trust window and the round trip of the
// request that set it.
func (l *Lease) window() (time.Time, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.trustEnd, l.trip
}

// checkInterval is how often a lease checks its trust window besides its
// timers, so that a process resumed after its window closed (a suspend
// stops the monotonic clock the timers run on) notices within this.
const checkInterval = 100 * time.Millisecond

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
	check := time.NewTicker(checkInterval)
	defer check.Stop()
	var lastErr error
	for {
		select {
		case <-l.stop:
			return
		case <-l.ctx.Done(): // ended by Check
			return
		case <-expiry.C:
			l.cancel(l.windowErr(lastErr))
			return
		case <-check.C:
			if !l.inWindow(time.Now()) {
				l.cancel(l.windowErr(lastErr))
				return
			}
			continue
		case <-next.C:
		}
		start := time.Now()
		trustEnd, trip := l.window()
		if !l.inWindow(start) { // e.g. the process was paused
			l.cancel(l.windowErr(lastErr))
			return
		}
		rctx, cancel := context.WithDeadline(context.Background(), earliest(start.Add(min(CallTimeout, l.ttl/3)), trustEnd))
		res := make(chan renewal, 1)
		go func() {
			ok, err := l.b.renew(rctx, l.name, l.owner, l.ttl, Margin(l.ttl)+trip)
			res <- renewal{ok, err}
		}()
		r, ended := l.await(res, expiry, check, lastErr)
		cancel()
		if ended {
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
		case !l.inWindow(time.Now()):
			// Confirmed, but after the window closed: Valid has already
			// reported false, and a lost lease stays lost.
			l.cancel(l.windowErr(nil))
			return
		default:
			l.mu.Lock()
			l.trustEnd = start.Add(l.ttl - Margin(l.ttl))
			l.trip = time.Since(start)
			l.mu.Unlock()
			expiry.Reset(time.Until(l.until()))
			next.Reset(l.ttl / 3)
			lastErr = nil
		}
	}
}

// await waits for the reply to a renewal. It reports ended when the
// lease ended first: released, ended by Check, or its trust window closed
// (then it cancels the lease).
func (l *Lease) await(res <-chan renewal, expiry *time.Timer, check *time.Ticker, lastErr error) (renewal, bool) {
	for {
		select {
		case r := <-res:
			return r, false
		case <-check.C:
			if l.inWindow(time.Now()) {
				continue
			}
		case <-expiry.C:
		case <-l.stop:
			return renewal{}, true
		case <-l.ctx.Done():
			return renewal{}, true
		}
		l.cancel(l.windowErr(lastErr))
		return renewal{}, true
	}
}

// windowErr is the cause of a loss by the end of the trust window.
func (l *Lease) windowErr(last error) error {
	if last != nil {
		return fmt.Errorf("%w: %s: no renewal confirmed within %s (last error: %v)", ErrLost, l.name, l.ttl-Margin(l.ttl), last)
	}
	return fmt.Errorf("%w: %s: no renewal confirmed within %s", ErrLost, l.name, l.ttl-Margin(l.ttl))
}
