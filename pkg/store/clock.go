package store

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/taskd/taskd/pkg/clock"
)

// Clock follows the database clock from a node, as an interval that
// certainly holds it. A sync reads NOW(3), which the server evaluated at
// some instant between the read's send and its answer and truncated to the
// millisecond. So from the answer on, the database clock has reached at
// least the value read (Earliest), and not yet passed the value plus a
// millisecond plus the round trip (Latest); both advance at the local
// clock's pace from there. The interval is as wide as the sync's round
// trip plus a millisecond, whichever part of it was spent before the
// server read its clock: a connection pool's wait, say, is all before.
//
// Pick the bound by what a wrong guess would break: Earliest for "not
// before" decisions (a message pushed at its due time, a grace that must
// have passed), Latest for stamps of events that must not precede what the
// database stamped before them (a start after its dispatch). The bounds
// hold while the local clock keeps the database's pace, which NTP keeps
// to microseconds per second: users resync well within a minute.
//
// Before the first sync both bounds are the local clock.
type Clock struct {
	src   TimeSource
	local clock.Clock
	last  atomic.Pointer[reading]
}

// reading is one sync: the local clock when the read was sent and when
// its answer arrived, and the NOW(3) it read.
type reading struct {
	sent, received time.Time
	db             time.Time
}

// TimeSource tells the database's time, NOW(3): a *Store.
type TimeSource interface {
	Now(ctx context.Context) (time.Time, error)
}

// nowResolution is how much of the database clock NOW(3) truncates.
const nowResolution = time.Millisecond

// NewClock returns a clock that syncs against src and advances with the
// local clock (nil: the system clock; tests drive a clock.Manual).
func NewClock(src TimeSource, local clock.Clock) *Clock {
	return &Clock{src: src, local: clock.Or(local)}
}

// Sync reads the database clock.
func (c *Clock) Sync(ctx context.Context) error {
	sent := c.local.Now()
	db, err := c.src.Now(ctx)
	if err != nil {
		return err
	}
	c.last.Store(&reading{sent: sent, received: c.local.Now(), db: db})
	return nil
}

// SyncIfOlder syncs when the last reading is older than maxAge by the
// local clock, when there is none, or when the local clock went back
// since.
func (c *Clock) SyncIfOlder(ctx context.Context, maxAge time.Duration) error {
	if r := c.last.Load(); r != nil {
		if age := c.local.Now().Sub(r.received); age >= 0 && age < maxAge {
			return nil
		}
	}
	return c.Sync(ctx)
}

// Earliest is an instant the database clock has certainly reached: the
// start of the interval.
func (c *Clock) Earliest() time.Time {
	now := c.local.Now()
	r := c.last.Load()
	if r == nil {
		return now
	}
	return r.db.Add(now.Sub(r.received))
}

// Latest is an instant the database clock has certainly not reached yet:
// the end of the interval.
func (c *Clock) Latest() time.Time {
	now := c.local.Now()
	r := c.last.Load()
	if r == nil {
		return now
	}
	return r.db.Add(nowResolution + now.Sub(r.sent))
}
