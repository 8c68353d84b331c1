package store

import (
	"context"
	"sync/atomic"
	"time"
)

// Clock follows the database clock from a node: it measures the offset
// between the local clock and NOW(3) and applies it, so instants a node
// computes (the next cron occurrence) agree with the instants SQL compares.
type Clock struct {
	store  TimeSource
	offset atomic.Int64 // nanoseconds to add to the local clock
}

// TimeSource tells the database's time: a *Store.
type TimeSource interface {
	Now(ctx context.Context) (time.Time, error)
}

// NewClock returns a clock with no offset until Sync.
func NewClock(s TimeSource) *Clock { return &Clock{store: s} }

// Sync measures the offset, correcting for half the round trip.
func (c *Clock) Sync(ctx context.Context) error {
	start := time.Now()
	db, err := c.store.Now(ctx)
	if err != nil {
		return err
	}
	rtt := time.Since(start)
	local := start.Add(rtt / 2)
	c.offset.Store(int64(db.Sub(local)))
	return nil
}

// Now is the database's current time as seen from this node.
func (c *Clock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }
