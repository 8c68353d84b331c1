package node_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/testenv"
)

// With tracing.enabled a node exports each attempt's span over OTLP/HTTP
// to tracing.endpoint, with the node as service.instance.id; stopping the
// node flushes what is still buffered.
func TestTracingExportsOverOTLP(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var spans []*tracepb.ResourceSpans
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		mu.Lock()
		spans = append(spans, req.ResourceSpans...)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Write(out)
	}))
	t.Cleanup(collector.Close)

	env := testenv.New(t)
	reg := handler.NewRegistry()
	reg.Register("ok", handler.Func(func(context.Context, *handler.Request) (string, error) { return "", nil }))
	n := startNode(t, env, reg, "node:\n  id: web-3\nqueues:\n  q: { concurrency: 1 }\ntracing:\n  enabled: true\n  endpoint: "+collector.URL+"\n")
	res, err := producer.New(env.Store, env.Broker, producer.Options{}).Submit(context.Background(), producer.Submission{Code: "ok", Queue: "q"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return env.Count(t, "SELECT COUNT(*) FROM task_center WHERE status = 3") == 1
	}, 20*time.Second, 50*time.Millisecond)
	n.Stop()

	mu.Lock()
	defer mu.Unlock()
	var found bool
	for _, rs := range spans {
		resource := map[string]string{}
		for _, a := range rs.GetResource().GetAttributes() {
			resource[a.GetKey()] = a.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				if s.GetName() != "process q" {
					continue
				}
				found = true
				require.Equal(t, "taskd", resource["service.name"])
				require.Equal(t, "web-3", resource["service.instance.id"])
				var id int64
				for _, a := range s.GetAttributes() {
					if a.GetKey() == "taskd.task.id" {
						id = a.GetValue().GetIntValue()
					}
				}
				require.Equal(t, res.ID, id)
			}
		}
	}
	require.True(t, found, "the attempt's span reached the collector")
}
