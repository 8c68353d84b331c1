package handler

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRegistry(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	ok := Func(func(context.Context, *Request) (string, error) { return "ok", nil })
	reg.Register("b", &Exec{Argv: []string{"true"}})
	reg.Register("c", &HTTP{URL: "http://127.0.0.1:1"})
	reg.Register("a", ok)
	require.Equal(t, []string{"a", "b", "c"}, reg.Codes())

	h, found := reg.Lookup("a")
	require.True(t, found)
	out, err := h.Handle(context.Background(), testRequest())
	require.NoError(t, err)
	require.Equal(t, "ok", out)
	_, found = reg.Lookup("missing")
	require.False(t, found)

	reg.Register("b", ok) // replaces
	h, _ = reg.Lookup("b")
	require.IsType(t, ok, h)
	require.Panics(t, func() { reg.Register("", ok) })
	require.Panics(t, func() { reg.Register("x", nil) })

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = reg.Lookup("a")
				_ = reg.Codes()
			}
		})
	}
	reg.Register("d", ok)
	wg.Wait()
}

func panicsDeep(v any) Func {
	return func(context.Context, *Request) (string, error) { panic(v) }
}

func TestSafe(t *testing.T) {
	t.Parallel()
	out, err := Safe(context.Background(), panicsDeep("boom"), testRequest())
	require.EqualError(t, err, "handler panicked: boom")
	require.True(t, strings.HasPrefix(out, "panic: boom\n"), out)
	require.Contains(t, out, "panicsDeep")
	require.NotContains(t, out, "runtime.gopanic")
	require.NotContains(t, out, "testing.tRunner", "frames below Safe are the worker's")

	sentinel := errors.New("sentinel")
	_, err = Safe(context.Background(), panicsDeep(sentinel), testRequest())
	require.ErrorIs(t, err, sentinel)

	var nilMap map[string]int
	_, err = Safe(context.Background(), Func(func(context.Context, *Request) (string, error) {
		nilMap["x"] = 1
		return "", nil
	}), testRequest())
	require.ErrorContains(t, err, "handler panicked: assignment to entry in nil map")

	out, err = Safe(context.Background(), Func(func(context.Context, *Request) (string, error) { return "fine", nil }), testRequest())
	require.NoError(t, err)
	require.Equal(t, "fine", out)
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	require.Equal(t, "short", Truncate("short", 5))
	require.Equal(t, "…(truncated 4 bytes)\nefgh", Truncate("abcdefgh", 4))
	// "ééé" is 6 bytes; the last 3 start mid-rune, so keep only the last é.
	require.Equal(t, "…(truncated 4 bytes)\né", Truncate("ééé", 3))
	// Binary data: skip at most a rune's continuation bytes.
	bin := strings.Repeat("\x80", 10)
	require.Equal(t, "…(truncated 8 bytes)\n\x80\x80", Truncate(bin, 5))
	require.Equal(t, "…(truncated 3 bytes)\n", Truncate("abc", 0))
	// A text truncated already (by its handler) keeps counting: its prefix
	// is not cut as if it were output.
	require.Equal(t, "…(truncated 100 bytes)\nabc", Truncate("…(truncated 100 bytes)\nabc", 3))
	require.Equal(t, "…(truncated 104 bytes)\nefgh", Truncate("…(truncated 100 bytes)\nabcdefgh", 4))
	require.Equal(t, "…(truncated lots)\nabc", Truncate("…(truncated lots)\nabc", 100), "not a count: output like any other")
}

// The streaming tailBuffer must give what Truncate gives on the whole text.
func TestTailBufferMatchesTruncate(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("héllo wörld ✓ ", 500)
	for _, limit := range []int{0, 1, 7, 100, 1000, len(text), len(text) + 1} {
		for _, chunk := range []int{1, 3, 64, 999, len(text)} {
			b := &tailBuffer{limit: limit}
			for s := text; s != ""; {
				n := min(chunk, len(s))
				_, _ = b.Write([]byte(s[:n]))
				s = s[n:]
			}
			require.Equal(t, Truncate(text, limit), b.String(), "limit %d chunk %d", limit, chunk)
			require.LessOrEqual(t, cap(b.buf), 4*limit+2*chunk+64, "memory stays bounded")
		}
	}
}
