package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// The Redis half of the hot path, for benchstat:
//
//	go test -run NONE -bench . ./pkg/broker/

func messages(n int) []*task.Message {
	msgs := make([]*task.Message, n)
	for i := range msgs {
		msgs[i] = &task.Message{ID: int64(i + 1), Attempt: 1, Code: "noop", Queue: "noop", Priority: 5,
			Payload: []byte(`{"n":1}`), DispatchedUnixMS: time.Now().UnixMilli()}
	}
	return msgs
}

// BenchmarkPush: one scheduler batch of 500 messages per pipeline.
func BenchmarkPush(b *testing.B) {
	env := testenv.New(b)
	ctx := context.Background()
	msgs := messages(500)
	b.ResetTimer()
	for done := 0; done < b.N; done += len(msgs) {
		if failed, err := env.Broker.Push(ctx, msgs[:min(len(msgs), b.N-done)]); err != nil || len(failed) > 0 {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkTakeAck: a worker taking up to 256 messages per round trip into
// its processing list, then acknowledging them.
func BenchmarkTakeAck(b *testing.B) {
	env := testenv.New(b)
	ctx := context.Background()
	msgs := messages(1000)
	for done := 0; done < b.N; done += len(msgs) {
		if _, err := env.Broker.Push(ctx, msgs[:min(len(msgs), b.N-done)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for done := 0; done < b.N; {
		raws, err := env.Broker.Take(ctx, "noop", "w1", 256, time.Second)
		if err != nil || len(raws) == 0 {
			b.Fatalf("take after %d: %v", done, err)
		}
		if err := env.Broker.Ack(ctx, "w1", map[string][]string{"noop": raws}); err != nil {
			b.Fatal(err)
		}
		done += len(raws)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
