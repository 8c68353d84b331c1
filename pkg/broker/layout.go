package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/pkg/task"
)

// A queue's messages live in shards, and each shard in priority lanes:
//
//	{prefix}queue:{Q}              shard 0, priority 5 (the default): the whole
//	                               queue while it has one shard and one priority
//	{prefix}queue:{Q}:N            shard N > 0, priority 5
//	{prefix}queue:{Q}[:N]:pP       shard N, priority P != 5
//	{prefix}notify:{Q}             list of wake tokens: a push adds some, a
//	                               worker with nothing to take blocks on it
//	{prefix}queues                 pub/sub channel: a queue's state changed
//
// Workers take lanes in priority order (0 first), and within a lane the
// shards round robin from a rotating start, so no shard starves another
// and a priority-0 message never waits behind a backlog of lower ones.

// Lane is the list of queue q's shard holding messages of priority prio.
func (k Keys) Lane(q string, shard, prio int) string {
	if prio == task.DefaultPriority {
		return k.Queue(q, shard)
	}
	return k.Queue(q, shard) + ":p" + strconv.Itoa(prio)
}

// Notify is queue q's list of wake tokens.
func (k Keys) Notify(q string) string {
	if k.NotifyTag != "" {
		return k.Prefix + "notify:{" + k.NotifyTag + "}:q:" + q
	}
	return k.Prefix + "notify:{" + q + "}"
}

// QueuesChannel is where a change of queue state is announced.
func (k Keys) QueuesChannel() string { return k.Prefix + "queues" }

// Layout is the state of queues the broker follows (pkg/queues keeps it in
// step with the task center).
type Layout interface {
	// Shards returns the number of shards new messages go to, and the
	// number of shards workers consume (span >= shards).
	Shards(q string) (shards, span int)
	// Paused reports whether nothing of q may be started.
	Paused(q string) bool
	// Changed is closed at the next change of any queue's state.
	Changed() <-chan struct{}
}

// single is the layout of a broker that follows none: one shard, never
// paused.
type single struct{}

func (single) Shards(string) (int, int) { return 1, 1 }
func (single) Paused(string) bool       { return false }
func (single) Changed() <-chan struct{} { return nil }
func (b *Broker) currentLayout() Layout {
	if l := b.layout.Load(); l != nil {
		return *l
	}
	return single{}
}

// layoutHolder is embedded in Broker.
type layoutHolder struct {
	layout atomic.Pointer[Layout]
	rotate atomic.Uint64
}

// SetLayout makes the broker follow l (nil: one shard, never paused).
func (b *Broker) SetLayout(l Layout) {
	if l == nil {
		b.layout.Store(nil)
		return
	}
	b.layout.Store(&l)
}

// Layout returns the layout the broker follows.
func (b *Broker) Layout() Layout { return b.currentLayout() }

// notifyTokens bounds the wake tokens one push adds and a queue keeps.
const notifyTokens = 64

// laneOf is the list m goes to: its priority's lane of a shard chosen by
// task id, which spreads a batch evenly.
func (b *Broker) laneOf(m *task.Message, l Layout) string {
	shards, _ := l.Shards(m.Queue)
	shard := 0
	if shards > 1 {
		shard = int(uint64(m.ID) % uint64(shards))
	}
	prio := min(max(m.Priority, 0), task.MaxPriority)
	return b.Keys.Lane(m.Queue, shard, prio)
}

// notify adds wake tokens for n new messages of q to pipe.
func (b *Broker) notify(ctx context.Context, pipe redis.Pipeliner, q string, n int) {
	tokens := make([]any, min(n, notifyTokens))
	for i := range tokens {
		tokens[i] = "1"
	}
	// Run at maxmemory too (a few bytes, trimmed): a released lease's
	// token is what wakes the workers waiting for its capacity.
	b.write(ctx, pipe, "LPUSH", b.Keys.Notify(q), tokens...)
	pipe.LTrim(ctx, b.Keys.Notify(q), 0, notifyTokens-1)
}

// lanes lists queue q's lists in consumption order: priority 0 first, and
// in each priority the span shards from a rotating start.
func (b *Broker) lanes(q string, span int) []string {
	start := int(b.rotate.Add(1) % uint64(span))
	keys := make([]string, 0, (task.MaxPriority+1)*span)
	for p := 0; p <= task.MaxPriority; p++ {
		for i := range span {
			keys = append(keys, b.Keys.Lane(q, (start+i)%span, p))
		}
	}
	return keys
}

// QueueBacklog returns the number of queued messages of q in each shard
// of its span (all priorities).
func (b *Broker) QueueBacklog(ctx context.Context, q string, span int) ([]int64, error) {
	pipe := b.rdb.Pipeline()
	cmds := b.lengths(ctx, pipe, q, span)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("backlog of %s: %w", q, err)
	}
	out := make([]int64, len(cmds))
	for s, cs := range cmds {
		for _, c := range cs {
			out[s] += c.Val()
		}
	}
	return out, nil
}

// lengths queues on pipe the LLEN of every lane of q's span shards, by
// shard.
func (b *Broker) lengths(ctx context.Context, pipe redis.Pipeliner, q string, span int) [][]*redis.IntCmd {
	cmds := make([][]*redis.IntCmd, max(span, 1))
	for s := range cmds {
		for p := 0; p <= task.MaxPriority; p++ {
			cmds[s] = append(cmds[s], pipe.LLen(ctx, b.Keys.Lane(q, s, p)))
		}
	}
	return cmds
}

// QueueLens returns the number of queued messages of each of queues, over
// the shards of its span and its priorities, in one pipeline.
func (b *Broker) QueueLens(ctx context.Context, queues []string) (map[string]int64, error) {
	out := make(map[string]int64, len(queues))
	if len(queues) == 0 {
		return out, nil
	}
	l := b.currentLayout()
	pipe := b.rdb.Pipeline()
	cmds := make([][][]*redis.IntCmd, len(queues))
	for i, q := range queues {
		_, span := l.Shards(q)
		cmds[i] = b.lengths(ctx, pipe, q, span)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("length of %d queues: %w", len(queues), err)
	}
	for i, q := range queues {
		for _, cs := range cmds[i] {
			for _, c := range cs {
				out[q] += c.Val()
			}
		}
	}
	return out, nil
}

// NudgeQueues announces a change of queue state to every node.
func (b *Broker) NudgeQueues(ctx context.Context) error {
	if err := b.rdb.Publish(ctx, b.Keys.QueuesChannel(), "1").Err(); err != nil {
		return fmt.Errorf("announce queue change: %w", err)
	}
	return nil
}

// QueueNudges subscribes to announcements of queue state changes until the
// returned close function is called.
func (b *Broker) QueueNudges(ctx context.Context) (<-chan struct{}, func() error) {
	sub := b.rdb.Subscribe(ctx, b.Keys.QueuesChannel())
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for range sub.Channel() {
			select {
			case out <- struct{}{}:
			default: // one pending refresh covers it
			}
		}
	}()
	return out, sub.Close
}

// RetiredLeft is how many messages q's shards from shards to span-1 still
// hold: the shards a reshard to fewer retired, which workers keep taking
// from until they are empty.
func (b *Broker) RetiredLeft(ctx context.Context, q string, shards, span int) (int64, error) {
	pipe := b.rdb.Pipeline()
	var cmds []*redis.IntCmd
	for s := shards; s < span; s++ {
		for p := 0; p <= task.MaxPriority; p++ {
			cmds = append(cmds, pipe.LLen(ctx, b.Keys.Lane(q, s, p)))
		}
	}
	if len(cmds) == 0 {
		return 0, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("retired shards %d-%d of %s: %w", shards, span-1, q, err)
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}
