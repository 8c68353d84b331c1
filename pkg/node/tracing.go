package node

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/tracing"
)

// tracingFlushTimeout bounds the export of the spans still buffered at
// shutdown.
const tracingFlushTimeout = 5 * time.Second

// openTracing returns the tracer provider of the tracing.* keys: spans in
// batches to the OTLP/HTTP exporter; nil when tracing is off. The
// exporter does not connect until it sends, so a collector that is down
// costs dropped spans, never a failed start.
func openTracing(ctx context.Context, cfg *config.Config, log *slog.Logger) (*sdktrace.TracerProvider, error) {
	t := cfg.Tracing
	if !t.Enabled {
		return nil, nil
	}
	var opts []otlptracehttp.Option
	if t.Endpoint != "" {
		u, err := url.Parse(t.Endpoint) // validated with the configuration
		if err != nil {
			return nil, fmt.Errorf("tracing.endpoint: %w", err)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces" // as OTEL_EXPORTER_OTLP_ENDPOINT does
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	// The SDK reports failed exports through a process-wide handler that
	// writes to the standard logger; the daemon's log is structured.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))
	host, _ := os.Hostname()
	res := resource.NewWithAttributes(semconv.SchemaURL,
		semconv.ServiceName(cmp.Or(os.Getenv("OTEL_SERVICE_NAME"), t.ServiceName)),
		semconv.ServiceVersion(Version), semconv.ServiceInstanceID(cfg.Node.ID), semconv.HostName(host))
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.TraceIDRatioBased(t.SampleRatio)),
	), nil
}

// tracer is the tracer of the node's spans (nil when tracing is off).
func (n *Node) tracer() trace.Tracer {
	if n.tracing == nil {
		return nil
	}
	return n.tracing.Tracer(tracing.Name)
}

// stopTracing flushes the spans still buffered; after the worker stopped.
func (n *Node) stopTracing() {
	if n.tracing == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
	defer cancel()
	if err := n.tracing.Shutdown(ctx); err != nil {
		n.log.Warn("flush trace spans", "err", err)
	}
}
