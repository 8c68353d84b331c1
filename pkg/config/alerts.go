package config

import (
	"net/url"
	"time"

	"github.com/taskd/taskd/pkg/alert"
)

// AlertsConfig configures alerting. Each rule has a threshold (a negative
// one switches the rule off) and a duration: how long its condition must
// hold before it fires (`_for`), or the window it looks back over
// (`_window`).
type AlertsConfig struct {
	// Enabled runs the alerter on this node; the nodes that run it take
	// turns through a lock, one evaluating and sending at a time.
	Enabled bool `mapstructure:"enabled"`
	// Interval between evaluations.
	Interval time.Duration `mapstructure:"interval"`
	// Cooldown: an alert is not notified as firing again within this long.
	Cooldown time.Duration `mapstructure:"cooldown"`
	// Notifiers: an Alertmanager-style webhook, a Slack incoming webhook,
	// a WeCom group robot ("" = not used).
	WebhookURL string `mapstructure:"webhook_url"`
	SlackURL   string `mapstructure:"slack_url"`
	WeComURL   string `mapstructure:"wecom_url"`

	BacklogThreshold        int64         `mapstructure:"backlog_threshold"`
	BacklogFor              time.Duration `mapstructure:"backlog_for"`
	SuccessRateThreshold    float64       `mapstructure:"success_rate_threshold"`
	SuccessRateFor          time.Duration `mapstructure:"success_rate_for"`
	HeartbeatStaleThreshold time.Duration `mapstructure:"heartbeat_stale_threshold"`
	HeartbeatStaleFor       time.Duration `mapstructure:"heartbeat_stale_for"`
	NoConsumerThreshold     int64         `mapstructure:"no_consumer_threshold"`
	NoConsumerFor           time.Duration `mapstructure:"no_consumer_for"`
	OldestDueThreshold      time.Duration `mapstructure:"oldest_due_threshold"`
	OldestDueFor            time.Duration `mapstructure:"oldest_due_for"`
	DeadThreshold           int64         `mapstructure:"dead_threshold"`
	DeadWindow              time.Duration `mapstructure:"dead_window"`
	WatchdogThreshold       int64         `mapstructure:"watchdog_threshold"`
	WatchdogWindow          time.Duration `mapstructure:"watchdog_window"`
	RedisMemoryThreshold    float64       `mapstructure:"redis_memory_threshold"`
	RedisMemoryFor          time.Duration `mapstructure:"redis_memory_for"`
}

// alertDefaults are the alerts.* keys with their defaults.
var alertDefaults = map[string]any{
	"alerts.enabled":                   false,
	"alerts.interval":                  dur(alert.IntervalDefault),
	"alerts.cooldown":                  dur(alert.CooldownDefault),
	"alerts.webhook_url":               "",
	"alerts.slack_url":                 "",
	"alerts.wecom_url":                 "",
	"alerts.backlog_threshold":         10000,
	"alerts.backlog_for":               "5m",
	"alerts.success_rate_threshold":    0.99,
	"alerts.success_rate_for":          "0s",
	"alerts.heartbeat_stale_threshold": "1m",
	"alerts.heartbeat_stale_for":       "0s",
	"alerts.no_consumer_threshold":     1,
	"alerts.no_consumer_for":           "1m",
	"alerts.oldest_due_threshold":      "5m",
	"alerts.oldest_due_for":            "0s",
	"alerts.dead_threshold":            0,
	"alerts.dead_window":               "10m",
	"alerts.watchdog_threshold":        0,
	"alerts.watchdog_window":           "10m",
	"alerts.redis_memory_threshold":    alert.DefaultRules.RedisMemory.Threshold,
	"alerts.redis_memory_for":          dur(alert.DefaultRules.RedisMemory.For),
}

func init() {
	for k, v := range alertDefaults {
		defaults[k] = v
	}
}

// validateAlerts checks the alerts section.
func (c *Config) validateAlerts() error {
	a := c.Alerts
	if a.Interval <= 0 {
		return invalid("alerts.interval", a.Interval.String(), "a positive duration")
	}
	if a.Cooldown <= 0 {
		return invalid("alerts.cooldown", a.Cooldown.String(), "a positive duration")
	}
	for key, d := range map[string]time.Duration{"alerts.backlog_for": a.BacklogFor, "alerts.success_rate_for": a.SuccessRateFor,
		"alerts.heartbeat_stale_for": a.HeartbeatStaleFor, "alerts.no_consumer_for": a.NoConsumerFor, "alerts.oldest_due_for": a.OldestDueFor,
		"alerts.redis_memory_for": a.RedisMemoryFor} {
		if d < 0 {
			return invalid(key, d.String(), "a duration not negative")
		}
	}
	if a.SuccessRateThreshold > 1 {
		// 99 for 99% would hold every queue below it, firing for good.
		return invalid("alerts.success_rate_threshold", a.SuccessRateThreshold, "a share of attempts in [0, 1] (0.99 for 99%%), 0 or negative to switch the rule off")
	}
	if a.RedisMemoryThreshold > 1 || a.RedisMemoryThreshold == 0 {
		return invalid("alerts.redis_memory_threshold", a.RedisMemoryThreshold, "a share of maxmemory in (0, 1], or negative to switch the rule off")
	}
	if a.DeadWindow <= 0 {
		return invalid("alerts.dead_window", a.DeadWindow.String(), "a positive duration")
	}
	if a.WatchdogWindow <= 0 {
		return invalid("alerts.watchdog_window", a.WatchdogWindow.String(), "a positive duration")
	}
	for key, u := range map[string]string{"webhook_url": a.WebhookURL, "slack_url": a.SlackURL, "wecom_url": a.WeComURL} {
		if u == "" {
			continue
		}
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return invalid("alerts."+key, u, "an http or https URL")
		}
	}
	return nil
}
