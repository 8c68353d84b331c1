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
	if !strings.HasPrefix(expr, "CRON_TZ=") && !strings.HasPrefix(expr, "TZ=") && tz != "" {
		full = "CRON_TZ=" + loc.String() + " " + expr
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
	if _, ok := s.(*cron.SpecSchedule); !ok {
		if c, ok := s.(cron.ConstantDelaySchedule); ok && c.Delay <= 0 {
			return nil, task.Invalidf("malformed cron expression %q: interval must be positive", expr)
		}
	}
	spec = &Spec{expr: expr, schedule: s}
	// An expression such as "0 0 30 2 *" parses but never fires.
	if spec.Next(time.Now()).IsZero() {
		return nil, task.Invalidf("cron expression %q never fires", expr)
	}
	return spec, nil
}

// Next returns the first occurrence strictly after t, or the zero time when
// there is none within five years.
func (s *Spec) Next(t time.Time) time.Time {
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
func (s *Spec) NextAfterRun(planned, now time.Time) time.Time {
	from := now
	if planned.After(from) {
		from = planned
	}
	return s.Next(from)
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
