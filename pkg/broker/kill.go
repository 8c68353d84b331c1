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

// Kill publishes a kill request to every worker and returns how many
// processes received it.
func (b *Broker) Kill(ctx context.Context, r KillRequest) (int64, error) {
	raw, _ := json.Marshal(r)
	n, err := b.rdb.Publish(ctx, b.Keys.Kill(), raw).Result()
	if err != nil {
		return 0, fmt.Errorf("publish kill of task %d: %w", r.ID, err)
	}
	return n, nil
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
