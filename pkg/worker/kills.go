package worker

import (
	"context"
	"log/slog"

	"github.com/taskd/taskd/pkg/startstop"
)

// killListener cancels attempts that an operator killed. Every worker gets
// every request; the one running that attempt acts.
type killListener struct {
	broker Broker
	log    *slog.Logger
	// kill cancels the attempt if a slot runs it, returning its job.
	kill   func(id int64, attempt int) *job
	runner startstop.Runner
}

// Start subscribes until Stop.
func (k *killListener) Start(ctx context.Context) error {
	return k.runner.Start(ctx, k.loop)
}

// Stop unsubscribes.
func (k *killListener) Stop() { k.runner.Stop() }

func (k *killListener) loop(ctx context.Context) {
	kills, closeKills := k.broker.Kills(ctx)
	stop := context.AfterFunc(ctx, func() { closeKills() })
	defer func() {
		if stop() { // the subscription ended by itself
			closeKills()
		}
	}()
	for r := range kills {
		if j := k.kill(r.ID, r.Attempt); j != nil {
			k.log.Warn("killing task on operator request", "task_id", r.ID, "task_code", j.msg.Code, "attempt", r.Attempt)
		}
	}
}
