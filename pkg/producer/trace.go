package producer

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/pkg/tracing"
)

// startSend starts the span of one submission call: the tasks it inserts
// keep its trace context, and their attempts' spans link to it.
func (c *Client) startSend(ctx context.Context, subs []Submission) (context.Context, trace.Span) {
	name, attrs := "submit", tracing.SendAttributes(len(subs))
	if len(subs) > 0 && sameCode(subs) {
		name += " " + subs[0].Code
		attrs = append(attrs, tracing.TaskCodeKey.String(subs[0].Code))
	}
	return c.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
}

func endSend(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func sameCode(subs []Submission) bool {
	for _, s := range subs[1:] {
		if s.Code != subs[0].Code {
			return false
		}
	}
	return true
}
