package broker

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/pkg/limit"
)

// A queue limited as a whole (limit.Limit.AtTake: a rate, a max_running)
// is taken through one limiter in Redis, shared by every worker of the
// cluster and kept in the queue's hash tag:
//
//	{prefix}limit:{Q}     the rate's GCRA: the theoretical arrival time of
//	                      the next task (ms, Redis clock); expires when idle
//	{prefix}leases:{Q}    sorted set of the leases of running attempts,
//	                      scored by expiry (ms); a worker's heartbeat renews
//	                      its own, so a dead worker's expire with it
//	{prefix}limited:{Q}   hash: since (ms), by (rate, max_running), until
//	                      (ms), while the limit holds messages back
//
// A message over the limit is simply not taken: it waits in its list, is
// not failed or retried, and holds back no other queue. The limiter's
// clock is Redis's (TIME), one clock for every node.

// Limit is queue q's GCRA state.
func (k Keys) Limit(q string) string { return k.Prefix + "limit:{" + q + "}" }

// Leases is queue q's set of running attempts' leases.
func (k Keys) Leases(q string) string { return k.Prefix + "leases:{" + q + "}" }

// Limited is queue q's limited state.
func (k Keys) Limited(q string) string { return k.Prefix + "limited:{" + q + "}" }

// limitOf is queue q's limit in layout l (none when l keeps no limits).
func limitOf(l Layout, q string) limit.Limit {
	if lm, ok := l.(interface{ Limit(string) limit.Limit }); ok {
		return lm.Limit(q)
	}
	return limit.Limit{}
}

// takeLimitedScript takes messages of one queue through its limiter: at
// most what the rate's GCRA allows now (burst tokens after a quiet spell)
// and what max_running leaves free, counting the leases not expired. Each
// message taken gets a lease. While the limit holds messages back it
// keeps the queue's limited state.
//
//	KEYS  the queue's lanes (see takeScript), its processing list, its
//	      GCRA, leases and limited keys
//	ARGV  number of lanes, maximum, span, token interval (ms, 0: no rate),
//	      burst, max running (0: none), lease TTL (ms), now (ms; 0: TIME)
//	returns {retry ms (0: not limited), limit that held back ("rate",
//	      "max_running", ""), then a lease and a message for each taken}
var takeLimitedScript = newScript(luaTakeLanes + `
local nl, max, span = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local T, burst, cap, ttl = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local now = tonumber(ARGV[8])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local proc, gk, lk, sk = KEYS[nl + 1], KEYS[nl + 2], KEYS[nl + 3], KEYS[nl + 4]
if not exists(KEYS, 1, nl) then
  redis.call('DEL', sk)
  return {0, ''}
end
local allow, by = max, ''
local tat = now
if T > 0 then
  tat = math.max(now, tonumber(redis.call('GET', gk) or '0'))
  local avail = math.floor(burst - (tat - now) / T + 1e-6)
  if avail < allow then allow, by = math.max(avail, 0), 'rate' end
end
if cap > 0 then
  redis.call('ZREMRANGEBYSCORE', lk, '-inf', now)
  local free = cap - redis.call('ZCARD', lk)
  if free <= 0 or free < allow then allow, by = math.max(free, 0), 'max_running' end
end
local got = {}
if allow > 0 then takeLanes(1, nl, span, allow, got) end
local out = {0, ''}
if #got > 0 then
  redis.call('LPUSH', proc, unpack(got))
  if T > 0 then
    tat = tat + #got * T
    redis.call('SET', gk, tostring(tat), 'PX', math.ceil(tat - now) + 1000)
  end
  for i = 1, #got do
    local lease = redis.sha1hex(got[i]) .. ':' .. now .. ':' .. i
    if cap > 0 then redis.call('ZADD', lk, now + ttl, lease) end
    out[#out + 1] = lease
    out[#out + 1] = got[i]
  end
end
if by ~= '' and #got == allow and exists(KEYS, 1, nl) then
  local retry
  if by == 'rate' then
    retry = math.max(1, math.ceil(tat - (burst - 1) * T - now))
  else
    local first = redis.call('ZRANGE', lk, 0, 0, 'WITHSCORES')
    retry = math.max(1, math.ceil((tonumber(first[2]) or (now + ttl)) - now))
  end
  redis.call('HSETNX', sk, 'since', now)
  redis.call('HSET', sk, 'by', by, 'until', now + retry)
  redis.call('PEXPIRE', sk, retry + 60000)
  out[1], out[2] = retry, by
else
  redis.call('DEL', sk)
end
return out
`)

// limitedTakeArgs are the ARGV of takeLimitedScript for request r of a
// queue with nl lanes in span shards under l. now, when set, stands in
// for Redis's clock (tests).
func limitedTakeArgs(nl int, r TakeRequest, span int, l limit.Limit, now func() time.Time) []any {
	interval := 0.0
	if !l.Rate.IsZero() {
		interval = float64(l.Rate.Interval()) / float64(time.Millisecond)
	}
	var at int64
	if now != nil {
		at = now().UnixMilli()
	}
	ttl := max(r.LeaseTTL, time.Second)
	return []any{nl, r.Max, span, strconv.FormatFloat(interval, 'f', -1, 64), l.EffectiveBurst(), l.MaxRunning, ttl.Milliseconds(), at}
}

// readLimitedTake reads takeLimitedScript's reply.
func readLimitedTake(res []any) (Taken, error) {
	if len(res) < 2 || len(res)%2 != 0 {
		return Taken{}, fmt.Errorf("limited take returned %d values", len(res))
	}
	retry, _ := res[0].(int64)
	by, _ := res[1].(string)
	t := Taken{Msgs: make([]string, 0, (len(res)-2)/2), By: by, Retry: time.Duration(retry) * time.Millisecond}
	for i := 2; i+1 < len(res); i += 2 {
		lease, _ := res[i].(string)
		msg, _ := res[i+1].(string)
		t.Leases = append(t.Leases, lease)
		t.Msgs = append(t.Msgs, msg)
	}
	return t, nil
}

// ReleaseLeases gives back the leases of attempts that ended, per queue,
// and wakes a worker waiting for the capacity they held.
func (b *Broker) ReleaseLeases(ctx context.Context, leases map[string][]string) error {
	if len(leases) == 0 {
		return nil
	}
	pipe := b.rdb.Pipeline()
	for q, ls := range leases {
		if len(ls) == 0 {
			continue
		}
		args := make([]any, len(ls))
		for i, l := range ls {
			args[i] = l
		}
		pipe.ZRem(ctx, b.Keys.Leases(q), args...)
		b.notify(ctx, pipe, q, len(ls))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("release leases: %w", err)
	}
	return nil
}

// RenewLeases extends the leases of attempts still running, per queue, to
// ttl from now (Redis's clock). A lease it does not find (Redis restarted
// empty, or the lease expired while this worker could not reach Redis) is
// added back: the attempt still runs, and max_running counts what runs.
// Left out, the limit let as many more run as were already running. The
// caller keeps a release from landing between its read of the running
// attempts and this write, which would bring the released lease back.
func (b *Broker) RenewLeases(ctx context.Context, leases map[string][]string, ttl time.Duration) error {
	if len(leases) == 0 {
		return nil
	}
	pipe := b.rdb.Pipeline()
	for q, ls := range leases {
		if len(ls) == 0 {
			continue
		}
		args := make([]any, 0, len(ls)+1)
		args = append(args, ttl.Milliseconds())
		for _, l := range ls {
			args = append(args, l)
		}
		// EVAL: a pipelined EVALSHA cannot fall back on NOSCRIPT.
		b.pick(renewLeasesScript).Eval(ctx, pipe, []string{b.Keys.Leases(q)}, args...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("renew leases: %w", err)
	}
	return nil
}

// renewLeasesScript sets the expiry of leases to ttl from now, adding
// those that are missing.
//
//	KEYS[1] the queue's leases
//	ARGV[1] ttl (ms), then the leases
var renewLeasesScript = newScript(`
local t = redis.call('TIME')
local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], at, ARGV[i]) end
return 0
`)

// Limited is a queue whose limit holds messages back.
type Limited struct {
	// Since is when it started holding them back (Redis's clock), By the
	// limit ("rate", "max_running"), Until when it lets one go at the
	// latest.
	Since, Until time.Time
	By           string
	// Running is the number of leases held (max_running); Groups the
	// number of groups waiting for room (by group).
	Running, Groups int64
}

// Under reports whether the state can come from limit lim: a state left
// by a limit removed since (it lapses within a minute) is not.
func (l Limited) Under(lim limit.Limit) bool {
	switch l.By {
	case "rate":
		return lim.AtTake() && !lim.Rate.IsZero()
	case "max_running":
		return lim.AtTake() && lim.MaxRunning > 0
	case "group":
		return lim.Grouped()
	}
	return false
}

// LimitedQueues reads the limited state of queues, in one pipeline: only
// the queues held back now are in the result.
func (b *Broker) LimitedQueues(ctx context.Context, queues []string) (map[string]Limited, error) {
	pipe := b.rdb.Pipeline()
	states := make([]*redis.MapStringStringCmd, len(queues))
	groups := make([]*redis.MapStringStringCmd, len(queues))
	running := make([]*redis.IntCmd, len(queues))
	for i, q := range queues {
		states[i] = pipe.HGetAll(ctx, b.Keys.Limited(q))
		groups[i] = pipe.HGetAll(ctx, b.Keys.GroupsFull(q))
		running[i] = pipe.ZCard(ctx, b.Keys.Leases(q))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("read limited queues: %w", err)
	}
	out := map[string]Limited{}
	for i, q := range queues {
		m, g := states[i].Val(), groups[i].Val()
		if len(m) == 0 && len(g) == 0 {
			continue
		}
		l := Limited{Running: running[i].Val()}
		if len(g) > 0 {
			since, _ := strconv.ParseInt(g["since"], 10, 64)
			l.Groups, _ = strconv.ParseInt(g["groups"], 10, 64)
			l.By, l.Since = "group", time.UnixMilli(since)
		}
		if len(m) > 0 { // the queue's own limit comes first
			since, _ := strconv.ParseInt(m["since"], 10, 64)
			until, _ := strconv.ParseInt(m["until"], 10, 64)
			l.By, l.Since, l.Until = m["by"], time.UnixMilli(since), time.UnixMilli(until)
		}
		out[q] = l
	}
	return out, nil
}

// A grouped queue's per-group rate is asked at claim time by the
// schedulers, from one GCRA per group:
//
//	{prefix}group-rate:{Q}     hash: group -> theoretical arrival time (ms)
//	{prefix}groups-full:{Q}    hash: since (ms), groups (how many are at
//	                           their limit), while some are

// GroupRate is queue q's per-group GCRA state.
func (k Keys) GroupRate(q string) string { return k.Prefix + "group-rate:{" + q + "}" }

// GroupsFull is queue q's state of groups at their limit.
func (k Keys) GroupsFull(q string) string { return k.Prefix + "groups-full:{" + q + "}" }

// groupRateScript grants, per group, what its GCRA allows of what is
// wanted now, and counts it spent.
//
//	KEYS[1] the queue's group-rate hash
//	ARGV    token interval (ms), burst, now (ms; 0: TIME), then pairs of
//	        group and number wanted
//	returns the number granted per pair
var groupRateScript = newScript(`
local T, burst, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local out, far = {}, now
for i = 4, #ARGV, 2 do
  local g, want = ARGV[i], tonumber(ARGV[i + 1])
  local tat = math.max(now, tonumber(redis.call('HGET', KEYS[1], g) or '0'))
  local n = math.max(0, math.min(want, math.floor(burst - (tat - now) / T + 1e-6)))
  if n > 0 then
    tat = tat + n * T
    redis.call('HSET', KEYS[1], g, tostring(tat))
    far = math.max(far, tat)
  end
  out[#out + 1] = n
end
if far > now and redis.call('PTTL', KEYS[1]) < far - now + 1000 then
  redis.call('PEXPIRE', KEYS[1], math.ceil(far - now) + 1000)
end
return out
`)

// GroupRate grants, per group of queue q, what the per-group rate r with
// burst allows now of want, and counts it spent.
func (b *Broker) GroupRate(ctx context.Context, q string, r limit.Rate, burst int, want map[string]int) (map[string]int, error) {
	if len(want) == 0 {
		return map[string]int{}, nil
	}
	var now int64
	if b.limitNow != nil {
		now = b.limitNow().UnixMilli()
	}
	groups := make([]string, 0, len(want))
	args := []any{strconv.FormatFloat(float64(r.Interval())/float64(time.Millisecond), 'f', -1, 64), burst, now}
	for g, n := range want {
		groups = append(groups, g)
		args = append(args, g, n)
	}
	res, err := b.run(ctx, b.rdb, groupRateScript, []string{b.Keys.GroupRate(q)}, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("per-group rate of %s: %w", q, err)
	}
	out := make(map[string]int, len(groups))
	for i, g := range groups {
		if i < len(res) {
			out[g] = int(res[i])
		}
	}
	return out, nil
}

// SetGroupsFull records how many groups of queue q are at their limit
// (0: none, which clears the state). The state lapses after a minute
// unless a scheduler records it again.
func (b *Broker) SetGroupsFull(ctx context.Context, q string, full int) error {
	var err error
	if full <= 0 {
		err = b.rdb.Del(ctx, b.Keys.GroupsFull(q)).Err()
	} else {
		err = b.run(ctx, b.rdb, groupsFullScript, []string{b.Keys.GroupsFull(q)}, full).Err()
	}
	if err != nil {
		return fmt.Errorf("record the groups of %s at their limit: %w", q, err)
	}
	return nil
}

// groupsFullScript sets a queue's groups-full state, keeping its start.
//
//	KEYS[1] the state, ARGV[1] the number of groups at their limit
var groupsFullScript = newScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSETNX', KEYS[1], 'since', now)
redis.call('HSET', KEYS[1], 'groups', ARGV[1])
redis.call('PEXPIRE', KEYS[1], 60000)
return 0
`)
