package cli

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"
	"github.com/rivo/uniseg"
)

// printable is a handler's output as a terminal would leave it, safe to
// print: escape sequences are dropped (a colour, or one that moves the
// cursor or retitles the window), a carriage return keeps what was
// written after it as a progress line does ("进度 10%\r进度 100%" is
// "进度 100%", and a CRLF line end is a line end), and other control
// characters are shown as \xNN. `taskd show` printed them raw, and a \r in
// `taskd list`'s LAST RESULT sent the cursor back over the row's ID.
func printable(s string) string {
	s = ansi.Strip(s)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		l = strings.TrimRight(l, "\r")
		if j := strings.LastIndexByte(l, '\r'); j >= 0 {
			l = l[j+1:]
		}
		if strings.ContainsFunc(l, control) {
			var b strings.Builder
			for _, r := range l {
				if control(r) {
					fmt.Fprintf(&b, "\\x%02x", r)
				} else {
					b.WriteRune(r)
				}
			}
			l = b.String()
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n")
}

// oneLine is the first line of s, printable, at most n columns wide
// (a Chinese character takes two), cut between characters with "…".
func oneLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(printable(s)), "\n")
	s = strings.ReplaceAll(s, "\t", " ")
	if uniseg.StringWidth(s) <= n {
		return s
	}
	var b strings.Builder
	w, state := 0, -1
	for rest := s; rest != ""; {
		var c string
		var bounds int
		c, rest, bounds, state = uniseg.StepString(rest, state)
		cw := bounds >> uniseg.ShiftWidth
		if w+cw > n-1 {
			break
		}
		b.WriteString(c)
		w += cw
	}
	return b.String() + "…"
}

// control is a control character other than a tab (C1 too: U+009B is a
// CSI to some terminals).
func control(r rune) bool { return (r < 0x20 && r != '\t') || (r >= 0x7f && r < 0xa0) }
