package config

import (
	"net/url"

	"github.com/taskd/taskd/pkg/tracing"
)

// TracingConfig configures OpenTelemetry traces: a span per task attempt,
// exported over OTLP/HTTP (pkg/tracing).
type TracingConfig struct {
	// Enabled turns tracing on for this node's workers.
	Enabled bool `mapstructure:"enabled"`
	// Endpoint is the collector's OTLP/HTTP URL, e.g.
	// http://otel-collector:4318 ("": OTEL_EXPORTER_OTLP_ENDPOINT, else
	// http://localhost:4318).
	Endpoint string `mapstructure:"endpoint"`
	// SampleRatio is the share of attempts traced, 0 to 1.
	SampleRatio float64 `mapstructure:"sample_ratio"`
	// ServiceName is the spans' service.name (OTEL_SERVICE_NAME wins).
	ServiceName string `mapstructure:"service_name"`
}

func init() {
	defaults["tracing.enabled"] = false
	defaults["tracing.endpoint"] = ""
	defaults["tracing.sample_ratio"] = tracing.SampleRatioDefault
	defaults["tracing.service_name"] = tracing.ServiceNameDefault
}

// validateTracing checks the tracing section.
func (c *Config) validateTracing() error {
	t := c.Tracing
	if t.SampleRatio < 0 || t.SampleRatio > 1 {
		return invalid("tracing.sample_ratio", t.SampleRatio, "a ratio from 0 to 1")
	}
	if t.Endpoint != "" {
		if u, err := url.Parse(t.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return invalid("tracing.endpoint", t.Endpoint, "the collector's http or https URL, e.g. http://otel-collector:4318")
		}
	}
	return nil
}
