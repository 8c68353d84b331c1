package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/taskd/taskd/pkg/handler"
)

var (
	descPoolSize = prometheus.NewDesc("taskd_pool_size",
		"Processes a pool handler keeps on this node (handlers.CODE.size).", []string{"handler"}, nil)
	descPoolProcesses = prometheus.NewDesc("taskd_pool_processes",
		"Running processes of a pool handler on this node (booting, idle or busy).", []string{"handler"}, nil)
	descPoolBusy = prometheus.NewDesc("taskd_pool_busy_processes",
		"Processes of a pool handler running a task.", []string{"handler"}, nil)
	descPoolCrashLoop = prometheus.NewDesc("taskd_pool_crash_looping",
		"1 while a pool handler's processes keep dying at start (starts backed off), else 0.", []string{"handler"}, nil)
	descPoolStarts = prometheus.NewDesc("taskd_pool_starts_total",
		"Pool process starts, by result: ok (ready line read), failed (could not start, stalled or died before its ready line, or died after it before any task).", []string{"handler", "result"}, nil)
	descPoolEnds = prometheus.NewDesc("taskd_pool_process_ends_total",
		"Pool processes that ended, by reason: max_jobs, max_memory, idle (recycled); exit, protocol, timeout, cancelled (replaced); stop.", []string{"handler", "reason"}, nil)
)

// poolCollector reads the pools' counters at scrape time.
type poolCollector struct{ stats func() []handler.PoolStats }

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPoolSize, descPoolProcesses, descPoolBusy, descPoolCrashLoop, descPoolStarts, descPoolEnds} {
		ch <- d
	}
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	for _, s := range c.stats() {
		gauge(descPoolSize, float64(s.Size), s.Code)
		gauge(descPoolProcesses, float64(s.Processes), s.Code)
		gauge(descPoolBusy, float64(s.Busy), s.Code)
		looping := 0.0
		if s.CrashLooping {
			looping = 1
		}
		gauge(descPoolCrashLoop, looping, s.Code)
		counter(descPoolStarts, float64(s.Starts), s.Code, "ok")
		counter(descPoolStarts, float64(s.FailedStarts), s.Code, "failed")
		for _, reason := range handler.PoolEndReasons() {
			counter(descPoolEnds, float64(s.Ended[reason]), s.Code, reason)
		}
	}
}

// CollectPools registers the pool handlers' metrics, read through stats.
func (m *Metrics) CollectPools(stats func() []handler.PoolStats) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(poolCollector{stats})
}
