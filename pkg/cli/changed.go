package cli

import (
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskd/taskd/pkg/task"
)

// changedWindow is --since and --until: the time a task's row last
// changed, for "the tasks that died during last night's outage" without
// those that died for good reasons days before.
type changedWindow struct{ since, until string }

func (w *changedWindow) register(cmd *cobra.Command, verb string) {
	const what = "a duration back from now (90m, 2h, 3d), a time of day (HH:MM, its last occurrence) or a time ('YYYY-MM-DD HH:MM[:SS]' in the local zone, or RFC 3339)"
	cmd.Flags().StringVar(&w.since, "since", "", verb+" tasks whose row last changed at or after this: "+what)
	cmd.Flags().StringVar(&w.until, "until", "", verb+" tasks whose row last changed before this: "+what)
}

func (w *changedWindow) set() bool { return w.since != "" || w.until != "" }

// bounds are the window's times (zero: no bound), durations counted back
// from now.
func (w *changedWindow) bounds(now time.Time) (since, until time.Time, err error) {
	if since, err = whenArg("--since", w.since, now); err != nil {
		return
	}
	if until, err = whenArg("--until", w.until, now); err != nil {
		return
	}
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		err = task.Invalidf("--since %s is not before --until %s: no task can match", w.since, w.until)
	}
	return
}

// whenArg reads a --since or --until value: a duration back from now
// (Go's units, and d for days), or a time as --at takes it.
func whenArg(flag, s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, ok := agoArg(s); ok {
		if d <= 0 {
			return time.Time{}, task.Invalidf("%s %s: want a duration above zero", flag, s)
		}
		return now.Add(-d), nil
	}
	if t, ok := clockArg(s, now); ok {
		return t, nil
	}
	t, err := parseTime(s)
	if err != nil {
		return time.Time{}, task.Invalidf("%s: cannot read %q as a duration (90m, 2h, 3d) or a time (HH:MM, 'YYYY-MM-DD HH:MM[:SS]' or RFC 3339)", flag, s)
	}
	return t, nil
}

// clockArg reads a time of day, HH:MM[:SS] in the local zone, as its last
// occurrence at or before now: what an operator types at 02:40 about an
// outage that began at 02:10, or at 00:20 about one at 23:50.
func clockArg(s string, now time.Time) (time.Time, bool) {
	for _, layout := range []string{"15:04", "15:04:05"} {
		c, err := time.Parse(layout, s)
		if err != nil {
			continue
		}
		now = now.Local()
		t := time.Date(now.Year(), now.Month(), now.Day(), c.Hour(), c.Minute(), c.Second(), 0, time.Local)
		if t.After(now) {
			t = t.AddDate(0, 0, -1)
		}
		return t, true
	}
	return time.Time{}, false
}

// agoArg parses a duration, with d as 24 h ("3d", "1d12h").
func agoArg(s string) (time.Duration, bool) {
	var days time.Duration
	if n, rest, ok := strings.Cut(s, "d"); ok {
		v, err := strconv.Atoi(n)
		if err != nil || v < 0 || v > 36500 {
			return 0, false
		}
		days, s = time.Duration(v)*24*time.Hour, rest
		if s == "" {
			return days, true
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, false
	}
	return days + d, true
}
