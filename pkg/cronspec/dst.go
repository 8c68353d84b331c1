package cronspec

import (
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Daylight saving time, as classic cron (cronie, Vixie cron) handles it.
// A job at fixed times, whose minute and hour fields are both fixed
// ("30 2 * * *", "0 9,17 * * 1-5", @daily), is a wall-clock appointment:
// on the day clocks go forward, a time in the skipped interval runs at the
// jump, once; on the day clocks go back, a time in the repeated interval
// runs on its first pass only. Any other job ("*/15 * * * *", "0 * * * *",
// "* 2 * * *") runs by elapsed time: in the skipped interval it has nothing
// to run, and in the repeated one it runs again as the wall clock shows
// its times again. robfig evaluates every schedule the second way.

// fixedTime reports whether the fields (classic's output) schedule a job at
// fixed times: minute and hour fields without a wildcard, or a descriptor
// of a day or longer.
func fixedTime(fields string) bool {
	switch strings.ToLower(fields) {
	case "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight":
		return true
	}
	f := strings.Fields(fields)
	if len(f) == 6 { // a leading seconds field
		f = f[1:]
	}
	if len(f) != 5 {
		return false
	}
	wild := func(field string) bool { return strings.ContainsAny(field, "*?") }
	return !wild(f[0]) && !wild(f[1])
}

// wallClock computes a schedule's occurrences from its wall-clock times:
// robfig matches the times in UTC, where none is skipped or repeated, and
// wallClock finds the instants that show each of them in the zone. (robfig
// in the zone itself evaluates by elapsed time, and where the clock changes
// by half an hour, as on Lord Howe Island, it returns instants that show
// none of the schedule's times.)
type wallClock struct {
	utc   cron.SpecSchedule // the schedule in UTC
	zone  *time.Location    // nil: the zone of the time asked about
	fixed bool              // a job at fixed times
}

func newWallClock(sched *cron.SpecSchedule, fixed bool) *wallClock {
	w := &wallClock{utc: *sched, fixed: fixed}
	if sched.Location != time.Local {
		w.zone = sched.Location
	}
	w.utc.Location = time.UTC
	return w
}

// next is the first occurrence strictly after t, or the zero time when
// there is none within the horizon.
func (w *wallClock) next(t time.Time) time.Time {
	if w.zone != nil {
		t = t.In(w.zone)
	}
	// Wall clocks after t start at t's, or lower after a change back.
	lo, hi := wallOf(t), wallOf(t)
	_, change := t.ZoneBounds()
	if !change.IsZero() {
		if after := wallOf(change); after.Before(lo) {
			lo = after
		}
	}
	var best time.Time
	for c := w.utc.Next(lo.Add(-time.Second)); !c.IsZero() && c.Sub(lo) <= horizon; c = w.utc.Next(c) {
		// Once an occurrence is found, a later wall clock comes earlier
		// only if it was shown before the clock went back (hi).
		if !best.IsZero() && c.After(hi) {
			break
		}
		if at, ok := w.runAt(c, t); ok && (best.IsZero() || at.Before(best)) {
			best = at
			hi = wallOf(best)
			if !change.IsZero() && !change.After(best) {
				if before := wallOf(change.Add(-time.Second)).Add(time.Second); before.After(hi) {
					hi = before
				}
			}
		}
	}
	return best
}

// runAt is the instant after t at which the schedule's wall clock time c
// runs: for a job at fixed times the first instant that shows c, or the
// jump forward that skipped c; for any other the first instant after t
// that shows c.
func (w *wallClock) runAt(c, t time.Time) (time.Time, bool) {
	shows := w.instants(c, t.Location())
	if len(shows) == 0 {
		if !w.fixed {
			return time.Time{}, false
		}
		// c is in a gap: read in the offset before the jump, it is an
		// instant after the jump.
		jump, _ := showing(c, offsetNear(c, -24*time.Hour, t.Location()), t.Location()).ZoneBounds()
		return jump, jump.After(t)
	}
	if w.fixed {
		return shows[0], shows[0].After(t)
	}
	for _, at := range shows {
		if at.After(t) {
			return at, true
		}
	}
	return time.Time{}, false
}

// instants returns the instants, in order, at which the clock of zone
// shows the wall clock time c (a UTC time): none in a gap, two in a
// repeated interval. A zone changes its offset at most once in two days,
// so the offsets a day before and a day after c are all it can have then.
func (w *wallClock) instants(c time.Time, zone *time.Location) []time.Time {
	var out []time.Time
	for _, probe := range []time.Duration{-24 * time.Hour, 24 * time.Hour} {
		off := offsetNear(c, probe, zone)
		at := showing(c, off, zone)
		if _, o := at.Zone(); o == off && (len(out) == 0 || !out[0].Equal(at)) {
			out = append(out, at)
		}
	}
	if len(out) == 2 && out[1].Before(out[0]) {
		out[0], out[1] = out[1], out[0]
	}
	return out
}

// offsetNear is zone's offset (seconds east of UTC) at d from the wall
// clock time c read as UTC.
func offsetNear(c time.Time, d time.Duration, zone *time.Location) int {
	_, off := c.Add(d).In(zone).Zone()
	return off
}

// showing is the instant whose clock in zone shows the wall clock time c
// (a UTC time) if its offset there is off.
func showing(c time.Time, off int, zone *time.Location) time.Time {
	return c.Add(-time.Duration(off) * time.Second).In(zone)
}

// wallOf is the date and time t's clock shows, as a UTC time, to the
// second.
func wallOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
}
