package broker

import (
	"context"
	"encoding/json"
	"fmt"
)

// KillRequest asks the worker running attempt Attempt of task ID to cancel
// it.
type KillRequest struct {
	ID      int64 `json:"id"`
	Attempt int   `json:"attempt"`
}

// Kill publishes kill requests to every worker, pipelined in chunks.
func (b *Broker) Kill(ctx context.Context, rs ...KillRequest) error {
	const chunk = 1000
	for len(rs) > 0 {
		n := min(len(rs), chunk)
		pipe := b.rdb.Pipeline()
		for _, r := range rs[:n] {
			raw, _ := json.Marshal(r)
			pipe.Publish(ctx, b.Keys.Kill(), raw)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("publish kill of task %d: %w", rs[0].ID, err)
		}
		rs = rs[n:]
	}
	return nil
}

// Kills subscribes to kill requests until the returned close function is
// called. Malformed requests are skipped.
func (b *Broker) Kills(ctx context.Context) (<-chan KillRequest, func() error) {
	sub := b.rdb.Subscribe(ctx, b.Keys.Kill())
	out := make(chan KillRequest, 16)
	go func() {
		defer close(out)
		for msg := range sub.Channel() {
			var r KillRequest
			if json.Unmarshal([]byte(msg.Payload), &r) != nil || r.ID <= 0 {
				continue
			}
			out <- r
		}
	}()
	return out, sub.Close
}
