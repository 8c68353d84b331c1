package metrics

import "github.com/prometheus/client_golang/prometheus"

// Label values of taskd_tasks_dispatched_total{source}.
const (
	SourceScheduler = "scheduler"
	SourceSubmit    = "submit"
)

// Label values of taskd_submit_push_failures_total{kind}.
const (
	PushHandedBack     = "handed_back"
	PushLeftToRecovery = "left_to_recovery"
)

var (
	descDispatched = prometheus.NewDesc("taskd_tasks_dispatched_total",
		"Tasks this process pushed to Redis, by source: scheduler (claimed by its scheduler), submit (inserted dispatched by a submit made in this process, through the Go API or producer.Client).",
		[]string{"source"}, nil)
	descPushFailures = prometheus.NewDesc("taskd_submit_push_failures_total",
		"Tasks inserted dispatched by a submit made in this process whose push to Redis failed, by kind: handed_back (back to pending; a scheduler dispatches the next attempt), left_to_recovery (the hand-back failed too; recovery re-dispatches it after recovery.dispatch_window).",
		[]string{"kind"}, nil)
)

// Dispatches are the counts behind taskd_tasks_dispatched_total and
// taskd_submit_push_failures_total.
type Dispatches struct {
	Scheduler, Submit          int64
	HandedBack, LeftToRecovery int64
}

// dispatchCollector reads the dispatch counts at scrape time: the
// scheduler and the submits keep them already, so the hot path pays
// nothing more.
type dispatchCollector struct{ read func() Dispatches }

func (c dispatchCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descDispatched
	ch <- descPushFailures
}

func (c dispatchCollector) Collect(ch chan<- prometheus.Metric) {
	d := c.read()
	counter := func(desc *prometheus.Desc, v int64, label string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), label)
	}
	counter(descDispatched, d.Scheduler, SourceScheduler)
	counter(descDispatched, d.Submit, SourceSubmit)
	counter(descPushFailures, d.HandedBack, PushHandedBack)
	counter(descPushFailures, d.LeftToRecovery, PushLeftToRecovery)
}

// CollectDispatches registers the dispatch counters, read through read.
// Every series exists from the start, at 0.
func (m *Metrics) CollectDispatches(read func() Dispatches) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(dispatchCollector{read})
}
