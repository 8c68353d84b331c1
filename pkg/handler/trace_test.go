package handler

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

// tracedContext carries the span of a traced attempt.
func tracedContext(t *testing.T) (context.Context, string) {
	t.Helper()
	tid, err := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	require.NoError(t, err)
	sid, err := trace.SpanIDFromHex("00f067aa0ba902b7")
	require.NoError(t, err)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	return trace.ContextWithSpanContext(context.Background(), sc), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
}

// A traced attempt's span reaches exec handlers as TRACEPARENT and http
// handlers as the traceparent header, so they can continue its trace; an
// untraced one sends neither.
func TestHandlersGetTheAttemptsTraceContext(t *testing.T) {
	t.Parallel()
	ctx, want := tracedContext(t)
	h := &Exec{Argv: sh(`printf '%s' "${TRACEPARENT-none}"`)}
	out, err := h.Handle(ctx, testRequest())
	require.NoError(t, err)
	require.Equal(t, want, out)
	out, err = h.Handle(context.Background(), testRequest())
	require.NoError(t, err)
	require.Equal(t, "none", out)

	got := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Traceparent")
	}))
	t.Cleanup(srv.Close)
	_, err = (&HTTP{URL: srv.URL}).Handle(ctx, testRequest())
	require.NoError(t, err)
	require.Equal(t, want, <-got)
	_, err = (&HTTP{URL: srv.URL}).Handle(context.Background(), testRequest())
	require.NoError(t, err)
	require.Empty(t, <-got)

	p := newTestPool(t, "serve", nil)
	for c, want := range map[context.Context]string{ctx: want, context.Background(): ""} {
		out, err := p.Handle(c, testRequest())
		require.NoError(t, err)
		var res helperResult
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		require.Equal(t, want, res.Trace)
	}
}
