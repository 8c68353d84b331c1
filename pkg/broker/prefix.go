package broker

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// DeletePrefix deletes every key under the broker's prefix: SCAN, not KEYS,
// so a large Redis is not blocked, on every master of a cluster, and one
// DEL per key so no command crosses hash slots. For tests and benchmarks
// that own a prefix; the daemon never calls it.
func (b *Broker) DeletePrefix(ctx context.Context) error {
	del := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, b.Keys.Prefix+"*", 1000).Iterator()
		pipe := b.rdb.Pipeline()
		for iter.Next(ctx) {
			pipe.Del(ctx, iter.Val())
			if pipe.Len() == 1000 {
				if _, err := pipe.Exec(ctx); err != nil {
					return err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	var err error
	if cc, ok := b.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return del(ctx, c) })
	} else {
		err = del(ctx, b.rdb)
	}
	if err != nil {
		return fmt.Errorf("delete keys under %s: %w", b.Keys.Prefix, err)
	}
	return nil
}
