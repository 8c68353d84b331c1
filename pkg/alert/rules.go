package alert

import (
	"fmt"
	"slices"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/metrics"
	"github.com/taskd/taskd/pkg/monitor"
	"github.com/taskd/taskd/pkg/stats"
)

// Input is what one evaluation reads.
type Input struct {
	// Now is the database clock (stats' time): durations, windows and
	// cooldowns are counted on it, whichever node evaluates.
	Now time.Time
	// Local is this host's clock, for ages stamped by other hosts' clocks
	// (heartbeats, events), as the metrics compute them.
	Local time.Time
	// Snapshot holds the watchdog's recorded events too.
	Snapshot *monitor.Snapshot
	Stats    *stats.Stats
}

// severities are the rules' severity labels: critical when nothing will
// run until someone acts.
var severities = map[string]string{
	RuleBacklog:        "warning",
	RuleSuccessRate:    "warning",
	RuleHeartbeatStale: "critical",
	RuleNoConsumer:     "critical",
	RuleOldestDue:      "warning",
	RuleDeadTasks:      "warning",
	RuleWatchdogHeal:   "critical",
	RuleRedisMemory:    "warning",
}

// observation is what a rule sees of one alert in one evaluation.
type observation struct {
	labels      map[string]string
	annotations map[string]string
	active      bool
	rule        Rule
}

// evaluate applies the rules to in. st holds the previous states, for the
// dead-tasks rule, which compares with the past; it updates their memory.
func (r *Rules) evaluate(in *Input, st map[string]*state) map[string]*observation {
	out := map[string]*observation{}
	add := func(rule Rule, name string, active bool, summary string, labels ...string) {
		l := map[string]string{"alertname": name, "severity": severities[name]}
		for i := 0; i+1 < len(labels); i += 2 {
			l[labels[i]] = labels[i+1]
		}
		out[fingerprint(l)] = &observation{labels: l, active: active, rule: rule,
			annotations: map[string]string{"summary": summary, "description": describe(name, r), "runbook_url": runbook(name)}}
	}
	for _, q := range in.Stats.Queues {
		sq := in.Snapshot.Queues[q.Name]
		var waiting, consumers int64
		var oldest time.Duration
		if sq != nil {
			waiting, consumers, oldest = sq.Due+sq.Messages, int64(sq.Consumers), sq.OldestDue
		}
		// A paused queue keeps its backlog on purpose.
		if !r.Backlog.Off() && !q.Paused {
			add(r.Backlog, RuleBacklog, float64(waiting) > r.Backlog.Threshold,
				fmt.Sprintf("queue %s: %d tasks waiting (threshold %g)", q.Name, waiting, r.Backlog.Threshold), "queue", q.Name)
		}
		if !r.NoConsumer.Off() && !q.Paused {
			add(r.NoConsumer, RuleNoConsumer, waiting > 0 && float64(waiting) >= r.NoConsumer.Threshold && consumers == 0,
				fmt.Sprintf("queue %s: %d tasks waiting and no live worker consumes it", q.Name, waiting), "queue", q.Name)
		}
		if !r.OldestDue.Off() && !q.Paused {
			add(r.OldestDue, RuleOldestDue, oldest.Seconds() > r.OldestDue.Threshold,
				fmt.Sprintf("queue %s: the oldest due task has waited %s to be dispatched (threshold %s)",
					q.Name, clock.Format(oldest.Round(time.Second)), clock.Format(seconds(r.OldestDue.Threshold))), "queue", q.Name)
		}
		if !r.SuccessRate.Off() && q.SuccessRate10m != nil {
			add(r.SuccessRate, RuleSuccessRate, *q.SuccessRate10m < r.SuccessRate.Threshold,
				fmt.Sprintf("queue %s: %.2f%% of attempts succeeded over 10 minutes (threshold %g%%)",
					q.Name, 100**q.SuccessRate10m, 100*r.SuccessRate.Threshold), "queue", q.Name)
		}
		if !r.DeadTasks.Off() {
			labels := map[string]string{"alertname": RuleDeadTasks, "queue": q.Name}
			s := st[fingerprint(labels)]
			if s == nil {
				s = &state{}
				st[fingerprint(labels)] = s
			}
			rose := s.deadRise(q.Dead, in.Now, r.DeadTasks)
			add(Rule{Threshold: r.DeadTasks.Threshold}, RuleDeadTasks, rose,
				fmt.Sprintf("queue %s: %d dead tasks, %d more than %s ago",
					q.Name, q.Dead, q.Dead-s.Base, clock.Format(r.DeadTasks.For)), "queue", q.Name)
		}
	}
	if !r.HeartbeatStale.Off() {
		procs := in.Snapshot.Processes
		fresh := func(p broker.Process) bool { return in.Local.Sub(p.LastBeat).Seconds() <= r.HeartbeatStale.Threshold }
		for _, p := range procs {
			// A stale process is over once a process on its host that
			// started after its last beat beats (its supervisor restarted
			// it). Processes that were beside it all along replace
			// nothing: a host runs several.
			replaced := slices.ContainsFunc(procs, func(q broker.Process) bool {
				return q.ID != p.ID && q.Hostname() == p.Hostname() && q.StartedAt.After(p.LastBeat) && fresh(q)
			})
			age := in.Local.Sub(p.LastBeat)
			add(r.HeartbeatStale, RuleHeartbeatStale, !fresh(p) && !replaced,
				fmt.Sprintf("process %s on %s: last heartbeat %s ago (threshold %s)",
					p.ID, p.Hostname(), clock.Format(age.Round(time.Second)), clock.Format(seconds(r.HeartbeatStale.Threshold))),
				"process", p.ID, "host", p.Hostname())
		}
	}
	if !r.WatchdogHeal.Off() {
		type heals struct {
			n    int
			node string
			last broker.Event
		}
		by := map[string]*heals{}
		for _, e := range in.Snapshot.Events { // newest first
			if in.Local.Sub(e.At) > r.WatchdogHeal.For {
				break
			}
			if !metrics.IsHeal(e.Kind) {
				continue // recovery's and the locks' events are no heals
			}
			h := by[e.WorkerID]
			if h == nil {
				h = &heals{node: e.Node, last: e}
				by[e.WorkerID] = h
			}
			h.n++
		}
		for w, h := range by {
			add(Rule{Threshold: r.WatchdogHeal.Threshold}, RuleWatchdogHeal, float64(h.n) > r.WatchdogHeal.Threshold,
				fmt.Sprintf("worker %s on node %s: %d watchdog heals in %s, the last: %s: %s",
					w, h.node, h.n, clock.Format(r.WatchdogHeal.For), h.last.Kind, h.last.Detail), "worker", w, "node", h.node)
		}
	}
	if m := in.Snapshot.Redis; !r.RedisMemory.Off() && m != nil && m.Max > 0 {
		add(r.RedisMemory, RuleRedisMemory, m.Near(r.RedisMemory.Threshold),
			fmt.Sprintf("redis: %.0f%% of maxmemory used (%d of %d bytes; threshold %g%%)",
				100*m.Ratio(), m.Used, m.Max, 100*r.RedisMemory.Threshold))
	}
	return out
}

// deadRise updates the dead-tasks memory with the queue's dead count now
// and reports whether it rose by more than the threshold within the
// window: the baseline moves up after a window without a rise, and down
// when an operator retried or deleted dead tasks.
func (s *state) deadRise(dead int64, now time.Time, r Rule) bool {
	if !s.Seen {
		s.Seen, s.Base, s.Last = true, dead, dead
		return false
	}
	if dead > s.Last {
		s.Rise = now
	}
	s.Last = dead
	s.Base = min(s.Base, dead)
	if now.Sub(s.Rise) >= r.For {
		s.Base = dead
	}
	return float64(dead-s.Base) > r.Threshold
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// describe says what a rule means, for the notification's description.
// The Prometheus rules in deploy/prometheus carry the same text.
func describe(name string, rules *Rules) string {
	switch name {
	case RuleBacklog:
		r := rules.Backlog
		return fmt.Sprintf("More than %g tasks due and not started%s: workers do not keep up.", r.Threshold, forClause(r.For))
	case RuleSuccessRate:
		r := rules.SuccessRate
		return fmt.Sprintf("Fewer than %g%% of the attempts of the last 10 minutes succeeded%s.", 100*r.Threshold, forClause(r.For))
	case RuleHeartbeatStale:
		r := rules.HeartbeatStale
		return fmt.Sprintf("A taskd process last published its heartbeat more than %s ago and did not exit cleanly: crashed, frozen or cut off from Redis.",
			clock.Format(seconds(r.Threshold)))
	case RuleNoConsumer:
		r := rules.NoConsumer
		return fmt.Sprintf("At least %g tasks wait%s and no live worker consumes the queue: nothing will run them.", r.Threshold, forClause(r.For))
	case RuleOldestDue:
		r := rules.OldestDue
		return fmt.Sprintf("A due task has waited more than %s to be dispatched%s: schedulers are down or behind.",
			clock.Format(seconds(r.Threshold)), forClause(r.For))
	case RuleDeadTasks:
		r := rules.DeadTasks
		return fmt.Sprintf("More than %g tasks exhausted their retries within %s; they wait for an operator (taskd retry).", r.Threshold, clock.Format(r.For))
	case RuleRedisMemory:
		r := rules.RedisMemory
		return fmt.Sprintf("Redis uses at least %g%% of its maxmemory: at the limit it refuses new messages, and due tasks wait in the task center until workers free room.", 100*r.Threshold)
	case RuleWatchdogHeal:
		r := rules.WatchdogHeal
		return fmt.Sprintf("The watchdog healed a worker more than %g times within %s: a hung handler's slot abandoned, a worker alive but idle, or the process exited for its supervisor to restart it (see {prefix}events).",
			r.Threshold, clock.Format(r.For))
	}
	return ""
}

func forClause(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return " for " + clock.Format(d)
}

// runbookBase is the runbook of every rule; each has a section.
const runbookBase = "https://github.com/taskd/taskd/blob/main/docs/troubleshooting.md"

// runbooks are the rules' sections of runbookBase (GitHub heading anchors).
var runbooks = map[string]string{
	RuleBacklog:        "tasks-pile-up-backlog",
	RuleSuccessRate:    "attempts-fail-success-rate",
	RuleHeartbeatStale: "a-process-stopped-heartbeating",
	RuleNoConsumer:     "no-worker-consumes-a-queue",
	RuleOldestDue:      "due-tasks-wait-for-a-scheduler-oldest-due",
	RuleDeadTasks:      "dead-and-failed-tasks",
	RuleWatchdogHeal:   "workers-alive-but-idle",
	RuleRedisMemory:    "redis-is-near-maxmemory-redis-memory",
}

// runbook is the address of rule name's runbook section.
func runbook(name string) string { return runbookBase + "#" + runbooks[name] }
