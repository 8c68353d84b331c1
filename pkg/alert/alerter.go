package alert

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/lock"
	"github.com/taskd/taskd/pkg/monitor"
	"github.com/taskd/taskd/pkg/startstop"
	"github.com/taskd/taskd/pkg/stats"
	"github.com/taskd/taskd/pkg/store"
)

// Defaults of Config.
const (
	IntervalDefault = 15 * time.Second
	CooldownDefault = 30 * time.Minute
	// LockName is the lock the evaluating node holds.
	LockName = "alerts"
	// sendTimeout bounds one notifier's delivery.
	sendTimeout = 10 * time.Second
)

// Config configures an Alerter.
type Config struct {
	// Interval between evaluations.
	Interval time.Duration
	// Cooldown: an alert still firing is not notified again within this
	// long of its last firing notification (one that fires again after
	// its resolve was sent is notified at once).
	Cooldown time.Duration
	Rules    Rules
	// Notifiers receive every notification (none: alerts are evaluated
	// and kept in Redis only).
	Notifiers []Notifier
	// Queues are the configured queues, reported even when empty, and
	// Configured their configured shard counts (see stats.Source).
	Queues     []string
	Configured func(queue string) int
	Logger     *slog.Logger
	// Node names this node in the lock events it records.
	Node string
	// Clock, when set, stands for both the database clock (durations,
	// cooldowns) and this host's (heartbeat ages), so tests drive time;
	// default: the database clock and the host's.
	Clock clock.Clock
}

// Event kinds the alerter records when it takes or loses the alerts lock.
const (
	KindLockTaken = "lock taken"
	KindLockLost  = "lock lost"
)

// Result is what one evaluation did.
type Result struct {
	// Leader: this alerter held the lock and evaluated.
	Leader   bool
	Firing   int // alerts firing after the evaluation
	Notified int // notifications handed to the notifiers
}

// Alerter evaluates the rules and notifies, on the one node that holds
// the alerts lock.
type Alerter struct {
	cfg    Config
	store  *store.Store
	broker *broker.Broker
	locker lock.Locker
	log    *slog.Logger
	runner startstop.Runner

	mu    sync.Mutex
	lease *lock.Lease
	// failures counts this node's evaluations failed in a row; failing
	// says that it notified taskd_alerts_failing, to be resolved.
	failures int
	failing  *Alert
}

// failLimit is how many evaluations in a row may fail before the node
// gives up the lock (another node, whose task center may answer, takes
// it) and tells the notifiers that alerting is broken.
const failLimit = 2

// RuleAlertsFailing is the alert of an alerter that cannot evaluate.
const RuleAlertsFailing = "taskd_alerts_failing"

// New returns an alerter reading s and b, coordinating through l.
func New(cfg Config, s *store.Store, b *broker.Broker, l lock.Locker) *Alerter {
	cfg.Interval = cmp.Or(cfg.Interval, IntervalDefault)
	cfg.Cooldown = cmp.Or(cfg.Cooldown, CooldownDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Alerter{cfg: cfg, store: s, broker: b, locker: l, log: cfg.Logger.With("component", "alerter")}
}

// Start evaluates every Interval until Stop.
func (a *Alerter) Start(ctx context.Context) error {
	return a.runner.Start(ctx, func(ctx context.Context) {
		startstop.Every(ctx, a.cfg.Interval, func(ctx context.Context) {
			if _, err := a.RunOnce(ctx); err != nil && ctx.Err() == nil {
				a.log.Error("alert evaluation failed", "err", err)
			}
		})
	})
}

// Stop stops evaluating and releases the lock, so another node takes over
// at once. Safe to call twice or without Start.
func (a *Alerter) Stop() {
	a.runner.Stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lease != nil {
		ctx, cancel := context.WithTimeout(context.Background(), lock.CallTimeout)
		defer cancel()
		if err := a.lease.Release(ctx); err != nil {
			a.log.Warn("release the alerts lock", "err", err)
		}
		a.lease = nil
	}
}

// lockTTL is long enough that a holder renewing every TTL/3 keeps the lock
// across evaluations, short enough that a vanished holder is replaced
// within a few intervals.
func (a *Alerter) lockTTL() time.Duration { return max(3*a.cfg.Interval, lock.MinTTL) }

// RunOnce evaluates once if this alerter holds, or can take, the lock.
func (a *Alerter) RunOnce(ctx context.Context) (Result, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lease != nil && !a.lease.Valid() {
		a.log.Warn("alerts lock lost", "err", a.lease.Err())
		a.record(ctx, KindLockLost, fmt.Sprintf("%s: this node stopped evaluating alerts: %v", LockName, a.lease.Err()))
		_ = a.lease.Release(context.WithoutCancel(ctx))
		a.lease = nil
	}
	if a.lease == nil {
		lease, err := a.locker.Acquire(ctx, LockName, a.lockTTL())
		if errors.Is(err, lock.ErrNotAcquired) {
			a.recovered(ctx) // another node evaluates
			return Result{}, nil
		}
		if err != nil {
			// No node can take the lock while Redis does not answer:
			// each says so itself, or nobody would.
			if ctx.Err() == nil {
				a.failed(ctx, err)
			}
			return Result{}, err
		}
		a.log.Info("this node evaluates and sends alerts")
		a.record(ctx, KindLockTaken, LockName+": this node evaluates and sends alerts")
		a.lease = lease
	}
	// Work stops when the lease is lost.
	lctx, cancel := context.WithCancel(a.lease.Context())
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	res, err := a.evaluate(lctx)
	res.Leader = true
	if err == nil {
		a.recovered(ctx)
		return res, nil
	}
	if ctx.Err() == nil && !a.lease.Valid() {
		// The lock was lost while this evaluation ran, which stopped it:
		// a hand-over, not a failure. The next run says so and tries to
		// take the lock again.
		return Result{}, nil
	}
	if ctx.Err() == nil {
		a.failed(ctx, err)
	}
	return res, err
}

// failed counts a failed evaluation, or a failed attempt to take the lock.
// At failLimit in a row the node tells the notifiers (they need neither
// MySQL nor Redis) and gives the lock up: a node that lost its task center
// must not keep every alert silent, nor every node one that lost Redis.
func (a *Alerter) failed(ctx context.Context, err error) {
	a.failures++
	if a.failures < failLimit {
		return
	}
	a.failures = 0
	if a.lease != nil {
		a.log.Error("alerts cannot be evaluated; giving the lock to another node", "err", err)
		a.record(ctx, KindLockLost, fmt.Sprintf("%s: this node gave the lock up after %d failed evaluations: %v", LockName, failLimit, err))
		_ = a.lease.Release(context.WithoutCancel(ctx))
		a.lease = nil
	} else {
		a.log.Error("alerts cannot be evaluated: the alerts lock cannot be taken", "err", err)
	}
	if a.failing != nil {
		return
	}
	now := time.Now()
	al := Alert{Status: StatusFiring, StartsAt: now,
		Labels: map[string]string{"alertname": RuleAlertsFailing, "severity": "critical", "node": a.cfg.Node},
		Annotations: map[string]string{"summary": fmt.Sprintf("node %s cannot evaluate alerts: %v", a.cfg.Node, err),
			"description": "Alerts are not evaluated while the task center or Redis does not answer this node; another node takes over if it can."}}
	al.Fingerprint = fingerprint(al.Labels)
	if a.notify(ctx, []Alert{al}) {
		a.failing = &al
	}
}

// recovered resolves this node's taskd_alerts_failing once alerts are
// evaluated again, here or by the node that holds the lock.
func (a *Alerter) recovered(ctx context.Context) {
	a.failures = 0
	if a.failing == nil {
		return
	}
	al := *a.failing
	al.Status, al.EndsAt = StatusResolved, time.Now()
	if a.notify(ctx, []Alert{al}) {
		a.failing = nil
	}
}

// record adds a lock event for operators; best effort.
func (a *Alerter) record(ctx context.Context, kind, detail string) {
	if err := a.broker.RecordEvent(context.WithoutCancel(ctx), &broker.Event{At: time.Now(), Kind: kind, Node: a.cfg.Node, Detail: detail}); err != nil {
		a.log.Warn("record lock event", "err", err)
	}
}

// gather reads the rules' input.
func (a *Alerter) gather(ctx context.Context) (*Input, error) {
	snap, err := monitor.Take(ctx, a.store, a.broker, a.cfg.Queues)
	if err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	st, err := stats.Collect(ctx, stats.Source{Store: a.store, Broker: a.broker, Queues: a.cfg.Queues, Configured: a.cfg.Configured,
		Clock: a.cfg.Clock})
	if err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	return &Input{Now: st.At, Local: clock.Or(a.cfg.Clock).Now(), Snapshot: snap, Stats: st}, nil
}

// state is one alert's state in Redis.
type state struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// Active: since when the condition holds (zero: it does not).
	Active time.Time `json:"active,omitzero"`
	// Firing since StartsAt.
	Firing   bool      `json:"firing,omitempty"`
	StartsAt time.Time `json:"starts_at,omitzero"`
	// Notified is the time of the last firing notification; Sent says it
	// belongs to the current firing, so its resolve is notified too.
	Notified time.Time `json:"notified,omitzero"`
	Sent     bool      `json:"sent,omitempty"`
	// Dead-tasks memory: seen, count at the last evaluation, baseline and
	// time of the last rise.
	Seen bool      `json:"seen,omitempty"`
	Last int64     `json:"last,omitempty"`
	Base int64     `json:"base,omitempty"`
	Rise time.Time `json:"rise,omitzero"`
}

// evaluate reads the input and the states, applies the rules, sends what
// changed and saves the states.
func (a *Alerter) evaluate(ctx context.Context) (Result, error) {
	var res Result
	in, err := a.gather(ctx)
	if err != nil {
		return res, err
	}
	raw, err := a.store.AlertStates(ctx)
	if err != nil {
		return res, err
	}
	states := make(map[string]*state, len(raw))
	for fp, doc := range raw {
		s := &state{}
		if json.Unmarshal([]byte(doc), s) == nil {
			states[fp] = s
		}
	}
	obs := a.cfg.Rules.evaluate(in, states)
	var out []Alert
	prev := map[string]state{} // before the step, for the alerts notified
	for fp, s := range states {
		o := obs[fp]
		if o == nil { // its queue, process or worker is gone
			o = &observation{labels: s.Labels, annotations: s.Annotations}
			// A dead process leaves the registry an hour after its last
			// beat: gone from there, it is still dead until a process
			// started since on its host replaces it.
			if s.Firing && s.Labels["alertname"] == RuleHeartbeatStale && !restartedOn(in, s.Labels["host"], s.StartsAt) {
				o.active, o.rule = true, a.cfg.Rules.HeartbeatStale
			}
		}
		before := *s
		if n := s.step(fp, o, in.Now, a.cfg.Cooldown); n != nil {
			out = append(out, *n)
			prev[fp] = before
		}
	}
	for fp, o := range obs {
		if states[fp] == nil {
			s := &state{}
			states[fp] = s
			if n := s.step(fp, o, in.Now, a.cfg.Cooldown); n != nil {
				out = append(out, *n)
				prev[fp] = state{}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Fingerprint < out[j].Fingerprint })
	sent := a.notify(ctx, out)
	set, del := map[string]string{}, []string{}
	for fp, s := range states {
		if p, ok := prev[fp]; ok && !sent {
			// No notifier took it: send it again next time.
			s.Notified, s.Sent, s.Firing = p.Notified, p.Sent, p.Firing || s.Firing
		}
		if s.Firing {
			res.Firing++
		}
		if s.idle(in.Now, a.cfg.Cooldown) && obs[fp] == nil {
			del = append(del, fp)
			continue
		}
		b, err := json.Marshal(s)
		if err != nil {
			return res, fmt.Errorf("alert state: %w", err)
		}
		set[fp] = string(b)
	}
	if sent {
		res.Notified = len(out)
	}
	return res, a.store.SaveAlertStates(ctx, set, del)
}

// restartedOn reports whether a process of host that started after since
// beats in the input.
func restartedOn(in *Input, host string, since time.Time) bool {
	return slices.ContainsFunc(in.Snapshot.Processes, func(p broker.Process) bool {
		return p.Hostname() == host && p.StartedAt.After(since)
	})
}

// step advances one alert by an observation at now and returns the
// notification to send, if any.
func (s *state) step(fp string, o *observation, now time.Time, cooldown time.Duration) *Alert {
	s.Labels, s.Annotations = o.labels, o.annotations
	if !o.active {
		s.Active = time.Time{}
		if !s.Firing {
			return nil
		}
		s.Firing = false
		if !s.Sent {
			return nil
		}
		// A receiver told "resolved" hears of the next firing at once:
		// the cooldown spaces reminders of one firing, not a new one.
		s.Sent, s.Notified = false, time.Time{}
		return &Alert{Status: StatusResolved, Fingerprint: fp, Labels: s.Labels, Annotations: s.Annotations, StartsAt: s.StartsAt, EndsAt: now}
	}
	if s.Active.IsZero() {
		s.Active = now
	}
	if !s.Firing && now.Sub(s.Active) >= o.rule.For {
		s.Firing, s.StartsAt = true, now
	}
	if !s.Firing || (!s.Notified.IsZero() && now.Sub(s.Notified) < cooldown) {
		return nil
	}
	s.Notified, s.Sent = now, true
	return &Alert{Status: StatusFiring, Fingerprint: fp, Labels: s.Labels, Annotations: s.Annotations, StartsAt: s.StartsAt}
}

// idle reports whether the state holds nothing worth keeping.
func (s *state) idle(now time.Time, cooldown time.Duration) bool {
	return !s.Firing && s.Active.IsZero() && !s.Seen && now.Sub(s.Notified) >= cooldown
}

// notify hands the alerts to every notifier; it reports whether at least
// one took them (none configured counts as taken).
func (a *Alerter) notify(ctx context.Context, alerts []Alert) bool {
	// With no notifier configured the log is where alerts go.
	ok := len(a.cfg.Notifiers) == 0
	for _, n := range a.cfg.Notifiers {
		nctx, cancel := context.WithTimeout(ctx, sendTimeout)
		err := n.Notify(nctx, alerts)
		cancel()
		if err != nil {
			a.log.Error("send alerts", "notifier", n.Name(), "alerts", len(alerts), "err", err)
			continue
		}
		ok = true
	}
	for _, al := range alerts {
		if ok {
			a.log.Info("alert "+al.Status, "alert", al.Name(), "fingerprint", al.Fingerprint, "summary", al.Annotations["summary"])
		} else {
			a.log.Warn("alert "+al.Status+", not delivered: sent again at the next evaluation", "alert", al.Name(),
				"fingerprint", al.Fingerprint, "summary", al.Annotations["summary"])
		}
	}
	return ok
}
