package tui

import (
	"context"
	"fmt"
	"os"
	"strconv"
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
	for from := 1; from <= n; from += 100000 {
		to := min(n, from+99999)
		env.Exec(b, fmt.Sprintf(`INSERT INTO task_center (task_code, payload, status, plan_next_run_at, attempt, worker_id, finished_at, last_result)
			SELECT CONCAT('code', seq %% 20), '{"n":1}',
				CASE WHEN seq %% 200 = 0 THEN 5 WHEN seq %% 200 = 1 THEN 4 WHEN seq %% 200 = 2 THEN 0
				     WHEN seq %% 5000 = 3 THEN 2 ELSE 3 END,
				NOW(3) + INTERVAL (seq %% 200 IN (1, 2)) HOUR, 1, IF(seq %% 5000 = 3, CONCAT('w', seq %% 200), ''),
				IF(seq %% 200 > 2, NOW(3) - INTERVAL (seq %% 3600) SECOND, NULL), 'ok'
			FROM seq_%d_to_%d`, from, to))
	}
	env.Exec(b, `INSERT INTO task_run (task_id, attempt, task_code, queue, worker_id, finished_at, outcome)
		SELECT seq, 1, CONCAT('code', seq % 20), CONCAT('code', seq % 20), CONCAT('w', seq % 200),
			NOW(3) - INTERVAL (seq % 1800) SECOND, IF(seq % 50 = 0, 'failed', 'succeeded') FROM seq_1_to_60000`)
	for i := range 200 {
		id := "w" + strconv.Itoa(i)
		hb := &broker.Heartbeat{ID: id, Host: "host", PID: i, Queues: []string{"code" + strconv.Itoa(i%20)}}
		if err := env.Broker.BeatCounts(ctx, hb, time.Hour, time.Now(), broker.Counts{Processed: 10}); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("filled %d tasks in %s", n, time.Since(start).Round(time.Second))
	l := &Loader{Store: env.Store, Broker: env.Broker, Alerts: BrokerAlerts(env.Broker)}
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
