// Package tracing is taskd's OpenTelemetry tracing, off by default: one
// span per task attempt, linked to the span that submitted the task.
//
// The producer's trace context travels with the task as a W3C traceparent:
// producer.Client writes the span of its context to task_center.trace_parent
// (a PHP producer may write one too), the scheduler copies it into each of
// the task's messages, and the worker's span of each attempt carries a link
// to it. A link, not a parent: a task runs later than the request that
// submitted it ended, maybe many times, and each attempt is a trace of its
// own that points back to where it came from.
//
// This package holds what producers, workers and handlers share (the
// trace context's format, the spans' attributes); the daemon's tracer
// provider and its OTLP exporter are set up by pkg/node.
package tracing

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of the daemon's tracer provider (tracing.* keys).
const (
	SampleRatioDefault = 1.0
	ServiceNameDefault = "taskd"
)

// Name is the instrumentation scope of taskd's spans.
const Name = "github.com/taskd/taskd"

// Attributes of the spans; the messaging.* ones follow OpenTelemetry's
// messaging conventions.
var (
	TaskIDKey   = attribute.Key("taskd.task.id")
	TaskCodeKey = attribute.Key("taskd.task.code")
	AttemptKey  = attribute.Key("taskd.task.attempt")
	QueueKey    = attribute.Key("taskd.queue")
	OutcomeKey  = attribute.Key("taskd.outcome")
	system      = semconv.MessagingSystemKey.String("taskd")
)

// TaskAttributes describe one attempt of a task (attempt 0: its
// submission).
func TaskAttributes(id int64, code, queue string, attempt int) []attribute.KeyValue {
	out := []attribute.KeyValue{system, TaskCodeKey.String(code), QueueKey.String(queue),
		semconv.MessagingDestinationName(queue)}
	if id > 0 {
		out = append(out, TaskIDKey.Int64(id), semconv.MessagingMessageID(fmt.Sprint(id)))
	}
	if attempt > 0 {
		out = append(out, AttemptKey.Int(attempt), semconv.MessagingOperationTypeProcess)
	}
	return out
}

// SendAttributes describe a submission.
func SendAttributes(n int) []attribute.KeyValue {
	return []attribute.KeyValue{system, semconv.MessagingOperationTypeSend, semconv.MessagingBatchMessageCount(n)}
}

var w3c = propagation.TraceContext{}

// TraceParent returns the W3C traceparent of ctx's span ("" when ctx has
// no valid span context).
func TraceParent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	return c["traceparent"]
}

// LinkTo returns a link to the span a traceparent names; ok is false for
// an empty or malformed one, which is ignored.
func LinkTo(traceParent string) (trace.Link, bool) {
	if traceParent == "" {
		return trace.Link{}, false
	}
	sc := trace.SpanContextFromContext(w3c.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceParent}))
	if !sc.IsValid() {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc}, true
}

// Inject writes the trace context of ctx's span as W3C headers (or, for
// an exec handler, the TRACEPARENT variable) for a handler to continue.
func Inject(ctx context.Context, c propagation.TextMapCarrier) { w3c.Inject(ctx, c) }
