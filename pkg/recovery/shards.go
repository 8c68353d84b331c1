package recovery

import (
	"context"
	"time"
)

// retireGrace is how old a reshard to fewer shards must be before its
// retired shards are emptied and no longer consumed: every node's queue
// state follows within about a second, so no scheduler still pushes there.
const retireGrace = 15 * time.Second

// retireShards moves what is left in the shards a reshard retired into the
// live ones (atomically, in order) and lowers the queue's span, so workers
// stop polling them. It returns the number of messages moved.
func (r *Recoverer) retireShards(ctx context.Context) (int64, error) {
	qs, err := r.store.QueueList(ctx)
	if err != nil {
		return 0, err
	}
	var moved int64
	for _, q := range qs {
		// The grace has certainly passed by the database clock's lower
		// bound (updated_at is the database's).
		if q.Shards < 1 || q.Span <= q.Shards || r.clock.Earliest().Sub(q.UpdatedAt) < retireGrace {
			continue
		}
		n, err := r.broker.RetireShards(ctx, q.Name, q.Shards, q.Span)
		if err != nil {
			return moved, err
		}
		moved += n
		ok, err := r.store.QueueShrinkSpan(ctx, q, retireGrace)
		if err != nil {
			return moved, err
		}
		if ok {
			r.broker.NudgeQueues(ctx) // best effort: nodes re-read within a second
			r.log.Info("retired shards", "queue", q.Name, "shards", q.Shards, "was", q.Span, "moved", n)
		}
	}
	return moved, nil
}
