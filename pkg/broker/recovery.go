package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/pkg/task"
)

// Epoch returns when the current Redis data set was first seen by taskd,
// and its age, both on Redis's clock, creating the marker when it is
// missing. created is true when this call created it: Redis was flushed or
// restarted empty since the last call (or this is the first start), so
// nothing that was queued can be trusted to still be there. The age is not
// read off this host's clock: a host 25 s ahead would take the marker of a
// flush 5 s ago for one older than a heartbeat's TTL, and workers that had
// not beaten again yet for dead.
//
// The marker is read before it is created: SETNX is refused at maxmemory
// even when the key exists, and recovery, which frees the lists of dead
// workers, must run on a full Redis too. Creating it runs with allow-oom
// (one small key).
func (b *Broker) Epoch(ctx context.Context) (since time.Time, age time.Duration, created bool, err error) {
	for range 2 {
		pipe := b.rdb.Pipeline()
		get := pipe.Get(ctx, b.Keys.Epoch())
		clock := pipe.Time(ctx)
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return time.Time{}, 0, false, fmt.Errorf("redis epoch: %w", err)
		}
		now := clock.Val()
		if v, err := get.Result(); err == nil {
			ms, _ := strconv.ParseInt(v, 10, 64)
			since := time.UnixMilli(ms)
			return since, now.Sub(since), false, nil
		}
		pipe = b.rdb.Pipeline()
		set := b.write(ctx, pipe, "SET", b.Keys.Epoch(), now.UnixMilli(), "NX")
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return time.Time{}, 0, false, fmt.Errorf("redis epoch: %w", err)
		}
		if set.Err() == nil {
			return time.UnixMilli(now.UnixMilli()), 0, true, nil
		}
		// Another node created it meanwhile: read it again.
	}
	return time.Time{}, 0, false, errors.New("redis epoch: the marker vanished twice while it was created")
}

// DeadWorkers returns registered workers whose heartbeat key is gone and
// whose last beat is older than olderThan.
func (b *Broker) DeadWorkers(ctx context.Context, olderThan time.Duration) ([]string, error) {
	max := strconv.FormatInt(time.Now().Add(-olderThan).UnixMilli(), 10)
	ids, err := b.rdb.ZRangeByScore(ctx, b.Keys.Workers(), &redis.ZRangeBy{Min: "-inf", Max: max, Count: 1000}).Result()
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	alive, err := b.Alive(ctx, ids)
	if err != nil {
		return nil, err
	}
	var dead []string
	for _, id := range ids {
		if !alive[id] {
			dead = append(dead, id)
		}
	}
	return dead, nil
}

// Alive reports which worker ids have a live heartbeat key.
func (b *Broker) Alive(ctx context.Context, ids []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.Exists(ctx, b.Keys.Worker(id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("check heartbeats: %w", err)
	}
	for i, id := range ids {
		out[id] = cmds[i].Val() == 1
	}
	return out, nil
}

// HoldingResults reports which of the workers ids said in their last
// heartbeat that results of theirs wait to be written (ResultsWaitingMS).
func (b *Broker) HoldingResults(ctx context.Context, ids []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.Get(ctx, b.Keys.Worker(id))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read heartbeats: %w", err)
	}
	for i, id := range ids {
		var hb struct {
			ResultsWaitingMS int64 `json:"results_waiting_ms"`
		}
		if raw, err := cmds[i].Bytes(); err == nil && json.Unmarshal(raw, &hb) == nil {
			out[id] = hb.ResultsWaitingMS > 0
		}
	}
	return out, nil
}

// WorkerNode returns the node of worker w as its last heartbeats said ("":
// unknown).
func (b *Broker) WorkerNode(ctx context.Context, w string) string {
	return b.rdb.Get(ctx, b.Keys.WorkerNode(w)).Val()
}

// Orphans returns the messages left in dead worker w's processing lists,
// by queue.
func (b *Broker) Orphans(ctx context.Context, w string) (map[string][]string, error) {
	queues, err := b.rdb.SMembers(ctx, b.Keys.WorkerQueues(w)).Result()
	if err != nil {
		return nil, fmt.Errorf("queues of worker %s: %w", w, err)
	}
	out := map[string][]string{}
	for _, q := range queues {
		raws, err := b.rdb.LRange(ctx, b.Keys.Processing(q, w), 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("processing list of %s on %s: %w", w, q, err)
		}
		if len(raws) > 0 {
			out[q] = raws
		}
	}
	return out, nil
}

// Withdraw deletes worker w's heartbeat, so recovery treats it as dead at
// once instead of after the heartbeat's TTL.
func (b *Broker) Withdraw(ctx context.Context, w string) error {
	if err := b.rdb.Del(ctx, b.Keys.Worker(w)).Err(); err != nil {
		return fmt.Errorf("withdraw heartbeat of %s: %w", w, err)
	}
	return nil
}

// Forget deletes dead worker w's processing lists and registry entries,
// and remembers it among the drained workers (GoneWorkers).
func (b *Broker) Forget(ctx context.Context, w string) error { return b.forget(ctx, w, true) }

// Leave is Forget for a worker that stopped cleanly, its work handed back:
// it is not remembered among the drained (dead) workers, so a deploy does
// not show as a crash.
func (b *Broker) Leave(ctx context.Context, w string) error { return b.forget(ctx, w, false) }

func (b *Broker) forget(ctx context.Context, w string, dead bool) error {
	queues, err := b.rdb.SMembers(ctx, b.Keys.WorkerQueues(w)).Result()
	if err != nil {
		return fmt.Errorf("queues of worker %s: %w", w, err)
	}
	var last float64
	if dead {
		last, err = b.rdb.ZScore(ctx, b.Keys.Workers(), w).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("last beat of worker %s: %w", w, err)
		}
	}
	pipe := b.rdb.Pipeline()
	if last > 0 {
		// At maxmemory too: a member in a set trimmed to GoneKeep, while
		// the DELs below free the worker's lists.
		b.write(ctx, pipe, "ZADD", b.Keys.WorkersGone(), last, w)
		pipe.ZRemRangeByScore(ctx, b.Keys.WorkersGone(), "-inf", "("+strconv.FormatInt(time.Now().Add(-GoneKeep).UnixMilli(), 10))
	}
	for _, q := range queues {
		pipe.Del(ctx, b.Keys.Processing(q, w))
	}
	// One key per DEL: on a Cluster the keys may live in different slots.
	pipe.Del(ctx, b.Keys.WorkerQueues(w))
	pipe.Del(ctx, b.Keys.Worker(w))
	pipe.ZRem(ctx, b.Keys.Workers(), w)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("forget worker %s: %w", w, err)
	}
	return nil
}

// OldestDispatch returns the dispatch time of the oldest message waiting in
// queue q, in any shard of its span and any priority, and false when the
// queue is empty. A dispatched task whose dispatch is older than that
// cannot be waiting in the queue: each list is first in, first out.
func (b *Broker) OldestDispatch(ctx context.Context, q string) (time.Time, bool, error) {
	_, span := b.currentLayout().Shards(q)
	pipe := b.rdb.Pipeline()
	var cmds []*redis.StringCmd
	var keys []string
	for s := range max(span, 1) {
		for p := 0; p <= task.MaxPriority; p++ {
			keys = append(keys, b.Keys.Lane(q, s, p))
			cmds = append(cmds, pipe.LIndex(ctx, keys[len(keys)-1], -1))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return time.Time{}, false, fmt.Errorf("oldest message of %s: %w", q, err)
	}
	var oldest time.Time
	found := false
	for i, c := range cmds {
		raw, err := c.Result()
		if err != nil {
			continue // redis.Nil: an empty list
		}
		t, err := dispatchOf(raw)
		if err != nil {
			// A poison message at the oldest end, which a worker
			// quarantines when it takes it: the messages behind it are
			// still waiting, and the list's age is theirs.
			if t, err = b.oldestDecodable(ctx, keys[i]); err != nil {
				return time.Time{}, false, fmt.Errorf("oldest message of %s: %w", q, err)
			}
		}
		if !found || t.Before(oldest) {
			oldest, found = t, true
		}
	}
	return oldest, found, nil
}

// dispatchOf is the dispatch time of raw message.
func dispatchOf(raw string) (time.Time, error) {
	m, err := task.DecodeMessage([]byte(raw))
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(m.DispatchedUnixMS), nil
}

// oldestScan bounds the messages read past poison ones at a list's oldest
// end.
const oldestScan = 64

// oldestDecodable is the dispatch time of the oldest message of list key
// that decodes, among its oldestScan oldest; the zero time (older than
// every task: none is taken for lost) when none does.
func (b *Broker) oldestDecodable(ctx context.Context, key string) (time.Time, error) {
	raws, err := b.rdb.LRange(ctx, key, -oldestScan, -1).Result()
	if err != nil {
		return time.Time{}, err
	}
	for i := len(raws) - 1; i >= 0; i-- {
		if t, err := dispatchOf(raws[i]); err == nil {
			return t, nil
		}
	}
	return time.Time{}, nil
}

// Attempt names one attempt of a task.
type Attempt struct {
	ID      int64
	Attempt int
}

// TakenAttempts returns the attempts of queue q held in the processing
// lists of the registered workers: taken and not acked yet. Such a task
// may still be dispatched in the task center (its running mark comes
// later, or never for a short attempt) long after its dispatch, when it
// waited in its list for a rate, a max_running or a backlog.
func (b *Broker) TakenAttempts(ctx context.Context, q string) (map[Attempt]bool, error) {
	ws, err := b.rdb.ZRange(ctx, b.Keys.Workers(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	out := map[Attempt]bool{}
	if len(ws) == 0 {
		return out, nil
	}
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, len(ws))
	for i, w := range ws {
		cmds[i] = pipe.LRange(ctx, b.Keys.Processing(q, w), 0, -1)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("processing lists of %s: %w", q, err)
	}
	for _, c := range cmds {
		for _, raw := range c.Val() {
			if m, err := task.DecodeMessage([]byte(raw)); err == nil {
				out[Attempt{ID: m.ID, Attempt: m.Attempt}] = true
			}
		}
	}
	return out, nil
}
