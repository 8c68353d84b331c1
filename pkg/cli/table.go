package cli

import (
	"bytes"
	"io"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// table aligns columns as text/tabwriter does, by the width a terminal
// gives the text: tabwriter counts runes, so a Chinese or emoji cell
// (two columns a character) pushed every column after it to the right.
// Each wide character is written to the tabwriter followed by filler
// bytes that make up its width, which are dropped from what it writes.
type table struct {
	tw   *tabwriter.Writer
	part []byte // the start of a character split between writes
}

// filler is never part of UTF-8 text and is not tabwriter's escape.
const filler = 0xfe

func newTable(out io.Writer, padding int) *table {
	return &table{tw: tabwriter.NewWriter(dropFiller{out}, 0, 0, padding, ' ', 0)}
}

func (t *table) Write(p []byte) (int, error) {
	s := append(t.part, p...)
	t.part = nil
	// Keep a character split between writes for the next one.
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRune(s[i:]) {
				t.part, s = bytes.Clone(s[i:]), s[:i]
			}
			break
		}
	}
	out := make([]byte, 0, len(s)+len(s)/2)
	state := -1
	for len(s) > 0 {
		var c []byte
		var b int
		c, s, b, state = uniseg.Step(s, state)
		w := b >> uniseg.ShiftWidth
		if bytes.IndexByte(c, filler) >= 0 {
			c = []byte("\uFFFD") // a stray byte that would be taken for filler
		}
		out = append(out, c...)
		for n := utf8.RuneCount(c); n < w; n++ {
			out = append(out, filler)
		}
	}
	if _, err := t.tw.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes the table.
func (t *table) Flush() error {
	if len(t.part) > 0 {
		p := t.part
		t.part = nil
		if _, err := t.tw.Write(p); err != nil {
			return err
		}
	}
	return t.tw.Flush()
}

// dropFiller writes what it is given less the filler bytes.
type dropFiller struct{ w io.Writer }

func (d dropFiller) Write(p []byte) (int, error) {
	if bytes.IndexByte(p, filler) < 0 {
		return d.w.Write(p)
	}
	if _, err := d.w.Write(bytes.ReplaceAll(p, []byte{filler}, nil)); err != nil {
		return 0, err
	}
	return len(p), nil
}
