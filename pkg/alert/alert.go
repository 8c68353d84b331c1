// Package alert evaluates alert rules over the system's state and sends
// firing and resolved notifications to webhooks, Slack and WeCom.
//
// The rules read what the metrics and `taskd stats` read (a monitor
// snapshot, stats.Collect, the process registry and the watchdog's
// events). Each rule has a threshold and a duration; one alert exists per
// rule and queue, node or worker (its fingerprint). An alert whose
// condition holds for the rule's duration fires; it resolves when the
// condition no longer holds. A firing alert is notified once, then again
// at most once per cooldown while it keeps firing; a resolve is notified
// when its firing was.
//
// Alerting is a singular duty: every node with alerts enabled runs an
// Alerter, and the one that holds the "alerts" lock evaluates and sends,
// keeping the lease while it lives; the others wait to take over. The
// state of every alert (since when its condition holds, firing, last
// notified) lives in the task center (task_alert), so a new holder
// neither repeats nor forgets what the previous one did, and a Redis that
// lost its data forgets nothing: a firing alert is still resolved.
package alert

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
	"time"
)

// Statuses of a notification.
const (
	StatusFiring   = "firing"
	StatusResolved = "resolved"
)

// Rule names, the alertname label.
const (
	RuleBacklog        = "taskd_backlog"
	RuleSuccessRate    = "taskd_success_rate"
	RuleHeartbeatStale = "taskd_heartbeat_stale"
	RuleNoConsumer     = "taskd_no_consumer"
	RuleOldestDue      = "taskd_oldest_due"
	RuleDeadTasks      = "taskd_dead_tasks"
	RuleWatchdogHeal   = "taskd_watchdog_heal"
	RuleRedisMemory    = "taskd_redis_memory"
)

// Rule is one rule's threshold and duration. A negative threshold turns
// the rule off.
type Rule struct {
	// Threshold in the rule's unit: tasks, a ratio, or seconds.
	Threshold float64
	// For is how long the condition must hold before the alert fires; for
	// the dead-tasks and watchdog rules it is the window they look back
	// over instead.
	For time.Duration
}

// Off reports whether the rule is switched off.
func (r Rule) Off() bool { return r.Threshold < 0 }

// Rules are the thresholds and durations of every rule.
type Rules struct {
	// Backlog: tasks waiting (due in the task center and queued in Redis)
	// above Threshold, for For.
	Backlog Rule
	// SuccessRate: succeeded / ended attempts over the last ten minutes
	// below Threshold, for For.
	SuccessRate Rule
	// HeartbeatStale: a process's heartbeat older than Threshold seconds,
	// for For.
	HeartbeatStale Rule
	// NoConsumer: at least Threshold tasks waiting and no live worker
	// consuming the queue, for For.
	NoConsumer Rule
	// OldestDue: the oldest due task not dispatched for more than
	// Threshold seconds, for For.
	OldestDue Rule
	// DeadTasks: the queue's dead tasks rose by more than Threshold within
	// the window For; resolves after a window with no rise.
	DeadTasks Rule
	// WatchdogHeal: more than Threshold watchdog heals of one worker
	// within the window For.
	WatchdogHeal Rule
	// RedisMemory: Redis uses at least Threshold of its maxmemory, for
	// For.
	RedisMemory Rule
}

// DefaultRules are the defaults of the alerts.* configuration keys.
var DefaultRules = Rules{
	Backlog:        Rule{Threshold: 10000, For: 5 * time.Minute},
	SuccessRate:    Rule{Threshold: 0.99},
	HeartbeatStale: Rule{Threshold: 60},
	NoConsumer:     Rule{Threshold: 1, For: time.Minute},
	OldestDue:      Rule{Threshold: 300},
	DeadTasks:      Rule{Threshold: 0, For: 10 * time.Minute},
	WatchdogHeal:   Rule{Threshold: 0, For: 10 * time.Minute},
	RedisMemory:    Rule{Threshold: 0.9},
}

// Alert is one notification: an alert that fired or resolved.
type Alert struct {
	Status string
	// Fingerprint identifies the alert: its rule and labels.
	Fingerprint string
	// Labels: alertname, severity and what the alert is about (queue,
	// process, host, worker, node).
	Labels map[string]string
	// Annotations: summary and description.
	Annotations map[string]string
	StartsAt    time.Time
	// EndsAt is zero while firing.
	EndsAt time.Time
}

// Name is the alert's rule.
func (a *Alert) Name() string { return a.Labels["alertname"] }

// fingerprint is the key of an alert in the state hash: its rule and its
// labels in order, e.g. taskd_backlog{queue=mail}.
func fingerprint(labels map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if k != "alertname" && k != "severity" {
			parts = append(parts, k+"="+labels[k])
		}
	}
	return labels["alertname"] + "{" + strings.Join(parts, ",") + "}"
}

// shortFingerprint is the 16 hex digits Alertmanager-style receivers expect.
func shortFingerprint(fp string) string {
	sum := sha256.Sum256([]byte(fp))
	return hex.EncodeToString(sum[:8])
}
