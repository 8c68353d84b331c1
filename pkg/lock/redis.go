package lock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is the Redis backend. A lock is a hash with the TTL as the key's
// expiry; the last fencing token of each name outlives its locks:
//
//	{prefix}lock:{NAME}       hash, PX = TTL: owner (random id), token,
//	                          host, pid, since (server time, unix ms)
//	{prefix}lockseq:{NAME}    string, no TTL: the last fencing token of NAME
//
// The name is the keys' hash tag, so both live in one slot on Redis
// Cluster.
type Redis struct {
	rdb    redis.UniversalClient
	prefix string
	// noFlags: the server refused the script flags (before Redis 7), so
	// acquire runs plain.
	noFlags atomic.Bool
}

// NewRedis returns a Locker on rdb with keys under prefix (the broker's
// prefix, e.g. "task:"). The client should have ContextTimeoutEnabled, as
// the broker's has, so that each call's context deadline bounds it.
func NewRedis(rdb redis.UniversalClient, prefix string) *Redis {
	return &Redis{rdb: rdb, prefix: prefix}
}

// Key is the Redis key of lock name.
func (r *Redis) Key(name string) string { return r.prefix + "lock:{" + name + "}" }

// SeqKey is the Redis key holding the last fencing token of name.
func (r *Redis) SeqKey(name string) string { return r.prefix + "lockseq:{" + name + "}" }

// Acquire implements Locker.
func (r *Redis) Acquire(ctx context.Context, name string, ttl time.Duration) (*Lease, error) {
	return acquire(ctx, r, name, ttl)
}

// acquireSrc takes a free lock and draws its fencing token.
//
//	KEYS[1] lock key
//	KEYS[2] sequence key
//	ARGV[1] owner id
//	ARGV[2] TTL in milliseconds
//	ARGV[3] holder host
//	ARGV[4] holder pid
//	returns the fencing token, or 0 when the lock is held
//
// The token is max(last + 1, server time in µs), so it grows even when the
// sequence key was lost. Lua numbers are doubles: exact up to 2^53, which
// microseconds since 1970 stay below until the year 2255.
//
// It runs with allow-oom: a full Redis (maxmemory, noeviction) must not
// stop the singular duties (alerting, retention, cron locks) from moving
// to another node, and a lock costs a few hundred bytes per name, with no
// more names than duties. renewScript (PEXPIRE) and releaseScript (DEL)
// call no command Redis refuses at maxmemory, so they need no flag.
const acquireSrc = `
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local token = math.max((tonumber(redis.call('GET', KEYS[2])) or 0) + 1, now)
local s = string.format('%.0f', token)
redis.call('SET', KEYS[2], s)
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', s, 'host', ARGV[3], 'pid', ARGV[4],
  'since', string.format('%.0f', math.floor(now / 1000)))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return token
`

var (
	acquireScript      = redis.NewScript("#!lua flags=allow-oom\n" + acquireSrc)
	acquirePlainScript = redis.NewScript(acquireSrc)
)

func (r *Redis) tryAcquire(ctx context.Context, name, owner string, ttl time.Duration, h holder) (uint64, bool, error) {
	keys := []string{r.Key(name), r.SeqKey(name)}
	args := []any{owner, ttl.Milliseconds(), h.host, h.pid}
	if !r.noFlags.Load() {
		token, err := acquireScript.Run(ctx, r.rdb, keys, args...).Int64()
		if err == nil || !refusesFlags(err) {
			return uint64(token), err == nil && token > 0, err
		}
		r.noFlags.Store(true)
	}
	token, err := acquirePlainScript.Run(ctx, r.rdb, keys, args...).Int64()
	if err != nil {
		return 0, false, err
	}
	return uint64(token), token > 0, nil
}

// refusesFlags reports whether err is a server before Redis 7 reading the
// flags line as Lua.
func refusesFlags(err error) bool {
	return strings.Contains(err.Error(), "Error compiling script")
}

// renewScript extends a lock its caller still owns, while more than late
// is left of it (see backend.renew). A key of another type (a string lock
// of an older taskd) is another owner's.
//
//	KEYS[1] lock key
//	ARGV[1] owner id
//	ARGV[2] TTL in milliseconds
//	ARGV[3] late in milliseconds
//	returns 1 when renewed, 0 when the key is missing or another owner's,
//	-1 when it is the caller's but came too late
var renewScript = redis.NewScript(`
if redis.call('TYPE', KEYS[1]).ok == 'hash' and redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then
  if redis.call('PTTL', KEYS[1]) <= tonumber(ARGV[3]) then
    return -1
  end
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

func (r *Redis) renew(ctx context.Context, name, owner string, ttl, late time.Duration) (bool, error) {
	n, err := renewScript.Run(ctx, r.rdb, []string{r.Key(name)}, owner, ttl.Milliseconds(), late.Milliseconds()).Int()
	if err == nil && n == -1 {
		return false, errTooLate
	}
	return n == 1, err
}

// releaseScript deletes a lock its caller still owns; the sequence key
// stays.
//
//	KEYS[1] lock key
//	ARGV[1] owner id
//	returns 1 when deleted, 0 when the key is missing or another owner's
var releaseScript = redis.NewScript(`
if redis.call('TYPE', KEYS[1]).ok == 'hash' and redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

func (r *Redis) release(ctx context.Context, name, owner string) error {
	return releaseScript.Run(ctx, r.rdb, []string{r.Key(name)}, owner).Err()
}

// List implements Lister: SCAN on every master, then each lock's fields and
// TTL. A lock that expires between the two is left out.
func (r *Redis) List(ctx context.Context) ([]Held, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	var (
		mu   sync.Mutex // ForEachMaster scans the masters at once
		keys []string
	)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var found []string
		iter := c.Scan(ctx, 0, globEscape(r.prefix)+"lock:{*}", 1000).Iterator()
		for iter.Next(ctx) {
			found = append(found, iter.Val())
		}
		mu.Lock()
		keys = append(keys, found...)
		mu.Unlock()
		return iter.Err()
	}
	var err error
	if cc, ok := r.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, r.rdb)
	}
	if err != nil {
		return nil, fmt.Errorf("list locks: %w", err)
	}
	type reply struct {
		fields *redis.MapStringStringCmd
		ttl    *redis.DurationCmd
	}
	replies := make([]reply, len(keys))
	pipe := r.rdb.Pipeline()
	for i, k := range keys {
		replies[i] = reply{pipe.HGetAll(ctx, k), pipe.PTTL(ctx, k)}
	}
	if len(keys) > 0 {
		// A string lock of an older taskd answers HGETALL with WRONGTYPE.
		if _, err := pipe.Exec(ctx); err != nil && !isWrongType(err) {
			return nil, fmt.Errorf("list locks: %w", err)
		}
	}
	out := make([]Held, 0, len(keys))
	for i, k := range keys {
		ttl := replies[i].ttl.Val()
		if replies[i].ttl.Err() != nil || ttl <= 0 {
			continue // expired meanwhile
		}
		f := replies[i].fields.Val() // empty for an older taskd's lock
		pid, _ := strconv.Atoi(f["pid"])
		token, _ := strconv.ParseUint(f["token"], 10, 64)
		h := Held{
			Name:    strings.TrimSuffix(strings.TrimPrefix(k, r.prefix+"lock:{"), "}"),
			Backend: "redis", Host: f["host"], PID: pid, TTLLeft: ttl, Token: token,
		}
		if ms, err := strconv.ParseInt(f["since"], 10, 64); err == nil {
			h.Since = time.UnixMilli(ms)
		}
		out = append(out, h)
	}
	return out, nil
}

func isWrongType(err error) bool { return strings.HasPrefix(err.Error(), "WRONGTYPE") }

// globEscape quotes the glob characters of s for SCAN MATCH.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}
