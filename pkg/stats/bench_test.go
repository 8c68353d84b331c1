package stats_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/stats"
	"github.com/taskd/taskd/pkg/testenv"
)

// BenchmarkCollect measures one stats.Collect on a large task center:
// STATS_BENCH_TASKS tasks (default 1,000,000; 97% succeeded, the rest
// pending in the future, failed, dead or running, over 20 queues), 60,000
// runs in the last ten minutes, 200 workers with heartbeats and per-minute
// counters. It reports the median of the calls. Filling takes a minute.
//
//	go test -run NONE -bench Collect -benchtime 50x ./pkg/stats/
func BenchmarkCollect(b *testing.B) {
	n := 1000000
	if v, err := strconv.Atoi(os.Getenv("STATS_BENCH_TASKS")); err == nil && v > 0 {
		n = v
	}
	env := testenv.New(b)
	ctx := context.Background()
	start := time.Now()
	env.FillLarge(b, n, 10*time.Minute)
	now := time.Now()
	for i := range 200 {
		id := "w" + strconv.Itoa(i)
		hb := &broker.Heartbeat{ID: id, Host: "host", PID: i, Queues: []string{"code" + strconv.Itoa(i%20)}}
		for m := range 11 {
			if err := env.Broker.BeatCounts(ctx, hb, time.Hour, now.Add(-time.Duration(m)*time.Minute), broker.Counts{Processed: 30}); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The queues' per-minute counters, as the completers write them.
	for q := range 20 {
		key := env.Prefix + "qstats:{code" + strconv.Itoa(q) + "}"
		for m := range 11 {
			minute := strconv.FormatInt(now.Unix()/60-int64(m), 10)
			if err := env.Broker.Client().HSet(ctx, key, minute+":s", 294, minute+":f", 6).Err(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Logf("filled %d tasks in %s", n, time.Since(start).Round(time.Second))
	src := stats.Source{Store: env.Store, Broker: env.Broker}
	var took []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := stats.Collect(ctx, src); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "median-ms")
}
