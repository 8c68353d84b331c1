// Package cronspec parses cron expressions and computes their next
// occurrence. It wraps robfig/cron's parser so that a malformed expression
// is an error, never a panic, and so that an expression that can never fire
// (February 30th) is rejected when it is added rather than found later.
package cronspec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

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
	// wall checks each occurrence against the wall clock across a change
	// of daylight saving time (dst.go); nil for an @every interval.
	wall *wallClock
}

// Parse parses expr in time zone tz (an IANA name; "" means the process's
// local zone). A CRON_TZ= prefix in expr wins over tz.
func Parse(expr, tz string) (spec *Spec, err error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, task.Invalidf("cron expression is empty")
	}
	if len(expr) > MaxLen {
		return nil, task.Invalidf("cron expression is %d characters, over the %d the task center holds", len(expr), MaxLen)
	}
	loc, err := task.ValidateTimezone(tz)
	if err != nil {
		return nil, err
	}
	fields, err := classic(expr)
	if err != nil {
		return nil, err
	}
	full := fields
	if zone, ok := prefixZone(expr); ok {
		if zone == "" {
			return nil, task.Invalidf("malformed cron expression %q: its CRON_TZ= names no zone", expr)
		}
		if _, err := task.ValidateTimezone(zone); err != nil {
			return nil, err
		}
		loc = nil // the expression names its zone
		full = "CRON_TZ=" + zone + " " + fields
	} else if tz != "" {
		full = "CRON_TZ=" + loc.String() + " " + fields
	}
	if fields == "@every" {
		return nil, task.Invalidf("malformed cron expression %q: @every needs an interval such as 90s, 5m or 1h30m", expr)
	}
	if rest, ok := strings.CutPrefix(fields, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		switch {
		case err != nil:
			return nil, task.Invalidf("malformed cron expression %q: %s", expr, everyError(strings.TrimSpace(rest)))
		case d < time.Second: // robfig rounds it up to a second
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
		why := fieldError(fields)
		if why == "" {
			why = parseError(perr, fields)
		}
		return nil, task.Invalidf("malformed cron expression %q: %s", expr, why)
	}
	spec = &Spec{expr: expr, schedule: s, loc: loc}
	if ss, ok := s.(*cron.SpecSchedule); ok {
		spec.wall = newWallClock(ss, fixedTime(fields))
	}
	// An expression such as "0 0 30 2 *" parses but never fires.
	if spec.Next(time.Now()).IsZero() {
		return nil, task.Invalidf("cron expression %q never fires", expr)
	}
	return spec, nil
}

// parseError is robfig's parse error in an operator's words: without Go's
// strconv text. Values out of their field's bounds never reach it
// (fieldError), so robfig's day of week ending at 6, where taskd reads 7
// as Sunday too (classic), is never shown.
func parseError(err error, fields string) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "failed to parse int from "); ok {
		tok, why, _ := strings.Cut(rest, ": strconv")
		switch {
		case tok == "":
			return "a - or / with a number missing on one side (a range is written 1-5, a step */5 or 0-30/5)"
		case strings.Contains(why, "out of range"):
			return fmt.Sprintf("%s is too large", tok)
		}
		// A name in the wrong field: robfig reads names in their own
		// field only.
		for _, name := range strings.Fields("SUN MON TUE WED THU FRI SAT") {
			if strings.EqualFold(tok, name) {
				return fmt.Sprintf("%q is a day name, in a field that is not the day of the week (the 5th of minute hour day-of-month month day-of-week)", tok)
			}
		}
		for _, name := range strings.Fields("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC") {
			if strings.EqualFold(tok, name) {
				return fmt.Sprintf("%q is a month name, in a field that is not the month (the 4th of minute hour day-of-month month day-of-week)", tok)
			}
		}
		return fmt.Sprintf("%q is not a number, nor a month or day name (JAN-DEC, SUN-SAT)", tok)
	}
	if d, ok := strings.CutPrefix(msg, "unrecognized descriptor: "); ok {
		return fmt.Sprintf("unknown descriptor %q: there are @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly and @every INTERVAL", d)
	}
	var n int
	if _, err := fmt.Sscanf(msg, "expected 5 to 6 fields, found %d", &n); err == nil {
		why := fmt.Sprintf("it has %d fields, where a cron expression has 5 (minute hour day-of-month month day-of-week), or 6 with seconds first", n)
		if n < 5 && strings.ContainsFunc(fields, unicode.IsLetter) {
			why += "; an interval is written @every 5m" // "every 5 minutes"
		}
		return why
	}
	return msg
}

// everyError says why s is not an @every interval, and what to write.
func everyError(s string) string {
	num := strings.TrimRight(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ ")
	unit := strings.ToLower(strings.TrimSpace(s[len(num):]))
	n, err := strconv.Atoi(num)
	if err != nil || strings.ContainsAny(num, "+-") {
		return fmt.Sprintf("%q is not an interval such as 90s, 5m or 1h30m", s)
	}
	switch unit {
	case "":
		return fmt.Sprintf("%q has no unit: write %ds, %dm or %dh", s, n, n, n)
	case "d", "day", "days":
		return fmt.Sprintf("%q: @every counts hours, not days: write %dh (or a time of day: 0 3 * * *)", s, n*24)
	}
	for u, names := range map[string][]string{"h": {"h", "hr", "hrs", "hour", "hours"}, "m": {"m", "min", "mins", "minute", "minutes"}, "s": {"s", "sec", "secs", "second", "seconds"}} {
		if slices.Contains(names, unit) {
			return fmt.Sprintf("%q is not an interval as @every writes it: write %d%s", s, n, u)
		}
	}
	return fmt.Sprintf("%q is not an interval such as 90s, 5m or 1h30m", s)
}

// MaxLen is the longest expression the task center's cron_expr holds.
const MaxLen = 100

// prefixZone returns the zone of a CRON_TZ= or TZ= prefix of expr.
func prefixZone(expr string) (string, bool) {
	for _, p := range []string{"CRON_TZ=", "TZ="} {
		if rest, ok := strings.CutPrefix(expr, p); ok {
			zone, _, _ := strings.Cut(rest, " ")
			return zone, true
		}
	}
	return "", false
}

// classic returns expr's schedule without its zone prefix, read as the
// crontabs it comes from read it: day of week 7 is Sunday (robfig knows
// 0-6 only). What a crontab has and taskd does not (L, W, #, @reboot) is
// refused with why.
func classic(expr string) (string, error) {
	rest := expr
	if _, ok := prefixZone(expr); ok {
		_, rest, _ = strings.Cut(expr, " ")
		rest = strings.TrimSpace(rest)
	}
	if rest == "@reboot" {
		return "", task.Invalidf("@reboot has no meaning for the tasks of a cluster: keep that line in each server's crontab or service unit")
	}
	f := strings.Fields(rest)
	if !strings.HasPrefix(rest, "@") && len(f) > 5 {
		for i, field := range f[5:] {
			// A sixth field alone may be a misspelt day (robfig names it);
			// more words, or one with a path's or a file's characters, are
			// a command.
			if !cronToken(field) && (len(f) > 6 || strings.ContainsFunc(field, notCronChar)) {
				return "", task.Invalidf("malformed cron expression %q: %q looks like a crontab line's command: give the schedule alone (the command is the handler's: handlers.CODE.exec)",
					expr, strings.Join(f[5+i:], " "))
			}
		}
	}
	if strings.HasPrefix(rest, "@") || len(f) < 5 || len(f) > 6 {
		return rest, nil // robfig says what is wrong
	}
	for _, field := range f {
		if quartz(field) {
			return "", task.Invalidf("malformed cron expression %q: L, W and # (last, weekday, nth) are not supported", expr)
		}
	}
	f[len(f)-1] = sundaySeven(f[len(f)-1])
	return strings.Join(f, " "), nil
}

// cronNames are the month and weekday names a field may hold.
var cronNames = strings.Fields("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC SUN MON TUE WED THU FRI SAT")

// cronToken reports whether field is made of what a cron field holds
// (numbers, names, * ? / , - and the L W # taskd refuses with why), so
// that a word that is not, such as a command, can be told apart.
func cronToken(field string) bool {
	for _, t := range strings.FieldsFunc(strings.ToUpper(field), func(r rune) bool { return strings.ContainsRune("*?/,-#", r) }) {
		if slices.Contains(cronNames, t) || strings.Trim(t, "0123456789LW") == "" {
			continue
		}
		return false
	}
	return true
}

// notCronChar reports whether r cannot appear in a cron field.
func notCronChar(r rune) bool {
	return !('0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || strings.ContainsRune("*?/,-#", r))
}

// quartz reports whether a field uses L, W or # (Quartz's and some
// crontabs' last, nearest weekday and nth weekday of the month).
func quartz(field string) bool {
	if strings.Contains(field, "#") {
		return true
	}
	for _, t := range strings.FieldsFunc(strings.ToUpper(field), func(r rune) bool { return r == ',' || r == '-' || r == '/' }) {
		last := t[len(t)-1]
		if t == "L" || t == "W" || t == "LW" || (len(t) > 1 && t[0] >= '0' && t[0] <= '9' && (last == 'L' || last == 'W')) {
			return true
		}
	}
	return false
}

// sundaySeven rewrites day-of-week 7 (Sunday, as in Vixie cron and cronie)
// as 0: "7" -> "0", "5-7" -> "5,6,0", "1-7/2" -> "1,3,5,0", and a range
// that ends on Sunday by name as one that ends at 7: "FRI-SUN" -> "5,6,0".
func sundaySeven(dow string) string {
	parts := strings.Split(dow, ",")
	for i, p := range parts {
		rng, step, _ := strings.Cut(p, "/")
		lo, hi, isRange := strings.Cut(rng, "-")
		switch {
		case p == "7":
			parts[i] = "0"
		case isRange && (hi == "7" || strings.EqualFold(hi, "SUN")):
			// MON-SUN is the whole week: SUN at a range's end is 7.
			a, ok := fieldValue(lo, dowField)
			if !ok || a < 0 || a > 7 || (a == 0 && hi != "7") {
				continue // SUN-SUN is Sunday alone, as robfig reads it
			}
			n := 1
			if step != "" {
				var err error
				if n, err = strconv.Atoi(step); err != nil || n < 1 {
					continue // robfig says what is wrong
				}
			}
			var days []string
			for d := a; d <= 7; d += n {
				days = append(days, strconv.Itoa(d%7))
			}
			parts[i] = strings.Join(days, ",")
		}
	}
	return strings.Join(parts, ",")
}

// Next returns the first occurrence strictly after t, or the zero time when
// there is none within five years.
func (s *Spec) Next(t time.Time) time.Time {
	if s.loc != nil {
		t = t.In(s.loc)
	}
	var n time.Time
	if s.wall != nil {
		n = s.wall.next(t)
	} else {
		n = s.schedule.Next(t)
	}
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
	return s.Next(later(planned, now))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
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
	// A stored definition may name the zone Local, which earlier releases
	// took (each host's own, as it still is for it): refused for new
	// definitions, still read, so that such a task does not die.
	if strings.EqualFold(tz, "Local") {
		tz = ""
	}
	if z := ExprZone(expr); strings.EqualFold(z, "Local") {
		_, expr, _ = strings.Cut(strings.TrimSpace(expr), " ")
		tz = ""
	}
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

// cronField is one field of a five- or six-field expression: its name,
// its unit in words, its first value and how many values it has.
type cronField struct {
	name, unit string
	min, size  int
}

var (
	secondField = cronField{"second", "seconds", 0, 60}
	monthField  = cronField{"month", "months", 1, 12}
	dowField    = cronField{"day-of-week", "days", 0, 7}
	fiveFields  = []cronField{{"minute", "minutes", 0, 60}, {"hour", "hours", 0, 24},
		{"day-of-month", "days", 1, 31}, monthField, dowField}
)

// fieldsOf splits an expression as classic returns it into its fields and
// what each is; false for a descriptor (@daily) or a count of fields
// other than 5 or 6 (seconds first).
func fieldsOf(fields string) ([]string, []cronField, bool) {
	f := strings.Fields(fields)
	switch {
	case strings.HasPrefix(fields, "@"):
		return nil, nil, false
	case len(f) == 5:
		return f, fiveFields, true
	case len(f) == 6:
		return f, append([]cronField{secondField}, fiveFields...), true
	}
	return nil, nil, false
}

// YearLike says, of a six-field expression whose last field is * and whose
// fifth is not, that six fields are read with seconds first: "0 9 * * 1 *",
// written as Quartz's minute hour day month weekday year, runs at minute 9
// of every hour in January. "" for any other expression.
func YearLike(expr string) string {
	fields, err := classic(strings.TrimSpace(expr))
	if err != nil {
		return ""
	}
	f := strings.Fields(fields)
	if len(f) != 6 || (f[5] != "*" && f[5] != "?") || f[4] == "*" || f[4] == "?" {
		return ""
	}
	return fmt.Sprintf("six fields are read with seconds first (second minute hour day-of-month month day-of-week): %q runs only in month %s; "+
		"if its last field is meant as a year, drop it: %q", fields, f[4], strings.Join(f[:5], " "))
}

// Oversteps describes each step of expr larger than the values it steps
// over: "*/61" in the minute field is minute 0 alone (an hourly run), not
// every 61 minutes. Crontabs accept such steps (Debian's crontab -n
// does), and so does Parse; the command line says what they mean. Nil
// for a descriptor (@every, @daily) or an expression without one.
func Oversteps(expr string) []string {
	fields, err := classic(strings.TrimSpace(expr))
	if err != nil {
		return nil
	}
	f, defs, ok := fieldsOf(fields)
	if !ok {
		return nil
	}
	var out []string
	for i, field := range f {
		d := defs[i]
		for part := range strings.SplitSeq(field, ",") {
			rng, st, ok := strings.Cut(part, "/")
			step, err := strconv.Atoi(st)
			if !ok || err != nil || step < 1 {
				continue
			}
			start, size := d.min, d.size
			if rng != "*" && rng != "?" {
				lo, hi, isRange := strings.Cut(rng, "-")
				a, errA := strconv.Atoi(lo)
				b, errB := strconv.Atoi(hi)
				switch {
				case errA != nil:
					continue // a name (JAN, MON): left to the parser
				case !isRange:
					start, size = a, d.min+d.size-a // "5/20": 5 to the field's last value
				case errB != nil:
					continue
				default:
					start, size = a, b-a+1
				}
			}
			if size > 0 && step > size {
				out = append(out, fmt.Sprintf("%q in the %s field steps past its %d values: it fires at %s %d only, not every %d %s (for a fixed interval, use @every)",
					part, d.name, size, d.name, start, step, d.unit))
			}
		}
	}
	return out
}

// fieldError names the field, and the value in it, that robfig refused
// without saying which ("end of range (24) above maximum (23)"): a value
// outside the field, a range that runs backwards, a step below 1. Empty
// when it finds none of these; robfig's own words are then used.
func fieldError(fields string) string {
	f, defs, ok := fieldsOf(fields)
	if !ok {
		return ""
	}
	for i, field := range f {
		d := defs[i]
		last := d.min + d.size - 1
		if d == dowField {
			last = 7 // Sunday, as 0 is (classic)
		}
		for part := range strings.SplitSeq(field, ",") {
			rng, st, stepped := strings.Cut(part, "/")
			if step, err := strconv.Atoi(st); stepped && err == nil && step < 1 {
				return fmt.Sprintf("the %s field's step in %q must be 1 or more", d.name, part)
			}
			if rng == "*" || rng == "?" {
				continue
			}
			lo, hi, isRange := strings.Cut(rng, "-")
			a, okA := fieldValue(lo, d)
			b, okB := fieldValue(hi, d)
			for _, v := range []struct {
				n  int
				ok bool
			}{{a, okA}, {b, okB && isRange}} {
				if v.ok && (v.n < d.min || v.n > last) {
					return fmt.Sprintf("the %s field's %d is outside %d-%d", d.name, v.n, d.min, last)
				}
			}
			if isRange && okA && okB && a > b {
				return fmt.Sprintf("the %s field's range %q runs backwards, and a range cannot wrap around: write %s",
					d.name, rng, wrapped(a, b, d))
			}
		}
	}
	return ""
}

// fieldValue reads one end of a field's range: a number, or a month's or
// a day's name in the fields that take names.
func fieldValue(s string, d cronField) (int, bool) {
	if n, err := strconv.Atoi(s); err == nil {
		return n, true
	}
	i := slices.Index(cronNames, strings.ToUpper(s))
	switch {
	case i >= 0 && i < 12 && d == monthField:
		return i + 1, true
	case i >= 12 && d == dowField:
		return i - 12, true
	}
	return 0, false
}

// wrapped is the backwards range a-b of field d written as cron reads it:
// from a to the field's end, then from its start to b ("22-2" in hours is
// "22-23,0-2").
func wrapped(a, b int, d cronField) string {
	span := func(x, y int) string {
		if x == y {
			return strconv.Itoa(x)
		}
		return fmt.Sprintf("%d-%d", x, y)
	}
	end := d.min + d.size - 1
	if d == dowField {
		if a == 7 {
			return span(0, b) // 7 is Sunday, the week's first day as 0
		}
		end = 6
	}
	return span(a, end) + "," + span(d.min, b)
}
