package node

import (
	"context"

	"github.com/taskd/taskd/pkg/metrics"
	"github.com/taskd/taskd/pkg/monitor"
)

// observe registers what the node's roles count and the system gauges.
func (n *Node) observe() {
	m := n.Metrics
	m.CounterFunc("taskd_tasks_dispatched_total", "Tasks this process's scheduler claimed and pushed to Redis.", func() float64 {
		if n.Scheduler == nil {
			return 0
		}
		return float64(n.Scheduler.Dispatched())
	})
	m.CounterFunc("taskd_stale_writes_rejected_total", "Messages and results of this process's worker rejected by the attempt fence.", func() float64 {
		if n.Worker == nil {
			return 0
		}
		return float64(n.Worker.Stats().Stale)
	})
	queues := make([]string, 0)
	for q := range n.cfg.WorkerQueues() {
		queues = append(queues, q)
	}
	m.CollectSnapshots(func(ctx context.Context) (*monitor.Snapshot, error) {
		return monitor.Take(ctx, n.Store, n.Broker, queues)
	}, n.log)
}

// serveMetrics starts the metrics listener when metrics.addr is set.
func (n *Node) serveMetrics() error {
	if n.cfg.Metrics.Addr == "" {
		return nil
	}
	srv, err := metrics.Serve(n.cfg.Metrics.Addr, n.Metrics, map[string]metrics.Pinger{"mysql": n.Store, "redis": n.Broker}, n.log)
	if err != nil {
		return err
	}
	n.metricsSrv = srv
	n.log.Info("metrics listening", "addr", srv.Addr())
	return nil
}

// MetricsAddr is the address of the metrics listener ("" when off).
func (n *Node) MetricsAddr() string {
	if n.metricsSrv == nil {
		return ""
	}
	return n.metricsSrv.Addr()
}

func (n *Node) stopMetrics() {
	if n.metricsSrv != nil {
		n.metricsSrv.Close()
		n.metricsSrv = nil
	}
}
