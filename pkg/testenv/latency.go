package testenv

import (
	"fmt"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/collectors"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// LatencyProxy starts an in-process TCP proxy to upstream that adds each
// way of every connection a delay of each (a slow link: a round trip costs
// 2 × each more), and returns its address. It stops when the test ends.
func LatencyProxy(t testing.TB, upstream string, each time.Duration) string {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	srv.Metrics.ProxyMetrics = collectors.NewProxyMetricCollectors()
	p := toxiproxy.NewProxy(srv, "latency", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("testenv: latency proxy to %s: %v", upstream, err)
	}
	t.Cleanup(p.Stop)
	for _, stream := range []string{"upstream", "downstream"} {
		toxic := fmt.Sprintf(`{"name":"latency_%s","type":"latency","stream":%q,"attributes":{"latency":%d}}`,
			stream, stream, each.Milliseconds())
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
			t.Fatalf("testenv: latency toxic: %v", err)
		}
	}
	return p.Listen
}
