package handler

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/taskd/taskd/pkg/task"
)

// OutputLimitDefault is the number of output bytes kept per attempt.
const OutputLimitDefault = 64 << 10

// ValidText is s with each byte that is not part of valid UTF-8 written as
// \xNN: a utf8mb4 column refuses invalid UTF-8, and a script's GBK output
// (你好 is \xc4\xe3\xba\xc3) stays readable to whoever knows the encoding,
// where one U+FFFD in place of a run of bytes told nothing.
func ValidText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size == 1 {
			fmt.Fprintf(&b, "\\x%02x", s[0])
		} else {
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

// Truncate keeps the last limit bytes of s, starting on a UTF-8 boundary,
// prefixed by "…(truncated N bytes)\n". The end of an output is kept because
// that is where a failing program says why. An s that a handler truncated
// already keeps counting from its prefix, which is not cut as if it were
// output.
func Truncate(s string, limit int) string {
	dropped := task.TruncatedBytes(s)
	if dropped > 0 {
		_, s, _ = strings.Cut(s, "\n")
	}
	return truncate(s, limit, dropped)
}

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

// copyBuffers are the buffers output is read through, so that each
// attempt does not allocate its own.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyOutput copies f to w until EOF or a read error (a deadline: see
// attempt.cutoff), then closes f.
func copyOutput(f *os.File, w io.Writer) {
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	for {
		n, err := f.Read(*buf)
		if n > 0 {
			_, _ = w.Write((*buf)[:n])
		}
		if err != nil {
			break
		}
	}
	_ = f.Close()
}
