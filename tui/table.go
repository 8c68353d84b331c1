package tui

import (
	"cmp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// column describes one table column. Columns with the highest drop value
// go first when the terminal is too narrow; a flex column takes the width
// left over, up to max.
type column struct {
	title string
	width int
	right bool
	drop  int // 0: never dropped
	flex  int // >0: grows up to this width
	// middle: a name too long is cut in its middle, keeping its end:
	// queue_mail_high and queue_mail_low differ there, and cut at the
	// end both read queue_mail_….
	middle bool
	// fill: its cells are drawn as wide as the column is (a sparkline),
	// so they never read as cut.
	fill bool
}

// row is one table row: its cells and its style (problem rows stand out).
type row struct {
	cells []string
	// keys are what each column sorts by (nil: the cells).
	keys  []any
	style lipgloss.Style
	mark  string // first-column mark: "*" selected, "!" problem
}

// fit returns the indexes of the columns that fit in width and their
// widths, flex columns widened into what is left. A column is never wider
// than its title and its widest cell in rows (nil: as wide as it may
// be): worker ids of 16 characters in a column of 28 left the task each
// worker runs cut at 80 columns.
//
// seen (nil: none) keeps the table's columns from narrowing again while
// the terminal keeps its width.
func fit(cols []column, rows []row, width int, seen *widest) ([]int, []int) {
	natural := make([]int, len(cols))
	for i, c := range cols {
		natural[i] = max(c.width, c.flex)
		if rows != nil && !c.fill {
			natural[i] = ansi.StringWidth(c.title)
			for _, r := range rows {
				if i < len(r.cells) {
					natural[i] = max(natural[i], ansi.StringWidth(r.cells[i]))
				}
			}
		}
	}
	if rows != nil {
		seen.widen(natural, width)
	}
	keep := make([]bool, len(cols))
	for i := range keep {
		keep[i] = true
	}
	// drop leaves out, of the kept columns ranked below rank (a drop
	// over it), the one dropped first; it reports whether there was one.
	drop := func(rank int) bool {
		worst := -1
		for i, c := range cols {
			if keep[i] && c.drop > rank && (worst < 0 || c.drop > cols[worst].drop) {
				worst = i
			}
		}
		if worst >= 0 {
			keep[worst] = false
		}
		return worst >= 0
	}
	for {
		idx, widths, need := layout(cols, keep, natural, width)
		if need > width && drop(0) {
			continue
		}
		// A ranked column whose cells are cut while one ranked below it
		// is shown: the lower one goes, so the task a worker runs is read
		// whole before its host and pid.
		cut := 0 // the rank of the first such column
		for k, i := range idx {
			if c := cols[i]; c.drop > 0 && c.flex > 0 && !c.fill && widths[k] < min(c.flex, natural[i]) && (cut == 0 || c.drop < cut) {
				cut = c.drop
			}
		}
		if cut > 0 && drop(cut) {
			continue
		}
		return idx, widths
	}
}

// widest is how wide a table's columns have been lately, while the
// terminal keeps its width. A column does not narrow until its cells
// have been narrower for relaxAfter: a count ticking between 999 and
// 1,000, or a page of tasks with shorter results, moved every column to
// its right on the next refresh, under the operator's eyes. Yet a column
// widened once (a long state while Redis was away) kept the columns it
// pushed out off the screen until the terminal was resized.
type widest struct {
	width  int
	cells  []int
	needed []time.Time      // when each column's cells last needed its width
	now    func() time.Time // nil: time.Now
}

// relaxAfter is how long a column keeps a width its cells no longer need.
const relaxAfter = 30 * time.Second

// widen raises natural to the widths needed in the last relaxAfter, and
// remembers it.
func (w *widest) widen(natural []int, width int) {
	if w == nil {
		return
	}
	clock := time.Now
	if w.now != nil {
		clock = w.now
	}
	now := clock()
	if w.width != width || len(w.cells) != len(natural) {
		w.width, w.cells, w.needed = width, slices.Clone(natural), make([]time.Time, len(natural))
		for i := range w.needed {
			w.needed[i] = now
		}
		return
	}
	for i := range natural {
		switch {
		case natural[i] >= w.cells[i] || now.Sub(w.needed[i]) >= relaxAfter:
			w.cells[i], w.needed[i] = natural[i], now
		default:
			natural[i] = w.cells[i]
		}
	}
}

// layout returns the kept columns, their widths, and the line's width
// before any column is narrowed: each as wide as its width or its cells,
// flex columns narrowed when the line is too wide, then widened into
// what is left.
func layout(cols []column, keep []bool, natural []int, width int) (idx, widths []int, need int) {
	total := 1 // the mark column
	for i, c := range cols {
		if keep[i] {
			idx = append(idx, i)
			widths = append(widths, min(c.width, natural[i]))
			total += widths[len(widths)-1] + 1
		}
	}
	need = total
	// Still too wide (60 columns): the rightmost flex column gives up
	// what it must, so its cells end in "…" rather than every line.
	for k := len(idx) - 1; k >= 0 && total > width; k-- {
		if cols[idx[k]].flex > 0 {
			give := max(0, min(total-width, widths[k]-4))
			widths[k] -= give
			total -= give
		}
	}
	// Flex columns grow up to what their cells need: first the ranked
	// ones, so a queue name is whole before a long result takes the rest,
	// then the rightmost (state, detail, result) first.
	spare := max(0, width-total)
	for _, ranked := range []bool{true, false} {
		for k := len(idx) - 1; k >= 0 && spare > 0; k-- {
			c := cols[idx[k]]
			if ranked && (c.drop == 0 || c.fill) {
				continue
			}
			if grow := min(c.flex, natural[idx[k]]) - widths[k]; c.flex > 0 && grow > 0 {
				grow = min(spare, grow)
				widths[k] += grow
				spare -= grow
			}
		}
	}
	return idx, widths, need
}

// cell pads or cuts s to w cells.
func cell(s string, w int, right bool) string {
	s = ansi.Truncate(s, w, "…")
	pad := strings.Repeat(" ", max(0, w-ansi.StringWidth(s)))
	if right {
		return pad + s
	}
	return s + pad
}

// cutMiddle cuts s to w cells by taking out its middle, marked "…".
func cutMiddle(s string, w int) string {
	n := ansi.StringWidth(s)
	if n <= w || w < 5 {
		return s
	}
	tail := ansi.TruncateLeft(s, n-(w-1-(w-1)/2), "")
	for ansi.StringWidth(tail) > w-1-(w-1)/2 {
		_, size := utf8.DecodeRuneInString(tail) // a wide character across the cut
		tail = tail[size:]
	}
	return ansi.Truncate(s, w-1-ansi.StringWidth(tail), "") + "…" + tail
}

// renderTable draws a header and the rows that fit in height, scrolled so
// that the cursor row is visible; the cursor row is shown reversed.
func renderTable(st *Styles, cols []column, rows []row, cur *cursor, width, height int) string {
	titles := make([]string, len(cols))
	for i, c := range cols {
		titles[i] = c.title
	}
	idx, widths := fit(cols, rows, width, &cur.cols)
	line := func(cells []string, mark string) string {
		var b strings.Builder
		b.WriteString(cell(mark, 1, false))
		for k, i := range idx {
			b.WriteByte(' ')
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			if cols[i].middle {
				c = cutMiddle(c, widths[k])
			}
			b.WriteString(cell(c, widths[k], cols[i].right))
		}
		return cell(b.String(), width, false)
	}
	out := []string{st.TableHead.Render(line(titles, ""))}
	body := max(1, height-1)
	cur.fit(len(rows), body)
	for i := cur.offset; i < len(rows) && i < cur.offset+body; i++ {
		s := line(rows[i].cells, rows[i].mark)
		style := rows[i].style
		if i == cur.pos {
			style = style.Inherit(st.Cursor).Reverse(true)
		}
		out = append(out, style.Render(s))
	}
	return strings.Join(out, "\n")
}

// cursor is a position in a list and the first row shown, and how wide
// the list's columns have been.
type cursor struct {
	pos, offset int
	n, height   int
	cols        widest
}

// fit clamps the cursor to n rows shown height at a time.
func (c *cursor) fit(n, height int) {
	c.n, c.height = n, max(1, height)
	c.pos = min(max(c.pos, 0), max(0, n-1))
	if c.pos < c.offset {
		c.offset = c.pos
	}
	if c.pos >= c.offset+c.height {
		c.offset = c.pos - c.height + 1
	}
	c.offset = min(max(c.offset, 0), max(0, n-c.height))
}

// move moves the cursor by d rows, within the list.
func (c *cursor) move(d int) {
	c.pos = min(max(c.pos+d, 0), max(0, c.n-1))
	c.fit(c.n, c.height)
}

// navigate handles the movement keys in a list of n rows; it reports
// whether k was one.
func (c *cursor) navigate(k tea.KeyPressMsg, n int) bool {
	c.n = n
	l := listKeys
	switch {
	case key.Matches(k, l.Up):
		c.move(-1)
	case key.Matches(k, l.Down):
		c.move(1)
	case key.Matches(k, l.Top):
		c.move(-c.n)
	case key.Matches(k, l.Bottom):
		c.move(c.n)
	case key.Matches(k, l.PageUp):
		c.move(-c.height)
	case key.Matches(k, l.PageDown):
		c.move(c.height)
	default:
		return false
	}
	return true
}

// sorting is a table's sort: by column col (-1: the view's own order,
// e.g. queues by trouble), descending when desc.
type sorting struct {
	col  int
	desc bool
}

// key handles o (next column) and O (reverse); it reports whether k was
// one.
func (s *sorting) key(k tea.KeyPressMsg, ncols int) bool {
	switch {
	case key.Matches(k, listKeys.Sort):
		s.col++
		if s.col >= ncols {
			s.col = -1
		}
	case key.Matches(k, listKeys.Reverse):
		s.desc = !s.desc
	default:
		return false
	}
	return true
}

// order returns the rows' indexes in the sort's order: by the col-th
// sort key (the cell when the row has no keys), stable, so rows equal in
// that column keep the view's order.
func (s sorting) order(rows []row) []int {
	idx := make([]int, len(rows))
	for i := range idx {
		idx[i] = i
	}
	if s.col < 0 {
		if s.desc {
			slices.Reverse(idx)
		}
		return idx
	}
	at := func(r row) any {
		if s.col < len(r.keys) {
			return r.keys[s.col]
		}
		if s.col < len(r.cells) {
			return r.cells[s.col]
		}
		return ""
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		c := compareAny(at(rows[a]), at(rows[b]))
		if s.desc {
			return -c
		}
		return c
	})
	return idx
}

// apply sorts rows, and items alongside them.
func sortBy[T any](s sorting, rows []row, items []T) ([]row, []T) {
	idx := s.order(rows)
	r2, i2 := make([]row, len(rows)), make([]T, len(items))
	for k, i := range idx {
		r2[k] = rows[i]
		if i < len(items) {
			i2[k] = items[i]
		}
	}
	return r2, i2
}

// titled marks the sorted column's title with ▲ or ▼.
func (s sorting) titled(cols []column) []column {
	if s.col < 0 || s.col >= len(cols) {
		return cols
	}
	out := slices.Clone(cols)
	mark := "▲"
	if s.desc {
		mark = "▼"
	}
	out[s.col].title += mark
	return out
}

// compareAny orders sort keys of one kind: numbers, durations, times and
// strings (case-insensitive).
func compareAny(a, b any) int {
	switch x := a.(type) {
	case int64:
		y, _ := b.(int64)
		return cmp.Compare(x, y)
	case int:
		y, _ := b.(int)
		return cmp.Compare(x, y)
	case float64:
		y, _ := b.(float64)
		return cmp.Compare(x, y)
	case time.Duration:
		y, _ := b.(time.Duration)
		return cmp.Compare(x, y)
	case time.Time:
		y, _ := b.(time.Time)
		return x.Compare(y)
	case string:
		y, _ := b.(string)
		return cmp.Compare(strings.ToLower(x), strings.ToLower(y))
	}
	return 0
}
