package testenv

import (
	"context"
	"time"

	"github.com/taskd/taskd/pkg/store"
)

// SlowClock is a task center whose reads of the database clock (Now) wait
// Before on the way to the server (as a read waiting for a free
// connection of the pool does) and After on the way back (a late answer);
// the rest works.
type SlowClock struct {
	*store.Store
	Name          string
	Before, After time.Duration
}

// SlowClocks are the two ways a read of the database clock can be slow:
// they move the middle of its round trip off the instant the server read
// its clock, ahead or behind.
var SlowClocks = []SlowClock{
	{Name: "slow request", Before: 20 * time.Millisecond},
	{Name: "slow answer", After: 20 * time.Millisecond},
}

// With returns c over s.
func (c SlowClock) With(s *store.Store) SlowClock {
	c.Store = s
	return c
}

// Now reads the database clock, slowly.
func (c SlowClock) Now(ctx context.Context) (time.Time, error) {
	time.Sleep(c.Before)
	t, err := c.Store.Now(ctx)
	time.Sleep(c.After)
	return t, err
}
