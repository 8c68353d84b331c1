// Package metrics is taskd's Prometheus instrumentation and its HTTP
// endpoint (/metrics, /livez, /readyz).
//
// Counters and histograms are this process's own: the worker adds to them
// once per written batch of results, so the hot path pays a few atomic adds
// per batch and one histogram observation per task. Gauges (queue depth,
// backlog age, heartbeat age) describe the whole system: they are read from
// a snapshot of the task center and Redis at scrape time, cached briefly,
// so every node reports the same values (aggregate them with max, not sum).
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/taskd/taskd/pkg/task"
)

// Metrics holds the process's collectors. A nil *Metrics is valid and
// records nothing, so components take one unconditionally.
type Metrics struct {
	Registry *prometheus.Registry

	completed *prometheus.CounterVec
	retried   prometheus.Counter
	recovered *prometheus.CounterVec
	heals     *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	latency   *prometheus.HistogramVec
}

// latencyBuckets spans a fast dispatch (ms) to a backlog of minutes.
var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// durationBuckets spans no-op handlers to hour-long reports.
var durationBuckets = []float64{.001, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600}

// Label values of taskd_watchdog_heals_total{kind}: the watchdog's actions.
const (
	HealAbandoned = "slot_abandoned"
	HealIdle      = "idle"
	HealExit      = "exit"
)

// IsHeal reports whether an event of kind is the watchdog healing a
// worker (the events list holds recovery's, the locks' and others too).
func IsHeal(kind string) bool { return kind == HealAbandoned || kind == HealIdle || kind == HealExit }

// Label values of taskd_tasks_recovered_total{kind}.
var recoveryKinds = []string{"redispatched", "running", "orphan", "watchdog"}

// resultsWritten are the outcomes a worker writes (crashed attempts are
// written by recovery).
var resultsWritten = []task.Outcome{task.OutcomeSucceeded, task.OutcomeFailed, task.OutcomeDead,
	task.OutcomeTimeout, task.OutcomeCancelled, task.OutcomeInterrupted}

// New returns metrics registered on a new registry, with the Go runtime's
// and the process's collectors and taskd_build_info, which names the
// process's node (the label dashboards join per-process series on).
func New(version, node string) *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		completed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taskd_tasks_completed_total",
			Help: "Attempts whose result was written to the task center, by result (succeeded, failed, dead, timeout, cancelled, interrupted).",
		}, []string{"queue", "result"}),
		retried: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "taskd_tasks_retried_total",
			Help: "Failed attempts that scheduled a retry (task back to status 4).",
		}),
		recovered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taskd_tasks_recovered_total",
			Help: "Tasks put back by recovery or the watchdog, by kind: redispatched (message lost), running (worker dead or hung), orphan (taken by a worker that died before marking it running: a crash), watchdog (slot abandoned).",
		}, []string{"kind"}),
		heals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "taskd_watchdog_heals_total",
			Help: "Watchdog actions, by kind: slot_abandoned, idle, exit.",
		}, []string{"kind"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "taskd_task_duration_seconds", Help: "Handler run time of written attempts.", Buckets: durationBuckets,
		}, []string{"queue"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "taskd_task_start_delay_seconds", Help: "Time from a task's due time to its start on a worker (database clock).", Buckets: latencyBuckets,
		}, []string{"queue"}),
	}
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "taskd_build_info", Help: "Always 1; the version of this taskd and its node id.",
		ConstLabels: prometheus.Labels{"version": version, "node": node},
	})
	build.Set(1)
	r.MustRegister(m.completed, m.retried, m.recovered, m.heals, m.duration, m.latency, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, k := range recoveryKinds {
		m.recovered.WithLabelValues(k)
	}
	for _, k := range []string{HealAbandoned, HealIdle, HealExit} {
		m.heals.WithLabelValues(k)
	}
	return m
}

// Prepare creates the series of the queues this process works at zero:
// rate() and increase() need a sample before the first increment, so a
// series born at 1 would hide a queue's first failure.
func (m *Metrics) Prepare(queues []string) {
	if m == nil {
		return
	}
	for _, q := range queues {
		for _, o := range resultsWritten {
			m.completed.WithLabelValues(q, string(o))
		}
		m.duration.WithLabelValues(q)
		m.latency.WithLabelValues(q)
	}
}

// Result is one written attempt.
type Result struct {
	Queue    string
	Outcome  task.Outcome
	Retry    bool // a retry was scheduled
	Duration time.Duration
}

// Completed records a written batch of results.
func (m *Metrics) Completed(rs []Result) {
	if m == nil || len(rs) == 0 {
		return
	}
	type key struct {
		q string
		o task.Outcome
	}
	counts := map[key]int{}
	retries := 0
	for _, r := range rs {
		counts[key{r.Queue, r.Outcome}]++
		if r.Retry {
			retries++
		}
		m.duration.WithLabelValues(r.Queue).Observe(r.Duration.Seconds())
	}
	for k, n := range counts {
		m.completed.WithLabelValues(k.q, string(k.o)).Add(float64(n))
	}
	m.retried.Add(float64(retries))
}

// Started records the delay between a task's due time and its start.
func (m *Metrics) Started(queue string, delay time.Duration) {
	if m == nil {
		return
	}
	m.latency.WithLabelValues(queue).Observe(max(0, delay.Seconds()))
}

// Recovered records n tasks put back by kind.
func (m *Metrics) Recovered(kind string, n int) {
	if m == nil || n == 0 {
		return
	}
	m.recovered.WithLabelValues(kind).Add(float64(n))
}

// Heal records a watchdog action.
func (m *Metrics) Heal(kind string) {
	if m == nil {
		return
	}
	m.heals.WithLabelValues(kind).Inc()
}

// CounterFunc registers a counter whose value is read from f at scrape
// time: counts a component already keeps (tasks dispatched, stale writes)
// cost nothing more on the hot path.
func (m *Metrics) CounterFunc(name, help string, f func() float64) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f))
}

// GaugeFunc registers a gauge read from f at scrape time.
func (m *Metrics) GaugeFunc(name, help string, f func() float64) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}
