package node

import (
	"context"
	"fmt"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/metrics"
	"github.com/taskd/taskd/pkg/monitor"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/watchdog"
)

// observe registers what the node's roles count and the system gauges.
func (n *Node) observe() {
	m := n.Metrics
	// The submits are the whole process's: a Go program that embeds a
	// node and submits through the Go API has them counted here.
	m.CollectDispatches(func() metrics.Dispatches {
		c := producer.ProcessCounts()
		d := metrics.Dispatches{Submit: c.Dispatched, HandedBack: c.HandedBack, LeftToRecovery: c.LeftToRecovery}
		if n.Scheduler != nil {
			d.Scheduler = n.Scheduler.Dispatched()
		}
		return d
	})
	m.CounterFunc("taskd_stale_writes_rejected_total", "Messages and results of this process's worker rejected by the attempt fence.", func() float64 {
		if n.Worker == nil {
			return 0
		}
		return float64(n.Worker.Stats().Stale)
	})
	m.CollectPools(func() []handler.PoolStats {
		out := make([]handler.PoolStats, len(n.Pools))
		for i, p := range n.Pools {
			out[i] = p.Stats()
		}
		return out
	})
	queues := make([]string, 0)
	for q := range n.cfg.WorkerQueues() {
		queues = append(queues, q)
	}
	if n.Worker != nil {
		m.Prepare(queues)
	}
	m.CollectSnapshots(func(ctx context.Context) (*monitor.Snapshot, error) {
		return monitor.TakePartial(ctx, n.Store, n.Broker, queues)
	}, n.log)
}

// serveMetrics starts the metrics listener when metrics.addr is set.
func (n *Node) serveMetrics() error {
	if n.cfg.Metrics.Addr == "" {
		return nil
	}
	srv, err := metrics.Serve(n.cfg.Metrics.Addr, n.Metrics, map[string]metrics.Pinger{"mysql": n.Store, "redis": redisReady{n.Broker, n.cfg.Alerts.RedisMemoryThreshold}}, n.log)
	if err != nil {
		return err
	}
	n.metricsSrv = srv
	n.log.Info("metrics listening", "addr", srv.Addr())
	return nil
}

// redisReady is Redis as /readyz checks it: it answers, and it uses less
// of its maxmemory than the threshold of the Redis memory alert (at the
// limit it refuses new messages).
type redisReady struct {
	b         *broker.Broker
	threshold float64 // negative: memory not checked
}

func (r redisReady) Ping(ctx context.Context) error {
	if err := r.b.Ping(ctx); err != nil {
		return err
	}
	if r.threshold < 0 {
		return nil
	}
	m, err := r.b.Memory(ctx)
	if err == nil && m.Max > 0 && m.Ratio() >= r.threshold {
		return fmt.Errorf("%.0f%% of maxmemory used (%d of %d bytes; threshold %g%%): at the limit new messages are refused and due tasks wait in the task center",
			100*m.Ratio(), m.Used, m.Max, 100*r.threshold)
	}
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

// ExitError asks `taskd run` to exit with Code: the watchdog gave up on
// this process.
type ExitError struct {
	Code   int
	Reason string
}

func (e *ExitError) Error() string { return "watchdog: " + e.Reason }

// Fatal yields at most one error after which the process must exit
// (an *ExitError).
func (n *Node) Fatal() <-chan error { return n.fatal }

// newWatchdog builds the watchdog of the node's worker.
func (n *Node) newWatchdog() *watchdog.Watchdog {
	c := n.cfg
	return watchdog.New(watchdog.Config{
		Interval: c.Watchdog.Interval, IdleWindow: c.Watchdog.IdleWindow, Grace: c.Watchdog.Grace,
		CrashLimit: c.Recovery.CrashLimit, DefaultTimezone: c.Cron.Timezone, Node: c.Node.ID,
		Logger: n.log, Metrics: n.Metrics,
		Exit: func(code int, reason string) {
			select {
			case n.fatal <- &ExitError{Code: code, Reason: reason}:
			default:
			}
		},
	}, n.Worker, n.Store, n.Broker)
}
