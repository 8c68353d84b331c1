package tui

import "github.com/taskd/taskd/pkg/cli"

// A payload can be megabytes (submit.max_payload), and so can a result
// (worker.output_limit). Indenting, cleaning and wrapping all of it at
// every refresh kept tasktop at a third of a CPU while such a task's
// detail was open, to show a screen of it. The detail holds each as a
// textBlock: made once per (content, width), reused by every refresh, and
// cut to what can usefully be scrolled, saying where the rest is.

// What a block shows at most: the first blockMaxBytes of its text, and
// of those the first blockMaxLines lines of the screen's width (about 50
// pages of an 80×24 terminal).
const (
	blockMaxBytes = 64 << 10
	blockMaxLines = 1000
)

// textBlock is one long text of the detail as shown: formatted, cut and
// wrapped.
type textBlock struct {
	valid bool // out is of the current content, at width
	width int
	out   string
	// renders counts the times out was made: a refresh that finds the
	// content unchanged makes none.
	renders int
}

// reset marks the content changed: the next text makes the block again.
func (b *textBlock) reset() { b.valid = false }

// text returns the block at width, made by make when the content or the
// width changed since it was last made.
func (b *textBlock) text(width int, make func() string) string {
	if !b.valid || b.width != width {
		b.out, b.width, b.valid = make(), width, true
		b.renders++
	}
	return b.out
}

// cutText wraps s at width, cut to blockMaxBytes and blockMaxLines; when
// it cuts, a last line says so: note (cli.CutNote).
func cutText(s string, width int, note string) string {
	return cli.CutText(s, width, blockMaxBytes, blockMaxLines, true, note)
}
