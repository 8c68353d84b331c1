package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/queues"
	"github.com/taskd/taskd/pkg/testenv"
)

var quiet = slog.New(slog.DiscardHandler)

// startNode runs a node with every role on env, with Go handlers reg and
// extra configuration YAML.
func startNode(t *testing.T, env *testenv.Env, reg *handler.Registry, extra string) *node.Node {
	t.Helper()
	path := filepath.Join(t.TempDir(), "taskd.yaml")
	yaml := env.ConfigYAML("worker:\n  heartbeat_interval: 100ms\n  heartbeat_ttl: 2s\nretry:\n  base: 50ms\n  max: 100ms\nscheduler:\n  poll_interval: 100ms\n" + extra)
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o644))
	cfg, err := config.Load(config.NewViper(), path)
	require.NoError(t, err)
	n, err := node.Open(context.Background(), cfg, reg, quiet)
	require.NoError(t, err)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(func() { n.Close() })
	return n
}

func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// sum adds the values of a family's series whose labels match.
func sum(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	var v float64
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			v += m.Counter.GetValue()
		case m.Gauge != nil:
			v += m.Gauge.GetValue()
		case m.Histogram != nil:
			v += float64(m.Histogram.GetSampleCount())
		}
	}
	return v
}

// The endpoint is scraped during a run: the names and types are those
// documented, and at the end the counters add up to the task center.
func TestMetricsAddUpToTheTaskCenter(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	reg := handler.NewRegistry()
	release := make(chan struct{})
	reg.Register("ok", handler.Func(func(ctx context.Context, _ *handler.Request) (string, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "", nil
	}))
	reg.Register("flaky", handler.Func(func(_ context.Context, r *handler.Request) (string, error) {
		if r.Attempt < 2 {
			return "", errors.New("first attempt fails")
		}
		return "", nil
	}))
	reg.Register("bad", handler.Func(func(context.Context, *handler.Request) (string, error) { return "", errors.New("always") }))
	// No recovery or watchdog: a heartbeat late on a loaded machine (its
	// TTL is 2 s here) would have a task run twice or its worker healed,
	// and the counters compared below count every attempt.
	n := startNode(t, env, reg, "node:\n  id: web-7\n  roles: [scheduler, worker]\nmetrics:\n  addr: 127.0.0.1:0\nqueues:\n  q: { concurrency: 4 }\n")
	addr := n.MetricsAddr()

	for _, path := range []string{"/livez", "/readyz"} {
		resp, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path+": "+string(body))
	}

	prod := producer.New(env.Store, env.Broker, producer.Options{})
	submit := func(code string, retries, count int) {
		for range count {
			_, err := prod.Submit(context.Background(), producer.Submission{Code: code, Queue: "q", MaxRetry: &retries})
			require.NoError(t, err)
		}
	}
	submit("ok", 3, 20)
	submit("flaky", 3, 10)
	submit("bad", 1, 5)

	// During the run: handlers of "ok" hold their slots.
	require.Eventually(t, func() bool {
		f := scrape(t, addr)
		return sum(f, "taskd_worker_busy_slots") == 4 && sum(f, "taskd_queue_tasks", "queue", "q", "state", "running") == 4
	}, 20*time.Second, 50*time.Millisecond)
	f := scrape(t, addr)
	require.Equal(t, 35.0, sum(f, "taskd_tasks_submitted_total"))
	require.Equal(t, 1.0, sum(f, "taskd_queue_consumers", "queue", "q"))
	require.Equal(t, 1.0, sum(f, "taskd_build_info", "version", node.Version, "node", "web-7"))
	// The queue's series exist before their first increment, so that
	// increase() sees it.
	require.Contains(t, f, "taskd_tasks_completed_total")
	require.Len(t, f["taskd_tasks_completed_total"].GetMetric(), 6, "one series per result written")
	require.Zero(t, sum(f, "taskd_tasks_completed_total", "queue", "q", "result", "timeout"))
	require.Len(t, f["taskd_watchdog_heals_total"].GetMetric(), 3, "one series per kind")
	require.Len(t, f["taskd_tasks_recovered_total"].GetMetric(), 4, "one series per kind")

	close(release)
	require.Eventually(t, func() bool {
		return env.Count(t, "SELECT COUNT(*) FROM task_center WHERE status IN (3, 5)") == 35
	}, 30*time.Second, 50*time.Millisecond)

	// A worker counts a result once its write has committed, so the task
	// center can show an end a moment before the counters do.
	runs := func(where string) float64 {
		return float64(env.Count(t, "SELECT COUNT(*) FROM task_run WHERE "+where))
	}
	require.Eventually(t, func() bool {
		return sum(scrape(t, addr), "taskd_tasks_completed_total") == runs("1")
	}, 10*time.Second, 50*time.Millisecond, "every attempt in task_run counted")
	f = scrape(t, addr)
	types := map[string]dto.MetricType{
		"taskd_tasks_submitted_total": dto.MetricType_COUNTER, "taskd_tasks_dispatched_total": dto.MetricType_COUNTER,
		"taskd_tasks_completed_total": dto.MetricType_COUNTER, "taskd_tasks_retried_total": dto.MetricType_COUNTER,
		"taskd_stale_writes_rejected_total": dto.MetricType_COUNTER,
		"taskd_task_duration_seconds":       dto.MetricType_HISTOGRAM, "taskd_task_start_delay_seconds": dto.MetricType_HISTOGRAM,
		"taskd_queue_tasks": dto.MetricType_GAUGE, "taskd_queue_backlog_tasks": dto.MetricType_GAUGE,
		"taskd_queue_messages": dto.MetricType_GAUGE, "taskd_queue_oldest_due_seconds": dto.MetricType_GAUGE,
		"taskd_queue_consumers": dto.MetricType_GAUGE, "taskd_worker_busy_slots": dto.MetricType_GAUGE,
		"taskd_worker_results_waiting_seconds": dto.MetricType_GAUGE,
		"taskd_worker_heartbeat_age_seconds":   dto.MetricType_GAUGE, "taskd_process_heartbeat_age_seconds": dto.MetricType_GAUGE,
		"taskd_process_start_time_seconds": dto.MetricType_GAUGE,
		"taskd_build_info":                 dto.MetricType_GAUGE, "taskd_monitor_up": dto.MetricType_GAUGE,
		"taskd_queue_paused": dto.MetricType_GAUGE, "taskd_queue_dead_tasks": dto.MetricType_GAUGE,
	}
	for name, typ := range types {
		require.Contains(t, f, name)
		require.Equal(t, typ, f[name].GetType(), name)
	}
	require.Equal(t, float64(env.Count(t, "SELECT COUNT(*) FROM task_center")), sum(f, "taskd_tasks_submitted_total"))
	require.Equal(t, float64(env.Count(t, "SELECT SUM(attempt) FROM task_center")), sum(f, "taskd_tasks_dispatched_total", "source", "scheduler"),
		"its scheduler dispatched every attempt (submits are the process's, other tests' included)")
	for _, outcome := range []string{"succeeded", "failed", "dead"} {
		require.Equal(t, runs(fmt.Sprintf("outcome = '%s'", outcome)), sum(f, "taskd_tasks_completed_total", "result", outcome), outcome)
	}
	require.Equal(t, 30.0, sum(f, "taskd_tasks_completed_total", "result", "succeeded"))
	require.Equal(t, 5.0, sum(f, "taskd_tasks_completed_total", "result", "dead"))
	require.Equal(t, runs("1"), sum(f, "taskd_tasks_completed_total"))
	require.Equal(t, runs("outcome = 'failed'"), sum(f, "taskd_tasks_retried_total"))
	require.Equal(t, runs("1"), sum(f, "taskd_task_duration_seconds"))
	require.Equal(t, runs("1"), sum(f, "taskd_task_start_delay_seconds"), "every attempt that ran started once")
	// Gauges come from a snapshot shared by scrapes for a moment.
	require.Eventually(t, func() bool {
		f := scrape(t, addr)
		return sum(f, "taskd_queue_backlog_tasks")+sum(f, "taskd_queue_tasks")+sum(f, "taskd_worker_busy_slots") == 0 &&
			sum(f, "taskd_queue_dead_tasks", "queue", "q") == 5 // they wait in the task center
	}, 10*time.Second, 100*time.Millisecond)
	require.True(t, strings.HasPrefix(addr, "127.0.0.1:"))
}

// The gauges the alert rules need besides depths: a paused queue, each
// process's host, and the watchdog's last heal of each worker, read from
// the events in Redis (they outlive the process that healed).
func TestMetricsPausedHostsAndHeals(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	n := startNode(t, env, handler.NewRegistry(), "metrics:\n  addr: 127.0.0.1:0\nqueues:\n  q: { concurrency: 1 }\n  other: { concurrency: 1 }\n")
	addr := n.MetricsAddr()
	ctx := context.Background()

	o := ops.New(env.Store, env.Broker)
	o.Known = func(q string) bool { return q == "q" || q == "other" } // the node's queues: entries
	_, err := o.Pause(ctx, "q")
	require.NoError(t, err)
	healed := time.Now().Add(-3 * time.Minute).Truncate(time.Millisecond)
	for _, at := range []time.Time{healed.Add(-time.Minute), healed} { // recorded oldest first
		require.NoError(t, env.Broker.RecordEvent(ctx, &broker.Event{At: at, Kind: "idle", Node: "web-9", WorkerID: "h9-1-ab", Detail: "test"}))
	}
	require.NoError(t, env.Broker.RecordEvent(ctx, &broker.Event{At: time.Now().Add(-2 * time.Hour), Kind: "idle", Node: "web-8", WorkerID: "h8-1-ab"}))
	// Recovery's, the locks' and tasktop's events are no heals.
	require.NoError(t, env.Broker.RecordEvent(ctx, &broker.Event{At: time.Now(), Kind: "recovered", Node: "web-7", WorkerID: "h7-1-ab"}))
	require.NoError(t, env.Broker.RecordEvent(ctx, &broker.Event{At: time.Now(), Kind: "lock", Node: "web-1"}))

	host, err := os.Hostname()
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		f := scrape(t, addr)
		return sum(f, "taskd_queue_paused", "queue", "q") == 1
	}, 10*time.Second, 100*time.Millisecond)
	f := scrape(t, addr)
	require.Zero(t, sum(f, "taskd_queue_paused", "queue", "other"))
	require.Contains(t, f, "taskd_queue_paused")
	require.Len(t, f["taskd_queue_paused"].GetMetric(), 2)
	require.Len(t, series(f, "taskd_process_heartbeat_age_seconds", "process", n.ID, "host", host), 1, "the process's series names its host")
	start := series(f, "taskd_process_start_time_seconds", "process", n.ID, "host", host)
	require.Len(t, start, 1)
	require.InDelta(t, float64(time.Now().Unix()), start[0].GetGauge().GetValue(), 600, "a Unix time")
	heals := series(f, "taskd_watchdog_last_heal_timestamp_seconds")
	require.Len(t, heals, 1, "only workers healed in the last hour")
	require.Equal(t, float64(healed.UnixMilli())/1000, heals[0].GetGauge().GetValue(), "the newest heal")
	require.Equal(t, map[string]string{"worker": "h9-1-ab", "node": "web-9"}, labels(heals[0]))

	// A worker whose results the task center does not take (a full disk):
	// how long its oldest has waited.
	require.NoError(t, env.Broker.Beat(ctx, &broker.Heartbeat{ID: "h6-1-ab", Node: "web-6", ResultsWaitingMS: 45_000}, time.Minute))
	require.Eventually(t, func() bool {
		return sum(scrape(t, addr), "taskd_worker_results_waiting_seconds", "worker", "h6-1-ab", "node", "web-6") == 45
	}, 10*time.Second, 100*time.Millisecond)
	require.Len(t, series(scrape(t, addr), "taskd_worker_results_waiting_seconds", "worker", n.ID), 1)
	require.Zero(t, sum(scrape(t, addr), "taskd_worker_results_waiting_seconds", "worker", n.ID), "the node's own worker writes its results")
}

// series returns the series of a family whose labels match.
func series(fams map[string]*dto.MetricFamily, name string, match ...string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range fams[name].GetMetric() {
		l := labels(m)
		ok := true
		for i := 0; i+1 < len(match); i += 2 {
			ok = ok && l[match[i]] == match[i+1]
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// Redis at maxmemory: /readyz says so, and the memory gauges show it; with
// room again /readyz is ready.
func TestReadyzAndGaugesAtMaxmemory(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	env.RedisAddr = testenv.PrivateRedis(t, 0, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	n := startNode(t, env, handler.NewRegistry(), "metrics:\n  addr: 127.0.0.1:0\n")
	addr := n.MetricsAddr()
	ready := func() (int, string) {
		resp, err := http.Get("http://" + addr + "/readyz")
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, body := ready()
	require.Equal(t, http.StatusOK, code, body)
	fams := scrape(t, addr)
	require.EqualValues(t, 4<<20, sum(fams, "taskd_redis_memory_max_bytes"))
	require.Positive(t, sum(fams, "taskd_redis_memory_used_bytes"))

	// Another application fills Redis up.
	rdb := n.Broker.Client()
	blob := strings.Repeat("x", 32<<10)
	for rdb.RPush(context.Background(), "other-app:blobs", blob).Err() == nil {
	}
	code, body = ready()
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "of maxmemory used")
	require.True(t, strings.HasPrefix(body, "redis: "), body)
	// Once the metrics' snapshot (reused for up to 2 s) is taken again.
	require.Eventually(t, func() bool {
		return sum(scrape(t, addr), "taskd_redis_memory_used_bytes") >= float64(4<<20)*0.9
	}, 10*time.Second, 100*time.Millisecond)

	require.NoError(t, rdb.Del(context.Background(), "other-app:blobs").Err())
	code, body = ready()
	require.Equal(t, http.StatusOK, code, body)
}

// Submits made in the node's process count on its /metrics, whatever
// client made them: pushed ones under source="submit", next to the
// scheduler's, and a refused push (a Redis at maxmemory) as handed back,
// which the scheduler then dispatches. The counts are the process's, so
// the test compares what they moved by.
func TestMetricsCountSubmitDispatches(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	n := startNode(t, env, handler.NewRegistry(), "node:\n  roles: [scheduler]\nmetrics:\n  addr: 127.0.0.1:0\n")
	addr := n.MetricsAddr()
	f := scrape(t, addr)
	for _, s := range []string{"scheduler", "submit"} {
		require.Len(t, series(f, "taskd_tasks_dispatched_total", "source", s), 1, "a series from the start")
	}
	for _, k := range []string{"handed_back", "left_to_recovery"} {
		require.Len(t, series(f, "taskd_submit_push_failures_total", "kind", k), 1, "a series from the start")
	}
	submitted0 := sum(f, "taskd_tasks_dispatched_total", "source", "submit")
	handed0 := sum(f, "taskd_submit_push_failures_total", "kind", "handed_back")
	scheduled0 := sum(f, "taskd_tasks_dispatched_total", "source", "scheduler")

	dispatching := func(b *broker.Broker) *producer.Client {
		qc := queues.New(queues.Config{Logger: quiet}, env.Store, b)
		b.SetLayout(qc)
		return producer.New(env.Store, b, producer.Options{Queues: qc, Logger: quiet})
	}
	for range 3 {
		r, err := dispatching(env.Broker).Submit(ctx, producer.Submission{Code: "now", Queue: "q"})
		require.NoError(t, err)
		require.True(t, r.Dispatched)
	}

	// A Redis that answers but refuses every push: at maxmemory.
	br, err := broker.Open(ctx, broker.Options{Addr: testenv.FullRedis(t), Prefix: env.Prefix})
	require.NoError(t, err)
	t.Cleanup(func() { br.Close() })
	rs, err := dispatching(br).SubmitBatch(ctx, []producer.Submission{{Code: "refused", Queue: "q"}, {Code: "refused", Queue: "q"}})
	require.NoError(t, err)
	require.False(t, rs[0].Dispatched || rs[1].Dispatched)

	require.Eventually(t, func() bool {
		return env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'refused' AND status = 1 AND attempt = 2`) == 2
	}, 20*time.Second, 50*time.Millisecond, "the scheduler dispatches the handed-back tasks")
	// The counts follow the writes: a claim is counted after its push, which
	// follows its commit, and a hand-back after its write.
	require.Eventually(t, func() bool {
		f = scrape(t, addr)
		return sum(f, "taskd_tasks_dispatched_total", "source", "scheduler")-scheduled0 >= 2 &&
			sum(f, "taskd_submit_push_failures_total", "kind", "handed_back")-handed0 >= 2
	}, 20*time.Second, 50*time.Millisecond, "the dispatches and hand-backs are counted")
	require.Equal(t, 3.0, sum(f, "taskd_tasks_dispatched_total", "source", "submit")-submitted0)
	require.Equal(t, 2.0, sum(f, "taskd_submit_push_failures_total", "kind", "handed_back")-handed0)
	require.Equal(t, 2.0, sum(f, "taskd_tasks_dispatched_total", "source", "scheduler")-scheduled0)
}
