package lock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is the Redis backend. A lock is one string key holding its owner's
// token, with the TTL as the key's expiry:
//
//	{prefix}lock:{NAME}    owner token (hex); PX = TTL
//
// The name is the key's hash tag, so each lock has its slot on Redis
// Cluster.
type Redis struct {
	rdb    redis.UniversalClient
	prefix string
}

// NewRedis returns a Locker on rdb with keys under prefix (the broker's
// prefix, e.g. "task:"). The client should have ContextTimeoutEnabled, as
// the broker's has, so that each call's context deadline bounds it.
func NewRedis(rdb redis.UniversalClient, prefix string) *Redis {
	return &Redis{rdb: rdb, prefix: prefix}
}

// Key is the Redis key of lock name.
func (r *Redis) Key(name string) string { return r.prefix + "lock:{" + name + "}" }

// Acquire implements Locker.
func (r *Redis) Acquire(ctx context.Context, name string, ttl time.Duration) (*Lease, error) {
	return acquire(ctx, r, name, ttl)
}

func (r *Redis) tryAcquire(ctx context.Context, name, token string, ttl time.Duration) (bool, error) {
	err := r.rdb.SetArgs(ctx, r.Key(name), token, redis.SetArgs{Mode: "NX", TTL: ttl}).Err()
	switch err {
	case nil:
		return true, nil
	case redis.Nil: // NX: the key exists
		return false, nil
	default:
		return false, err
	}
}

// renewScript extends a lock its caller still owns.
//
//	KEYS[1] lock key
//	ARGV[1] owner token
//	ARGV[2] TTL in milliseconds
//	returns 1 when renewed, 0 when the key is missing or another owner's
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

func (r *Redis) renew(ctx context.Context, name, token string, ttl time.Duration) (bool, error) {
	n, err := renewScript.Run(ctx, r.rdb, []string{r.Key(name)}, token, ttl.Milliseconds()).Int()
	return n == 1, err
}

// releaseScript deletes a lock its caller still owns.
//
//	KEYS[1] lock key
//	ARGV[1] owner token
//	returns 1 when deleted, 0 when the key is missing or another owner's
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

func (r *Redis) release(ctx context.Context, name, token string) error {
	return releaseScript.Run(ctx, r.rdb, []string{r.Key(name)}, token).Err()
}
