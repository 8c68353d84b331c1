package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWhenArg(t *testing.T) {
	now := time.Date(2026, 12, 5, 2, 40, 0, 0, time.Local)
	for in, want := range map[string]time.Time{
		"90m":              now.Add(-90 * time.Minute),
		"2d":               now.Add(-48 * time.Hour),
		"1d12h":            now.Add(-36 * time.Hour),
		"02:10":            time.Date(2026, 12, 5, 2, 10, 0, 0, time.Local),
		"23:50":            time.Date(2026, 12, 4, 23, 50, 0, 0, time.Local), // not yet today: yesterday's
		"02:40:00":         now,
		"2026-12-01 08:00": time.Date(2026, 12, 1, 8, 0, 0, 0, time.Local),
	} {
		got, err := whenArg("--since", in, now)
		require.NoError(t, err, in)
		require.True(t, want.Equal(got), "%s: %v, want %v", in, got, want)
	}
	for _, bad := range []string{"yesterday", "0m", "25:00", "2h30", "d"} {
		_, err := whenArg("--since", bad, now)
		require.Error(t, err, bad)
	}
}
