package worker

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/tracing"
)

// startAttempt starts the span of j's attempt, linked to the span that
// submitted the task when its message names one, and returns the
// handler's context, which carries the span. With tracing off it does
// nothing: the handler's context carries no span either way.
func (w *Worker) startAttempt(j *job, untraced bool) context.Context {
	if untraced {
		return j.ctx
	}
	m := j.msg
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithTimestamp(j.started),
		trace.WithAttributes(tracing.TaskAttributes(m.ID, m.Code, j.queue, m.Attempt)...),
	}
	if l, ok := tracing.LinkTo(m.TraceParent); ok {
		opts = append(opts, trace.WithLinks(l))
	}
	ctx, span := w.cfg.Tracer.Start(j.ctx, "process "+j.queue, opts...)
	j.span = span
	return ctx
}

// untraced reports whether attempts under ctx need no span: the tracer
// is the no-op one and ctx carries no span context for it to pass on, so
// a span would be invisible to the handler and go nowhere.
func untraced(ctx context.Context, t trace.Tracer) bool {
	_, off := t.(noop.Tracer)
	return off && trace.SpanContextFromContext(ctx).Equal(trace.SpanContext{})
}

// endAttempt ends j's span with the attempt's outcome; an attempt that
// did not succeed is an error, except a hand-back on shutdown.
func endAttempt(j *job, o task.Outcome, err error) {
	if j.span == nil {
		return
	}
	j.span.SetAttributes(tracing.OutcomeKey.String(string(o)))
	if o != task.OutcomeSucceeded && o != task.OutcomeInterrupted {
		if err != nil {
			j.span.RecordError(err)
		}
		j.span.SetStatus(codes.Error, string(o))
	}
	j.span.End()
}

// errTakenAway ends the span of an attempt whose result the fence will
// reject: recovery or an operator took its task meanwhile.
var errTakenAway = errors.New("the task was taken from this attempt (recovered or cancelled): its result is dropped")

// endAttemptAbandoned ends the span of an attempt the watchdog gave up on;
// its handler's late return changes nothing (a span ends once).
func endAttemptAbandoned(j *job) {
	endAttempt(j, task.OutcomeCrashed, errAbandoned)
}
