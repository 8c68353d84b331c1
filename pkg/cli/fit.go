package cli

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/term"
	"github.com/rivo/uniseg"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// grid is a text table built whole before it is written, so that on a
// terminal narrower than its rows (an SSH session of 80 columns) it leaves
// out the columns least needed instead of wrapping every row in two.
// Written anywhere else (a pipe, a file) it keeps every column.
type grid struct {
	header []string
	rows   [][]string
	// drop are the columns a narrow terminal leaves out, least needed
	// first.
	drop []int
	// cut is the column that is shortened before any is dropped, down
	// to cutMin cells (a free-text column such as LAST RESULT); -1: none.
	cut int
	// quiet are the columns a narrow terminal leaves out before any of
	// drop when they say nothing: 0, - or empty in every row, said once
	// under the table. A quiet day's zeros then no longer push out the columns
	// that have something to say (stats' DONE/MIN, or FAILED beside a
	// column of zeros in an incident).
	quiet []int
}

// cutMin is the fewest cells the cut column keeps while other columns
// can be dropped instead, cutLeast the fewest when none can.
const cutMin, cutLeast = 24, 8

// gridPadding is the space between columns.
const gridPadding = 2

func newGrid(cut int, drop []int, header ...string) *grid {
	return &grid{header: header, cut: cut, drop: drop}
}

func (g *grid) add(cells ...any) {
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = fmt.Sprint(c)
	}
	g.rows = append(g.rows, row)
}

// width is the width of the terminal the tables are written to: Width
// when set (tests), else stdout's when it is a terminal, else $COLUMNS
// when stdout is a pipe or a file and that is set, else 0 (no bound).
// watch(1) runs `taskd stats` on a pipe and exports the width of its
// screen as COLUMNS: at 80 columns every row wrapped in two.
func (a *App) width() int {
	if a.Width > 0 {
		return a.Width
	}
	if w := TerminalWidth(a.Stdout); w > 0 {
		return w
	}
	if _, ok := a.Stdout.(*os.File); ok {
		if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
			return n
		}
	}
	return 0
}

// hanging wraps text at width columns (0: not at all) for a line that
// starts indent columns in, its next lines indented as much: an 80-column
// terminal broke doctor's checks in mid-word under their names' column.
// Piped or redirected, each stays one line for grep.
func hanging(text string, indent, width int) string {
	if width <= 0 || width-indent < 20 {
		return text
	}
	return strings.ReplaceAll(WrapWords(text, width-indent), "\n", "\n"+strings.Repeat(" ", indent))
}

// WrapWords wraps each line of s longer than width columns at its spaces,
// a word wider than the line cut, never inside a character (0: s as it
// is). Not at hyphens, as ansi's word wrap does: a worker id or a date at
// a line's end was cut in two.
func WrapWords(s string, width int) string {
	if width <= 0 {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if ansi.StringWidth(l) <= width {
			continue
		}
		words := strings.Split(l, " ")
		var out []string
		cur := words[0]
		for _, w := range words[1:] {
			// A word that does not fit goes to the next line, unless
			// all before it is indentation: an indented JSON string
			// longer than the line left an empty line, then the string.
			if next := cur + " " + w; ansi.StringWidth(next) <= width || strings.TrimSpace(cur) == "" {
				cur = next
				continue
			}
			out = append(out, strings.TrimRight(cur, " "))
			cur = w
		}
		lines[i] = ansi.Hardwrap(strings.Join(append(out, cur), "\n"), width, true)
	}
	return strings.Join(lines, "\n")
}

// WrapHelp makes the help of root and its subcommands fit width columns
// (0: no bound): each description line longer than that wraps between
// words, and each subcommand's and flag's description wraps under the
// descriptions' column. At 80 columns `taskd submit --help` broke every long one
// mid-word at the screen's edge. Examples are commands, and stay whole.
func WrapHelp(root *cobra.Command, width int) {
	helpTemplateFuncs.Do(func() {
		cobra.AddTemplateFunc("flagUsagesWrapped", func(f *pflag.FlagSet, cols int) string { return f.FlagUsagesWrapped(cols) })
		cobra.AddTemplateFunc("linesWrapped", wrapLines)
		// A subcommand's line: two spaces, its name padded, a space.
		cobra.AddTemplateFunc("shortWrapped", func(short string, pad, width int) string { return hanging(short, pad+3, width) })
	})
	t := root.UsageTemplate()
	t = strings.ReplaceAll(t, "{{rpad .Name .NamePadding }} {{.Short}}",
		fmt.Sprintf("{{rpad .Name .NamePadding }} {{shortWrapped .Short .NamePadding %d}}", width))
	for _, set := range []string{".LocalFlags", ".InheritedFlags"} {
		t = strings.ReplaceAll(t, set+".FlagUsages", fmt.Sprintf("flagUsagesWrapped %s %d", set, width))
	}
	root.SetUsageTemplate(t)
	root.SetHelpTemplate(strings.Replace(root.HelpTemplate(), "{{. | trimTrailingWhitespaces}}",
		fmt.Sprintf("{{linesWrapped . %d | trimTrailingWhitespaces}}", width), 1))
}

// wrapLines wraps each line of s longer than width between words, keeping
// the lines that fit as they are (0: s as it is).
func wrapLines(s string, width int) string {
	if width < 20 {
		return s
	}
	return WrapWords(s, width)
}

// TerminalWidth is the width of w when it is a terminal, else 0.
func TerminalWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		if w, _, err := term.GetSize(f.Fd()); err == nil {
			return w
		}
	}
	return 0
}

var helpTemplateFuncs sync.Once

// write writes g to out within width columns (0: any), and under it which
// columns it left out.
func (g *grid) write(out io.Writer, width int) error {
	keep, widths := g.fit(width)
	t := newTable(out, gridPadding)
	line := func(cells []string) {
		parts := make([]string, 0, len(keep))
		for _, c := range keep {
			cell := cells[c]
			if c == g.cut {
				cell = oneLine(cell, widths[c])
			}
			parts = append(parts, cell)
		}
		fmt.Fprintln(t, strings.Join(parts, "\t"))
	}
	line(g.header)
	for _, r := range g.rows {
		line(r)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if len(keep) < len(g.header) {
		// The hidden columns that said nothing are named apart, by what
		// they held, so that no figure is lost.
		type quietCols struct{ held, cols string }
		var left []string
		var quiet []quietCols
		for c, h := range g.header {
			if slices.Contains(keep, c) {
				continue
			}
			if len(g.rows) == 0 || !g.blank(c) {
				left = append(left, h)
				continue
			}
			held := g.held(c)
			if i := slices.IndexFunc(quiet, func(q quietCols) bool { return q.held == held }); i >= 0 {
				quiet[i].cols += ", " + h
			} else {
				quiet = append(quiet, quietCols{held, h})
			}
		}
		var parts []string
		if len(left) > 0 {
			parts = append(parts, strings.Join(left, ", "))
		}
		for _, q := range quiet {
			parts = append(parts, q.held+" in every row: "+q.cols)
		}
		note := fmt.Sprintf("hidden to fit %d columns: %s", width, strings.Join(parts, "; "))
		if long := note + "; -o json has all"; uniseg.StringWidth(long) <= width {
			note = long
		}
		_, err := fmt.Fprintln(out, WrapWords(note, width))
		return err
	}
	return nil
}

// blank reports whether column c says nothing in any row: 0, - or empty.
func (g *grid) blank(c int) bool {
	for _, r := range g.rows {
		if v := r[c]; v != "0" && v != "-" && v != "" {
			return false
		}
	}
	return true
}

// held says what blank column c holds: "0", "-", "empty", or two of them
// joined by "or".
func (g *grid) held(c int) string {
	seen := map[string]bool{}
	for _, r := range g.rows {
		seen[r[c]] = true
	}
	vals := slices.Sorted(maps.Keys(seen))
	if vals[0] == "" {
		vals[0] = "empty" // sorted first
	}
	return strings.Join(vals, " or ")
}

// fit returns the columns to write within width, in order, and the width
// of each column (the cut column's as shortened).
func (g *grid) fit(width int) (keep []int, widths []int) {
	widths = make([]int, len(g.header))
	for c, h := range g.header {
		widths[c] = uniseg.StringWidth(h)
		for _, r := range g.rows {
			widths[c] = max(widths[c], uniseg.StringWidth(r[c])) // cells are one line each
		}
	}
	for c := range g.header {
		keep = append(keep, c)
	}
	if width <= 0 {
		return keep, widths
	}
	// total is the width of the kept columns with the cut column at its
	// shortest.
	total := func() int {
		n := gridPadding * (len(keep) - 1)
		for _, c := range keep {
			if c == g.cut {
				n += min(widths[c], cutMin)
			} else {
				n += widths[c]
			}
		}
		return n
	}
	if len(g.rows) > 0 { // no rows: no column says anything, and none is cleared
		for _, q := range g.quiet {
			if total() <= width {
				break
			}
			if g.blank(q) {
				keep = slices.DeleteFunc(keep, func(c int) bool { return c == q })
			}
		}
	}
	for _, d := range g.drop {
		if total() <= width {
			break
		}
		keep = slices.DeleteFunc(keep, func(c int) bool { return c == d })
	}
	if g.cut >= 0 && slices.Contains(keep, g.cut) {
		// What the others leave, down to a few cells when no column is
		// left to drop.
		others := total() - min(widths[g.cut], cutMin)
		if width-others < cutLeast && len(keep) > 1 {
			// Too few cells to read: left out (-o json has it) rather
			// than every row wrapped (audit's DETAIL beside a long
			// filter at 80 columns).
			keep = slices.DeleteFunc(keep, func(c int) bool { return c == g.cut })
		} else {
			widths[g.cut] = min(widths[g.cut], max(width-others, cutLeast))
		}
	}
	return keep, widths
}
