// Package limit describes flow control: the limits a queue's tasks run
// under across the whole cluster. A queue may have a rate (tasks started
// per period, with a burst), a bound on its running tasks (max_running),
// apply both to each group of tasks separately (per: group), and run the
// tasks of each group one at a time, oldest first (serial).
//
// Where each is enforced:
//
//   - a queue's rate and max_running, when they apply to the whole queue,
//     at take time: the worker's take script asks one limiter in Redis
//     (a GCRA and a set of leases, in the queue's hash tag), so a task
//     over the limit stays queued, counted as limited, never failed;
//   - per-group limits and serial order at claim time: the scheduler
//     claims a group's tasks only while the group has room, from the task
//     center, which knows what each group has in flight (a dead worker's
//     tasks count until recovery puts them back).
package limit

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/task"
)

// Bounds of the values a limit takes.
const (
	// MaxRunningMax bounds max_running.
	MaxRunningMax = 1_000_000
	// BurstMax bounds a burst.
	BurstMax = 1_000_000
	// RatePeriodMax is the longest period of a rate (a day).
	RatePeriodMax = 24 * time.Hour
	// MaxGroupLen bounds a group key.
	MaxGroupLen = 64
)

// Rate is N tasks started per Period; the zero Rate is no rate limit.
type Rate struct {
	N      int
	Period time.Duration
}

// IsZero reports whether r limits nothing.
func (r Rate) IsZero() bool { return r.N == 0 }

// Interval is the time one task's token takes to come back.
func (r Rate) Interval() time.Duration {
	if r.N <= 0 {
		return 0
	}
	return r.Period / time.Duration(r.N)
}

// PerSecond is the rate in tasks per second.
func (r Rate) PerSecond() float64 {
	if r.N <= 0 || r.Period <= 0 {
		return 0
	}
	return float64(r.N) / r.Period.Seconds()
}

// String prints r as ParseRate reads it: 100/s, 5/m, 30/10s.
func (r Rate) String() string {
	if r.IsZero() {
		return ""
	}
	unit := ""
	switch r.Period {
	case time.Second:
		unit = "s"
	case time.Minute:
		unit = "m"
	case time.Hour:
		unit = "h"
	case 24 * time.Hour:
		unit = "d"
	default:
		unit = clock.Format(r.Period)
	}
	return strconv.Itoa(r.N) + "/" + unit
}

// ParseRate reads a rate: N/s, N/m, N/h, N/d or N/DURATION (30/10s). ""
// is no rate. N is at least 1; the period is 1ms to a day, and at most a
// token per millisecond.
func ParseRate(s string) (Rate, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Rate{}, nil
	}
	n, per, ok := strings.Cut(s, "/")
	if !ok {
		return Rate{}, task.Invalidf("rate %q: want N/s, N/m, N/h or N/DURATION, e.g. 100/s", s)
	}
	count, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil {
		return Rate{}, task.Invalidf("rate %q: %q is not a whole number of tasks", s, n)
	}
	if count <= 0 {
		return Rate{}, task.Invalidf("rate %q: the number of tasks must be at least 1 (remove the rate for none)", s)
	}
	var period time.Duration
	switch p := strings.TrimSpace(per); p {
	case "s", "sec", "second":
		period = time.Second
	case "m", "min", "minute":
		period = time.Minute
	case "h", "hour":
		period = time.Hour
	case "d", "day":
		period = 24 * time.Hour
	default:
		d, err := time.ParseDuration(p)
		if err != nil {
			return Rate{}, task.Invalidf("rate %q: period %q is not s, m, h, d or a duration like 10s", s, p)
		}
		period = d
	}
	if period < time.Millisecond || period > RatePeriodMax {
		return Rate{}, task.Invalidf("rate %q: the period must be 1ms to 24h", s)
	}
	r := Rate{N: count, Period: period}
	if r.Interval() < time.Millisecond {
		return Rate{}, task.Invalidf("rate %q: more than 1,000 tasks a second is not limited here; raise the period or remove the rate", s)
	}
	return r, nil
}

// Per names what a limit applies to.
const (
	PerQueue = ""      // the whole queue
	PerGroup = "group" // each group of tasks separately
)

// Serial modes.
const (
	SerialOff  = 0
	SerialOn   = 1 // a failed task blocks its group until it ends
	SerialSkip = 2 // a failed task waiting for its retry does not
)

// Limit is the flow control of one queue. The zero Limit limits nothing.
// In JSON: {"rate": "100/s", "burst": 20, "max_running": 3, "per":
// "group", "serial": "on"}, zero fields left out.
type Limit struct {
	Rate Rate `json:"-"`
	// Burst is how many tasks may start at once after a quiet spell; the
	// rate refills it (default DefaultBurst).
	Burst int `json:"burst,omitempty"`
	// MaxRunning bounds the tasks running at once over all nodes (0: no
	// bound).
	MaxRunning int `json:"max_running,omitempty"`
	// Per is PerQueue or PerGroup.
	Per string `json:"per,omitempty"`
	// Serial is SerialOff, SerialOn or SerialSkip.
	Serial int `json:"-"`
}

// limitJSON is Limit's JSON form.
type limitJSON struct {
	Rate       string `json:"rate,omitempty"`
	Burst      int    `json:"burst,omitempty"`
	MaxRunning int    `json:"max_running,omitempty"`
	Per        string `json:"per,omitempty"`
	Serial     string `json:"serial,omitempty"`
}

// MarshalJSON writes l in its JSON form; the burst is the one in force.
func (l Limit) MarshalJSON() ([]byte, error) {
	j := limitJSON{Rate: l.Rate.String(), MaxRunning: l.MaxRunning, Per: l.Per}
	if !l.Rate.IsZero() {
		j.Burst = l.EffectiveBurst()
	}
	if l.Serial != SerialOff {
		j.Serial = SerialString(l.Serial)
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads l's JSON form.
func (l *Limit) UnmarshalJSON(b []byte) error {
	var j limitJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	r, err := ParseRate(j.Rate)
	if err != nil {
		return err
	}
	s, err := ParseSerial(j.Serial)
	if err != nil {
		return err
	}
	*l = Limit{Rate: r, Burst: j.Burst, MaxRunning: j.MaxRunning, Per: j.Per, Serial: s}
	return nil
}

// IsZero reports whether l limits nothing.
func (l Limit) IsZero() bool { return l.Rate.IsZero() && l.MaxRunning == 0 && l.Serial == SerialOff }

// AtTake reports whether the queue's take is limited (a rate or a
// max_running of the whole queue).
func (l Limit) AtTake() bool { return l.Per == PerQueue && (!l.Rate.IsZero() || l.MaxRunning > 0) }

// Grouped reports whether the queue's tasks with a group are claimed group
// by group (per-group limits or serial order).
func (l Limit) Grouped() bool {
	return l.Serial != SerialOff || (l.Per == PerGroup && (!l.Rate.IsZero() || l.MaxRunning > 0))
}

// GroupRoom is how many tasks one group may have in flight (0: no bound):
// 1 when serial, else max_running when per group.
func (l Limit) GroupRoom() int {
	room := 0
	if l.Per == PerGroup {
		room = l.MaxRunning
	}
	if l.Serial != SerialOff {
		room = 1
	}
	return room
}

// EffectiveBurst is the burst in force: Burst, else DefaultBurst.
func (l Limit) EffectiveBurst() int {
	if l.Burst > 0 {
		return l.Burst
	}
	return DefaultBurst(l.Rate)
}

// DefaultBurst is the burst of a rate that names none: a tenth of a
// second's worth, at least 1, so that a take gets a few tasks at once
// instead of one per round trip.
func DefaultBurst(r Rate) int {
	if r.IsZero() {
		return 0
	}
	return max(1, int(math.Floor(r.PerSecond()/10)))
}

// Validate checks l: its values (ValidateValues), and that they fit
// together.
func (l Limit) Validate() error {
	if err := l.ValidateValues(); err != nil {
		return err
	}
	if l.Burst > 0 && l.Rate.IsZero() {
		return task.Invalidf("a burst needs a rate")
	}
	if l.Per == PerGroup && l.Rate.IsZero() && l.MaxRunning == 0 && l.Serial == SerialOff {
		return task.Invalidf("per group needs a rate or a max_running to apply to each group")
	}
	return nil
}

// ValidateValues checks each of l's values on its own.
func (l Limit) ValidateValues() error {
	if l.Burst < 0 || l.Burst > BurstMax {
		return task.Invalidf("burst %d is out of range 1-%d", l.Burst, BurstMax)
	}
	if l.MaxRunning < 0 || l.MaxRunning > MaxRunningMax {
		return task.Invalidf("max_running %d is out of range 0-%d (0: no bound)", l.MaxRunning, MaxRunningMax)
	}
	switch l.Per {
	case PerQueue, PerGroup:
	default:
		return task.Invalidf("per %q: want group (each group separately) or nothing (the whole queue)", l.Per)
	}
	if l.Serial < SerialOff || l.Serial > SerialSkip {
		return task.Invalidf("serial mode %d is out of range", l.Serial)
	}
	return nil
}

// String describes l in one short line: "100/s burst 20, max 3 running
// per group, serial"; "none" when l limits nothing.
func (l Limit) String() string {
	if l.IsZero() {
		return "none"
	}
	var parts []string
	if !l.Rate.IsZero() {
		parts = append(parts, fmt.Sprintf("%s burst %d", l.Rate, l.EffectiveBurst()))
	}
	if l.MaxRunning > 0 {
		parts = append(parts, fmt.Sprintf("max %d running", l.MaxRunning))
	}
	s := strings.Join(parts, ", ")
	if s != "" && l.Per == PerGroup {
		s += " per group"
	}
	switch l.Serial {
	case SerialOn:
		s = strings.TrimPrefix(s+", serial", ", ")
	case SerialSkip:
		s = strings.TrimPrefix(s+", serial (failed skipped)", ", ")
	}
	return s
}

// Short is l for a table column: "100/s", "≤3", "100/s ≤3/g", "serial".
func (l Limit) Short() string {
	var parts []string
	g := ""
	if l.Per == PerGroup {
		g = "/g"
	}
	if !l.Rate.IsZero() {
		parts = append(parts, l.Rate.String()+g)
	}
	if l.MaxRunning > 0 {
		parts = append(parts, "≤"+strconv.Itoa(l.MaxRunning)+g)
	}
	if l.Serial != SerialOff {
		parts = append(parts, "serial")
	}
	return strings.Join(parts, " ")
}

// ParseSerial reads a serial mode: off, on (a failed task blocks its
// group) or skip (it does not).
func ParseSerial(s string) (int, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "off", "false", "no":
		return SerialOff, nil
	case "on", "true", "yes", "block":
		return SerialOn, nil
	case "skip", "skip-failed":
		return SerialSkip, nil
	}
	return 0, task.Invalidf("serial %q: want on, skip (failed tasks do not hold their group) or off", s)
}

// SerialString names a serial mode as ParseSerial reads it.
func SerialString(m int) string {
	switch m {
	case SerialOn:
		return "on"
	case SerialSkip:
		return "skip"
	}
	return "off"
}

// ValidateGroup checks a group key: at most MaxGroupLen characters, none
// of them control characters ("" is no group).
func ValidateGroup(g string) error {
	// Characters, as the column counts them: a group of 30 Chinese
	// characters (90 bytes) was refused as longer than 64.
	if !utf8.ValidString(g) {
		return task.Invalidf("group %q is not valid UTF-8", g)
	}
	if utf8.RuneCountInString(g) > MaxGroupLen {
		return task.Invalidf("group %q is longer than %d characters", g, MaxGroupLen)
	}
	for _, r := range g {
		if r < 0x20 || r == 0x7f {
			return task.Invalidf("group %q contains a control character", g)
		}
	}
	if strings.TrimSpace(g) != g {
		return task.Invalidf("group %q starts or ends with a space", g)
	}
	return nil
}
