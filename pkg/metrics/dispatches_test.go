package metrics_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/metrics"
)

// Each count is its own series, read at scrape time.
func TestDispatches(t *testing.T) {
	t.Parallel()
	m := metrics.New("test", "n1")
	d := metrics.Dispatches{Scheduler: 7, Submit: 5, HandedBack: 2, LeftToRecovery: 1}
	m.CollectDispatches(func() metrics.Dispatches { return d })
	got := map[string]float64{}
	read := func() {
		fams, err := m.Registry.Gather()
		require.NoError(t, err)
		for _, f := range fams {
			for _, s := range f.GetMetric() {
				for _, l := range s.GetLabel() {
					got[f.GetName()+"{"+l.GetName()+"="+l.GetValue()+"}"] = s.GetCounter().GetValue()
				}
			}
		}
	}
	read()
	want := map[string]float64{
		"taskd_tasks_dispatched_total{source=scheduler}":          7,
		"taskd_tasks_dispatched_total{source=submit}":             5,
		"taskd_submit_push_failures_total{kind=handed_back}":      2,
		"taskd_submit_push_failures_total{kind=left_to_recovery}": 1,
	}
	for k, v := range want {
		require.Equal(t, v, got[k], k)
	}
	d.Submit = 6
	read()
	require.Equal(t, 6.0, got["taskd_tasks_dispatched_total{source=submit}"], "read again at each scrape")
}
