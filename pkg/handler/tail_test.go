package handler

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// published records what a Tail publishes.
type published struct {
	mu   sync.Mutex
	outs []string
	done []bool
}

func (p *published) publish(_ context.Context, out string, done bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.outs, p.done = append(p.outs, out), append(p.done, done)
	return nil
}

func (p *published) last() (string, bool, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.outs) == 0 {
		return "", false, 0
	}
	return p.outs[len(p.outs)-1], p.done[len(p.done)-1], len(p.outs)
}

// The tail keeps only the last bytes; the attempt's own output is kept
// whole.
func TestExecTailBounded(t *testing.T) {
	t.Parallel()
	pub := &published{}
	tail := StartTail(pub.publish, 64, 20*time.Millisecond)
	r := testRequest()
	r.Tail = tail
	h := &Exec{Argv: sh(`echo first line; echo to stderr >&2; i=0; while [ $i -lt 40 ]; do echo filler $i; i=$((i+1)); done`)}
	out, err := h.Handle(context.Background(), r)
	require.NoError(t, err)
	tail.Close()
	tail.Close() // twice is safe
	last := tail.buf.String()
	require.LessOrEqual(t, len(last), 64+len("…(truncated 9999 bytes)\n"), "bounded")
	require.Contains(t, last, "filler 39")
	require.NotContains(t, last, "first line")
	require.Contains(t, out, "first line")
	require.Contains(t, out, "to stderr")
}

// Output published before the attempt ends: a command that waits after
// printing is seen printing.
func TestExecTailBeforeTheEnd(t *testing.T) {
	t.Parallel()
	pub := &published{}
	tail := StartTail(pub.publish, 0, 20*time.Millisecond)
	r := testRequest()
	r.Tail = tail
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = (&Exec{Argv: sh(`echo working on it; sleep 30`), KillGrace: time.Second}).Handle(ctx, r)
	}()
	require.Eventually(t, func() bool {
		out, fin, _ := pub.last()
		return strings.Contains(out, "working on it") && !fin
	}, 10*time.Second, 10*time.Millisecond)
	cancel()
	<-done
	tail.Close()
	_, fin, _ := pub.last()
	require.True(t, fin)
}

// An HTTP attempt's body is published as it streams.
func TestHTTPTailStreams(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, strings.Repeat("x", errorLineLimit)+"\nprogress 50%\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, "done\n")
	}))
	defer srv.Close()
	defer close(release)
	pub := &published{}
	tail := StartTail(pub.publish, 0, 20*time.Millisecond)
	r := testRequest()
	r.Tail = tail
	res := make(chan error, 1)
	go func() {
		_, err := (&HTTP{URL: srv.URL}).Handle(context.Background(), r)
		res <- err
	}()
	require.Eventually(t, func() bool {
		out, _, _ := pub.last()
		return strings.Contains(out, "progress 50%")
	}, 10*time.Second, 10*time.Millisecond)
	release <- struct{}{}
	require.NoError(t, <-res)
	tail.Close()
	out, fin, _ := pub.last()
	require.True(t, fin)
	require.Contains(t, out, "done")
}

// A pool process's stderr during a task feeds that task's tail.
func TestPoolStderrFeedsTheTail(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, "serve", nil)
	pub := &published{}
	tail := StartTail(pub.publish, 0, 20*time.Millisecond)
	r := testRequest()
	r.Tail = tail
	r.Payload = []byte(`{"do":"stderr","text":"pool step 1\npool step 2\n"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := p.Handle(ctx, r)
	require.NoError(t, err)
	tail.Close()
	require.Contains(t, tail.buf.String(), "pool step 1\npool step 2\n")
}

// An attempt that ends before its tail's first publication publishes
// nothing: nobody could follow it live, its output is in its result, and
// a Redis key for each quick task that prints would only fill Redis.
func TestTailQuickAttemptPublishesNothing(t *testing.T) {
	t.Parallel()
	pub := &published{}
	tail := StartTail(pub.publish, 0, time.Hour)
	fmt.Fprint(tail, "done in a moment\n")
	require.True(t, tail.running)
	tail.Close()
	_, _, n := pub.last()
	require.Zero(t, n)
}

// A tail nobody writes to (a Go handler that prints nothing) runs no
// publishing goroutine and publishes nothing; its Close returns at once.
func TestTailUnwrittenPublishesNothing(t *testing.T) {
	t.Parallel()
	pub := &published{}
	tail := StartTail(pub.publish, 0, time.Millisecond)
	_, err := Func(func(context.Context, *Request) (string, error) { return "result", nil }).Handle(context.Background(), &Request{Tail: tail})
	require.NoError(t, err)
	require.False(t, tail.running, "no goroutine before the first write")
	tail.Close()
	tail.Close()
	_, _, n := pub.last()
	require.Zero(t, n)
}

// The first write starts publishing, on the interval counted from the
// tail's start; what is written after Close is not published.
func TestTailStartsOnFirstWrite(t *testing.T) {
	t.Parallel()
	pub := &published{}
	tail := StartTail(pub.publish, 0, 20*time.Millisecond)
	fmt.Fprint(tail, "step 1\n")
	require.True(t, tail.running)
	require.Eventually(t, func() bool {
		out, fin, _ := pub.last()
		return out == "step 1\n" && !fin
	}, 10*time.Second, 5*time.Millisecond)
	fmt.Fprint(tail, "step 2\n")
	tail.Close()
	out, fin, n := pub.last()
	require.True(t, fin)
	require.Equal(t, "step 1\nstep 2\n", out)
	fmt.Fprint(tail, "late\n")
	tail.Close()
	_, _, after := pub.last()
	require.Equal(t, n, after, "nothing published after Close")

	closed := StartTail(pub.publish, 0, 0)
	closed.Close()
	fmt.Fprint(closed, "after close\n")
	require.False(t, closed.running, "a write after Close starts nothing")
}
