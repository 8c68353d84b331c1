// Package broker is the Redis transport between schedulers and workers:
// queue lists, reliable takes into per-worker processing lists, the wake
// channel, and worker heartbeats. Redis holds nothing that cannot be rebuilt
// from the task center.
package broker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/pkg/task"
)

// Options configure the Redis connection: one server, a Sentinel-managed
// master, or a Cluster.
type Options struct {
	// Addr is host:port, or several separated by commas.
	Addr string
	// Addrs are more addresses; with Addr they are the seeds: the server,
	// the Sentinels when MasterName is set, else the Cluster's nodes (two
	// or more addresses mean a Cluster).
	Addrs []string
	// MasterName selects Sentinel: the name of the master they watch.
	MasterName string
	// Cluster forces Cluster mode with a single seed address.
	Cluster  bool
	Password string
	// PasswordKey names the password's configuration key in errors
	// (default redis.password), with where it came from.
	PasswordKey string
	DB          int
	Prefix      string
	PoolSize    int
	// DialTimeout bounds opening a connection, its handshake included;
	// ReadTimeout and WriteTimeout each read and write of a command
	// (defaults below; a blocking take waits longer by its own timeout).
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
}

// Defaults of the Options timeouts: a slow link is not a dead one, and a
// connection's handshake (HELLO, then its settings) with a second added
// each way still fits.
const (
	DialTimeoutDefault  = 10 * time.Second
	ReadTimeoutDefault  = 10 * time.Second
	WriteTimeoutDefault = 10 * time.Second
)

// clusterReload is how often a Cluster client rereads the slot map.
const clusterReload = 2 * time.Second

// Seeds returns every address of o, without blanks or repeats.
func (o Options) Seeds() []string {
	var out []string
	for _, a := range append(strings.Split(o.Addr, ","), o.Addrs...) {
		if a = strings.TrimSpace(a); a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// Broker is a handle on Redis.
type Broker struct {
	rdb  redis.UniversalClient
	Keys Keys
	layoutHolder
	// endedLast is, per queue, the minute of the last AckEnded that
	// counted some of its attempts.
	endedLast sync.Map
	// scriptFlags: the server runs script flags (Redis 7+), so scripts
	// may declare allow-oom (see oom.go).
	scriptFlags bool
	// limitNow, when set, stands in for Redis's clock in limited takes.
	limitNow func() time.Time
	// answerWait bounds waiting for a reply that has no read deadline of
	// its own (a subscription's confirmation): a new connection's dial
	// and handshake, then a reply.
	answerWait time.Duration
}

// SetLimitClock makes limited takes read c instead of Redis's clock, so a
// test can drive a rate (nil: Redis's clock again).
func (b *Broker) SetLimitClock(c func() time.Time) { b.limitNow = c }

// quiet drops go-redis's own log lines: every error it logs also reaches
// the caller, which reports it once, in context.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

var silence sync.Once

// Defaults of Options.
const (
	PrefixDefault   = "task:"
	PoolSizeDefault = 64
)

// Open connects to Redis and checks that it answers.
func Open(ctx context.Context, o Options) (*Broker, error) {
	return open(ctx, o, true)
}

// Dial returns a broker of o without waiting for Redis to answer: its calls
// fail until Redis does, and then work, as over any connection Redis
// dropped. Scripts run without allow-oom, since the server's version is
// not known. For a tool that shows what it can while Redis is down
// (tasktop); a refusal only a person can fix (a wrong password) is still
// an error.
func Dial(ctx context.Context, o Options) (*Broker, error) {
	return open(ctx, o, false)
}

func open(ctx context.Context, o Options, mustAnswer bool) (*Broker, error) {
	silence.Do(func() { redis.SetLogger(quiet{}) })
	pool := o.PoolSize
	if pool <= 0 {
		pool = PoolSizeDefault
	}
	seeds := o.Seeds()
	if len(seeds) == 0 {
		return nil, errors.New("connect to redis: no address")
	}
	if (o.Cluster || (len(seeds) > 1 && o.MasterName == "")) && o.DB != 0 {
		return nil, task.Configf("connect to redis: a Cluster has only database 0, not %d: set redis.db to 0", o.DB)
	}
	// UniversalClient: a master name means Sentinel, several addresses or
	// Cluster mean a Cluster client, else one server. Every key of a queue
	// shares a hash tag and every script names its keys, so the same calls
	// work on all three.
	uo := &redis.UniversalOptions{
		Addrs:         seeds,
		MasterName:    o.MasterName,
		IsClusterMode: o.Cluster && o.MasterName == "",
		Password:      o.Password,
		DB:            o.DB,
		PoolSize:      pool,
		DialTimeout:   cmp.Or(o.DialTimeout, DialTimeoutDefault),
		ReadTimeout:   cmp.Or(o.ReadTimeout, ReadTimeoutDefault),
		WriteTimeout:  cmp.Or(o.WriteTimeout, WriteTimeoutDefault),
		// Blocking takes carry their own timeout; the pool must not give
		// up on a connection while one waits.
		ContextTimeoutEnabled: true,
	}
	var rdb redis.UniversalClient
	keys := Keys{Prefix: o.Prefix}
	if o.MasterName == "" && (o.Cluster || len(seeds) > 1) {
		keys.NotifyTag = "notify"
		co := uo.Cluster()
		// go-redis reloads the slot map every minute, and at once only on
		// MOVED: after a master dies, pipelines to its slots fail with a
		// refused connection until the next reload, so dispatch to those
		// queues stalled for a minute after a failover.
		co.ClusterStateReloadInterval = clusterReload
		rdb = redis.NewClusterClient(co)
	} else {
		rdb = redis.NewUniversalClient(uo)
	}
	b := &Broker{rdb: rdb, Keys: keys, answerWait: uo.DialTimeout + 2*uo.ReadTimeout}
	// A new connection: dial, HELLO and its settings, then the PING.
	pctx, cancel := context.WithTimeout(ctx, b.answerWait)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		cerr := configError(err, strings.Join(seeds, ","), o.DB, cmp.Or(o.PasswordKey, "redis.password"))
		if cerr == nil && !mustAnswer {
			return b, nil
		}
		rdb.Close()
		if cerr != nil {
			return nil, cerr
		}
		return nil, fmt.Errorf("connect to redis %s: %w", strings.Join(seeds, ","), err)
	}
	b.scriptFlags = hasScriptFlags(pctx, rdb)
	return b, nil
}

// configError returns a config error (task.CodeConfig) when Redis refused
// the connection for a reason only a person can fix, else nil: a daemon
// must not retry a wrong password forever.
func configError(err error, addr string, db int, passwordKey string) error {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "WRONGPASS"), strings.HasPrefix(msg, "ERR invalid password"), strings.HasPrefix(msg, "NOPERM"):
		return task.Configf("redis %s refused the password (%s): fix %s", addr, msg, passwordKey)
	case strings.HasPrefix(msg, "NOAUTH"):
		return task.Configf("redis %s requires a password (%s): set redis.password", addr, msg)
	case strings.HasPrefix(msg, "ERR AUTH") && strings.Contains(msg, "without any password configured"):
		return task.Configf("redis %s has no password, but %s is set: empty it or set the server's requirepass", addr, passwordKey)
	case strings.HasPrefix(msg, "ERR DB index is out of range"), strings.HasPrefix(msg, "ERR invalid DB index"):
		return task.Configf("redis %s has no database %d: fix redis.db (the server's databases setting bounds it)", addr, db)
	}
	return nil
}

// Hint says what Redis's refusal of a connection means when err is one: a
// node whose connections were dropped after the server's password was
// set or changed (requirepass, ACL) opens new ones that Redis refuses,
// with a NOAUTH, or for a script's arguments "Protocol error:
// unauthenticated multibulk length", which reads like a bug. Empty
// otherwise.
func Hint(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "redis.password"):
		return "" // configError said it
	case strings.Contains(msg, "NOAUTH"), strings.Contains(msg, "unauthenticated multibulk"):
		return " (Redis asks for a password this process does not give: set redis.password and restart it)"
	case strings.Contains(msg, "WRONGPASS"):
		return " (Redis refuses redis.password: fix it and restart the process)"
	}
	return ""
}

// Client exposes the Redis client for tests and tools.
func (b *Broker) Client() redis.UniversalClient { return b.rdb }

// Close closes the connection pool.
func (b *Broker) Close() error { return b.rdb.Close() }

// Ping checks that Redis answers.
func (b *Broker) Ping(ctx context.Context) error { return b.rdb.Ping(ctx).Err() }

// CheckEviction returns an error when Redis may evict keys: a queue whose
// messages are evicted loses work silently, so taskd refuses to start.
func (b *Broker) CheckEviction(ctx context.Context) error {
	p, err := b.EvictionPolicy(ctx)
	if err != nil {
		// CONFIG may be disabled on managed Redis: nothing to check.
		return nil
	}
	if p != "noeviction" {
		return task.Configf("redis maxmemory-policy is %q: set it to noeviction (in redis.conf, and CONFIG SET maxmemory-policy noeviction), or queued tasks can be evicted", p)
	}
	return nil
}

// EvictionPolicy returns Redis's maxmemory-policy (an error where CONFIG
// is disabled, as on some managed services).
func (b *Broker) EvictionPolicy(ctx context.Context) (string, error) {
	v, err := b.rdb.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return "", fmt.Errorf("redis maxmemory-policy: %w", err)
	}
	p, ok := v["maxmemory-policy"]
	if !ok {
		return "", fmt.Errorf("redis maxmemory-policy: not in CONFIG GET")
	}
	return p, nil
}

// Push appends messages to their queues in one pipeline. It returns the
// messages it could not push (the caller hands them back) and the first
// error. Among them, those whose command was sent but whose reply never
// came (a timeout, a connection reset or closed after the write) may or
// may not be in Redis: the error is then, or wraps, an *UnsettledError
// naming them (see Unsettled). Handed back, such a message that did land
// would run beside the next attempt: a caller that knows leaves them
// dispatched, for recovery to settle from the queue itself.
func (b *Broker) Push(ctx context.Context, msgs []*task.Message) ([]*task.Message, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	pipe := b.rdb.Pipeline()
	var failed []*task.Message
	var firstErr error
	l := b.currentLayout()
	// One LPUSH per lane: a claimed batch mostly goes to one or a few. A
	// lane's LPUSH holds at most pushChunk bytes: Redis near maxmemory
	// refuses a command whose own size passes the limit, so one of a whole
	// batch of large payloads would be refused time and again where
	// smaller ones still fit.
	type lane struct {
		key   string
		raws  []any
		msgs  []*task.Message
		bytes int
	}
	lanes := map[string]*lane{}
	var order []*lane
	perQueue := map[string]int{}
	for _, m := range msgs {
		raw, err := m.Encode()
		if err != nil {
			failed = append(failed, m)
			firstErr = orErr(firstErr, err)
			continue
		}
		key := b.laneOf(m, l)
		ln := lanes[key]
		if ln == nil || ln.bytes+len(raw) > pushChunk && len(ln.raws) > 0 {
			ln = &lane{key: key}
			lanes[key] = ln
			order = append(order, ln)
		}
		ln.raws, ln.msgs, ln.bytes = append(ln.raws, raw), append(ln.msgs, m), ln.bytes+len(raw)
		perQueue[m.Queue]++
	}
	cmds := make([]*sendOnce, len(order))
	for i, ln := range order {
		cmds[i] = &sendOnce{IntCmd: redis.NewIntCmd(ctx, append([]any{"lpush", ln.key}, ln.raws...)...)}
		_ = pipe.Process(ctx, cmds[i])
	}
	for q, n := range perQueue {
		b.notify(ctx, pipe, q, n)
	}
	_, err := pipe.Exec(ctx)
	var unsettled []*task.Message
	var refused, lost error
	for i, c := range cmds {
		switch cerr := c.Err(); {
		case cerr == nil:
		case c.notApplied(cerr):
			failed = append(failed, order[i].msgs...)
			refused = orErr(refused, cerr)
		default:
			failed = append(failed, order[i].msgs...)
			unsettled = append(unsettled, order[i].msgs...)
			lost = orErr(lost, cerr)
		}
	}
	if len(unsettled) == 0 {
		// Exec's error is a refusal's, or a wake token's when every
		// message went in.
		if err != nil {
			firstErr = orErr(firstErr, fmt.Errorf("push %d messages: %w", len(msgs), err))
		}
		return failed, firstErr
	}
	if refused != nil {
		firstErr = orErr(firstErr, fmt.Errorf("push %d messages: %w", len(msgs), refused))
	}
	u := &UnsettledError{Msgs: unsettled, Err: lost}
	if firstErr == nil {
		return failed, u
	}
	return failed, fmt.Errorf("%w; %w", firstErr, u)
}

// UnsettledError is Push's error for failed messages that may or may not
// be in Redis: their command was sent and no reply came back.
type UnsettledError struct {
	Msgs []*task.Message
	Err  error
}

func (e *UnsettledError) Error() string {
	return fmt.Sprintf("%d messages sent with no reply may or may not be in redis: %v", len(e.Msgs), e.Err)
}

func (e *UnsettledError) Unwrap() error { return e.Err }

// Unsettled returns the failed messages that Push's error err says may
// or may not be in Redis (none when err says no such thing).
func Unsettled(err error) []*task.Message {
	var u *UnsettledError
	if errors.As(err, &u) {
		return u.Msgs
	}
	return nil
}

// sendOnce is an LPUSH that go-redis sends at most once, and that says
// whether it was written. Retried after a lost reply, an LPUSH pushes its
// messages again, and the retry's own error (a refused dial, say) hides
// that the first try may have landed.
type sendOnce struct {
	*redis.IntCmd
	read atomic.Bool // Args was read
}

func (*sendOnce) NoRetry() bool { return true }

// Args is what go-redis writes a command from (a Cluster client also
// routes it by them): a command whose Args were never read was not sent,
// such as one whose new connection failed its handshake.
func (c *sendOnce) Args() []any {
	c.read.Store(true)
	return c.IntCmd.Args()
}

// notApplied reports whether c's error err says Redis did not apply it:
// c was never written, Redis refused it (an error reply: OOM,
// WRONGTYPE...), or its last try found no connection (a failed dial, a
// full or closed pool). Any other failure (a timeout, a reset, a
// connection closed) may have come after Redis ran it.
func (c *sendOnce) notApplied(err error) bool {
	if !c.read.Load() {
		return true
	}
	var re redis.Error
	if errors.As(err, &re) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) || errors.Is(err, redis.ErrClosed)
}

// pushChunk bounds the bytes of messages one LPUSH carries.
const pushChunk = 64 << 10

func orErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// Ack removes finished messages from worker w's processing lists.
func (b *Broker) Ack(ctx context.Context, w string, msgs map[string][]string) error {
	return b.AckEnded(ctx, w, msgs, time.Time{}, nil)
}

// Quarantine moves a message that cannot be decoded from a processing list
// to the queue's poison list, where an operator can inspect it.
func (b *Broker) Quarantine(ctx context.Context, q, w, raw string) error {
	if err := b.run(ctx, b.rdb, quarantineScript, []string{b.Keys.Processing(q, w), b.Keys.Poison(q)}, raw).Err(); err != nil {
		return fmt.Errorf("quarantine message of %s: %w", q, err)
	}
	return nil
}

// quarantineScript moves one message from a processing list to a poison
// list.
//
//	KEYS[1] processing list, KEYS[2] poison list
//	ARGV[1] the message
var quarantineScript = newScript(`
if redis.call('LREM', KEYS[1], 1, ARGV[1]) > 0 then
  redis.call('LPUSH', KEYS[2], ARGV[1])
end
return 0
`)

// QueueLen returns the number of queued messages of q, over its shards and
// priorities.
func (b *Broker) QueueLen(ctx context.Context, q string) (int64, error) {
	_, span := b.currentLayout().Shards(q)
	per, err := b.QueueBacklog(ctx, q, span)
	var n int64
	for _, v := range per {
		n += v
	}
	return n, err
}

// Wake tells schedulers that a task is due in d (zero: now).
func (b *Broker) Wake(ctx context.Context, d time.Duration) error {
	if d < 0 {
		d = 0
	}
	return b.rdb.Publish(ctx, b.Keys.Wake(), strconv.FormatInt(d.Milliseconds(), 10)).Err()
}

// Wakeups subscribes to the wake channel. The returned channel yields the
// delay each producer announced; close the subscription with the returned
// function.
func (b *Broker) Wakeups(ctx context.Context) (<-chan time.Duration, func() error) {
	sub := b.rdb.Subscribe(ctx, b.Keys.Wake())
	out := make(chan time.Duration, 1)
	go func() {
		defer close(out)
		for msg := range sub.Channel() {
			ms, _ := strconv.ParseInt(strings.TrimSpace(msg.Payload), 10, 64)
			d := time.Duration(ms) * time.Millisecond
			select {
			case out <- d:
			default:
				// A wakeup is already pending; the scheduler rescans anyway.
			}
		}
	}()
	return out, sub.Close
}

// Heartbeat is what a worker publishes about itself.
type Heartbeat struct {
	ID        string    `json:"id"`
	Node      string    `json:"node"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Version   string    `json:"version"`
	Queues    []string  `json:"queues"`
	StartedAt time.Time `json:"started_at"`
	Busy      int       `json:"busy"`
	Processed int64     `json:"processed"`
	Failed    int64     `json:"failed"`
	// Capacity is the number of slots over all queues, QueueSlots those
	// of each queue; Slots are the busy ones, with what each is doing (see
	// heartbeat.go).
	Capacity   int            `json:"capacity,omitempty"`
	QueueSlots map[string]int `json:"queue_slots,omitempty"`
	Slots      []Slot         `json:"slots,omitempty"`
	// ResultsWaitingMS is how long the oldest of the worker's ended
	// attempts has waited for its result to be written (0: none waits):
	// while the task center is down or refuses writes, attempts end on
	// the worker and their rows still say running.
	ResultsWaitingMS int64 `json:"results_waiting_ms,omitempty"`
}

// ResultsStuckAfter is how long a worker's oldest result may wait to be
// written before stats, tasktop and doctor say so: results are batched
// for milliseconds; this long, the task center refuses them or does not
// answer, and the worker takes no new work until they are written.
const ResultsStuckAfter = 10 * time.Second

// ResultsStuck is how long the worker's oldest result has waited to be
// written, when that is ResultsStuckAfter or more; else 0.
func (h *Heartbeat) ResultsStuck() time.Duration {
	if d := time.Duration(h.ResultsWaitingMS) * time.Millisecond; d >= ResultsStuckAfter {
		return d
	}
	return 0
}

// Beat publishes a heartbeat with a TTL and records the worker in the
// registry.
func (b *Broker) Beat(ctx context.Context, hb *Heartbeat, ttl time.Duration) error {
	return b.BeatCounts(ctx, hb, ttl, time.Time{}, Counts{})
}

// beat queues the heartbeat's writes on pipe.
func (b *Broker) beat(ctx context.Context, pipe redis.Pipeliner, hb *Heartbeat, ttl time.Duration) error {
	raw, err := json.Marshal(hb)
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	// Written even at maxmemory: a worker draining a full Redis must not
	// look dead.
	b.write(ctx, pipe, "SET", b.Keys.Worker(hb.ID), raw, "PX", ttl.Milliseconds())
	b.write(ctx, pipe, "ZADD", b.Keys.Workers(), time.Now().UnixMilli(), hb.ID)
	if hb.Node != "" {
		b.write(ctx, pipe, "SET", b.Keys.WorkerNode(hb.ID), hb.Node, "PX", ThroughputKeep.Milliseconds())
	}
	if len(hb.Queues) > 0 {
		// Recovery reads it to find the processing lists of a dead worker.
		members := make([]any, len(hb.Queues))
		for i, q := range hb.Queues {
			members[i] = q
		}
		b.write(ctx, pipe, "SADD", b.Keys.WorkerQueues(hb.ID), members...)
	}
	return nil
}
