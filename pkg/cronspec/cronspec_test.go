package cronspec_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/cronspec"
	"github.com/taskd/taskd/pkg/task"
)

func mustLoad(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

func mustParse(t testing.TB, expr, tz string) *cronspec.Spec {
	t.Helper()
	s, err := cronspec.Parse(expr, tz)
	require.NoError(t, err, "parse %q in %q", expr, tz)
	require.NotNil(t, s)
	return s
}

// requireInvalid asserts that err is a bad-input error, so the CLI exits 2.
func requireInvalid(t testing.TB, err error, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	require.Equal(t, task.CodeInvalid, task.ErrorCode(err), msgAndArgs...)
}

func TestParseFields(t *testing.T) {
	t.Parallel()

	utc := time.UTC
	tests := []struct {
		name string
		expr string
		from time.Time
		want []time.Time // successive occurrences
	}{
		{
			name: "five fields, weekday office hours",
			expr: "*/15 9-17 * * 1-5",
			from: time.Date(2026, 3, 6, 17, 50, 0, 0, utc), // Friday
			want: []time.Time{
				time.Date(2026, 3, 9, 9, 0, 0, 0, utc), // Monday
				time.Date(2026, 3, 9, 9, 15, 0, 0, utc),
			},
		},
		{
			name: "five fields, minute list and month",
			expr: "5,35 0 1 6 *",
			from: time.Date(2026, 1, 1, 0, 0, 0, 0, utc),
			want: []time.Time{
				time.Date(2026, 6, 1, 0, 5, 0, 0, utc),
				time.Date(2026, 6, 1, 0, 35, 0, 0, utc),
				time.Date(2027, 6, 1, 0, 5, 0, 0, utc),
			},
		},
		{
			name: "five fields is strictly after from",
			expr: "0 12 * * *",
			from: time.Date(2026, 5, 5, 12, 0, 0, 0, utc),
			want: []time.Time{time.Date(2026, 5, 6, 12, 0, 0, 0, utc)},
		},
		{
			name: "six fields, leading seconds step",
			expr: "*/10 * * * * *",
			from: time.Date(2026, 5, 5, 12, 0, 3, 500, utc),
			want: []time.Time{
				time.Date(2026, 5, 5, 12, 0, 10, 0, utc),
				time.Date(2026, 5, 5, 12, 0, 20, 0, utc),
			},
		},
		{
			name: "six fields, fixed second",
			expr: "30 0 12 * * *",
			from: time.Date(2026, 5, 5, 12, 0, 30, 0, utc),
			want: []time.Time{time.Date(2026, 5, 6, 12, 0, 30, 0, utc)},
		},
		{
			name: "leap day fires within the horizon",
			expr: "0 0 29 2 *",
			from: time.Date(2026, 3, 1, 0, 0, 0, 0, utc),
			want: []time.Time{time.Date(2028, 2, 29, 0, 0, 0, 0, utc)},
		},
		{
			name: "@hourly",
			expr: "@hourly",
			from: time.Date(2026, 5, 5, 12, 34, 56, 0, utc),
			want: []time.Time{time.Date(2026, 5, 5, 13, 0, 0, 0, utc), time.Date(2026, 5, 5, 14, 0, 0, 0, utc)},
		},
		{
			name: "@daily",
			expr: "@daily",
			from: time.Date(2026, 5, 5, 12, 0, 0, 0, utc),
			want: []time.Time{time.Date(2026, 5, 6, 0, 0, 0, 0, utc)},
		},
		{
			name: "@weekly is Sunday midnight",
			expr: "@weekly",
			from: time.Date(2026, 5, 5, 12, 0, 0, 0, utc), // Tuesday
			want: []time.Time{time.Date(2026, 5, 10, 0, 0, 0, 0, utc)},
		},
		{
			name: "@monthly",
			expr: "@monthly",
			from: time.Date(2026, 5, 5, 12, 0, 0, 0, utc),
			want: []time.Time{time.Date(2026, 6, 1, 0, 0, 0, 0, utc)},
		},
		{
			name: "@yearly",
			expr: "@yearly",
			from: time.Date(2026, 5, 5, 12, 0, 0, 0, utc),
			want: []time.Time{time.Date(2027, 1, 1, 0, 0, 0, 0, utc)},
		},
		{
			name: "@every 10s counts from the previous instant",
			expr: "@every 10s",
			from: time.Date(2026, 5, 5, 12, 0, 3, 0, utc),
			want: []time.Time{time.Date(2026, 5, 5, 12, 0, 13, 0, utc), time.Date(2026, 5, 5, 12, 0, 23, 0, utc)},
		},
		{
			name: "@every 1h30m",
			expr: "@every 1h30m",
			from: time.Date(2026, 5, 5, 12, 0, 0, 0, utc),
			want: []time.Time{time.Date(2026, 5, 5, 13, 30, 0, 0, utc)},
		},
		{
			name: "surrounding blanks are trimmed",
			expr: "  0 3 * * *\n",
			from: time.Date(2026, 5, 5, 12, 0, 0, 0, utc),
			want: []time.Time{time.Date(2026, 5, 6, 3, 0, 0, 0, utc)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, tt.expr, "UTC")
			require.Equal(t, strings.TrimSpace(tt.expr), s.String())
			cur := tt.from
			for i, want := range tt.want {
				got := s.Next(cur)
				require.True(t, want.Equal(got), "occurrence %d after %s: want %s, got %s", i, cur, want, got)
				cur = got
			}
		})
	}
}

func TestParseTimezone(t *testing.T) {
	t.Parallel()

	from := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	eighteenUTC := time.Date(2026, 6, 1, 18, 0, 0, 0, time.UTC) // 02:00 on June 2nd in Shanghai (UTC+8)

	tests := []struct {
		name, expr, tz string
		want           time.Time
	}{
		{"tz argument", "0 2 * * *", "Asia/Shanghai", eighteenUTC},
		{"CRON_TZ prefix", "CRON_TZ=Asia/Shanghai 0 2 * * *", "", eighteenUTC},
		{"TZ prefix", "TZ=Asia/Shanghai 0 2 * * *", "", eighteenUTC},
		{"CRON_TZ prefix wins over tz argument", "CRON_TZ=Asia/Shanghai 0 2 * * *", "America/New_York", eighteenUTC},
		{"CRON_TZ=UTC wins over tz argument", "CRON_TZ=UTC 0 2 * * *", "Asia/Shanghai", time.Date(2026, 6, 1, 2, 0, 0, 0, time.UTC)},
		{"tz argument with six fields", "0 0 2 * * *", "Asia/Shanghai", eighteenUTC},
		{"New York summer time", "0 2 * * *", "America/New_York", time.Date(2026, 6, 1, 6, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, tt.expr, tt.tz)
			got := s.Next(from)
			require.True(t, tt.want.Equal(got), "want %s, got %s", tt.want, got.UTC())
			// The instant does not depend on the zone the caller's time is in.
			got2 := s.Next(from.In(mustLoad(t, "Pacific/Auckland")))
			require.True(t, tt.want.Equal(got2), "from another zone: want %s, got %s", tt.want, got2.UTC())
		})
	}

	t.Run("empty tz is the local zone", func(t *testing.T) {
		t.Parallel()
		s := mustParse(t, "0 2 * * *", "")
		from := time.Date(2026, 6, 1, 12, 0, 0, 0, time.Local)
		want := time.Date(2026, 6, 2, 2, 0, 0, 0, time.Local)
		require.True(t, want.Equal(s.Next(from)), "want %s, got %s", want, s.Next(from))
	})
}

// Parse documents that "" means the process's local zone, but robfig
// evaluates a schedule bound to time.Local in the zone of the time it is
// given, so the instant returned depends on t.Location().
func TestParseEmptyTimezoneIgnoresCallerZone(t *testing.T) {
	t.Parallel()

	s := mustParse(t, "0 2 * * *", "")
	from := time.Date(2026, 6, 1, 12, 0, 0, 0, time.Local)
	want := s.Next(from)
	got := s.Next(from.In(mustLoad(t, "Asia/Shanghai")))
	require.True(t, want.Equal(got), "same instant, another zone: want %s, got %s", want, got)
}

// occurrences returns the occurrences of s after from up to until.
func occurrences(s *cronspec.Spec, from, until time.Time) []time.Time {
	var out []time.Time
	for cur := s.Next(from); !cur.IsZero() && !cur.After(until); cur = s.Next(cur) {
		out = append(out, cur)
		if len(out) > 10000 {
			break
		}
	}
	return out
}

// requireMonotonic asserts that no instant repeats and none goes back.
func requireMonotonic(t *testing.T, ts []time.Time) {
	t.Helper()
	seen := map[int64]bool{}
	for i, x := range ts {
		require.False(t, seen[x.UnixNano()], "instant %s fires twice", x.UTC())
		seen[x.UnixNano()] = true
		if i > 0 {
			require.True(t, x.After(ts[i-1]), "occurrence %d (%s) is not after %s", i, x.UTC(), ts[i-1].UTC())
		}
	}
}

func TestNextAcrossDST(t *testing.T) {
	t.Parallel()

	ny := mustLoad(t, "America/New_York")
	// 2026-03-08: 02:00 EST jumps to 03:00 EDT. 2026-11-01: 02:00 EDT falls back to 01:00 EST.
	spring := [2]time.Time{time.Date(2026, 3, 1, 0, 0, 0, 0, ny), time.Date(2026, 3, 15, 0, 0, 0, 0, ny)}
	fall := [2]time.Time{time.Date(2026, 10, 25, 0, 0, 0, 0, ny), time.Date(2026, 11, 8, 0, 0, 0, 0, ny)}

	for _, expr := range []string{"30 2 * * *", "30 1 * * *", "0 * * * *", "*/15 * * * *", "0 30 1 * * *", "0 2 * * *", "@hourly"} {
		t.Run("monotonic "+expr, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, expr, "America/New_York")
			for _, win := range [][2]time.Time{spring, fall} {
				ts := occurrences(s, win[0], win[1])
				require.NotEmpty(t, ts)
				requireMonotonic(t, ts)
			}
		})
	}

	t.Run("02:30 on spring-forward day runs at the jump", func(t *testing.T) {
		t.Parallel()
		s := mustParse(t, "30 2 * * *", "America/New_York")
		got := s.Next(time.Date(2026, 3, 7, 3, 0, 0, 0, ny))
		// There is no 02:30 on March 8th: cronie runs it at 03:00 EDT.
		require.Equal(t, time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC), got.UTC())
		require.Equal(t, time.Date(2026, 3, 9, 6, 30, 0, 0, time.UTC), s.Next(got).UTC())
		require.Len(t, occurrences(s, spring[0], spring[1]), 14, "a run every day")
		// Several times in the skipped hour run once, at the jump.
		two := mustParse(t, "0,30 2 * * *", "America/New_York")
		ts := occurrences(two, time.Date(2026, 3, 7, 12, 0, 0, 0, ny), time.Date(2026, 3, 9, 0, 0, 0, 0, ny))
		require.Equal(t, []time.Time{time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)}, utc(ts))
	})

	t.Run("hourly loses no real hour on spring-forward day", func(t *testing.T) {
		t.Parallel()
		s := mustParse(t, "0 * * * *", "America/New_York")
		ts := occurrences(s, time.Date(2026, 3, 7, 20, 0, 0, 0, ny), time.Date(2026, 3, 8, 8, 0, 0, 0, ny))
		for i := 1; i < len(ts); i++ {
			require.Equal(t, time.Hour, ts[i].Sub(ts[i-1]), "between %s and %s", ts[i-1].UTC(), ts[i].UTC())
		}
	})

	t.Run("hourly on fall-back day: every real hour once", func(t *testing.T) {
		t.Parallel()
		s := mustParse(t, "0 * * * *", "America/New_York")
		ts := occurrences(s, time.Date(2026, 10, 31, 20, 0, 0, 0, ny), time.Date(2026, 11, 1, 8, 0, 0, 0, ny))
		for i := 1; i < len(ts); i++ {
			require.Equal(t, time.Hour, ts[i].Sub(ts[i-1]), "between %s and %s", ts[i-1].UTC(), ts[i].UTC())
		}
	})

	t.Run("01:30 on fall-back day runs once", func(t *testing.T) {
		t.Parallel()
		// The wall clock shows 01:30 twice (EDT, then EST): a job at a
		// fixed time runs on the first pass only, as in cronie.
		s := mustParse(t, "30 1 * * *", "America/New_York")
		first := s.Next(time.Date(2026, 10, 31, 12, 0, 0, 0, ny))
		require.Equal(t, time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC), first.UTC())
		require.Equal(t, time.Date(2026, 11, 2, 6, 30, 0, 0, time.UTC), s.Next(first).UTC())
		// Started during the second pass, it waits for the next day.
		require.Equal(t, time.Date(2026, 11, 2, 6, 30, 0, 0, time.UTC),
			s.Next(time.Date(2026, 11, 1, 6, 10, 0, 0, time.UTC)).UTC())
		two := mustParse(t, "0,30 1 * * *", "America/New_York")
		ts := occurrences(two, time.Date(2026, 10, 31, 12, 0, 0, 0, ny), time.Date(2026, 11, 1, 12, 0, 0, 0, ny))
		require.Equal(t, []time.Time{time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC)}, utc(ts))
	})

	t.Run("an hourly run on fall-back day plans the next real hour", func(t *testing.T) {
		t.Parallel()
		s := mustParse(t, "0 * * * *", "America/New_York")
		planned := time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC) // 01:00 EDT
		got := s.NextAfterRun(planned, planned.Add(5*time.Second))
		require.Equal(t, time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC), got.UTC(), "01:00 EST, not 02:00 EST")
	})

	t.Run("a job by elapsed time runs as the wall clock shows its times", func(t *testing.T) {
		t.Parallel()
		// Minute or hour a wildcard: each pass of the repeated hour runs,
		// and the skipped hour has nothing to run.
		s := mustParse(t, "*/30 1 * * *", "America/New_York")
		require.Len(t, occurrences(s, time.Date(2026, 10, 31, 12, 0, 0, 0, ny), time.Date(2026, 11, 1, 12, 0, 0, 0, ny)), 4)
		s = mustParse(t, "*/30 2 * * *", "America/New_York")
		for _, x := range occurrences(s, spring[0], spring[1]) {
			require.NotEqual(t, 8, x.In(ny).Day(), "no 02:xx on March 8th: %s", x)
		}
	})
}

func utc(ts []time.Time) []time.Time {
	out := make([]time.Time, len(ts))
	for i, x := range ts {
		out[i] = x.UTC()
	}
	return out
}

// TestNextAgainstTheWallClock compares Next, over weeks around each change
// of daylight saving time in zones with one- and half-hour changes, with
// what a classic cron daemon does minute by minute: a job at fixed times
// runs at the first instant whose wall clock matches and has not shown
// that time before, or at a jump forward whose skipped interval held one
// of its times; any other job at every instant whose wall clock matches.
func TestNextAgainstTheWallClock(t *testing.T) {
	t.Parallel()
	exprs := map[string]bool{ // expression: at fixed times
		"30 2 * * *": true, "0 2 * * *": true, "0,30 1 * * *": true, "15 0-3 * * *": true, "0 3 * * *": true,
		"45 1 * * 0": true, "@daily": true, "0 30 2 * * *": true,
		"*/20 * * * *": false, "0 * * * *": false, "* 2 * * *": false, "*/30 1 * * *": false,
	}
	zones := []string{"America/New_York", "Europe/London", "Australia/Lord_Howe", "America/Santiago", "America/Havana", "Europe/Dublin"}
	for _, zone := range zones {
		loc := mustLoad(t, zone)
		// The changes of 2026, found by the zone's own bounds.
		var changes []time.Time
		for at := time.Date(2026, 1, 1, 0, 0, 0, 0, loc); at.Year() == 2026; {
			_, end := at.ZoneBounds()
			if end.IsZero() || end.Year() != 2026 {
				break
			}
			changes = append(changes, end)
			at = end
		}
		require.Len(t, changes, 2, zone)
		for expr, fixed := range exprs {
			s := mustParse(t, expr, zone)
			for _, c := range changes {
				from, until := c.Add(-3*24*time.Hour), c.Add(3*24*time.Hour)
				match := matcher(t, expr, from, until)
				var want []time.Time
				seen := map[time.Time]bool{} // wall clocks shown so far
				for at := from.Truncate(time.Minute).Add(time.Minute); !at.After(until); at = at.Add(time.Minute) {
					wall := wallOf(at)
					prev := wallOf(at.Add(-time.Minute))
					if fixed && wall.Sub(prev) > time.Minute { // a jump forward
						skipped := false
						for w := prev.Add(time.Minute); w.Before(wall); w = w.Add(time.Minute) {
							skipped = skipped || match(w)
						}
						if skipped || match(wall) {
							want = append(want, at)
						}
						seen[wall] = true
						continue
					}
					if match(wall) && !(fixed && seen[wall]) {
						want = append(want, at)
					}
					seen[wall] = true
				}
				got := occurrences(s, from, until)
				require.Equal(t, utc(want), utc(got), "%s in %s around %s", expr, zone, c)
			}
		}
	}
}

// wallOf is the date and time the wall clock shows at t, as a UTC time.
func wallOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
}

// matcher reports whether a wall clock time (as from wallOf) within a day
// of [from, until] is one of expr's times, from expr's occurrences in UTC,
// where no time is skipped or repeated.
func matcher(t *testing.T, expr string, from, until time.Time) func(time.Time) bool {
	s := mustParse(t, expr, "UTC")
	times := map[time.Time]bool{}
	for _, w := range occurrences(s, wallOf(from).Add(-24*time.Hour), wallOf(until).Add(24*time.Hour)) {
		times[w] = true
	}
	return func(w time.Time) bool { return times[w] }
}

func TestNextAfterRunMisfire(t *testing.T) {
	t.Parallel()

	s := mustParse(t, "* * * * *", "UTC")
	planned := time.Date(2026, 5, 5, 11, 0, 0, 0, time.UTC)
	now := planned.Add(time.Hour + 17*time.Second) // the daemon was down for an hour

	next := s.NextAfterRun(planned, now)
	require.Equal(t, time.Date(2026, 5, 5, 12, 1, 0, 0, time.UTC), next, "first occurrence after now")
	require.True(t, next.After(now))

	// Simulate the scheduler: every due occurrence runs, and the run that
	// ends at now plans the next one. 60 missed occurrences fire once.
	fires := 0
	for due := planned; !due.After(now); due = s.NextAfterRun(due, now) {
		fires++
		require.Less(t, fires, 3, "missed occurrences are replayed")
	}
	require.Equal(t, 1, fires)
}

func TestNextAfterRun(t *testing.T) {
	t.Parallel()

	s := mustParse(t, "0 */2 * * *", "UTC")
	planned := time.Date(2026, 5, 5, 10, 0, 0, 0, time.UTC)

	t.Run("run ends before the next occurrence", func(t *testing.T) {
		t.Parallel()
		got := s.NextAfterRun(planned, planned.Add(90*time.Second))
		require.Equal(t, time.Date(2026, 5, 5, 12, 0, 0, 0, time.UTC), got)
	})
	t.Run("run overlaps several occurrences", func(t *testing.T) {
		t.Parallel()
		got := s.NextAfterRun(planned, planned.Add(5*time.Hour))
		require.Equal(t, time.Date(2026, 5, 5, 16, 0, 0, 0, time.UTC), got)
	})
	t.Run("run ends exactly on an occurrence", func(t *testing.T) {
		t.Parallel()
		got := s.NextAfterRun(planned, planned.Add(2*time.Hour))
		require.Equal(t, time.Date(2026, 5, 5, 14, 0, 0, 0, time.UTC), got, "strictly after now")
	})
	t.Run("now before planned (skewed clock) never repeats planned", func(t *testing.T) {
		t.Parallel()
		got := s.NextAfterRun(planned, planned.Add(-30*time.Minute))
		require.Equal(t, time.Date(2026, 5, 5, 12, 0, 0, 0, time.UTC), got)
	})
}

func TestParseMalformed(t *testing.T) {
	t.Parallel()

	for _, expr := range []string{
		"",
		"   ",
		"* * * *",
		"* * * * * * *",
		"61 * * * *",
		"* 24 * * *",
		"* * 0 * *",
		"* * 32 * *",
		"* * * 13 *",
		"* * * * 8",
		"1-0 * * * *",
		"*/0 * * * *",
		"-1 * * * *",
		"a b c d e",
		"*/ * * * *",
		"5- * * * *",
		"0 0 * JANUARY *",
		"* * * * * ?x",
		"99999999999999999999 * * * *",
		"0-99999999999 * * * *",
		"*/99999999999999999999 * * * *",
		"@every",
		"@every banana",
		"@every 99999999999999h",
		"@every 87600h", // once in ten years: beyond the five-year horizon
		"@fortnightly",
		"TZ=",
		"CRON_TZ=",
		"CRON_TZ=Asia/Shanghai",
		"CRON_TZ=Nope/Zone * * * * *",
		"TZ=../../etc/passwd * * * * *",
		"0 0 30 2 *",
		"0 0 31 4 *",
		"0 0 0 31 11 *",
	} {
		t.Run(expr, func(t *testing.T) {
			t.Parallel()
			var s *cronspec.Spec
			var err error
			require.NotPanics(t, func() { s, err = cronspec.Parse(expr, "") })
			requireInvalid(t, err, "expr %q", expr)
			require.Nil(t, s)
			require.NotContains(t, err.Error(), "\n", "errors are one line")
			require.NotContains(t, err.Error(), "strconv", "errors speak of the expression, not of Go")
			requireInvalid(t, cronspec.Validate(expr, "UTC"))
		})
	}

	t.Run("unknown tz argument", func(t *testing.T) {
		t.Parallel()
		_, err := cronspec.Parse("* * * * *", "Mars/Base")
		requireInvalid(t, err)
		require.Contains(t, err.Error(), "Mars/Base")
	})
	t.Run("a word that is not a field's", func(t *testing.T) {
		t.Parallel()
		_, err := cronspec.Parse("0 0 * JANUARY *", "UTC")
		require.ErrorContains(t, err, `"JANUARY" is not a number, nor a month or day name (JAN-DEC, SUN-SAT)`)
		_, err = cronspec.Parse("0 9 * MON *", "UTC")
		require.ErrorContains(t, err, `"MON" is a day name, in a field that is not the day of the week (the 5th of minute hour day-of-month month day-of-week)`)
		_, err = cronspec.Parse("0 9 * * jan", "UTC")
		require.ErrorContains(t, err, `"jan" is a month name, in a field that is not the month (the 4th`)
		_, err = cronspec.Parse("*/ * * * *", "UTC")
		require.ErrorContains(t, err, "a - or / with a number missing on one side (a range is written 1-5, a step */5 or 0-30/5)")
		_, err = cronspec.Parse("-1 * * * *", "UTC")
		require.ErrorContains(t, err, "a - or / with a number missing on one side")
		_, err = cronspec.Parse("*/99999999999999999999 * * * *", "UTC")
		require.ErrorContains(t, err, "99999999999999999999 is too large")
	})
	t.Run("day of week ends at 7", func(t *testing.T) {
		t.Parallel()
		_, err := cronspec.Parse("0 0 * * 8", "UTC")
		require.ErrorContains(t, err, "the day-of-week field's 8 is outside 0-7")
		require.NoError(t, cronspec.Validate("0 0 * * 7", "UTC"))
	})
	// A value out of bounds, a range that runs backwards and a zero step
	// name their field; a backwards range says how to write it.
	for expr, want := range map[string]string{
		"61 * * * *":      "the minute field's 61 is outside 0-59",
		"70 * * * * *":    "the second field's 70 is outside 0-59",
		"* 24 * * *":      "the hour field's 24 is outside 0-23",
		"* * 0 * *":       "the day-of-month field's 0 is outside 1-31",
		"* * * 13 *":      "the month field's 13 is outside 1-12",
		"0 5-30 * * *":    "the hour field's 30 is outside 0-23",
		"0 22-2 * * *":    `the hour field's range "22-2" runs backwards, and a range cannot wrap around: write 22-23,0-2`,
		"1-0 * * * *":     "write 1-59,0",
		"0 0 * DEC-JAN *": `the month field's range "DEC-JAN" runs backwards, and a range cannot wrap around: write 12,1`,
		"0 0 * * FRI-MON": "write 5-6,0-1",
		"0 0 * * 7-1":     "write 0-1",
		"*/0 * * * *":     `the minute field's step in "*/0" must be 1 or more`,
		"0 0 1,5/0 * *":   `the day-of-month field's step in "5/0" must be 1 or more`,
		// A mistyped interval or descriptor, or a schedule in words, says
		// what to write.
		"@every 5min":     `"5min" is not an interval as @every writes it: write 5m`,
		"@every 2 hours":  "write 2h",
		"@every 1d":       `"1d": @every counts hours, not days: write 24h`,
		"@every 30":       `"30" has no unit: write 30s, 30m or 30h`,
		"@every":          "@every needs an interval such as 90s, 5m or 1h30m",
		"@every banana":   `"banana" is not an interval such as 90s, 5m or 1h30m`,
		"@dayly":          `unknown descriptor "@dayly": there are @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly and @every INTERVAL`,
		"every 5 minutes": "it has 3 fields, where a cron expression has 5 (minute hour day-of-month month day-of-week), or 6 with seconds first; an interval is written @every 5m",
		"* * *":           "it has 3 fields",
		// A line copied from a crontab with its command says which part is
		// the command; a sixth word alone may be a misspelt day and gets
		// the parser's own error.
		"0 9 * * 1-5 echo hi":                   `"echo hi" looks like a crontab line's command`,
		"0 9 * * 1-5 /usr/bin/backup.sh":        `"/usr/bin/backup.sh" looks like a crontab line's command`,
		"*/5 * * * * php artisan schedule:run":  `"php artisan schedule:run" looks like`,
		"30 2 * * * root /usr/local/bin/job":    `"root /usr/local/bin/job" looks like`,
		"CRON_TZ=UTC 0 9 * * * cd /srv && make": `"cd /srv && make" looks like`,
		"0 30 9 * * MONN":                       "MONN",
	} {
		t.Run("says what to write "+expr, func(t *testing.T) {
			t.Parallel()
			_, err := cronspec.Parse(expr, "UTC")
			requireInvalid(t, err)
			require.ErrorContains(t, err, want)
			require.NotContains(t, err.Error(), "range (", "robfig's words are not shown")
			require.NotContains(t, err.Error(), "time: ", "nor Go's duration error")
			switch {
			case expr == "* * *":
				require.NotContains(t, err.Error(), "@every", "no interval hint for a schedule without words")
			case strings.Contains(want, "looks like"):
				require.ErrorContains(t, err, "handlers.CODE.exec")
			case expr == "0 30 9 * * MONN":
				require.NotContains(t, err.Error(), "command")
			}
		})
	}
	t.Run("never fires says so", func(t *testing.T) {
		t.Parallel()
		_, err := cronspec.Parse("0 0 30 2 *", "UTC")
		require.ErrorContains(t, err, "never fires")
	})
	t.Run("valid expression validates", func(t *testing.T) {
		t.Parallel()
		require.NoError(t, cronspec.Validate("*/5 * * * *", "Europe/Berlin"))
	})
	for _, expr := range []string{"0 30 9 * * MON-FRI", "0 0 * * * ?", "0 0 12 * * sun,sat", "0 */5 * * * 1-5/2"} {
		require.NoError(t, cronspec.Validate(expr, "UTC"), expr)
	}
}

func TestParseEveryNonPositive(t *testing.T) {
	t.Parallel()

	for _, expr := range []string{"@every -1s", "@every 0s", "@every -5m"} {
		_, err := cronspec.Parse(expr, "UTC")
		requireInvalid(t, err, "expr %q", expr)
	}
}

// FuzzParse: Parse never panics; an error is always bad input; a spec that
// parses has a next occurrence after now, and occurrences move forward.
func FuzzParse(f *testing.F) {
	for _, seed := range [][2]string{
		{"", ""},
		{"* * * * *", ""},
		{"* * * * * *", "UTC"},
		{"* * * * * * *", ""},
		{"TZ=", ""},
		{"TZ= * * * * *", ""},
		{"CRON_TZ=", ""},
		{"CRON_TZ=Asia/Shanghai", ""},
		{"CRON_TZ=Nope/Zone * * * * *", ""},
		{"CRON_TZ=Asia/Shanghai 0 2 * * *", "America/New_York"},
		{"@every -1s", ""},
		{"@every 0s", ""},
		{"@every 10s", "Asia/Shanghai"},
		{"@every 9999999999999h", ""},
		{"@hourly", "Europe/Berlin"},
		{"@reboot", ""},
		{"0 0 30 2 *", ""},
		{"0 0 29 2 *", "America/Sao_Paulo"},
		{"0 0 * * *", "America/Sao_Paulo"},
		{"30 2 * * *", "America/New_York"},
		{"1-0 * * * *", ""},
		{"*/0 * * * *", ""},
		{"0-59/99999999999999999999 * * * *", ""},
		{"4294967296 * * * *", ""},
		{"18446744073709551616 * * * *", ""},
		{"* * * * JAN-DEC", ""},
		{"* * * JAN-DEC SUN-SAT", ""},
		{"? ? ? ? ?", ""},
		{"* * * * *", "Mars/Base"},
		{"* * * * *", "../../etc/passwd"},
		{"\x00 * * * *", ""},
		{"CRON_TZ=UTC\t* * * * *", ""},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, expr, tz string) {
		s, err := cronspec.Parse(expr, tz)
		if err != nil {
			require.Nil(t, s)
			require.Equal(t, task.CodeInvalid, task.ErrorCode(err), "error %v", err)
			return
		}
		require.NotNil(t, s)
		now := time.Now()
		n1 := s.Next(now)
		require.False(t, n1.IsZero(), "%q in %q parsed but never fires", expr, tz)
		require.True(t, n1.After(now))
		n2 := s.Next(n1)
		if !n2.IsZero() {
			require.True(t, n2.After(n1), "%s then %s", n1, n2)
		}
		require.True(t, s.NextAfterRun(now.Add(-time.Hour), now).After(now))
	})
}

// A crontab's lines read as crontabs read them: day of week 7 is Sunday.
// What taskd does not have says so, rather than what the parser tripped on.
func TestCrontabDialect(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC) // a Saturday
	for expr, same := range map[string]string{
		"0 3 * * 7":             "0 3 * * 0",
		"0 3 * * 5-7":           "0 3 * * 5,6,0",
		"0 3 * * 1-7/2":         "0 3 * * 1,3,5,0",
		"0 0 3 * * 6,7":         "0 0 3 * * 6,0",
		"CRON_TZ=UTC 0 3 * * 7": "0 3 * * 0",
		"0 3 * JUL WED":         "0 3 * 7 3",
		"0 3 * * FRI-SUN":       "0 3 * * 5,6,0",
		"0 3 * * mon-sun":       "0 3 * * *",
		"0 3 * * MON-SUN/2":     "0 3 * * 1,3,5,0",
		"0 3 * * SUN-SUN":       "0 3 * * 0",
		"0 3 * * SUN-7":         "0 3 * * *",
	} {
		a, b := mustParse(t, expr, "UTC"), mustParse(t, same, "UTC")
		at := from
		for range 5 {
			na, nb := a.Next(at), b.Next(at)
			require.Equal(t, nb, na, "%q after %v", expr, at)
			at = na
		}
	}
	for expr, says := range map[string]string{
		"0 3 L * *":                            "L, W and # (last, weekday, nth) are not supported",
		"0 3 15W * *":                          "L, W and #",
		"0 3 * * 5#3":                          "L, W and #",
		"0 3 * * 5L":                           "L, W and #",
		"@reboot":                              "@reboot has no meaning for the tasks of a cluster",
		"CRON_TZ= 0 3 * * *":                   "its CRON_TZ= names no zone",
		"CRON_TZ=Local 0 3 * * *":              `time zone "Local" is each host's own`,
		strings.Repeat("0,", 50) + "1 3 * * *": "over the 100 the task center holds",
	} {
		_, err := cronspec.Parse(expr, "UTC")
		requireInvalid(t, err, expr)
		require.ErrorContains(t, err, says, expr)
	}
	_, err := cronspec.Parse("0 3 * * *", "Local")
	require.ErrorContains(t, err, `time zone "Local" is each host's own`)
}

// A definition stored by an earlier release with the zone Local is still
// read (as the host's zone), so that its task does not die at its next
// run; only new definitions refuse it.
func TestStoredLocalZoneStillRuns(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	for _, c := range [][2]string{{"0 3 * * *", "Local"}, {"CRON_TZ=Local 0 3 * * *", ""}} {
		next, err := cronspec.NextRun(c[0], c[1], now, now)
		require.NoError(t, err, "%q in %q", c[0], c[1])
		require.True(t, next.After(now))
	}
}

func BenchmarkNext(b *testing.B) {
	for _, expr := range []string{"* * * * * *", "*/5 * * * *", "30 2 * * *", "0 0 29 2 *"} {
		s := mustParse(b, expr, "America/New_York")
		b.Run(expr, func(b *testing.B) {
			at := time.Date(2026, 3, 8, 1, 59, 0, 0, time.UTC)
			for b.Loop() {
				s.Next(at)
			}
		})
	}
}

// A step larger than the values it steps over parses, as in a crontab,
// and fires at its start alone; Oversteps says so, and says nothing of a
// step that fits, even one equal to the field's size (*/60: hourly, which
// is every 60 minutes).
func TestOversteps(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		expr string
		want []string // substrings, one per warning
	}{
		{"*/61 * * * *", []string{`"*/61" in the minute field steps past its 60 values: it fires at minute 0 only, not every 61 minutes`}},
		{"0 */25 * * *", []string{`"*/25" in the hour field`, "hour 0 only"}},
		{"0 0 */32 * *", []string{`"*/32" in the day-of-month field`, "day-of-month 1 only"}},
		{"0 0 1 */13 *", []string{`"*/13" in the month field`, "month 1 only"}},
		{"0 0 * * */8", []string{`"*/8" in the day-of-week field`}},
		{"*/90 * * * * *", []string{`"*/90" in the second field`}},
		{"10-20/15 * * * *", []string{`"10-20/15" in the minute field steps past its 11 values: it fires at minute 10 only`}},
		{"5/70,*/61 * * * *", []string{`"5/70"`, "past its 55 values", `"*/61"`}},
		{"CRON_TZ=Asia/Shanghai */61 * * * *", []string{`"*/61"`}},
		{"*/60 * * * *", nil},
		{"0 */24 * * *", nil},
		{"*/15 9-17 * * MON-FRI", nil},
		{"10-20/11 * * * *", nil},
		{"0 0 * * MON-FRI/2", nil},
		{"@every 61m", nil},
		{"@hourly", nil},
		{"61 * * * *", nil}, // malformed: Parse says so
	} {
		got := cronspec.Oversteps(c.expr)
		if c.want == nil {
			require.Empty(t, got, c.expr)
			continue
		}
		text := strings.Join(got, "\n")
		for _, w := range c.want {
			require.Contains(t, text, w, c.expr)
		}
		if c.expr != "5/70,*/61 * * * *" {
			require.Len(t, got, 1, c.expr)
		}
		_, err := cronspec.Parse(c.expr, "UTC")
		require.NoError(t, err, "%s parses, as in a crontab", c.expr)
	}
}

// Six fields whose last is * and whose fifth is not read as Quartz's
// minute hour day month weekday year would run in one month only: said.
func TestYearLike(t *testing.T) {
	t.Parallel()
	require.Equal(t, `six fields are read with seconds first (second minute hour day-of-month month day-of-week): "0 9 * * 1 *" runs only in month 1; `+
		`if its last field is meant as a year, drop it: "0 9 * * 1"`, cronspec.YearLike("0 9 * * 1 *"))
	for _, quiet := range []string{"30 0 * * * *", "0 */5 * * * *", "0 9 * * 1", "@daily", "0 0 9 * * MON", "CRON_TZ=UTC 0 9 * * *"} {
		require.Empty(t, cronspec.YearLike(quiet), quiet)
	}
}
