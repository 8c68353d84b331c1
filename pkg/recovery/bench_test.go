package recovery_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/taskd/taskd/pkg/recovery"
	"github.com/taskd/taskd/pkg/testenv"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// BenchmarkFleetCrash: the whole fleet died with 50,000 tasks running and
// 50,000 dispatched; one pass recovers them all, in transactions of at most
// 500 rows.
//
//	go test -run NONE -bench FleetCrash -benchtime 1x ./pkg/recovery/
func BenchmarkFleetCrash(b *testing.B) {
	env := testenv.New(b)
	ctx := context.Background()
	r := recovery.New(recovery.Config{DispatchWindow: time.Second, HeartbeatTTL: time.Second, Logger: quiet}, env.Store, env.Broker)
	for range b.N {
		b.StopTimer()
		env.Exec(b, `DELETE FROM task_center`)
		env.Exec(b, `INSERT INTO task_center (task_code, payload, status, attempt, worker_id, dispatched_at, started_at)
			SELECT 'x', '{}', IF(seq % 2 = 0, 2, 1), 1, 'dead-worker', NOW(3) - INTERVAL 1 MINUTE, NOW(3) - INTERVAL 1 MINUTE
			FROM seq_1_to_100000`)
		ms := time.Now().Add(-time.Hour).UnixMilli()
		env.Broker.Client().Set(ctx, env.Broker.Keys.Epoch(), ms, 0)
		b.StartTimer()
		res, err := r.RunOnce(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if res.Recovered+res.Redispatched != 100000 {
			b.Fatalf("recovered %+v", res)
		}
	}
	b.ReportMetric(float64(100000*b.N)/b.Elapsed().Seconds(), "tasks/s")
}
