package handler

import (
	"fmt"
	"io"
	"sync"
	"unicode/utf8"
)

// OutputLimitDefault is the number of output bytes kept per attempt.
const OutputLimitDefault = 64 << 10

// Truncate keeps the last limit bytes of s, starting on a UTF-8 boundary,
// prefixed by "…(truncated N bytes)\n". The end of an output is kept because
// that is where a failing program says why.
func Truncate(s string, limit int) string { return truncate(s, limit, 0) }

// truncate is Truncate for a tail of a longer text of which dropped bytes
// were already discarded.
func truncate(s string, limit, dropped int) string {
	cut := max(len(s)-max(limit, 0), 0)
	if cut+dropped == 0 {
		return s
	}
	// Skip at most one rune's continuation bytes, so binary output still
	// shows its tail.
	for i := 0; i < utf8.UTFMax-1 && cut < len(s) && !utf8.RuneStart(s[cut]); i++ {
		cut++
	}
	return fmt.Sprintf("…(truncated %d bytes)\n%s", dropped+cut, s[cut:])
}

// tailBuffer keeps the last limit bytes written to it, so a chatty handler
// cannot grow the worker's memory. Safe for concurrent writes (stdout and
// stderr are copied by two goroutines).
type tailBuffer struct {
	mu      sync.Mutex
	limit   int
	buf     []byte
	dropped int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if len(p) > b.limit {
		b.dropped += len(b.buf) + len(p) - b.limit
		b.buf, p = b.buf[:0], p[len(p)-b.limit:]
	}
	b.buf = append(b.buf, p...)
	// Compact only at twice the limit, so each byte is moved O(1) times.
	if over := len(b.buf) - b.limit; over > b.limit {
		b.dropped += over
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return n, nil
}

// String is the kept tail, prefixed as by Truncate when bytes were dropped.
func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return truncate(string(b.buf), b.limit, b.dropped)
}

// raw is the kept tail without prefix.
func (b *tailBuffer) raw() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// copyBuffers are the buffers output is copied through: os/exec copies a
// handler's stdout and stderr with io.Copy, which allocates 32 KiB per
// stream and process unless the writer reads for itself.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// pooledWriter is a writer that copies from a reader through a pooled
// buffer.
type pooledWriter struct{ io.Writer }

func (w pooledWriter) ReadFrom(r io.Reader) (int64, error) {
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	return io.CopyBuffer(struct{ io.Writer }{w.Writer}, r, *buf)
}
