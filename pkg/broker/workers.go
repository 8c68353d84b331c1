package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// LiveWorker is a worker whose heartbeat key exists.
type LiveWorker struct {
	Heartbeat
	LastBeat time.Time // by the worker's clock, from the registry
}

// LiveWorkers returns the workers with a live heartbeat.
func (b *Broker) LiveWorkers(ctx context.Context) ([]LiveWorker, error) {
	zs, err := b.rdb.ZRangeWithScores(ctx, b.Keys.Workers(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	if len(zs) == 0 {
		return nil, nil
	}
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(zs))
	for i, z := range zs {
		cmds[i] = pipe.Get(ctx, b.Keys.Worker(fmt.Sprint(z.Member)))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read heartbeats: %w", err)
	}
	var out []LiveWorker
	for i, z := range zs {
		raw, err := cmds[i].Bytes()
		if err != nil {
			continue // no heartbeat: dead, left for recovery
		}
		var w LiveWorker
		if json.Unmarshal(raw, &w.Heartbeat) != nil {
			continue
		}
		w.LastBeat = time.UnixMilli(int64(z.Score))
		out = append(out, w)
	}
	return out, nil
}
