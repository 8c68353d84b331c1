package worker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/tracing"
	"github.com/taskd/taskd/pkg/worker"
)

// Each attempt is a span with the task's id, code, attempt and queue,
// linked to the span that submitted the task; its handler runs inside it.
// Tasks INSERTed by hand are traced too: linked when the row carries a
// W3C traceparent, without a link when it has none or a malformed one.
func TestAttemptSpansLinkToTheProducer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	b.prod = producer.New(b.env.Store, nil, producer.Options{TracerProvider: tp})

	var mu sync.Mutex
	inHandler := map[int]trace.SpanContext{} // attempt -> the handler's span
	b.reg.Register("flaky", handler.Func(func(ctx context.Context, r *handler.Request) (string, error) {
		mu.Lock()
		inHandler[r.Attempt] = trace.SpanContextFromContext(ctx)
		mu.Unlock()
		if r.Attempt == 1 {
			return "", errors.New("first attempt fails")
		}
		return "", nil
	}))
	b.reg.Register("ok", handler.Func(func(context.Context, *handler.Request) (string, error) { return "", nil }))
	b.startWorker(t, func(c *worker.Config) { c.Tracer = tp.Tracer(tracing.Name) })

	ctx, request := tp.Tracer("app").Start(context.Background(), "request")
	res, err := b.prod.Submit(ctx, producer.Submission{Code: "flaky", Queue: "q", MaxRetry: intp(2)})
	require.NoError(t, err)
	request.End()
	insert := func(traceParent string) int64 {
		r := b.env.Exec(t, `INSERT INTO task_center (task_code, queue, payload, plan_next_run_at, trace_parent) VALUES ('ok', 'q', '{}', NOW(), ?)`, traceParent)
		id, err := r.LastInsertId()
		require.NoError(t, err)
		return id
	}
	const phpParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	seedID, phpID, badID := insert(""), insert(phpParent), insert("not a traceparent")
	b.dispatchUntil(t, "every task", func() bool {
		for _, id := range []int64{res.ID, seedID, phpID, badID} {
			if b.task(t, id).Status != task.Succeeded {
				return false
			}
		}
		return true
	})

	var submit tracetest.SpanStub
	attempts := map[int64][]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		switch {
		case s.Name == "submit flaky":
			submit = s
		case s.Name == "process q":
			id := attr(s, tracing.TaskIDKey).AsInt64()
			attempts[id] = append(attempts[id], s)
		}
	}
	require.Equal(t, trace.SpanKindProducer, submit.SpanKind)
	require.Equal(t, request.SpanContext().SpanID(), submit.Parent.SpanID(), "the submission is a child of the caller's span")

	require.Len(t, attempts[res.ID], 2, "one span per attempt")
	for _, s := range attempts[res.ID] {
		n := int(attr(s, tracing.AttemptKey).AsInt64())
		require.Equal(t, trace.SpanKindConsumer, s.SpanKind)
		require.Equal(t, "flaky", attr(s, tracing.TaskCodeKey).AsString())
		require.Equal(t, "q", attr(s, tracing.QueueKey).AsString())
		require.Len(t, s.Links, 1)
		require.Equal(t, submit.SpanContext.SpanID(), s.Links[0].SpanContext.SpanID(), "attempt %d links to the submission", n)
		require.Equal(t, submit.SpanContext.TraceID(), s.Links[0].SpanContext.TraceID())
		require.NotEqual(t, submit.SpanContext.TraceID(), s.SpanContext.TraceID(), "an attempt is a trace of its own")
		mu.Lock()
		require.Equal(t, s.SpanContext.SpanID(), inHandler[n].SpanID(), "attempt %d's handler runs in its span", n)
		mu.Unlock()
		switch n {
		case 1:
			require.Equal(t, "failed", attr(s, tracing.OutcomeKey).AsString())
			require.Equal(t, codes.Error, s.Status.Code)
			require.NotEmpty(t, s.Events, "the error is recorded")
		case 2:
			require.Equal(t, "succeeded", attr(s, tracing.OutcomeKey).AsString())
			require.Equal(t, codes.Unset, s.Status.Code)
		default:
			t.Fatalf("attempt %d", n)
		}
	}
	require.Len(t, attempts[seedID], 1)
	require.Empty(t, attempts[seedID][0].Links, "no trace context, no link")
	require.Equal(t, "ok", attr(attempts[seedID][0], tracing.TaskCodeKey).AsString())
	require.Len(t, attempts[badID], 1)
	require.Empty(t, attempts[badID][0].Links, "a malformed trace context is ignored")
	require.Len(t, attempts[phpID], 1)
	require.Len(t, attempts[phpID][0].Links, 1, "a producer that writes the column itself")
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", attempts[phpID][0].Links[0].SpanContext.TraceID().String())
	require.Equal(t, "00f067aa0ba902b7", attempts[phpID][0].Links[0].SpanContext.SpanID().String())
}

// Off by default: a worker without a tracer runs its handlers outside any
// span.
func TestNoSpansByDefault(t *testing.T) {
	t.Parallel()
	b := setup(t)
	got := make(chan trace.SpanContext, 1)
	b.reg.Register("ok", handler.Func(func(ctx context.Context, _ *handler.Request) (string, error) {
		got <- trace.SpanContextFromContext(ctx)
		return "", nil
	}))
	b.startWorker(t, nil)
	id := b.submit(t, producer.Submission{Code: "ok"})
	b.dispatchUntil(t, "success", func() bool { return b.task(t, id).Status == task.Succeeded })
	select {
	case sc := <-got:
		require.False(t, sc.IsValid())
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not run")
	}
}

// Without a tracer, a span context the worker was started under reaches
// the handlers as the no-op tracer passes it on: skipping the no-op span
// must not drop it.
func TestNoTracerPassesTheStartSpanOn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	got := make(chan trace.SpanContext, 1)
	b.reg.Register("ok", handler.Func(func(ctx context.Context, _ *handler.Request) (string, error) {
		got <- trace.SpanContextFromContext(ctx)
		return "", nil
	}))
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	w := worker.New(worker.Config{Node: "test", Queues: map[string]int{"q": 1}, Handlers: b.reg, ShutdownGrace: 5 * time.Second},
		b.env.Store, b.env.Broker)
	require.NoError(t, w.Start(trace.ContextWithRemoteSpanContext(context.Background(), sc)))
	t.Cleanup(w.Stop)
	id := b.submit(t, producer.Submission{Code: "ok"})
	b.dispatchUntil(t, "success", func() bool { return b.task(t, id).Status == task.Succeeded })
	select {
	case in := <-got:
		require.True(t, in.Equal(sc), "the handler runs under the start's span context")
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not run")
	}
}

func attr(s tracetest.SpanStub, k attribute.Key) attribute.Value {
	for _, a := range s.Attributes {
		if a.Key == k {
			return a.Value
		}
	}
	return attribute.Value{}
}
