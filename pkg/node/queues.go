package node

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/queues"
	"github.com/taskd/taskd/pkg/store"
)

// openQueues builds the queue state every role of the node follows and
// makes the broker follow it. Configured shard counts are recorded for
// queues that have none yet, so nodes agree on one layout even if their
// configurations differ; `taskd reshard` changes it afterwards. Configured
// limits are recorded too, unless an operator set one (`taskd limit`):
// the last node to start wins, so a changed configuration takes effect as
// it is rolled out.
func openQueues(ctx context.Context, cfg *config.Config, st *store.Store, br *broker.Broker, log *slog.Logger) *queues.Cache {
	shards := cfg.QueueShards()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := st.QueueSeed(sctx, shards); err != nil {
		log.Warn("record configured shards", "err", err)
	}
	if err := st.LimitSeed(sctx, slices.Sorted(maps.Keys(cfg.WorkerQueues())), cfg.QueueLimits()); err != nil {
		log.Warn("record configured limits", "err", err)
	}
	c := queues.New(queues.Config{Configured: shards, Limits: cfg.QueueLimits(), Logger: log}, st, br)
	br.SetLayout(c)
	return c
}

// NewProducer returns the producer client of cfg for programs that submit
// (the Go API, taskd submit, taskd bench): it follows the task center's
// queue state, and makes br follow it (br is the caller's own, or nil),
// so that a task due now is dispatched by its submit within the window a
// scheduler keeps (producer's dispatch.go). The shards are the recorded
// ones only, one where none are: a submitter's configuration does not
// record them as a node's does, and pushing by it put messages in shards
// that the daemons, configured otherwise, did not take from.
func NewProducer(cfg *config.Config, st *store.Store, br *broker.Broker, log *slog.Logger) *producer.Client {
	o := producer.Options{MaxPayload: int(cfg.Submit.MaxPayload), QueueFor: cfg.QueueFor, Timezone: cfg.Cron.Timezone,
		Logger: log, Window: cmp.Or(cfg.Scheduler.Window, 2*cfg.Scheduler.BatchSize), WindowBytes: offIfZero(int64(cfg.Scheduler.WindowBytes))}
	if br != nil {
		o.Queues = queues.New(queues.Config{Limits: cfg.QueueLimits(), Logger: log}, st, br)
		br.SetLayout(o.Queues)
	}
	return producer.New(st, br, o)
}
