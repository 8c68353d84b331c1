package node

import (
	"github.com/taskd/taskd/pkg/alert"
	"github.com/taskd/taskd/pkg/lock"
)

// newAlerter builds the alerter of alerts.enabled. Any node may run it,
// whatever its roles: the nodes that do take turns through the alerts
// lock, and the one holding it evaluates the whole system.
func (n *Node) newAlerter() *alert.Alerter {
	a := n.cfg.Alerts
	rules := alert.Rules{
		Backlog:        alert.Rule{Threshold: float64(a.BacklogThreshold), For: a.BacklogFor},
		SuccessRate:    alert.Rule{Threshold: a.SuccessRateThreshold, For: a.SuccessRateFor},
		HeartbeatStale: alert.Rule{Threshold: a.HeartbeatStaleThreshold.Seconds(), For: a.HeartbeatStaleFor},
		NoConsumer:     alert.Rule{Threshold: float64(a.NoConsumerThreshold), For: a.NoConsumerFor},
		OldestDue:      alert.Rule{Threshold: a.OldestDueThreshold.Seconds(), For: a.OldestDueFor},
		DeadTasks:      alert.Rule{Threshold: float64(a.DeadThreshold), For: a.DeadWindow},
		WatchdogHeal:   alert.Rule{Threshold: float64(a.WatchdogThreshold), For: a.WatchdogWindow},
		RedisMemory:    alert.Rule{Threshold: a.RedisMemoryThreshold, For: a.RedisMemoryFor},
	}
	var notifiers []alert.Notifier
	if a.WebhookURL != "" {
		notifiers = append(notifiers, &alert.Webhook{URL: a.WebhookURL})
	}
	if a.SlackURL != "" {
		notifiers = append(notifiers, &alert.Slack{URL: a.SlackURL})
	}
	if a.WeComURL != "" {
		notifiers = append(notifiers, &alert.WeCom{URL: a.WeComURL})
	}
	queues := make([]string, 0)
	for q := range n.cfg.WorkerQueues() {
		queues = append(queues, q)
	}
	shards := n.cfg.QueueShards()
	return alert.New(alert.Config{
		Interval: a.Interval, Cooldown: a.Cooldown, Rules: rules, Notifiers: notifiers,
		Queues: queues, Configured: func(q string) int { return shards[q] }, Logger: n.log, Node: n.cfg.Node.ID,
	}, n.Store, n.Broker, lock.NewRedis(n.Broker.Client(), n.cfg.Redis.Prefix))
}
