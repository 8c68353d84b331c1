// Package clock is the local clock of taskd's components, as a value that
// tests can drive: components read the time through a Clock, and a test
// hands them a Manual clock it moves forward instead of sleeping. (Due
// times are not read from it: the database clock decides those, and
// store.Clock follows it from a node, advanced by a Clock between reads.)
package clock

import (
	"context"
	"strings"
	"sync"
	"time"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// System is the host's clock.
type System struct{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// Or returns c, or the system clock when c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return System{}
	}
	return c
}

// Manual is a clock that moves only when told to. The zero value stands at
// the zero time; it is safe for concurrent use.
type Manual struct {
	mu sync.Mutex
	t  time.Time
}

// NewManual returns a clock standing at t.
func NewManual(t time.Time) *Manual { return &Manual{t: t} }

// Now returns the clock's time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.t
}

// Set moves the clock to t.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	m.t = t
	m.mu.Unlock()
}

// Advance moves the clock forward by d and returns the new time.
func (m *Manual) Advance(d time.Duration) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.t = m.t.Add(d)
	return m.t
}

// Format writes d as the configuration and Prometheus write durations:
// 5m and 1h, not 5m0s and 1h0m0s.
func Format(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// HalfLeft bounds ctx to half of what is left of its deadline, if it has
// one: a read of one server that hangs leaves the other the rest (tasktop,
// the metrics' snapshot).
func HalfLeft(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok {
		return context.WithTimeout(ctx, time.Until(d)/2)
	}
	return context.WithCancel(ctx)
}
