package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/taskd/taskd/pkg/cli"
)

// count writes n short: 950, 12.3k, 4.5M.
func count(n int64) string {
	switch {
	case n < 10000:
		return strconv.FormatInt(n, 10)
	case n < 1000000:
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	default:
		return fmt.Sprintf("%.1fM", float64(n)/1000000)
	}
}

// age writes a duration short: 3s, 4m10s, 2h5m, 3d4h.
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// percent writes a ratio as a percentage, "-" when there is none.
func percent(r *float64) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100**r)
}

var sparks = []rune("▁▂▃▄▅▆▇█")

// sparkline draws the last width values, scaled to their maximum; a zero
// is a blank so that idle minutes read as such.
func sparkline(vals []int64, width int) string {
	if width <= 0 {
		return ""
	}
	if len(vals) > width {
		vals = vals[len(vals)-width:]
	}
	var top int64
	for _, v := range vals {
		top = max(top, v)
	}
	var b strings.Builder
	b.WriteString(strings.Repeat(" ", width-len(vals)))
	for _, v := range vals {
		if v <= 0 || top == 0 {
			b.WriteRune(' ')
			continue
		}
		i := int((v*int64(len(sparks)) - 1) / top)
		b.WriteRune(sparks[min(max(i, 0), len(sparks)-1)])
	}
	return b.String()
}

// clock writes a time of day in the local zone.
func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("15:04:05")
}

// stamp writes a date and time in the local zone.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// oneLineMax is how much of a text oneLine reads: a listing or a run's
// line shows no more, and a result can be megabytes, cleaned at every
// refresh.
const oneLineMax = 1024

// oneLine keeps the first line of s, marking with " …" that more follows.
func oneLine(s string) string {
	more := len(s) > oneLineMax
	s = strings.TrimSpace(clean(cli.CutBytes(s, oneLineMax)))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	if more && s != "" {
		return s + " …"
	}
	return s
}

func joinIDs(ids []int64, most int) string {
	var parts []string
	for i, id := range ids {
		if i == most {
			parts = append(parts, fmt.Sprintf("+%d", len(ids)-most))
			break
		}
		parts = append(parts, strconv.FormatInt(id, 10))
	}
	return strings.Join(parts, ",")
}

// clean makes text from handlers and producers safe to print: escape
// sequences are removed, tabs become spaces and other control characters
// are dropped, so output cannot move the cursor or recolour the screen.
func clean(s string) string {
	s = ansi.Strip(s)
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n':
			return r
		case r == '\t':
			return ' '
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return -1
		}
		return r
	}, s)
}
