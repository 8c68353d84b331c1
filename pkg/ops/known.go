package ops

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/suggest"
	"github.com/taskd/taskd/pkg/task"
)

// An action on a task or queue that does not exist is "not found" and
// writes nothing, not even an audit row: a mistyped id or queue name must
// not look like success, and pausing a queue nobody uses must not leave a
// phantom queue behind.

// NewFromConfig returns the operator actions with what c configures: the
// shards and names of queues and the default time zone of periodic tasks.
func NewFromConfig(s *store.Store, b *broker.Broker, c *config.Config) *Ops {
	o := New(s, b)
	queues := c.WorkerQueues()
	o.Configured, o.ConfiguredLimit = ConfiguredOf(c)
	o.Known = func(q string) bool { _, ok := queues[q]; return ok }
	o.Handled = func(code string) bool { _, ok := c.Handlers[code]; return ok }
	o.QueueNames, o.CodeNames = slices.Collect(maps.Keys(queues)), slices.Collect(maps.Keys(c.Handlers))
	o.Timezone = c.Cron.Timezone
	o.KillWait = KillWaitFor(c)
	return o
}

// ConfiguredOf returns each queue's shard count and limit under c, as
// Ops' Configured and ConfiguredLimit: what a reader without the task
// center (stats and tasktop while MySQL is down) shows.
func ConfiguredOf(c *config.Config) (shards func(queue string) int, limits func(queue string) limit.Limit) {
	sh, li := c.QueueShards(), c.QueueLimits()
	return func(q string) int { return sh[q] }, func(q string) limit.Limit { return li[q] }
}

// KillWaitFor is how long a kill waits for the worker running its task
// under c. A handler that ignores SIGTERM ends at SIGKILL, kill_grace
// later: its worker answers then. Waiting less took the task as if its
// worker were dead ("its worker did not answer") while it ran on.
func KillWaitFor(c *config.Config) time.Duration {
	return max(killWaitDefault, c.Worker.KillGrace+2*time.Second)
}

// QueueKnown reports whether queue q exists for taskd: the configuration
// names it (Known), a live worker consumes it, or the task center has a
// node's handler for it, a pause, a reshard or an unfinished, dead or
// cancelled task of it.
func (o *Ops) QueueKnown(ctx context.Context, q string) (bool, error) {
	if o.Known != nil && o.Known(q) {
		return true, nil
	}
	// The cheap sources first: the task center's check reads the index
	// entries of every waiting task (BenchmarkQueueNamed).
	if o.broker != nil {
		live, err := o.broker.LiveWorkers(ctx)
		if err != nil {
			return false, err
		}
		for _, w := range live {
			if slices.Contains(w.Queues, q) {
				return true, nil
			}
		}
	}
	return o.store.QueueNamed(ctx, q)
}

// CheckQueue is a not-found error unless queue q is known.
func (o *Ops) CheckQueue(ctx context.Context, q string) error {
	if err := task.ValidateName("queue", q); err != nil {
		return err
	}
	known, err := o.QueueKnown(ctx, q)
	if err != nil {
		return err
	}
	if !known {
		return task.NotFoundf("unknown queue %q%s: no handler or queues: entry configures it, no worker consumes it and no task is in it",
			q, suggest.DidYouMean(q, o.QueueNames))
	}
	return nil
}

// CheckCode is a not-found error unless task code code is known: the
// configuration has its handler (Handled), a node recorded a route for
// it, or a task of it is in the task center.
func (o *Ops) CheckCode(ctx context.Context, code string) error {
	if o.Handled != nil && o.Handled(code) {
		return nil
	}
	known, err := o.store.CodeNamed(ctx, code)
	if err != nil {
		return err
	}
	if !known {
		return task.NotFoundf("unknown task code %q%s: no handler is configured for it, no node routes it and no task has it",
			code, suggest.DidYouMean(code, o.CodeNames))
	}
	return nil
}

// resolve returns the tasks t names, each once. Ids that name no task, or
// a filter on an unknown queue or task code, are a not-found error.
func (o *Ops) resolve(ctx context.Context, t Target) ([]int64, error) {
	if t.Filter != nil && t.Filter.Queue != "" {
		if err := o.CheckQueue(ctx, t.Filter.Queue); err != nil {
			return nil, err
		}
	}
	if t.Filter != nil && t.Filter.Code != "" {
		if err := o.CheckCode(ctx, t.Filter.Code); err != nil {
			return nil, err
		}
	}
	ids, err := o.IDs(ctx, t)
	if err != nil {
		return nil, err
	}
	ids = dedupe(ids)
	if t.Filter != nil || t.Lenient || len(ids) == 0 {
		return ids, nil
	}
	states, err := o.store.TaskStates(ctx, ids)
	if err != nil {
		return nil, err
	}
	var missing []int64
	for _, id := range ids {
		if _, ok := states[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) == 1 {
		return nil, task.NotFoundf("task %d not found", missing[0])
	}
	if len(missing) > 1 {
		return nil, task.NotFoundf("tasks %s not found", joinIDs(missing, 10))
	}
	return ids, nil
}

// StillMatching narrows the ids of t, a filter's tasks as resolved when the
// operator was asked, to those that match the filter now; the others are
// returned as skipped, each with its status now. A task that stopped
// matching while the question waited (retried, run, deleted by another
// operator) is left alone, and one that began to match is not taken: it
// was not confirmed. A target without a filter is returned as it is.
func (o *Ops) StillMatching(ctx context.Context, t Target) (Target, []Skipped, error) {
	if t.Filter == nil || len(t.IDs) == 0 {
		return t, nil, nil
	}
	now, err := o.Select(ctx, *t.Filter)
	if err != nil {
		return t, nil, err
	}
	match := make(map[int64]bool, len(now))
	for _, id := range now {
		match[id] = true
	}
	keep := []int64{}
	var left []int64
	for _, id := range t.IDs {
		if match[id] {
			keep = append(keep, id)
		} else {
			left = append(left, id)
		}
	}
	skipped, err := o.skipped(ctx, left, func(int64, store.TaskState) string { return "no longer matches the filter (changed meanwhile)" })
	if err != nil {
		return t, nil, err
	}
	t.IDs = keep
	return t, skipped, nil
}

// dedupe drops repeated ids, keeping the order.
func dedupe(ids []int64) []int64 {
	seen := make(map[int64]bool, len(ids))
	out := ids[:0:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// Resolve returns t with the tasks it names in IDs, checked: ids that name
// no task, or a filter on an unknown queue or task code, are a not-found error. A
// front end resolves before it asks, so the question has the count and the
// action applies to exactly the tasks confirmed.
func (o *Ops) Resolve(ctx context.Context, t Target) (Target, error) {
	ids, err := o.resolve(ctx, t)
	if err != nil {
		return t, err
	}
	t.IDs = nonNil(ids)
	return t, nil
}
