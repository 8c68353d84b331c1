package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/pkg/task"
)

// QueueStatsKeep is how long a queue's per-minute counters of ended
// attempts are kept, and how far back they reach.
const QueueStatsKeep = 2 * time.Hour

// queueStatsKinds are the fields of a queue's minute: attempts that
// succeeded, failed (failed, dead, timeout, crashed), ended otherwise
// (cancelled) and were interrupted (handed back on shutdown).
const queueStatsKinds = "sfoi"

// Ended counts the attempts of one queue whose results were written, by
// outcome class.
type Ended struct {
	Succeeded, Failed, Other, Interrupted int64
}

// CountEnded counts in m one attempt of queue q that ended with o.
func CountEnded(m map[string]Ended, q string, o task.Outcome) {
	e := m[q]
	e.add(o)
	m[q] = e
}

func (e *Ended) add(o task.Outcome) {
	switch o {
	case task.OutcomeSucceeded:
		e.Succeeded++
	case task.OutcomeFailed, task.OutcomeDead, task.OutcomeTimeout, task.OutcomeCrashed:
		e.Failed++
	case task.OutcomeInterrupted:
		e.Interrupted++
	default:
		e.Other++
	}
}

// AckEnded is Ack that, in the same pipeline, adds ended to each queue's
// counters of the minute that contains at (the database clock).
func (b *Broker) AckEnded(ctx context.Context, w string, msgs map[string][]string, at time.Time, ended map[string]Ended) error {
	pipe := b.rdb.Pipeline()
	for q, raws := range msgs {
		key := b.Keys.Processing(q, w)
		if len(raws) == 1 {
			pipe.LRem(ctx, key, 1, raws[0])
			continue
		}
		args := make([]any, len(raws))
		for i, r := range raws {
			args[i] = r
		}
		// EVAL: a pipelined EVALSHA cannot fall back on NOSCRIPT. The list
		// only shrinks, so the script may run at maxmemory.
		b.pick(ackScript).Eval(ctx, pipe, []string{key}, args...)
	}
	m := at.Unix() / 60
	for q, e := range ended {
		since := m - 1
		if v, ok := b.endedLast.Swap(q, m); ok {
			since = v.(int64)
		}
		b.addMinute(ctx, pipe, b.Keys.QueueStats(q), QueueStatsKeep, m, since, queueStatsKinds,
			e.Succeeded, e.Failed, e.Other, e.Interrupted)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("ack messages: %w", err)
	}
	return nil
}

// ackScript removes messages from a processing list in one pass: one
// read of the list and one rewrite, however many messages it removes
// (LREM, one per message, scans the list for each).
//
//	KEYS[1] the processing list
//	ARGV    the messages to remove, one copy each
//	returns the number removed
var ackScript = newScript(`
local drop = {}
for i = 1, #ARGV do drop[ARGV[i]] = (drop[ARGV[i]] or 0) + 1 end
local all = redis.call('LRANGE', KEYS[1], 0, -1)
local keep, n = {}, 0
for i = 1, #all do
  local m = all[i]
  if (drop[m] or 0) > 0 then
    drop[m] = drop[m] - 1
    n = n + 1
  else
    keep[#keep + 1] = m
  end
end
if n == 0 then return 0 end
redis.call('DEL', KEYS[1])
for i = 1, #keep, 1000 do
  redis.call('RPUSH', KEYS[1], unpack(keep, i, math.min(#keep, i + 999)))
end
return n
`)

// QueueRuns are a queue's attempts whose results were written: over the
// last minute, those that ended and those that failed; over the last ten
// minutes, those that succeeded and those that succeeded or failed
// (interrupted and cancelled ones excluded). Minutes at the edge of a window count pro rata.
type QueueRuns struct {
	Processed1m, Failed1m  float64
	Succeeded10m, Ended10m float64
}

// QueueRuns reads the counters of queues up to now (the database clock):
// one HMGET per queue, in one pipeline.
func (b *Broker) QueueRuns(ctx context.Context, queues []string, now time.Time) (map[string]QueueRuns, error) {
	cur := now.Unix() / 60
	first := cur - 10
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(queues))
	for i, q := range queues {
		cmds[i] = readMinutes(ctx, pipe, b.Keys.QueueStats(q), first, cur, queueStatsKinds)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("read queue counters: %w", err)
	}
	out := make(map[string]QueueRuns, len(queues))
	for i, q := range queues {
		c := minuteCounts(cmds[i], queueStatsKinds)
		var r QueueRuns
		for k := range queueStatsKinds {
			r.Processed1m += window(c, first, now, 1, k)
		}
		r.Failed1m = window(c, first, now, 1, 1)
		r.Succeeded10m = window(c, first, now, 10, 0)
		// Cancelled attempts (an operator's kill) are no failure of the
		// queue: they stay out of the success rate, as interrupted do.
		r.Ended10m = r.Succeeded10m + window(c, first, now, 10, 1)
		out[q] = r
	}
	return out, nil
}

// WorkersProcessed returns the attempts each of workers finished over the
// minute before now, from their per-minute counters (kept by the workers'
// clocks).
func (b *Broker) WorkersProcessed(ctx context.Context, workers []string, now time.Time) (map[string]float64, error) {
	cur := now.Unix() / 60
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(workers))
	for i, w := range workers {
		cmds[i] = readMinutes(ctx, pipe, b.Keys.Throughput(w), cur-1, cur, "p")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("read worker counters: %w", err)
	}
	out := make(map[string]float64, len(workers))
	for i, w := range workers {
		out[w] = window(minuteCounts(cmds[i], "p"), cur-1, now, 1, 0)
	}
	return out, nil
}
