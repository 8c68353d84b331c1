// Package monitor takes snapshots of the whole system, read from the task
// center and Redis: queue depths, backlog and its age, workers with their
// heartbeats and per-minute throughput, processes. The metrics endpoint and
// the alert rules read the same snapshot.
package monitor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/store"
)

// Minutes of per-minute throughput a snapshot reads.
const Minutes = 60

// Queue is one queue in a snapshot.
type Queue struct {
	store.QueueDepth
	// Messages waiting in Redis (all shards), and per shard of the span
	// workers consume.
	Messages int64
	Shards   []int64
	// Consumers is the number of live workers that consume the queue.
	Consumers int
	// Paused queues keep their backlog on purpose.
	Paused bool
}

// Snapshot is the state of the system at one moment.
type Snapshot struct {
	At     time.Time
	Queues map[string]*Queue
	// MaxTaskID is the highest task id: tasks submitted so far.
	MaxTaskID int64
	Workers   []broker.WorkerStatus
	// Processes seen in the last hour, with their last heartbeat.
	Processes []broker.Process
	// Events are the watchdog's recorded events of the last hour, newest
	// first.
	Events []broker.Event
	// Redis is Redis's memory use against maxmemory; nil where INFO is
	// refused (some managed Redis).
	Redis *broker.Memory
	// MySQLErr is set by TakePartial when the task center did not answer:
	// the snapshot holds what Redis does alone (each queue's messages,
	// consumers and pause, the workers, processes and events), and each
	// queue's counts of tasks, its due backlog and MaxTaskID are unknown
	// (left zero).
	MySQLErr error
}

// eventsRead bounds the watchdog events a snapshot reads.
const eventsRead = 1000

// Take reads a snapshot. queues are queues to report even when they hold
// nothing (the configured ones).
func Take(ctx context.Context, st *store.Store, br *broker.Broker, queues []string) (*Snapshot, error) {
	s, err := TakePartial(ctx, st, br, queues)
	if err != nil {
		return nil, err
	}
	if s.MySQLErr != nil {
		return nil, s.MySQLErr
	}
	return s, nil
}

// TakePartial is Take, except that a task center that does not answer
// leaves what Redis holds, with MySQLErr saying why: the metrics of the
// workers, their unwritten results and the queues' messages are what an
// operator watches during a MySQL outage. The task center gets half of
// ctx's time, so that one that hangs leaves Redis the rest.
func TakePartial(ctx context.Context, st *store.Store, br *broker.Broker, queues []string) (*Snapshot, error) {
	mctx, cancel := clock.HalfLeft(ctx)
	depths, maxID, err := st.QueueDepths(mctx)
	cancel()
	s := &Snapshot{At: time.Now(), Queues: map[string]*Queue{}, MaxTaskID: maxID}
	if err != nil {
		s.MySQLErr = fmt.Errorf("MySQL: %w", err)
	}
	for q, d := range depths {
		s.Queues[q] = &Queue{QueueDepth: *d}
	}
	for _, q := range queues {
		if s.Queues[q] == nil {
			s.Queues[q] = &Queue{QueueDepth: store.QueueDepth{Queue: q}}
		}
	}
	if err := s.readRedis(ctx, br); err != nil {
		// Both down: the error names both.
		return nil, errors.Join(s.MySQLErr, err)
	}
	return s, nil
}

// readRedis reads what Redis holds into s: workers, processes, memory,
// events, and each queue's consumers, pause and messages.
func (s *Snapshot) readRedis(ctx context.Context, br *broker.Broker) (err error) {
	if s.Workers, err = br.Workers(ctx, Minutes); err != nil {
		return err
	}
	if s.Processes, err = br.Processes(ctx, time.Hour); err != nil {
		return err
	}
	if m, err := br.Memory(ctx); err == nil {
		s.Redis = &m
	}
	events, err := br.Events(ctx, eventsRead)
	if err != nil {
		return err
	}
	for _, e := range events { // stamped by each host's clock: filtered, not cut
		if s.At.Sub(e.At) <= time.Hour {
			s.Events = append(s.Events, e)
		}
	}
	for _, w := range s.Workers {
		if !w.Alive() {
			continue
		}
		for _, q := range w.Heartbeat.Queues {
			if s.Queues[q] == nil {
				s.Queues[q] = &Queue{QueueDepth: store.QueueDepth{Queue: q}}
			}
			s.Queues[q].Consumers++
		}
	}
	for q, v := range s.Queues {
		_, span := br.Layout().Shards(q)
		v.Paused = br.Layout().Paused(q)
		if v.Shards, err = br.QueueBacklog(ctx, q, span); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		v.Messages = 0
		for _, n := range v.Shards {
			v.Messages += n
		}
	}
	return nil
}

// QueueNames returns the snapshot's queues, sorted.
func (s *Snapshot) QueueNames() []string {
	out := make([]string, 0, len(s.Queues))
	for q := range s.Queues {
		out = append(out, q)
	}
	sort.Strings(out)
	return out
}

// Throughput sums the live and dead workers' attempts over the last
// minutes (the current, unfinished minute included).
func (s *Snapshot) Throughput(minutes int) (processed, failed, dead int64) {
	for _, w := range s.Workers {
		for _, m := range w.Series[max(0, len(w.Series)-minutes):] {
			processed += m.Processed
			failed += m.Failed
			dead += m.Dead
		}
	}
	return processed, failed, dead
}
