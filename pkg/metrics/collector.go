package metrics

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/taskd/taskd/pkg/monitor"
	"github.com/taskd/taskd/pkg/startstop"
)

// snapshotTimeout bounds a snapshot: a few round trips to MySQL and to
// Redis, on links that may be slow, well within Prometheus's default
// scrape timeout (10s): a server that hangs then gives a scrape that says
// taskd_monitor_up 0 (taskd_monitor_down), not a scrape that fails.
const snapshotTimeout = 8 * time.Second

// upHelp is taskd_monitor_up's help, also served while a node starts.
const upHelp = "1 when the last snapshot of MySQL and Redis succeeded, 0 otherwise: while only MySQL fails the gauges read from Redis " +
	"(messages, consumers, pauses, workers, processes, Redis memory) are still served, the others are missing."

// snapshotMaxAge bounds the queries scrapes cause: scrapers arriving
// within it share one snapshot.
const snapshotMaxAge = 2 * time.Second

var (
	descSubmitted = prometheus.NewDesc("taskd_tasks_submitted_total",
		"Tasks submitted to the task center by any producer (its highest task id); the same on every node.", nil, nil)
	descQueueTasks = prometheus.NewDesc("taskd_queue_tasks",
		"Unfinished tasks per queue and state (pending, failed, dispatched, running).", []string{"queue", "state"}, nil)
	descBacklog = prometheus.NewDesc("taskd_queue_backlog_tasks",
		"Tasks of the queue that are due and not dispatched yet (pending or failed).", []string{"queue"}, nil)
	descMessages = prometheus.NewDesc("taskd_queue_messages",
		"Messages waiting in the queue's Redis lists, per shard.", []string{"queue", "shard"}, nil)
	descOldest = prometheus.NewDesc("taskd_queue_oldest_due_seconds",
		"How long the queue's longest-waiting due task has been due (database clock).", []string{"queue"}, nil)
	descConsumers = prometheus.NewDesc("taskd_queue_consumers",
		"Live workers consuming the queue.", []string{"queue"}, nil)
	descPaused = prometheus.NewDesc("taskd_queue_paused",
		"1 while the queue is paused (nothing of it starts), else 0.", []string{"queue"}, nil)
	descDead = prometheus.NewDesc("taskd_queue_dead_tasks",
		"Tasks of the queue whose retries are exhausted, waiting for an operator (status dead).", []string{"queue"}, nil)
	descBusy = prometheus.NewDesc("taskd_worker_busy_slots",
		"Slots of a live worker running a task.", []string{"worker", "node"}, nil)
	descSlots = prometheus.NewDesc("taskd_worker_slots",
		"Slots of a live worker.", []string{"worker", "node"}, nil)
	descUnwritten = prometheus.NewDesc("taskd_worker_results_waiting_seconds",
		"How long the oldest result of a live worker has waited to be written (0: none waits). Results are batched for milliseconds; 10 s or more, the task center refuses them or does not answer, and the worker takes no new work.", []string{"worker", "node"}, nil)
	descBeatAge = prometheus.NewDesc("taskd_worker_heartbeat_age_seconds",
		"Time since the worker's last heartbeat; dead workers stay until recovery drains them.", []string{"worker"}, nil)
	descProcAge = prometheus.NewDesc("taskd_process_heartbeat_age_seconds",
		"Time since a taskd process's last heartbeat; a process that exits cleanly is removed.", []string{"process", "node", "host"}, nil)
	descProcStart = prometheus.NewDesc("taskd_process_start_time_seconds",
		"When a taskd process started: a process of a host that started after another's last heartbeat replaced it.", []string{"process", "node", "host"}, nil)
	descLastHeal = prometheus.NewDesc("taskd_watchdog_last_heal_timestamp_seconds",
		"When the watchdog last healed the worker (slot abandoned, alive but idle, exit), for workers healed in the last hour; read from {prefix}events, so it outlives the process.", []string{"worker", "node"}, nil)
	descRedisUsed = prometheus.NewDesc("taskd_redis_memory_used_bytes",
		"Memory Redis uses (used_memory; on a Cluster, the master closest to its limit).", nil, nil)
	descRedisMax = prometheus.NewDesc("taskd_redis_memory_max_bytes",
		"Redis's maxmemory (0: no limit); at it, Redis refuses new messages and the backlog waits in the task center.", nil, nil)
	descUp = prometheus.NewDesc("taskd_monitor_up", upHelp, nil, nil)
)

// SnapshotFunc takes a snapshot of the system.
type SnapshotFunc func(ctx context.Context) (*monitor.Snapshot, error)

// snapshotCollector turns snapshots into gauges at scrape time.
type snapshotCollector struct {
	take SnapshotFunc
	// fails logs the scrapes that lack figures once a minute, not once
	// a scrape: Prometheus scrapes every few seconds through an outage.
	fails *startstop.FailLog

	mu   sync.Mutex
	last *monitor.Snapshot
	// submitted is the highest task id served: the counter never goes
	// down when the newest task is deleted (or a failover loses the last
	// rows), which Prometheus would read as a reset, rate() as a spike of
	// every task ever submitted.
	submitted int64
}

// CollectSnapshots registers the system gauges, read through take.
func (m *Metrics) CollectSnapshots(take SnapshotFunc, log *slog.Logger) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(&snapshotCollector{take: take, fails: &startstop.FailLog{Log: log, Level: slog.LevelWarn,
		Failed: "metrics snapshot incomplete: the gauges it lacks are left out", Again: "metrics snapshot complete again"}})
}

func (c *snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSubmitted, descQueueTasks, descBacklog, descMessages, descOldest,
		descConsumers, descPaused, descDead, descBusy, descSlots, descUnwritten, descBeatAge, descProcAge, descProcStart, descLastHeal,
		descRedisUsed, descRedisMax, descUp} {
		ch <- d
	}
}

func (c *snapshotCollector) snapshot() (*monitor.Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil && time.Since(c.last.At) < snapshotMaxAge {
		return c.last, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), snapshotTimeout)
	defer cancel()
	s, err := c.take(ctx)
	if err != nil {
		return nil, err
	}
	if s.MySQLErr == nil {
		c.submitted = max(c.submitted, s.MaxTaskID)
		s.MaxTaskID = c.submitted
	}
	c.last = s
	return s, nil
}

func (c *snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	s, err := c.snapshot()
	if err != nil {
		c.fails.Fail(err)
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0)
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	// Without the task center its figures are missing, not zero: a
	// dashboard must not read an outage as empty queues.
	counts := s.MySQLErr == nil
	if counts {
		c.fails.OK()
		gauge(descUp, 1)
		ch <- prometheus.MustNewConstMetric(descSubmitted, prometheus.CounterValue, float64(s.MaxTaskID))
	} else {
		c.fails.Fail(s.MySQLErr)
		gauge(descUp, 0)
	}
	if s.Redis != nil {
		gauge(descRedisUsed, float64(s.Redis.Used))
		gauge(descRedisMax, float64(s.Redis.Max))
	}
	for _, name := range s.QueueNames() {
		q := s.Queues[name]
		if counts {
			gauge(descQueueTasks, float64(q.Pending), name, "pending")
			gauge(descQueueTasks, float64(q.Failed), name, "failed")
			gauge(descQueueTasks, float64(q.Dispatched), name, "dispatched")
			gauge(descQueueTasks, float64(q.Running), name, "running")
			gauge(descBacklog, float64(q.Due), name)
			gauge(descOldest, q.OldestDue.Seconds(), name)
			gauge(descDead, float64(q.Dead), name)
		}
		for shard, n := range q.Shards {
			gauge(descMessages, float64(n), name, strconv.Itoa(shard))
		}
		gauge(descConsumers, float64(q.Consumers), name)
		gauge(descPaused, bool01(q.Paused), name)
	}
	for _, w := range s.Workers {
		gauge(descBeatAge, s.At.Sub(w.LastBeat).Seconds(), w.ID)
		if w.Alive() {
			gauge(descBusy, float64(w.Heartbeat.Busy), w.ID, w.Heartbeat.Node)
			gauge(descSlots, float64(w.Heartbeat.Capacity), w.ID, w.Heartbeat.Node)
			gauge(descUnwritten, float64(w.Heartbeat.ResultsWaitingMS)/1000, w.ID, w.Heartbeat.Node)
		}
	}
	for _, p := range s.Processes {
		gauge(descProcAge, s.At.Sub(p.LastBeat).Seconds(), p.ID, p.Node, p.Hostname())
		gauge(descProcStart, float64(p.StartedAt.UnixMilli())/1000, p.ID, p.Node, p.Hostname())
	}
	healed := map[string]bool{}
	for _, e := range s.Events { // newest first
		if !IsHeal(e.Kind) {
			continue
		}
		if !healed[e.WorkerID] {
			healed[e.WorkerID] = true
			gauge(descLastHeal, float64(e.At.UnixMilli())/1000, e.WorkerID, e.Node)
		}
	}
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
