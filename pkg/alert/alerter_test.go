package alert_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/alert"
	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/lock"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/recovery"
	"github.com/taskd/taskd/pkg/scheduler"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
	"github.com/taskd/taskd/pkg/worker"
)

var quiet = slog.New(slog.DiscardHandler)

// off is a switched-off rule.
var off = alert.Rule{Threshold: -1}

// allOff has every rule off; each test switches on the ones it checks.
var allOff = alert.Rules{Backlog: off, SuccessRate: off, HeartbeatStale: off, NoConsumer: off, OldestDue: off, DeadTasks: off,
	WatchdogHeal: off, RedisMemory: off}

type testBundle struct {
	env  *testenv.Env
	recv *receiver
}

// run starts a worker consuming queue q with reg's handlers, and a
// scheduler; both stop when the test ends.
func (b *testBundle) run(t *testing.T, reg *handler.Registry) {
	t.Helper()
	ctx := context.Background()
	w := worker.New(worker.Config{Node: "n1", Queues: map[string]int{"q": 2}, Handlers: reg, Logger: quiet,
		HeartbeatInterval: 100 * time.Millisecond, ShutdownGrace: time.Second}, b.env.Store, b.env.Broker)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(w.Stop)
	sched := scheduler.New(scheduler.Config{PollInterval: 50 * time.Millisecond, Logger: quiet}, b.env.Store, b.env.Broker)
	require.NoError(t, sched.Start(ctx))
	t.Cleanup(sched.Stop)
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return &testBundle{env: testenv.New(t), recv: newReceiver(t, "")}
}

// alerter returns an alerter of the bundle's system posting to its
// receiver; it is stopped when the test ends.
// A clock given drives both of its clocks.
func (b *testBundle) alerter(t *testing.T, rules alert.Rules, cooldown time.Duration, clk ...clock.Clock) *alert.Alerter {
	cfg := alert.Config{Interval: 50 * time.Millisecond, Cooldown: cooldown, Rules: rules, Queues: []string{"q"},
		Notifiers: []alert.Notifier{&alert.Webhook{URL: b.recv.URL}}, Logger: quiet}
	if len(clk) > 0 {
		cfg.Clock = clk[0]
	}
	a := alert.New(cfg, b.env.Store, b.env.Broker, lock.NewRedis(b.env.Broker.Client(), b.env.Prefix))
	t.Cleanup(a.Stop)
	return a
}

// sent are the notifications received so far, in order.
func (b *testBundle) sent(t *testing.T) []alert.WebhookAlert {
	var out []alert.WebhookAlert
	for _, body := range b.recv.received() {
		var m alert.WebhookMessage
		require.NoError(t, json.Unmarshal(body, &m))
		out = append(out, m.Alerts...)
	}
	return out
}

// count counts the notifications of rule with status.
func (b *testBundle) count(t *testing.T, rule, status string) int {
	n := 0
	for _, a := range b.sent(t) {
		if a.Labels["alertname"] == rule && a.Status == status {
			n++
		}
	}
	return n
}

// beat records a heartbeat of p stamped at clk's time (BeatProcess stamps
// the host's), kept for hours.
func (b *testBundle) beat(t *testing.T, p *broker.Process, clk clock.Clock) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, b.env.Broker.BeatProcess(ctx, p, 3*time.Hour))
	require.NoError(t, b.env.Broker.Client().ZAdd(ctx, b.env.Broker.Keys.Processes(),
		redis.Z{Score: float64(clk.Now().UnixMilli()), Member: p.ID}).Err())
}

// evalUntil evaluates until cond holds, within a minute: the full suite
// (the e2e package beside this one) slows every evaluation.
func evalUntil(t *testing.T, a *alert.Alerter, cond func() bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := a.RunOnce(context.Background())
		require.NoError(t, err)
		return cond()
	}, time.Minute, 20*time.Millisecond)
}

// Tasks wait in a queue no worker consumes: backlog, no-consumer and
// oldest-due alerts are pending at first, fire once their duration has
// passed, are not repeated within the cooldown, and resolve when a worker
// drains the queue.
func TestQueueRulesFireAndResolve(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const hold = 300 * time.Millisecond
	rules := allOff
	rules.Backlog = alert.Rule{Threshold: 2, For: hold}
	rules.NoConsumer = alert.Rule{Threshold: 1, For: hold}
	rules.OldestDue = alert.Rule{Threshold: 0.2, For: hold}
	a := b.alerter(t, rules, time.Hour)

	prod := producer.New(b.env.Store, b.env.Broker, producer.Options{})
	for range 3 {
		_, err := prod.Submit(ctx, producer.Submission{Code: "job", Queue: "q"})
		require.NoError(t, err)
	}
	res, err := a.RunOnce(ctx)
	require.NoError(t, err)
	require.True(t, res.Leader)
	require.Zero(t, res.Notified, "the conditions hold, but not yet for their duration")
	first := time.Now()

	names := []string{alert.RuleBacklog, alert.RuleNoConsumer, alert.RuleOldestDue}
	evalUntil(t, a, func() bool {
		return b.count(t, alert.RuleBacklog, alert.StatusFiring) == 1 && b.count(t, alert.RuleNoConsumer, alert.StatusFiring) == 1 &&
			b.count(t, alert.RuleOldestDue, alert.StatusFiring) == 1
	})
	require.GreaterOrEqual(t, time.Since(first), hold)
	for _, n := range b.sent(t) {
		require.Equal(t, "q", n.Labels["queue"])
		require.NotEmpty(t, n.Annotations["summary"])
		require.Contains(t, n.Annotations["runbook_url"], "docs/troubleshooting.md#", "the same runbook as the Prometheus rule")
	}
	// Within the cooldown: evaluated again, not notified again.
	for range 5 {
		res, err := a.RunOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, res.Firing)
		require.Zero(t, res.Notified)
	}
	require.Len(t, b.sent(t), 3)

	// A worker drains the queue: every alert resolves, once.
	reg := handler.NewRegistry()
	reg.Register("job", handler.Func(func(context.Context, *handler.Request) (string, error) { return "ok", nil }))
	b.run(t, reg)
	evalUntil(t, a, func() bool {
		for _, n := range names {
			if b.count(t, n, alert.StatusResolved) != 1 {
				return false
			}
		}
		return true
	})
	for _, n := range b.sent(t)[3:] {
		require.Equal(t, alert.StatusResolved, n.Status)
		require.False(t, n.EndsAt.Before(n.StartsAt))
	}
}

// A failing task drives the success rate under its threshold (fires after
// its duration) and raises the dead tasks (fires at once); successes bring
// the rate back and a window without new dead tasks resolves the other.
func TestFailureRulesFireAndResolve(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const hold, window = 300 * time.Millisecond, time.Second
	rules := allOff
	rules.SuccessRate = alert.Rule{Threshold: 0.5, For: hold}
	rules.DeadTasks = alert.Rule{Threshold: 0, For: window}
	a := b.alerter(t, rules, time.Hour)

	reg := handler.NewRegistry()
	reg.Register("bad", handler.Func(func(context.Context, *handler.Request) (string, error) { return "", task.Invalidf("no") }))
	reg.Register("good", handler.Func(func(context.Context, *handler.Request) (string, error) { return "ok", nil }))
	b.run(t, reg)

	_, err := a.RunOnce(ctx) // the baseline: no dead task yet
	require.NoError(t, err)
	prod := producer.New(b.env.Store, b.env.Broker, producer.Options{})
	zero := 0
	bad, err := prod.Submit(ctx, producer.Submission{Code: "bad", Queue: "q", MaxRetry: &zero})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		tk, err := b.env.Store.TaskGet(ctx, bad.ID)
		require.NoError(t, err)
		return tk.Status == task.Dead
	}, 20*time.Second, 10*time.Millisecond)

	res, err := a.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, b.count(t, alert.RuleDeadTasks, alert.StatusFiring), "a rise fires at once")
	require.Zero(t, b.count(t, alert.RuleSuccessRate, alert.StatusFiring), "not yet for its duration")
	require.Equal(t, 1, res.Firing)
	evalUntil(t, a, func() bool { return b.count(t, alert.RuleSuccessRate, alert.StatusFiring) == 1 })

	for range 2 {
		_, err := prod.Submit(ctx, producer.Submission{Code: "good", Queue: "q"})
		require.NoError(t, err)
	}
	evalUntil(t, a, func() bool {
		return b.count(t, alert.RuleSuccessRate, alert.StatusResolved) == 1 && b.count(t, alert.RuleDeadTasks, alert.StatusResolved) == 1
	})
	require.Equal(t, 1, b.count(t, alert.RuleDeadTasks, alert.StatusFiring))
	require.Equal(t, 1, b.count(t, alert.RuleSuccessRate, alert.StatusFiring))
}

// A process that stops beating fires the stale-heartbeat alert and
// resolves when it beats again; a recorded watchdog heal fires and
// resolves after its window. The alerter's clock is driven, and the beats
// and the heal are stamped on it: on the host's clock, an evaluation slowed
// past the threshold after a beat (or past the window after the heal)
// would see the beat stale again (or the heal gone).
func TestHeartbeatAndWatchdogRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rules := allOff
	rules.HeartbeatStale = alert.Rule{Threshold: 0.3}
	const window = time.Second
	rules.WatchdogHeal = alert.Rule{Threshold: 0, For: window}
	clk := clock.NewManual(time.Now().Truncate(time.Millisecond)) // beats are stamped in ms
	a := b.alerter(t, rules, time.Hour, clk)
	eval := func() {
		t.Helper()
		_, err := a.RunOnce(ctx)
		require.NoError(t, err)
	}

	p := &broker.Process{ID: "h1-42-abcd", Node: "n1", Host: "h1", PID: 42}
	b.beat(t, p, clk)
	clk.Advance(300 * time.Millisecond) // at the threshold: not stale yet
	eval()
	require.Zero(t, b.count(t, alert.RuleHeartbeatStale, alert.StatusFiring))
	clk.Advance(time.Millisecond)
	eval()
	require.Equal(t, 1, b.count(t, alert.RuleHeartbeatStale, alert.StatusFiring))
	n := b.sent(t)[0]
	require.Equal(t, "h1-42-abcd", n.Labels["process"])
	require.Equal(t, "h1", n.Labels["host"])
	require.Equal(t, "critical", n.Labels["severity"])
	b.beat(t, p, clk)
	eval()
	require.Equal(t, 1, b.count(t, alert.RuleHeartbeatStale, alert.StatusResolved))

	// The lock taken is an event; it and recovery's events are no heals.
	events, err := b.env.Broker.Events(ctx, 10)
	require.NoError(t, err)
	require.NotEmpty(t, events)
	require.Equal(t, alert.KindLockTaken, events[len(events)-1].Kind)
	require.NoError(t, b.env.Broker.RecordEvent(ctx, &broker.Event{At: clk.Now(), Kind: recovery.KindRecovered,
		WorkerID: "w2", TaskID: 8, Detail: "task recovered"}))
	healAt := clk.Now()
	require.NoError(t, b.env.Broker.RecordEvent(ctx, &broker.Event{At: healAt, Kind: "slot_abandoned", Node: "n1",
		WorkerID: "w1", Queue: "q", TaskID: 7, Code: "job", Attempt: 1, Detail: "held 1s past its timeout"}))
	eval()
	require.Equal(t, 1, b.count(t, alert.RuleWatchdogHeal, alert.StatusFiring), "a heal fires at once")
	clk.Set(healAt.Add(window))
	eval()
	require.Zero(t, b.count(t, alert.RuleWatchdogHeal, alert.StatusResolved), "not resolved within its window")
	clk.Advance(time.Millisecond)
	eval()
	require.Equal(t, 1, b.count(t, alert.RuleWatchdogHeal, alert.StatusResolved), "resolved after its window")
	for _, n := range b.sent(t) {
		if n.Labels["alertname"] == alert.RuleWatchdogHeal {
			require.Equal(t, "w1", n.Labels["worker"])
			require.Contains(t, n.Annotations["summary"], "slot_abandoned: held 1s past its timeout")
		}
	}
}

// A Redis filling up towards maxmemory fires the Redis memory alert at the
// threshold, before it refuses messages, and resolves when it has room.
func TestRedisMemoryRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t)
	addr := testenv.PrivateRedis(t, 0, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	br, err := broker.Open(ctx, broker.Options{Addr: addr, Prefix: env.Prefix})
	require.NoError(t, err)
	defer br.Close()
	recv := newReceiver(t, "")
	rules := allOff
	rules.RedisMemory = alert.Rule{Threshold: 0.9}
	a := alert.New(alert.Config{Interval: 50 * time.Millisecond, Cooldown: time.Hour, Rules: rules,
		Notifiers: []alert.Notifier{&alert.Webhook{URL: recv.URL}}, Logger: quiet},
		env.Store, br, lock.NewRedis(br.Client(), env.Prefix))
	t.Cleanup(a.Stop)
	b := &testBundle{env: env, recv: recv}

	_, err = a.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, b.count(t, alert.RuleRedisMemory, alert.StatusFiring))
	// Another application's keys fill it past 92%.
	blob := strings.Repeat("x", 32<<10)
	for {
		m, err := br.Memory(ctx)
		require.NoError(t, err)
		if m.Ratio() > 0.92 {
			break
		}
		require.NoError(t, br.Client().RPush(ctx, "other-app:blobs", blob).Err())
	}
	_, err = a.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, b.count(t, alert.RuleRedisMemory, alert.StatusFiring))
	n := b.sent(t)[0]
	require.Equal(t, "warning", n.Labels["severity"])
	require.Contains(t, n.Annotations["summary"], "of maxmemory used")
	require.Contains(t, n.Annotations["runbook_url"], "#redis-is-near-maxmemory-redis-memory")

	require.NoError(t, br.Client().Del(ctx, "other-app:blobs").Err())
	_, err = a.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, b.count(t, alert.RuleRedisMemory, alert.StatusResolved))
}

// Within the cooldown an alert is not notified as firing again, even when
// it resolves and fires again; past it, a still-firing alert is notified
// again. The alerter's clock is driven, and the process's beats are
// stamped on it.
func TestCooldown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const cooldown = time.Hour
	rules := allOff
	rules.HeartbeatStale = alert.Rule{Threshold: 0.2}
	clk := clock.NewManual(time.Now())
	a := b.alerter(t, rules, cooldown, clk)
	p := &broker.Process{ID: "h1-42-abcd", Node: "n1", Host: "h1"}
	beat := func() { b.beat(t, p, clk) }
	eval := func(firing int) {
		t.Helper()
		res, err := a.RunOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, firing, res.Firing)
	}
	beat()
	eval(0)
	clk.Advance(time.Second) // stale
	eval(1)
	require.Equal(t, 1, b.count(t, alert.RuleHeartbeatStale, alert.StatusFiring))

	for range 3 {
		eval(1)
	}
	require.Equal(t, 1, b.count(t, alert.RuleHeartbeatStale, alert.StatusFiring), "not again while it fires")

	beat() // resolves
	eval(0)
	require.Equal(t, 1, b.count(t, alert.RuleHeartbeatStale, alert.StatusResolved))
	againAt := clk.Advance(time.Second) // stale again, within the cooldown of the first
	eval(1)
	require.Equal(t, 2, b.count(t, alert.RuleHeartbeatStale, alert.StatusFiring),
		"a receiver told resolved hears of the new firing at once")
	for range 3 {
		eval(1)
	}
	clk.Set(againAt.Add(cooldown - time.Millisecond))
	eval(1)
	require.Equal(t, 2, b.count(t, alert.RuleHeartbeatStale, alert.StatusFiring), "not again within the cooldown")
	clk.Set(againAt.Add(cooldown))
	eval(1)
	require.Equal(t, 3, b.count(t, alert.RuleHeartbeatStale, alert.StatusFiring), "again once the cooldown passed")
}

// Three nodes evaluate at once: one holds the lock and notifies, once;
// when it stops, another takes over from the state in Redis and neither
// repeats the firing nor forgets to resolve.
func TestOneNotificationWithThreeNodes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rules := allOff
	rules.HeartbeatStale = alert.Rule{Threshold: 0.2}
	clk := clock.NewManual(time.Now())
	nodes := []*alert.Alerter{b.alerter(t, rules, time.Hour, clk), b.alerter(t, rules, time.Hour, clk), b.alerter(t, rules, time.Hour, clk)}
	p := &broker.Process{ID: "h1-42-abcd", Node: "n1", Host: "h1"}
	b.beat(t, p, clk)
	clk.Advance(time.Second) // stale

	round := func() (leaders []int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i, a := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := a.RunOnce(ctx)
				require.NoError(t, err)
				if res.Leader {
					mu.Lock()
					leaders = append(leaders, i)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return leaders
	}
	var leader int
	for range 5 {
		l := round()
		require.Len(t, l, 1, "one node evaluates")
		leader = l[0]
	}
	require.Equal(t, 1, b.count(t, alert.RuleHeartbeatStale, alert.StatusFiring))

	nodes[leader].Stop() // releases the lock
	nodes = append(nodes[:leader], nodes[leader+1:]...)
	for range 3 {
		require.Len(t, round(), 1)
	}
	require.Equal(t, 1, b.count(t, alert.RuleHeartbeatStale, alert.StatusFiring), "the new holder does not repeat it")
	b.beat(t, p, clk)
	require.Len(t, round(), 1)
	require.Equal(t, 1, b.count(t, alert.RuleHeartbeatStale, alert.StatusResolved))
	require.Len(t, b.sent(t), 2)
}

// Started, an alerter evaluates on its own every interval; Stop ends it
// and frees the lock for another node.
func TestStartStop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rules := allOff
	rules.HeartbeatStale = alert.Rule{Threshold: 0.1}
	a := b.alerter(t, rules, time.Hour)
	require.NoError(t, b.env.Broker.BeatProcess(ctx, &broker.Process{ID: "h1-1-ab", Host: "h1"}, time.Minute))
	require.NoError(t, a.Start(ctx))
	require.Eventually(t, func() bool { return b.count(t, alert.RuleHeartbeatStale, alert.StatusFiring) == 1 }, 10*time.Second, 10*time.Millisecond)
	a.Stop()
	a.Stop()
	other := b.alerter(t, rules, time.Hour)
	res, err := other.RunOnce(ctx)
	require.NoError(t, err)
	require.True(t, res.Leader, "the lock was released")
	require.Equal(t, 1, res.Firing)
}

// A host runs several processes: one that dies is stale although its
// siblings beat on, and its alert resolves once a process started after
// its last beat (its supervisor's restart) beats.
func TestHeartbeatStaleBesideSiblings(t *testing.T) {
	t.Parallel()
	b, clk, eval := heartbeatAlerter(t)
	dies := &broker.Process{ID: "h1-41-aaaa", Node: "n1", Host: "h1", PID: 41, StartedAt: clk.Now()}
	sibling := &broker.Process{ID: "h1-42-bbbb", Node: "n1", Host: "h1", PID: 42, StartedAt: clk.Now()}
	b.beat(t, dies, clk)
	b.beat(t, sibling, clk)
	eval(0)
	clk.Advance(time.Second)
	b.beat(t, sibling, clk)
	eval(1)
	require.Equal(t, "h1-41-aaaa", b.sent(t)[0].Labels["process"])

	restarted := &broker.Process{ID: "h1-43-cccc", Node: "n1", Host: "h1", PID: 43, StartedAt: clk.Now()}
	b.beat(t, restarted, clk)
	b.beat(t, sibling, clk)
	eval(0)
	require.Equal(t, 1, b.count(t, alert.RuleHeartbeatStale, alert.StatusResolved))
}

// With no notifier configured, a firing alert is logged: the log is the
// only place it goes.
func TestAlertsLoggedWithoutNotifier(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rules := allOff
	rules.HeartbeatStale = alert.Rule{Threshold: 0.2}
	clk := clock.NewManual(time.Now().Truncate(time.Millisecond))
	var buf bytes.Buffer // RunOnce logs before it returns
	a := alert.New(alert.Config{Interval: 50 * time.Millisecond, Cooldown: time.Hour, Rules: rules, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(&buf, nil))}, b.env.Store, b.env.Broker, lock.NewRedis(b.env.Broker.Client(), b.env.Prefix))
	t.Cleanup(a.Stop)
	b.beat(t, &broker.Process{ID: "h1-41-aaaa", Node: "n1", Host: "h1", PID: 41}, clk)
	clk.Advance(time.Second)
	res, err := a.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.Firing)
	require.Contains(t, buf.String(), `msg="alert firing" component=alerter alert=taskd_heartbeat_stale`)
}

// A node that holds the alerts lock and loses its task center gives the
// lock up after two failed evaluations, telling the receiver, so that a
// node whose task center answers takes over; the notice is resolved once
// alerts are evaluated again.
func TestFailingAlerterGivesTheLockUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	lost, err := store.Open(ctx, b.env.DSN, store.Options{})
	require.NoError(t, err)
	require.NoError(t, lost.Close()) // every statement fails from now on
	cfg := alert.Config{Interval: 50 * time.Millisecond, Cooldown: time.Hour, Rules: allOff, Queues: []string{"q"},
		Notifiers: []alert.Notifier{&alert.Webhook{URL: b.recv.URL}}, Logger: quiet, Node: "sick"}
	sick := alert.New(cfg, lost, b.env.Broker, lock.NewRedis(b.env.Broker.Client(), b.env.Prefix))
	t.Cleanup(sick.Stop)
	healthy := b.alerter(t, allOff, time.Hour)

	res, err := sick.RunOnce(ctx)
	require.Error(t, err)
	require.True(t, res.Leader)
	res, err = healthy.RunOnce(ctx)
	require.NoError(t, err)
	require.False(t, res.Leader, "the sick node still holds the lock after one failure")
	_, err = sick.RunOnce(ctx)
	require.Error(t, err)
	require.Equal(t, 1, b.count(t, alert.RuleAlertsFailing, alert.StatusFiring))
	require.Equal(t, "sick", b.sent(t)[0].Labels["node"])

	res, err = healthy.RunOnce(ctx)
	require.NoError(t, err)
	require.True(t, res.Leader, "the lock was given up")
	res, err = sick.RunOnce(ctx)
	require.NoError(t, err)
	require.False(t, res.Leader)
	require.Equal(t, 1, b.count(t, alert.RuleAlertsFailing, alert.StatusResolved), "alerts are evaluated again")
}

// With Redis out of reach no node can take the alerts lock: each says so
// itself, where it said nothing and every alert stayed silent.
func TestAlerterWithoutRedisSaysSo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	gone := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { gone.Close() })
	cfg := alert.Config{Interval: 50 * time.Millisecond, Cooldown: time.Hour, Rules: allOff, Queues: []string{"q"},
		Notifiers: []alert.Notifier{&alert.Webhook{URL: b.recv.URL}}, Logger: quiet, Node: "cut-off"}
	a := alert.New(cfg, b.env.Store, b.env.Broker, lock.NewRedis(gone, b.env.Prefix))
	t.Cleanup(a.Stop)
	for range 2 {
		res, err := a.RunOnce(ctx)
		require.Error(t, err)
		require.False(t, res.Leader)
	}
	require.Equal(t, 1, b.count(t, alert.RuleAlertsFailing, alert.StatusFiring))
	require.Equal(t, "cut-off", b.sent(t)[0].Labels["node"])
	_, err := a.RunOnce(ctx)
	require.Error(t, err)
	require.Equal(t, 1, b.count(t, alert.RuleAlertsFailing, alert.StatusFiring), "said once")
}

// heartbeatAlerter is an alerter of the heartbeat rule alone (stale after
// 0.2 s) on a manual clock, and eval, which evaluates once and checks how
// many alerts fire.
func heartbeatAlerter(t *testing.T) (*testBundle, *clock.Manual, func(firing int)) {
	b := setup(t)
	rules := allOff
	rules.HeartbeatStale = alert.Rule{Threshold: 0.2}
	clk := clock.NewManual(time.Now().Truncate(time.Millisecond))
	a := b.alerter(t, rules, time.Hour, clk)
	return b, clk, func(firing int) {
		t.Helper()
		res, err := a.RunOnce(context.Background())
		require.NoError(t, err)
		require.Equal(t, firing, res.Firing)
	}
}

// A dead process leaves the registry an hour after its last beat; its
// alert does not resolve then, only when a process started since on its
// host beats.
func TestHeartbeatStaleOutlivesTheRegistry(t *testing.T) {
	t.Parallel()
	b, clk, eval := heartbeatAlerter(t)
	ctx := context.Background()
	dies := &broker.Process{ID: "h1-41-aaaa", Node: "n1", Host: "h1", PID: 41, StartedAt: clk.Now()}
	b.beat(t, dies, clk)
	eval(0)
	clk.Advance(time.Second)
	eval(1)
	require.NoError(t, b.env.Broker.Client().ZRem(ctx, b.env.Broker.Keys.Processes(), dies.ID).Err()) // pruned
	eval(1)
	require.Zero(t, b.count(t, alert.RuleHeartbeatStale, alert.StatusResolved), "still dead")

	clk.Advance(time.Second)
	b.beat(t, &broker.Process{ID: "h1-43-cccc", Node: "n1", Host: "h1", PID: 43, StartedAt: clk.Now()}, clk)
	eval(0)
	require.Equal(t, 1, b.count(t, alert.RuleHeartbeatStale, alert.StatusResolved), "its host restarted it")
}

// A Redis that lost its data (restarted without persistence, a failover
// to an empty replica) takes no alert's state with it: a firing alert is
// resolved once its condition ends, and not notified again meanwhile.
// With the states in Redis the receiver kept it firing for good.
func TestAlertsResolveAfterRedisLostItsData(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rules := allOff
	rules.Backlog = alert.Rule{Threshold: 2}
	a := b.alerter(t, rules, time.Hour)
	prod := producer.New(b.env.Store, b.env.Broker, producer.Options{})
	for range 3 {
		_, err := prod.Submit(ctx, producer.Submission{Code: "job", Queue: "q"})
		require.NoError(t, err)
	}
	evalUntil(t, a, func() bool { return b.count(t, alert.RuleBacklog, alert.StatusFiring) == 1 })

	rdb := b.env.Broker.Client()
	keys, err := rdb.Keys(ctx, b.env.Prefix+"*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	require.NoError(t, rdb.Del(ctx, keys...).Err())
	b.env.Exec(t, `DELETE FROM task_center`)

	evalUntil(t, a, func() bool { return b.count(t, alert.RuleBacklog, alert.StatusResolved) == 1 })
	require.Equal(t, 1, b.count(t, alert.RuleBacklog, alert.StatusFiring), "not notified again")
}

// A lock lost while an evaluation runs (its key gone with a Redis that
// lost its data, a renewal refused) stops the evaluation: that is a
// hand-over, not a failure, and RunOnce says nothing went wrong; the next
// run takes the lock again. It returned the evaluation's "context
// canceled", which the node logged as a failed evaluation.
func TestLockLostDuringEvaluation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// A receiver that answers no notification: the evaluation waits in
	// its send until its context ends. (The body is read first: only then
	// does the server see the client hang up.)
	hung := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		<-req.Context().Done()
	}))
	t.Cleanup(hung.Close)
	rules := allOff
	rules.Backlog = alert.Rule{Threshold: 2}
	a := alert.New(alert.Config{Interval: 50 * time.Millisecond, Cooldown: time.Hour, Rules: rules, Queues: []string{"q"},
		Notifiers: []alert.Notifier{&alert.Webhook{URL: hung.URL}}, Logger: quiet},
		b.env.Store, b.env.Broker, lock.NewRedis(b.env.Broker.Client(), b.env.Prefix))
	t.Cleanup(a.Stop)
	prod := producer.New(b.env.Store, b.env.Broker, producer.Options{})
	for range 3 {
		_, err := prod.Submit(ctx, producer.Submission{Code: "job", Queue: "q"})
		require.NoError(t, err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := a.RunOnce(ctx)
		done <- err
	}()
	key := lock.NewRedis(b.env.Broker.Client(), b.env.Prefix).Key(alert.LockName)
	require.Eventually(t, func() bool { return b.env.Broker.Client().Exists(ctx, key).Val() == 1 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, b.env.Broker.Client().Del(ctx, key).Err())
	select {
	case err := <-done:
		require.NoError(t, err, "a hand-over is no failure")
	case <-time.After(30 * time.Second):
		t.Fatal("the evaluation went on without its lock")
	}
}
