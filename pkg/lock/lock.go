// Package lock is a distributed, renewable lock for duties that must run on
// one node at a time (alerting, retention, a crontab line run on every
// server). Two backends implement one Locker interface:
//
//   - Redis (NewRedis): SET NX PX, renewed and released by Lua
//     compare-and-set on an owner token.
//   - MySQL (NewMySQL): a row in task_lock, for teams without Redis; expiry
//     is judged by the database clock.
//
// A Lease renews itself every TTL/3. It trusts itself only for a window of
// TTL − margin (margin = max(TTL/10, 100ms)) counted from the start of its
// last successful acquire or renew request, not from the reply: the server
// set its expiry no earlier than that start, so while the window is open no
// other owner can hold the lock, even if this process is slow or paused.
// When a renewal is refused (someone else owns the lock) or cannot be
// confirmed before the window closes, the Lease is lost: its Context is
// cancelled with a cause wrapping ErrLost, and the holder must stop. The
// server applies a renewal only while the holder still trusts its lease,
// so one held up on the way or behind a row lock does not keep the lock
// from the next owner after the holder gave up.
//
// Each acquisition also gets a fencing token (Lease.Token): a number that
// grows with every acquisition of a name. A lease cannot stop a holder
// that is itself frozen (SIGSTOP, a long GC pause, a suspended VM) from
// acting after its window closed; the token lets the resources it writes
// refuse it instead (UPDATE ... WHERE fence < token). The token is
// max(previous token + 1, the server's clock in microseconds): it keeps
// growing across a FLUSHALL, a Redis restart without persistence or a
// failover to a replica that missed the last increments, as long as the
// server's clock does not go back.
//
// Neither backend uses MySQL GET_LOCK: it is bound to one connection, which
// a pool may hand to someone else or a failover may drop without notice.
package lock

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/taskd/taskd/pkg/task"
)

// Locker takes locks by name.
type Locker interface {
	// Acquire takes the lock name for ttl and returns a Lease that renews
	// itself until Release. It returns an error wrapping ErrNotAcquired when
	// another owner holds the lock, and makes one attempt only (see
	// AcquireWait).
	Acquire(ctx context.Context, name string, ttl time.Duration) (*Lease, error)
}

var (
	// ErrNotAcquired: another owner holds the lock.
	ErrNotAcquired = errors.New("lock is held by another owner")
	// ErrLost is the cause of a lease's Context when the lease was lost:
	// renewal was refused, or could not be confirmed in time.
	ErrLost = errors.New("lock lost")
	// ErrReleased is the cause of a lease's Context after Release.
	ErrReleased = errors.New("lock released")

	// errTooLate is a renewal that reached the server when its holder
	// had stopped trusting the lease, or was about to.
	errTooLate = errors.New("renewal reached the server too late to be applied")
)

const (
	// MinTTL is the shortest TTL a lock accepts.
	MinTTL = 500 * time.Millisecond
	// MaxTTL is the longest: the TTL is how long a holder that died
	// blocks every other, not how long the work may take (the lock is
	// renewed while it runs).
	MaxTTL = 24 * time.Hour
	// CallTimeout bounds each request to the backend whose context has no
	// earlier deadline.
	CallTimeout = 5 * time.Second
	// minMargin is the least time a lease stops trusting itself before its
	// TTL runs out.
	minMargin = 100 * time.Millisecond
	// MaxNameLen is the longest lock name (the MySQL key column holds 191).
	MaxNameLen = task.MaxCodeLen
)

// Margin is how long before the TTL runs out a lease of ttl stops trusting
// itself: max(ttl/10, 100ms). It absorbs clock-rate drift between this host
// and the server and the time a holder needs to notice the loss.
func Margin(ttl time.Duration) time.Duration { return max(ttl/10, minMargin) }

// ValidateTTL rejects a TTL shorter than MinTTL.
func ValidateTTL(ttl time.Duration) error {
	if ttl < MinTTL {
		return task.Invalidf("lock ttl %s is shorter than the minimum of %s", ttl, MinTTL)
	}
	if ttl > MaxTTL {
		return task.Invalidf("lock ttl %s is longer than the maximum of %s: it is how long a holder that died blocks the others; the lock is renewed while the command runs", ttl, MaxTTL)
	}
	return nil
}

// validate checks a lock request.
func validate(name string, ttl time.Duration) error {
	if err := task.ValidateName("lock name", name); err != nil {
		return err
	}
	return ValidateTTL(ttl)
}

// Held is a lock someone holds, as Lister reports it.
type Held struct {
	Name    string        `json:"name"`
	Backend string        `json:"backend"` // "redis" or "mysql"
	Host    string        `json:"host"`    // holder's host name
	PID     int           `json:"pid"`     // holder's process id
	Since   time.Time     `json:"since"`   // acquired at, by the server's clock
	TTLLeft time.Duration `json:"-"`       // ttl_left_ms in JSON
	Token   uint64        `json:"token"`   // fencing token of this acquisition
}

// Lister lists the locks held now, by name.
type Lister interface {
	List(ctx context.Context) ([]Held, error)
}

// holder identifies this process in the locks it takes.
type holder struct {
	host string
	pid  int
}

var thisHolder = sync.OnceValue(func() holder {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return holder{host: host, pid: os.Getpid()}
})

// backend is what a Lease needs from a store. Every method is one
// compare-and-set on (name, owner) and must honour ctx's deadline.
type backend interface {
	// tryAcquire sets name's owner for ttl unless another owner holds it
	// unexpired. When owner holds it now, it returns the fencing token of
	// this acquisition and true.
	tryAcquire(ctx context.Context, name, owner string, ttl time.Duration, h holder) (uint64, bool, error)
	// renew extends name by ttl if owner still holds it and more than late
	// is left of it when the request is applied; else it changes nothing.
	// late is the margin plus the round trip of the request that set the
	// lock's expiry: the server set it no later than that trip's end, so
	// with no more than late left, the holder's trust window has closed
	// and it has given up on the lease (a renewal can be held up on the
	// way, or behind a row lock). When owner holds the lock but less is
	// left, renew returns errTooLate.
	renew(ctx context.Context, name, owner string, ttl, late time.Duration) (bool, error)
	// release frees name if owner holds it.
	release(ctx context.Context, name, owner string) error
}

// acquire makes one attempt at name through b.
func acquire(ctx context.Context, b backend, name string, ttl time.Duration) (*Lease, error) {
	if err := validate(name, ttl); err != nil {
		return nil, err
	}
	owner, err := newOwner()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	trustEnd := start.Add(ttl - Margin(ttl))
	// A reply after the trust window would be useless: give up then.
	cctx, cancel := context.WithDeadline(ctx, earliest(start.Add(CallTimeout), trustEnd))
	token, ok, err := b.tryAcquire(cctx, name, owner, ttl, thisHolder())
	cancel()
	if err != nil {
		// The request may have been applied before it failed: drop the lock
		// it may have taken (a no-op unless owner holds it).
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = b.release(rctx, name, owner)
		rcancel()
		return nil, fmt.Errorf("acquire lock %s: %w", name, err)
	}
	if !ok {
		return nil, fmt.Errorf("lock %s: %w", name, ErrNotAcquired)
	}
	return newLease(ctx, b, name, owner, token, ttl, start), nil
}

// AcquireWait acquires name, retrying while another owner holds it until
// wait has elapsed (wait 0: one attempt). It returns an error wrapping
// ErrNotAcquired when the lock stayed held, and any other error at once.
func AcquireWait(ctx context.Context, l Locker, name string, ttl, wait time.Duration) (*Lease, error) {
	deadline := time.Now().Add(wait)
	delay := 50 * time.Millisecond
	// Poll faster for short TTLs: a freed lock is taken within maxDelay.
	maxDelay := min(max(ttl/10, 50*time.Millisecond), time.Second)
	for {
		lease, err := l.Acquire(ctx, name, ttl)
		if !errors.Is(err, ErrNotAcquired) {
			return lease, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, err
		}
		// Full jitter keeps waiting hosts from retrying in step.
		d := min(left, time.Duration(mrand.Int64N(int64(delay)))+time.Millisecond)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("wait for lock %s: %w", name, context.Cause(ctx))
		case <-t.C:
		}
		delay = min(2*delay, maxDelay)
	}
}

// Run runs fn while holding name: it acquires the lock (one attempt),
// calls fn with a context cancelled when the lease is lost or ctx is done,
// and releases the lock when fn returns. It returns an error wrapping
// ErrNotAcquired when another owner holds the lock; fn's error if fn
// failed; else an error wrapping ErrLost if the lease was lost while fn
// ran (fn may have been interrupted, or may have overlapped the next
// owner); else the release error.
func Run(ctx context.Context, l Locker, name string, ttl time.Duration, fn func(ctx context.Context) error) (err error) {
	lease, err := l.Acquire(ctx, name, ttl)
	if err != nil {
		return err
	}
	defer func() { // also when fn panics
		if relErr := lease.Release(context.WithoutCancel(ctx)); err == nil {
			err = relErr
		}
	}()
	fctx, cancel := context.WithCancelCause(lease.Context())
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer stop()
	if err := fn(fctx); err != nil {
		return err
	}
	return lease.Err() // an error wrapping ErrLost, or nil while held
}

// newOwner returns a random owner id (128 bits, hex).
func newOwner() (string, error) {
	b := make([]byte, 16)
	if _, err := crand.Read(b); err != nil {
		return "", fmt.Errorf("lock owner id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// MarshalJSON writes TTLLeft in milliseconds, as ttl_left_ms.
func (h Held) MarshalJSON() ([]byte, error) {
	type plain Held
	return json.Marshal(struct {
		plain
		TTLLeftMS int64 `json:"ttl_left_ms"`
	}{plain(h), h.TTLLeft.Milliseconds()})
}

// ListAll lists the locks of every lister, by name.
func ListAll(ctx context.Context, ls ...Lister) ([]Held, error) {
	var out []Held
	for _, l := range ls {
		held, err := l.List(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, held...)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Backend < out[j].Backend
	})
	return out, nil
}
