package recovery

import (
	"context"
	"time"
)

// retireGrace is how old a reshard to fewer shards must be before its
// retired shards stop being consumed: every node's queue state follows
// within about a second, so no scheduler still pushes there.
const retireGrace = 15 * time.Second

// retireShards lowers the span of each queue resharded to fewer shards
// once its retired shards are empty, so workers stop polling them. The
// workers empty them: moving their messages into the live shards put them
// ahead of older ones there, and a list whose oldest end is not its oldest
// message makes recovery take the older ones for lost and run them twice.
// A queue that fails is logged and left for the next pass: the other
// queues, and the rest of the pass, go on.
func (r *Recoverer) retireShards(ctx context.Context) {
	qs, err := r.store.QueueList(ctx)
	if err != nil {
		r.log.Warn("retire shards: read the queues", "err", err)
		return
	}
	for _, q := range qs {
		// The grace has certainly passed by the database clock's lower
		// bound (updated_at is the database's).
		if q.Shards < 1 || q.Span <= q.Shards || r.clock.Earliest().Sub(q.UpdatedAt) < retireGrace {
			continue
		}
		left, err := r.broker.RetiredLeft(ctx, q.Name, q.Shards, q.Span)
		if err != nil {
			r.log.Warn("retire shards", "queue", q.Name, "err", err)
			continue
		}
		if left > 0 {
			continue // still being taken (or paused: polled until resumed and drained)
		}
		ok, err := r.store.QueueShrinkSpan(ctx, q, retireGrace)
		if err != nil {
			r.log.Warn("retire shards", "queue", q.Name, "err", err)
			continue
		}
		if ok {
			r.broker.NudgeQueues(ctx) // best effort: nodes re-read within a second
			r.log.Info("retired shards", "queue", q.Name, "shards", q.Shards, "was", q.Span)
		}
	}
}
