package tui

import (
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/stats"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// BenchmarkRefresh measures what one tasktop refresh reads on a large
// task center: TASKTOP_BENCH_TASKS tasks (default 1,000,000; 97% finished,
// the rest pending in the future, failed, dead or running, over 20 codes),
// 60,000 runs in the last 30 minutes and 200 workers with heartbeats.
// Filling it takes a minute or two.
//
//	go test -run NONE -bench Refresh -benchtime 20x ./tui/
func BenchmarkRefresh(b *testing.B) {
	n := 1000000
	if v, err := strconv.Atoi(os.Getenv("TASKTOP_BENCH_TASKS")); err == nil && v > 0 {
		n = v
	}
	env := testenv.New(b)
	ctx := context.Background()
	start := time.Now()
	env.FillLarge(b, n, 30*time.Minute)
	for i := range 200 {
		id := "w" + strconv.Itoa(i)
		hb := &broker.Heartbeat{ID: id, Host: "host", PID: i, Queues: []string{"code" + strconv.Itoa(i%20)}}
		if err := env.Broker.BeatCounts(ctx, hb, time.Hour, time.Now(), broker.Counts{Processed: 10}); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("filled %d tasks in %s", n, time.Since(start).Round(time.Second))
	l := &Loader{Store: env.Store, Broker: env.Broker, Alerts: StoredAlerts(env.Store)}
	dead := task.Dead
	var mid int64
	if err := env.Store.DB().QueryRowContext(ctx, `SELECT id FROM task_center ORDER BY id LIMIT 1 OFFSET ?`, n/2).Scan(&mid); err != nil {
		b.Fatal(err)
	}
	src := stats.Source{Store: env.Store, Broker: env.Broker}
	b.ResetTimer()
	for _, c := range []struct {
		name string
		fn   func() error
	}{
		{"overview", func() error { _, err := l.Overview(ctx); return err }},
		// The parts of the overview.
		{"overview_stats", func() error { _, err := stats.Collect(ctx, src); return err }},
		{"overview_series_2min", func() error { _, err := env.Store.RunSeries(ctx, time.Now().Unix()/60-1); return err }},
		{"overview_workers", func() error { _, err := env.Broker.Workers(ctx, SeriesMinutes); return err }},
		{"tasks_page", func() error { _, err := l.Tasks(ctx, TaskQuery{Limit: 37}); return err }},
		{"tasks_page_deep", func() error { _, err := l.Tasks(ctx, TaskQuery{Limit: 37, BeforeID: mid}); return err }},
		{"tasks_dead", func() error { _, err := l.Tasks(ctx, TaskQuery{Status: &dead, Limit: 37}); return err }},
		{"tasks_code", func() error { _, err := l.Tasks(ctx, TaskQuery{Code: "code7", Limit: 37}); return err }},
		{"tasks_dead_code", func() error {
			_, err := l.Tasks(ctx, TaskQuery{Status: &dead, Code: "code7", Limit: 37})
			return err
		}},
		{"detail", func() error { _, _, err := l.Task(ctx, mid); return err }},
		// A search reads rows until a page is full; a common word fills
		// it at once, a rare one scans.
		{"tasks_search_common", func() error { _, err := l.Tasks(ctx, TaskQuery{Search: "code1", Limit: 37}); return err }},
		{"tasks_search_none", func() error { _, err := l.Tasks(ctx, TaskQuery{Search: "no such text", Limit: 37}); return err }},
		// The count of an all-matching selection (bounded at
		// store.TaskCountMax rows read).
		{"count_dead", func() error { _, err := l.Count(ctx, TaskQuery{Status: &dead}); return err }},
		{"count_code", func() error { _, err := l.Count(ctx, TaskQuery{Code: "code7"}); return err }},
		{"count_search_none", func() error { _, err := l.Count(ctx, TaskQuery{Search: "no such text"}); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// countedSource counts the overviews that reach the Loader.
type countedSource struct {
	Source
	n atomic.Int64
}

func (c *countedSource) Overview(ctx context.Context) (*Overview, error) {
	c.n.Add(1)
	return c.Source.Overview(ctx)
}

// BenchmarkTenSessions measures one refresh round of ten tasktop serve
// sessions at once (each reads the overview) on a task center of
// TASKTOP_BENCH_TASKS tasks (default 100,000): each session reading the
// Loader itself, through Shared with only overlapping reads joined
// (MaxAge 0), and through Shared as tasktop serve uses it. loads/round is
// how many overviews reached the task center and Redis.
//
//	go test -run NONE -bench TenSessions -benchtime 50x ./tui/
func BenchmarkTenSessions(b *testing.B) {
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("TASKTOP_BENCH_TASKS")); err == nil && v > 0 {
		n = v
	}
	env := testenv.New(b)
	env.FillLarge(b, n, 30*time.Minute)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		src  func(Source) Source
	}{
		{"direct", func(s Source) Source { return s }},
		{"shared_joined_only", func(s Source) Source { sh := NewShared(s); sh.MaxAge = 0; return sh }},
		{"shared", func(s Source) Source { return NewShared(s) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			counted := &countedSource{Source: &Loader{Store: env.Store, Broker: env.Broker, Alerts: StoredAlerts(env.Store)}}
			src := c.src(counted)
			rounds := 0
			for b.Loop() {
				var wg sync.WaitGroup
				for range 10 {
					wg.Go(func() {
						if _, err := src.Overview(ctx); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
				rounds++
			}
			b.ReportMetric(float64(counted.n.Load())/float64(rounds), "loads/round")
		})
	}
}

// BenchmarkFit measures laying out the workers table of 300 workers at 80
// columns, each column as wide as its widest cell: what every refresh and
// key press of that view costs.
//
//	go test -run NONE -bench Fit ./tui/
func BenchmarkFit(b *testing.B) {
	rows := make([]row, 300)
	for i := range rows {
		rows[i].cells = []string{"web-" + strconv.Itoa(i%7) + "-12345-a1b2c3d4", "node-" + strconv.Itoa(i%7), "web-" + strconv.Itoa(i%7),
			"12345", "mail,reports", "2.0s", "120", "ok", "#" + strconv.Itoa(100000+i) + " send_email", "1.5s"}
	}
	for b.Loop() {
		fit(workerColumns, rows, 80, nil)
	}
}
