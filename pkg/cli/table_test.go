package cli

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/rivo/uniseg"
	"github.com/stretchr/testify/require"
)

// TestTableAlignsWideText lines columns up by the width a terminal shows:
// a queue named in Chinese (INSERTed by a PHP producer) or a cell with
// emoji moved every column after it one place right per character.
func TestTableAlignsWideText(t *testing.T) {
	var out bytes.Buffer
	w := newTable(&out, 2)
	rows := [][2]string{{"QUEUE", "PENDING"}, {"send_sms", "1"}, {"发送短信", "2"}, {"队列😀", "3"}, {"ok\xfe", "4"}}
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t|end\n", r[0], r[1])
	}
	// A character split between two writes is kept whole.
	b := []byte("中文\t5\t|end\n")
	w.Write(b[:1])
	w.Write(b[1:])
	require.NoError(t, w.Flush())

	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 6)
	col := func(line, cell string) int {
		i := strings.Index(line, cell)
		require.GreaterOrEqual(t, i, 0, "%q in %q", cell, line)
		return uniseg.StringWidth(line[:i])
	}
	want := col(lines[0], "PENDING")
	for i, cell := range []string{"1", "2", "3", "4", "5"} {
		line := lines[i+1]
		require.Equal(t, want, col(line, cell), "line %q", line)
		require.Equal(t, want+len("PENDING")+2, col(line, "|end"), "line %q", line)
	}
	require.Contains(t, out.String(), "中文")
	require.NotContains(t, out.String(), "\xfe")
}

// Wrapped between words, at spaces only: tasktop's task detail cut a
// worker id at a line's end in two (vm-26115-b90 / 8c3f2), and ansi's
// word wrap breaks at its hyphens. A word longer than the line is cut.
func TestWrapWords(t *testing.T) {
	t.Parallel()
	line := "#1   crashed     2026-12-07 01:05:22        0s  vm-26115-b908c3f2"
	got := WrapWords(line, 60)
	require.Contains(t, got, "\nvm-26115-b908c3f2")
	for _, l := range strings.Split(got, "\n") {
		require.LessOrEqual(t, uniseg.StringWidth(l), 60)
	}
	require.Equal(t, "abcde\nfghij", WrapWords("abcdefghij", 5))
	require.Equal(t, "  ab cd\nef", WrapWords("  ab cd ef", 7), "indentation kept")
	require.Equal(t, "short\n  ab\ncd", WrapWords("short\n  ab cd", 5))
	require.Equal(t, "    \"abcdef\ngh\",", WrapWords(`    "abcdefgh",`, 11), "an indented word longer than the line: no empty line before it")
}

// A narrow terminal hides the columns that say nothing (0, - or empty in
// every row) before the least needed ones, and says what they held:
// stats kept DUE, DEAD and BACKLOG at 0 on every queue while it hid
// FAILED. With no rows nothing is said to be 0, and only the drop order
// applies.
func TestGridHidesQuietColumnsFirst(t *testing.T) {
	t.Parallel()
	// written returns g's table within width and its note unwrapped.
	written := func(g *grid, width int) (table, note string) {
		t.Helper()
		var out bytes.Buffer
		require.NoError(t, g.write(&out, width))
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		for _, l := range lines {
			require.LessOrEqual(t, uniseg.StringWidth(l), width, l)
		}
		n := len(g.rows) + 1
		return strings.Join(lines[:n], "\n"), strings.Join(lines[n:], " ")
	}
	g := newGrid(-1, []int{3, 1}, "NAME", "FAILED", "DUE", "DEAD", "OLDEST", "RUNNING", "STATE")
	g.quiet = []int{2, 3, 4, 5}
	g.add("send_email", 1234, 0, 0, "-", "", "ok")
	g.add("report", 0, 0, "0", "-", "", "ok")
	table, note := written(g, 30)
	require.Equal(t, "NAME        FAILED  STATE\nsend_email  1234    ok\nreport      0       ok", table)
	require.Equal(t, "hidden to fit 30 columns: 0 in every row: DUE, DEAD; - in every row: OLDEST; empty in every row: RUNNING", note)

	// Only as many as it takes: RUNNING stays once the others made room.
	table, note = written(g, 40)
	require.Equal(t, "NAME        FAILED  RUNNING  STATE", strings.Split(table, "\n")[0])
	require.Equal(t, "hidden to fit 40 columns: 0 in every row: DUE, DEAD; - in every row: OLDEST", note)
	_, note = written(g, 80)
	require.Empty(t, note)

	// A quiet column with something in one row is not quiet; a column
	// that holds 0 in some rows and - in others says so.
	g = newGrid(-1, []int{1}, "NAME", "FAILED", "DUE", "OLDEST")
	g.quiet = []int{2, 3}
	g.add("send_email", 3, 7, "-")
	g.add("report", 0, 0, "0")
	table, note = written(g, 20)
	require.Equal(t, "NAME        DUE\nsend_email  7\nreport      0", table)
	require.Equal(t, "hidden to fit 20 columns: FAILED; - or 0 in every row: OLDEST", note)

	// No rows: the drop order alone.
	g = newGrid(-1, []int{1}, "NAME", "FAILED", "DUE")
	g.quiet = []int{2}
	table, note = written(g, 10)
	require.Equal(t, "NAME  DUE", table)
	require.Equal(t, "hidden to fit 10 columns: FAILED", note)
}

// watch(1) runs a command on a pipe and exports the width of its screen
// as COLUMNS: `watch taskd stats` at 80 columns wrapped every row in two.
// Written to a pipe or a file, the tables fit COLUMNS when it is set;
// a terminal's own width wins, and without either they are whole.
// t.Setenv: not parallel.
func TestTablesFollowColumns(t *testing.T) {
	g := newGrid(-1, []int{1}, "NAME", "FAILED", "DUE")
	g.add("send_email", 1234, 7)
	out, err := os.CreateTemp(t.TempDir(), "stats")
	require.NoError(t, err)
	defer out.Close()
	a := &App{Stdout: out}
	write := func() string {
		t.Helper()
		require.NoError(t, out.Truncate(0))
		_, err := out.Seek(0, 0)
		require.NoError(t, err)
		require.NoError(t, g.write(out, a.width()))
		b, err := os.ReadFile(out.Name())
		require.NoError(t, err)
		return string(b)
	}
	require.Equal(t, "NAME        FAILED  DUE\nsend_email  1234    7\n", write(), "no COLUMNS: whole")
	t.Setenv("COLUMNS", "20")
	require.Equal(t, "NAME        DUE\nsend_email  7\nhidden to fit 20\ncolumns: FAILED\n", write())
	t.Setenv("COLUMNS", "wide")
	require.Equal(t, 0, a.width(), "not a number: no bound")
	t.Setenv("COLUMNS", "20")
	a.Stdout = &bytes.Buffer{}
	require.Equal(t, 0, a.width(), "not a pipe or a file: no bound")
}
