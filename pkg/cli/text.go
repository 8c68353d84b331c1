package cli

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
	"github.com/rivo/uniseg"

	"github.com/taskd/taskd/pkg/task"
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

// shownRows is how many lines of a terminal `show` gives a task's payload
// and its last result: a payload of 500 KiB scrolled the task's fields
// out of sight, and an SSH session of 24 rows out of its scrollback.
const shownRows = 40

// shownBytes bounds what `show` reads of each to find those rows.
const shownBytes = 64 << 10

// CutText cuts s to its first maxBytes, then to what fills rows rows of a
// terminal width columns wide; when it cuts, a last line says so: note,
// which names the whole text's size and where to read all of it (CutNote).
// With wrap, lines longer than width are wrapped between words first (a
// viewport shows each line of its content as one row); without, they are
// left whole for the terminal to wrap, taking the rows they wrap to: a
// JSON payload copied from the terminal stays one string per line.
func CutText(s string, width, maxBytes, rows int, wrap bool, note string) string {
	kept := CutBytes(s, maxBytes)
	cut := len(kept) < len(s)
	if wrap {
		kept = WrapWords(kept, width)
	}
	lines := strings.Split(kept, "\n")
	used := 0
	for i, l := range lines {
		n := 1
		if width > 0 {
			n = max(1, (uniseg.StringWidth(l)+width-1)/width)
		}
		if used+n > rows {
			end := i
			if room := rows - used; room > 0 { // the rows left of a long line
				lines[i] = ansi.Truncate(l, room*width, "…")
				end++
			}
			lines, cut = lines[:end], true
			break
		}
		used += n
	}
	out := strings.Join(lines, "\n")
	if cut {
		out += "\n" + ansi.Wrap("✂ cut: "+note, width, "")
	}
	return out
}

// CutNote is the note of CutText for task id's payload or result (what)
// of size bytes.
func CutNote(what string, size int, id int64) string {
	return fmt.Sprintf("the %s is %s, more than is shown here; taskd show %d -o json prints all of it", what, task.ByteSize(int64(size)), id)
}

// CutBytes returns at most n bytes of s: whole lines when there is a line
// break in the last quarter, else whole characters.
func CutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if i := strings.LastIndexByte(s[:n], '\n'); i >= n*3/4 {
		return s[:i]
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
