package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/metrics"
	"github.com/taskd/taskd/pkg/monitor"
	"github.com/taskd/taskd/pkg/store"
)

// A snapshot taken while the task center does not answer serves what
// Redis holds (messages, workers and their unwritten results) with
// taskd_monitor_up 0, and leaves the task center's gauges out rather
// than at zero; a whole snapshot serves both.
func TestSnapshotWithoutMySQL(t *testing.T) {
	t.Parallel()
	now := time.Now()
	snap := func(mysqlErr error) *monitor.Snapshot {
		return &monitor.Snapshot{At: now, MySQLErr: mysqlErr, MaxTaskID: 9,
			Queues: map[string]*monitor.Queue{"q": {QueueDepth: store.QueueDepth{Queue: "q", Pending: 3}, Shards: []int64{2}, Messages: 2, Consumers: 1}},
			Workers: []broker.WorkerStatus{{ID: "w1", Node: "n1", LastBeat: now,
				Heartbeat: &broker.Heartbeat{ID: "w1", Node: "n1", ResultsWaitingMS: 42_000}}}}
	}
	gather := func(s *monitor.Snapshot) map[string]float64 {
		m := metrics.New("test", "n1")
		m.CollectSnapshots(func(context.Context) (*monitor.Snapshot, error) { return s, nil }, slog.New(slog.NewTextHandler(io.Discard, nil)))
		fams, err := m.Registry.Gather()
		require.NoError(t, err)
		got := map[string]float64{}
		for _, f := range fams {
			for _, mt := range f.GetMetric() {
				got[f.GetName()] += mt.GetGauge().GetValue() + mt.GetCounter().GetValue()
			}
		}
		return got
	}
	down := gather(snap(errors.New("MySQL: connection refused")))
	require.Equal(t, 0.0, down["taskd_monitor_up"])
	require.Equal(t, 2.0, down["taskd_queue_messages"])
	require.Equal(t, 42.0, down["taskd_worker_results_waiting_seconds"])
	require.Contains(t, down, "taskd_queue_consumers")
	for _, name := range []string{"taskd_queue_tasks", "taskd_tasks_submitted_total", "taskd_queue_dead_tasks"} {
		require.NotContains(t, down, name, "unknown, not zero")
	}
	up := gather(snap(nil))
	require.Equal(t, 1.0, up["taskd_monitor_up"])
	require.Equal(t, 3.0, up["taskd_queue_tasks"])
	require.Equal(t, 9.0, up["taskd_tasks_submitted_total"])
}

// taskd_tasks_submitted_total, the highest task id, does not go down when
// the newest task is deleted: Prometheus reads a counter that drops as a
// reset, and rate() as every task ever submitted.
func TestSubmittedNeverGoesDown(t *testing.T) {
	t.Parallel()
	ids := []int64{9, 5, 12}
	m := metrics.New("test", "n1")
	m.CollectSnapshots(func(context.Context) (*monitor.Snapshot, error) {
		id := ids[0]
		ids = ids[1:]
		// Old at once: each scrape takes a snapshot of its own.
		return &monitor.Snapshot{At: time.Now().Add(-time.Hour), MaxTaskID: id}, nil
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var got []float64
	for range 3 {
		fams, err := m.Registry.Gather()
		require.NoError(t, err)
		for _, f := range fams {
			if f.GetName() == "taskd_tasks_submitted_total" {
				got = append(got, f.GetMetric()[0].GetCounter().GetValue())
			}
		}
	}
	require.Equal(t, []float64{9, 9, 12}, got)
}

// Scrapes through an outage log it once a minute, not once a scrape
// (Prometheus scrapes every 15 s, some setups every second), and the
// first complete one says so.
func TestSnapshotOutageLogsOnce(t *testing.T) {
	t.Parallel()
	var mysqlErr error
	var buf bytes.Buffer
	m := metrics.New("test", "n1")
	m.CollectSnapshots(func(context.Context) (*monitor.Snapshot, error) {
		return &monitor.Snapshot{At: time.Now().Add(-time.Hour), MySQLErr: mysqlErr}, nil
	}, slog.New(slog.NewTextHandler(&buf, nil)))
	scrape := func() {
		_, err := m.Registry.Gather()
		require.NoError(t, err)
	}
	mysqlErr = errors.New("MySQL: connection refused")
	for range 5 {
		scrape()
	}
	require.Equal(t, 1, strings.Count(buf.String(), "level=WARN"), buf.String())
	require.Contains(t, buf.String(), "metrics snapshot incomplete")
	mysqlErr = nil
	scrape()
	scrape()
	require.Equal(t, 1, strings.Count(buf.String(), "metrics snapshot complete again"), buf.String())
	require.Contains(t, buf.String(), "failed_passes=5")
}
