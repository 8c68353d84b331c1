// Package cronspec parses cron expressions and computes their next
// occurrence. It wraps robfig/cron's parser so that a malformed expression
// is an error, never a panic, and so that an expression that can never fire
// (February 30th) is rejected when it is added rather than found later.
package cronspec

import (
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/taskd/taskd/pkg/task"
)

// The accepted syntax: standard five fields, an optional leading seconds
// field, descriptors (@hourly, @every 5m) and a CRON_TZ= or TZ= prefix.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour |
	cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// horizon bounds the search for a next occurrence: robfig gives up after
// five years and returns the zero time.
const horizon = 5 * 365 * 24 * time.Hour

// Spec is a parsed expression bound to a time zone.
type Spec struct {
	expr     string
	schedule cron.Schedule
	// loc is the zone to evaluate in; robfig evaluates a schedule bound to
	// time.Local in the zone of the time it is given, so Next converts.
	loc *time.Location
}

// Parse parses expr in time zone tz (an IANA name; "" means the process's
// local zone). A CRON_TZ= prefix in expr wins over tz.
func Parse(expr, tz string) (spec *Spec, err error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, task.Invalidf("cron expression is empty")
	}
	loc, err := task.ValidateTimezone(tz)
	if err != nil {
		return nil, err
	}
	full := expr
	if strings.HasPrefix(expr, "CRON_TZ=") || strings.HasPrefix(expr, "TZ=") {
		loc = nil // the expression names its zone
	} else if tz != "" {
		full = "CRON_TZ=" + loc.String() + " " + expr
	}
	if rest, ok := strings.CutPrefix(expr, "@every "); ok {
		// robfig rounds intervals under a second up to a second.
		if d, err := time.ParseDuration(strings.TrimSpace(rest)); err == nil && d < time.Second {
			return nil, task.Invalidf("malformed cron expression %q: interval must be at least 1s", expr)
		}
	}
	defer func() {
		if r := recover(); r != nil {
			spec, err = nil, task.Invalidf("malformed cron expression %q: %v", expr, r)
		}
	}()
	s, perr := parser.Parse(full)
	if perr != nil {
		return nil, task.Invalidf("malformed cron expression %q: %v", expr, perr)
	}
	spec = &Spec{expr: expr, schedule: s, loc: loc}
	// An expression such as "0 0 30 2 *" parses but never fires.
	if spec.Next(time.Now()).IsZero() {
		return nil, task.Invalidf("cron expression %q never fires", expr)
	}
	return spec, nil
}

// Next returns the first occurrence strictly after t, or the zero time when
// there is none within five years.
func (s *Spec) Next(t time.Time) time.Time {
	if s.loc != nil {
		t = t.In(s.loc)
	}
	n := s.schedule.Next(t)
	if n.IsZero() || n.Sub(t) > horizon {
		return time.Time{}
	}
	return n
}

// NextAfterRun implements the misfire rule. A run that ends at now, for an
// occurrence planned at planned, is followed by the first occurrence after
// both: occurrences missed while the system was down are skipped, so a
// daemon that was down for an hour fires a missed minutely task once, not
// sixty times.
//
// On the day clocks go back, an occurrence in the repeated hour exists
// twice; like classic cron, taskd fires it once: an occurrence with the same
// wall-clock time as the planned one is skipped.
func (s *Spec) NextAfterRun(planned, now time.Time) time.Time {
	from := now
	if planned.After(from) {
		from = planned
	}
	n := s.Next(from)
	if !n.IsZero() && !n.Equal(planned) && n.Sub(planned) <= 2*time.Hour && sameWallClock(n, planned) {
		n = s.Next(n)
	}
	return n
}

// sameWallClock compares the local date and time of two instants in the
// zone of a.
func sameWallClock(a, b time.Time) bool {
	b = b.In(a.Location())
	return a.Year() == b.Year() && a.YearDay() == b.YearDay() && a.Hour() == b.Hour() &&
		a.Minute() == b.Minute() && a.Second() == b.Second()
}

// String returns the expression as given.
func (s *Spec) String() string { return s.expr }

// Validate reports whether expr parses in tz.
func Validate(expr, tz string) error {
	_, err := Parse(expr, tz)
	return err
}

// NextRun is the next run of a periodic task after a run of the occurrence
// planned at planned ended at now (see NextAfterRun). It fails when the
// expression does not parse or has no next occurrence.
func NextRun(expr, tz string, planned, now time.Time) (time.Time, error) {
	spec, err := Parse(expr, tz)
	if err != nil {
		return time.Time{}, err
	}
	next := spec.NextAfterRun(planned, now)
	if next.IsZero() {
		return time.Time{}, task.Invalidf("cron expression %q has no next occurrence", expr)
	}
	return next, nil
}
