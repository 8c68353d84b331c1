package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/clock"
)

func TestManualMovesOnlyWhenTold(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c := clock.NewManual(at)
	require.Equal(t, at, c.Now())
	require.Equal(t, at.Add(time.Minute), c.Advance(time.Minute))
	require.Equal(t, at.Add(time.Minute), c.Now())
	c.Set(at)
	require.Equal(t, at, c.Now())
}

func TestOrDefaultsToTheSystemClock(t *testing.T) {
	t.Parallel()
	require.WithinDuration(t, time.Now(), clock.Or(nil).Now(), time.Minute)
	m := clock.NewManual(time.Unix(0, 0))
	require.Equal(t, clock.Clock(m), clock.Or(m))
}

func TestFormat(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0: "0s", 30 * time.Second: "30s", 5 * time.Minute: "5m", 90 * time.Second: "1m30s",
		time.Hour: "1h", 168 * time.Hour: "168h", 90 * time.Minute: "1h30m", 500 * time.Millisecond: "500ms",
	} {
		require.Equal(t, want, clock.Format(d), d.String())
	}
}

// HalfLeft leaves the caller the other half of its deadline, and no
// deadline where there was none.
func TestHalfLeft(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	half, cancelHalf := clock.HalfLeft(ctx)
	defer cancelHalf()
	d, ok := half.Deadline()
	require.True(t, ok)
	require.InDelta(t, 5*time.Second, time.Until(d), float64(time.Second))
	none, cancelNone := clock.HalfLeft(context.Background())
	defer cancelNone()
	_, ok = none.Deadline()
	require.False(t, ok)
}
