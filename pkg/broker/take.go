package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// takeScript moves messages of one or more queues into their processing
// lists. Each queue's lanes are taken in KEYS order, oldest first; within
// a priority the shards share what is left round robin. Nothing to take
// anywhere costs one EXISTS, an empty queue one more, so a worker can ask
// every queue it consumes at once.
//
//	KEYS for each queue: its lanes (priority-major, span shards each), then
//	     its processing list
//	ARGV[1] number of queues; then for each queue: number of lanes, maximum
//	     number of messages, span
//	returns for each queue the messages moved
var takeScript = newScript(luaTakeLanes + `
local nq = tonumber(ARGV[1])
local lanes = {}
local k = 1
for q = 1, nq do
  local nl = tonumber(ARGV[2 + 3 * (q - 1)])
  for j = 0, nl - 1 do lanes[#lanes + 1] = KEYS[k + j] end
  k = k + nl + 1
end
local out = {}
for q = 1, nq do out[q] = {} end
if not exists(lanes, 1, #lanes) then return out end
k = 1
for q = 1, nq do
  local a = 2 + 3 * (q - 1)
  local nl, max, span = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local got = out[q]
  if nq == 1 or exists(KEYS, k, k + nl - 1) then
    takeLanes(k, nl, span, max, got)
    if #got > 0 then redis.call('LPUSH', KEYS[k + nl], unpack(got)) end
  end
  k = k + nl + 1
end
return out
`)

// luaTakeLanes defines exists(keys, from, to), whether any of keys[from
// .. to] exists, and takeLanes(k, nl, span, max, got), which pops up to
// max messages into got from KEYS[k .. k+nl-1], a queue's lanes: in KEYS
// order, oldest first, and within a priority the span shards sharing what
// is left round robin.
const luaTakeLanes = `
local function exists(keys, from, to)
  for i = from, to, 2000 do
    if redis.call('EXISTS', unpack(keys, i, math.min(to, i + 1999))) > 0 then return true end
  end
  return false
end
local function takeLanes(k, nl, span, max, got)
  for base = k, k + nl - 1, span do
    if #got >= max then break end
    if span == 1 or exists(KEYS, base, base + span - 1) then
      local live, left = {}, span
      for s = 1, span do live[s] = true end
      while left > 0 and #got < max do
        local share = math.max(1, math.floor((max - #got) / left))
        for s = 1, span do
          if live[s] and #got < max then
            local n = math.min(share, max - #got)
            local m = redis.call('RPOP', KEYS[base + s - 1], n)
            if m then
              for i = 1, #m do got[#got + 1] = m[i] end
            end
            if not m or #m < n then live[s] = false; left = left - 1 end
          end
        end
      end
    end
  end
end
`

// TakeRequest asks for up to Max messages of Queue.
type TakeRequest struct {
	Queue string
	Max   int
	// LeaseTTL is how long the leases of a queue with a max_running last
	// unless renewed (RenewLeases): the worker's heartbeat TTL, so that
	// the capacity of a worker that died comes back with its heartbeat.
	LeaseTTL time.Duration
}

// Taken is what one TakeRequest got.
type Taken struct {
	Msgs []string
	// Leases hold, for a queue with a limit taken whole (rate, max
	// running), one lease per message in Msgs order: release each when
	// its attempt has ended (ReleaseLeases), renew them while it runs.
	Leases []string
	// By names the limit that held messages back ("rate", "max_running",
	// "" none), and Retry says when a take may get more: a rate's next
	// token, a lease's expiry (a released lease wakes the queue sooner).
	By    string
	Retry time.Duration
}

// takeKeys are the keys of a take of q by worker w: its lanes in
// consumption order, then w's processing list.
func (b *Broker) takeKeys(q, w string, l Layout) ([]string, int) {
	_, span := l.Shards(q)
	span = max(span, 1)
	return append(b.lanes(q, span), b.Keys.Processing(q, w)), span
}

// TakeMany moves messages of several queues into worker w's processing
// lists in one round trip, and returns what each request got (nothing for
// a request that failed). Paused queues give nothing. On one server (or
// Sentinel) one script call serves every queue; on a Cluster, where a
// script's keys share a slot, one call per queue goes in one pipeline. A
// queue limited as a whole takes through its limiter, one call of its own
// (takeLimitedScript). The error is the first that a call met.
func (b *Broker) TakeMany(ctx context.Context, w string, reqs []TakeRequest) ([]Taken, error) {
	l := b.currentLayout()
	out := make([]Taken, len(reqs))
	type call struct {
		reqs    []int // indexes into reqs
		keys    []string
		args    []any
		limited bool
	}
	var calls []call
	shared := -1 // the call every unlimited queue joins on one server
	for i, r := range reqs {
		if r.Max <= 0 || l.Paused(r.Queue) {
			continue
		}
		keys, span := b.takeKeys(r.Queue, w, l)
		if lim := limitOf(l, r.Queue); lim.AtTake() {
			calls = append(calls, call{reqs: []int{i}, limited: true,
				keys: append(keys, b.Keys.Limit(r.Queue), b.Keys.Leases(r.Queue), b.Keys.Limited(r.Queue)),
				args: limitedTakeArgs(len(keys)-1, r, span, lim, b.limitNow)})
			continue
		}
		if shared < 0 || b.Keys.NotifyTag != "" {
			calls = append(calls, call{args: []any{0}})
			shared = len(calls) - 1
		}
		c := &calls[shared]
		c.reqs = append(c.reqs, i)
		c.keys = append(c.keys, keys...)
		c.args = append(c.args, len(keys)-1, r.Max, span)
		c.args[0] = len(c.reqs)
	}
	run := func(calls []call, load bool) ([]call, error) {
		pipe := b.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(calls))
		for j, c := range calls {
			s := b.pick(takeScript)
			if c.limited {
				s = b.pick(takeLimitedScript)
			}
			if load {
				cmds[j] = s.Eval(ctx, pipe, c.keys, c.args...)
			} else {
				cmds[j] = s.EvalSha(ctx, pipe, c.keys, c.args...)
			}
		}
		pipe.Exec(ctx) // errors are read per command
		var noScript []call
		var first error
		for j, c := range calls {
			res, err := cmds[j].Slice()
			if err == nil && !c.limited && len(res) != len(c.reqs) {
				err = fmt.Errorf("take script returned %d lists for %d queues", len(res), len(c.reqs))
			}
			if err == nil && c.limited {
				out[c.reqs[0]], err = readLimitedTake(res)
			}
			switch {
			case err == nil && !c.limited:
				for k, i := range c.reqs {
					out[i] = Taken{Msgs: toStrings(res[k])}
				}
			case err == nil:
			case !load && redis.HasErrorPrefix(err, "NOSCRIPT"):
				noScript = append(noScript, c)
			case first == nil:
				first = fmt.Errorf("take from %s: %w", reqs[c.reqs[0]].Queue, err)
			}
		}
		return noScript, first
	}
	retry, err := run(calls, false)
	if len(retry) > 0 {
		_, err2 := run(retry, true)
		err = orErr(err, err2)
	}
	return out, err
}

// toStrings reads a script's list of messages.
func toStrings(v any) []string {
	vs, _ := v.([]any)
	out := make([]string, 0, len(vs))
	for _, x := range vs {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Take moves up to max messages of q into worker w's processing list. With
// nothing to take it blocks up to wait on the queue's wake tokens, then
// tries once more; while q is paused it takes nothing and waits for a
// change of state (at most wait).
func (b *Broker) Take(ctx context.Context, q, w string, max int, wait time.Duration) ([]string, error) {
	l := b.currentLayout()
	if l.Paused(q) {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-l.Changed():
		case <-t.C:
		}
		return nil, nil
	}
	take := func() ([]string, error) {
		got, err := b.TakeMany(ctx, w, []TakeRequest{{Queue: q, Max: max}})
		return got[0].Msgs, err
	}
	got, err := take()
	if err != nil || len(got) > 0 || wait <= 0 {
		return got, err
	}
	if err := b.rdb.BLPop(ctx, wait, b.Keys.Notify(q)).Err(); err != nil {
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		return nil, fmt.Errorf("wait on %s: %w", q, err)
	}
	return take()
}

// WaitNotify blocks up to wait on the wake tokens of queues and on worker
// w's own wake list, on one connection. It returns the queue whose token
// it took, or "" when the wait timed out or w was woken (Interrupt).
func (b *Broker) WaitNotify(ctx context.Context, w string, queues []string, wait time.Duration) (string, error) {
	keys := make([]string, 0, len(queues)+1)
	for _, q := range queues {
		keys = append(keys, b.Keys.Notify(q))
	}
	keys = append(keys, b.Keys.WorkerWake(w))
	kv, err := b.rdb.BLPop(ctx, wait, keys...).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("wait on %d queues: %w", len(queues), err)
	}
	for _, q := range queues {
		if kv[0] == b.Keys.Notify(q) {
			return q, nil
		}
	}
	return "", nil
}

// Interrupt ends worker w's WaitNotify at once, so it waits again on a new
// set of queues.
func (b *Broker) Interrupt(ctx context.Context, w string) error {
	pipe := b.rdb.Pipeline()
	b.write(ctx, pipe, "LPUSH", b.Keys.WorkerWake(w), "1") // expires: bounded
	pipe.Expire(ctx, b.Keys.WorkerWake(w), time.Minute)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("wake worker %s: %w", w, err)
	}
	return nil
}
