// Package stats gathers what `taskd stats` and tasktop show: per queue,
// the task center's counts, the Redis backlog of each shard, throughput,
// success rate, the oldest due task's wait and the queue's state; per
// worker, its heartbeat and what it runs. It is cheap enough to call every
// second on a task center of millions of rows: every count reads a bounded
// index range (see store.StatsCounts), attempts per minute and success
// rates come from Redis's per-minute counters, whatever the throughput,
// and Redis answers in a few pipelines.
package stats

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// Queue is one queue's figures.
type Queue struct {
	Name       string `json:"queue"`
	Pending    int64  `json:"pending"`
	Dispatched int64  `json:"dispatched"`
	Running    int64  `json:"running"`
	Failed     int64  `json:"failed"`
	Dead       int64  `json:"dead"`
	Cancelled  int64  `json:"cancelled"`
	// Due is the pending and failed tasks due now, which wait in the task
	// center for a scheduler's claim (a queue's window in Redis full, a
	// backlog INSERTed at once): with Backlog, the work waiting.
	Due int64 `json:"due"`
	// Backlog is the number of queued messages in Redis, per shard list
	// (Span lists while retired shards drain); see BacklogTotal.
	Backlog         []int64 `json:"backlog"`
	ProcessedPerMin int64   `json:"processed_per_min"`
	FailedPerMin    int64   `json:"failed_per_min"`
	// SuccessRate10m is succeeded / ended attempts over ten minutes (null
	// when none ended).
	SuccessRate10m *float64 `json:"success_rate_10m"`
	// Ended10m is the number of attempts that ended over ten minutes, the
	// rate's weight when queues are added up.
	Ended10m int64 `json:"ended_10m"`
	// OldestDueSeconds is the wait of the oldest due task not dispatched.
	OldestDueSeconds float64 `json:"oldest_due_seconds"`
	Paused           bool    `json:"paused"`
	Shards           int     `json:"shards"`
	LiveWorkers      int     `json:"live_workers"`
	// Limit is the queue's flow control in force.
	Limit limit.Limit `json:"limit"`
	// Limited is set while the limit holds tasks back: they wait, neither
	// failed nor retried.
	Limited *Limited `json:"limited,omitempty"`
}

// Limited says how a queue's limit holds tasks back.
type Limited struct {
	// By names the limit: rate, max_running (the queue's, at take), or
	// group (per-group limits and serial order, at claim).
	By string `json:"by"`
	// Since is when it started holding tasks back, For how long that is.
	Since time.Time `json:"since"`
	ForMS int64     `json:"for_ms"`
	// Running is the attempts holding the queue's max_running leases;
	// Groups the groups waiting for room.
	Running int64 `json:"running,omitempty"`
	Groups  int64 `json:"groups,omitempty"`
}

// For is how long the limit has held tasks back.
func (l *Limited) For() time.Duration { return time.Duration(l.ForMS) * time.Millisecond }

// BacklogTotal is the number of queued messages over all shards: what
// every front end prints as the backlog.
func (q Queue) BacklogTotal() int64 {
	var n int64
	for _, b := range q.Backlog {
		n += b
	}
	return n
}

// NoConsumer reports whether q has work that no live worker takes: a
// backlog in Redis or due tasks, not paused, and no consumer (a handler
// configured on no running node, or every node of it down). Only true
// where Redis answered: without it, consumers and backlog are unknown.
func (q Queue) NoConsumer() bool {
	return !q.Paused && q.LiveWorkers == 0 && (q.BacklogTotal() > 0 || q.OldestDueSeconds > 0)
}

// NoConsumer returns the queues of s that have work no live worker takes.
func (s *Stats) NoConsumer() []string {
	var qs []string
	for _, q := range s.Queues {
		if q.NoConsumer() {
			qs = append(qs, q.Name)
		}
	}
	slices.Sort(qs)
	return qs
}

// Worker is one live worker's figures.
type Worker struct {
	ID                  string   `json:"id"`
	Node                string   `json:"node"`
	Host                string   `json:"host"`
	PID                 int      `json:"pid"`
	Queues              []string `json:"queues"`
	HeartbeatAgeSeconds float64  `json:"heartbeat_age_seconds"`
	ProcessedPerMin     int64    `json:"processed_per_min"`
	// Busy is the number of tasks it runs: len(Current).
	Busy int `json:"busy"`
	// Current are the ids of the tasks the task center says it runs. Busy
	// counts them too, not the heartbeat's count, which lags by up to a
	// heartbeat interval, so the two always agree.
	Current []int64 `json:"current"`
	// ResultsStuckSeconds is how long its oldest result has waited to be
	// written, once that is broker.ResultsStuckAfter or more (else 0):
	// the task center refuses its writes or does not answer, and it takes
	// no new work until they land.
	ResultsStuckSeconds float64 `json:"results_stuck_seconds"`
}

// Stats is one snapshot.
type Stats struct {
	At      time.Time `json:"at"`
	Queues  []Queue   `json:"queues"`
	Workers []Worker  `json:"workers"`
	// RedisError is set when the snapshot holds the task center's figures
	// alone, Redis having not answered: each queue's backlog, per-minute
	// counts, success rate and live workers are then unknown (left zero),
	// and so are the workers.
	RedisError string `json:"redis_error,omitempty"`
	// MySQLError is set when the snapshot holds Redis's figures alone,
	// the task center having not answered: each queue's counts of tasks
	// by state, due tasks and oldest wait are then unknown (left zero),
	// its pause and shards are the configured ones, and a worker's
	// current tasks are those of its heartbeat.
	MySQLError string `json:"mysql_error,omitempty"`
	// RedisMemory is Redis's memory use against its maxmemory: at the
	// limit pushes are refused, and due tasks wait in the task center with
	// no backlog in Redis to show for it. Nil when Redis did not answer
	// or refuses INFO (some managed services).
	RedisMemory *broker.Memory `json:"redis_memory,omitempty"`
}

// Waiting is the work not yet taken in the queues that are not paused
// (a paused queue's waits on purpose): due in the task center (a backlog
// INSERTed at once waits there, past the queues' windows) and queued in
// Redis. It drains when its slowest queue does, at the attempts of the
// last minute; drains is false while a queue waits with no attempt in the
// last minute, or with a worker whose results wait to be written (it
// takes no work), or while Redis is full: its time is unknown.
func (s *Stats) Waiting() (tasks int64, drain time.Duration, drains bool) {
	stuck := map[string]bool{}
	for _, w := range s.Workers {
		if w.ResultsStuckSeconds > 0 {
			for _, q := range w.Queues {
				stuck[q] = true
			}
		}
	}
	drains = true
	for _, q := range s.Queues {
		if q.Paused {
			continue
		}
		w := q.Due + q.BacklogTotal()
		tasks += w
		switch {
		case w == 0:
		case q.ProcessedPerMin == 0 || stuck[q.Name]:
			drains = false
		default:
			drain = max(drain, time.Duration(float64(w)/float64(q.ProcessedPerMin)*float64(time.Minute)))
		}
	}
	// At maxmemory nothing is pushed: the last minute's rate drains what
	// Redis held, not what waits in the task center.
	full := s.RedisMemory != nil && s.RedisMemory.Full()
	return tasks, drain, drains && tasks > 0 && !full
}

// Paused is the work Waiting leaves out: the due and queued tasks of the
// paused queues, and those queues (sorted). A pause forgotten after an
// incident holds them for good, while "waiting" reads 0.
func (s *Stats) Paused() (tasks int64, queues []string) {
	for _, q := range s.Queues {
		if w := q.Due + q.BacklogTotal(); q.Paused && w > 0 {
			tasks += w
			queues = append(queues, q.Name)
		}
	}
	slices.Sort(queues)
	return tasks, queues
}

// Roughly writes a time to drain to the unit that matters: 40s, 22m,
// 3h10m.
func Roughly(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(1, int(d.Seconds()+0.5)))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()+0.5))
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// ResultsStuckText says that worker id's results have waited d to be
// written (see Worker.ResultsStuckSeconds), and what that means.
func ResultsStuckText(id string, d time.Duration) string {
	return fmt.Sprintf("worker %s has results waiting %s to be written: the task center refuses them or does not answer "+
		"(its node's log says why); it takes no new work until they are written", id, Roughly(d))
}

// Only keeps the queues named and the workers that consume any of them:
// an operator of three hundred queues asks about one.
func (s *Stats) Only(queues []string) {
	s.Queues = slices.DeleteFunc(s.Queues, func(q Queue) bool { return !slices.Contains(queues, q.Name) })
	s.Workers = slices.DeleteFunc(s.Workers, func(w Worker) bool {
		return !slices.ContainsFunc(w.Queues, func(q string) bool { return slices.Contains(queues, q) })
	})
}

// Source is where figures come from.
type Source struct {
	Store  *store.Store
	Broker *broker.Broker
	// Queues are queues to show even when nothing of them is in the task
	// center (the configured ones).
	Queues []string
	// Configured returns a queue's configured shard count (0: none).
	Configured func(queue string) int
	// ConfiguredLimit returns a queue's configured limit, in force while
	// no node recorded one.
	ConfiguredLimit func(queue string) limit.Limit
	// Clock, when set, gives the instant of the snapshot (tests pin it);
	// default: the database clock.
	Clock clock.Clock
}

// Collect takes a snapshot.
func Collect(ctx context.Context, src Source) (*Stats, error) {
	return collect(ctx, src)
}

// CollectWithoutRedis takes the task center's figures alone, for an
// operator to see the backlog while Redis is down: redisErr (not nil)
// says why.
func CollectWithoutRedis(ctx context.Context, src Source, redisErr error) (*Stats, error) {
	src.Broker = nil
	s, err := collect(ctx, src)
	if err != nil {
		return nil, err
	}
	s.RedisError = redisErr.Error()
	return s, nil
}

// CollectWithoutMySQL takes Redis's figures alone, for an operator to see
// the workers, the backlog and the throughput while the task center is
// down: mysqlErr (not nil) says why. The snapshot is taken at this
// host's clock, the database's being out of reach.
func CollectWithoutMySQL(ctx context.Context, src Source, mysqlErr error) (*Stats, error) {
	src.Store = nil
	s, err := collect(ctx, src)
	if err != nil {
		return nil, err
	}
	s.MySQLError = mysqlErr.Error()
	return s, nil
}

// fromMySQL and fromRedis name the server an error came from: an operator
// reading "context deadline exceeded" must know which one to look at.
func fromMySQL(err error) error { return fmt.Errorf("MySQL: %w", err) }
func fromRedis(err error) error { return fmt.Errorf("Redis: %w", err) }

// collect takes a snapshot, without Redis's figures when src has no
// broker, without the task center's when it has no store.
func collect(ctx context.Context, src Source) (*Stats, error) {
	withRedis, withMySQL := src.Broker != nil, src.Store != nil
	var qc map[string]*store.QueueCounts
	var wc map[string]*store.WorkerCounts
	var states []store.Queue
	var err error
	if withMySQL {
		if qc, wc, err = src.Store.StatsCounts(ctx); err != nil {
			return nil, fromMySQL(err)
		}
		if states, err = src.Store.QueueList(ctx); err != nil {
			return nil, fromMySQL(err)
		}
	}
	var live []broker.LiveWorker
	if withRedis {
		if live, err = src.Broker.LiveWorkers(ctx); err != nil {
			return nil, fromRedis(err)
		}
	}
	var now time.Time
	switch {
	case src.Clock != nil:
		now = src.Clock.Now()
	case !withMySQL:
		now = time.Now()
	default:
		if now, err = src.Store.Now(ctx); err != nil {
			return nil, fromMySQL(err)
		}
	}
	names := slices.Clone(src.Queues)
	for q := range qc {
		names = append(names, q)
	}
	state := map[string]store.Queue{}
	for _, s := range states {
		state[s.Name] = s
		names = append(names, s.Name)
	}
	for _, w := range live {
		names = append(names, w.Queues...)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	var runs map[string]broker.QueueRuns
	var perMin map[string]float64
	var held map[string]broker.Limited
	if withRedis {
		if runs, err = src.Broker.QueueRuns(ctx, names, now); err != nil {
			return nil, fromRedis(err)
		}
		ids := make([]string, len(live))
		for i, w := range live {
			ids[i] = w.ID
		}
		if perMin, err = src.Broker.WorkersProcessed(ctx, ids, now); err != nil {
			return nil, fromRedis(err)
		}
		if held, err = src.Broker.LimitedQueues(ctx, names); err != nil {
			return nil, fromRedis(err)
		}
	}

	out := &Stats{At: now, Queues: []Queue{}, Workers: []Worker{}}
	for _, name := range names {
		q := Queue{Name: name}
		if c := qc[name]; c != nil {
			q.Pending, q.Dispatched, q.Running = c.ByStatus[task.Pending], c.ByStatus[task.Dispatched], c.ByStatus[task.Running]
			q.Failed, q.Dead, q.Cancelled = c.ByStatus[task.Failed], c.ByStatus[task.Dead], c.ByStatus[task.Cancelled]
			q.Due, q.OldestDueSeconds = c.Due, c.OldestDueSeconds
		}
		r := runs[name]
		q.ProcessedPerMin, q.FailedPerMin = int64(math.Round(r.Processed1m)), int64(math.Round(r.Failed1m))
		if r.Ended10m > 0 {
			rate := r.Succeeded10m / r.Ended10m
			q.SuccessRate10m = &rate
			q.Ended10m = int64(math.Round(r.Ended10m))
		}
		st := state[name]
		q.Paused, q.Shards = st.Paused, st.Shards
		if q.Shards == 0 && src.Configured != nil {
			q.Shards = src.Configured(name)
		}
		q.Shards = max(q.Shards, 1)
		q.Limit = st.Limit
		if st.LimitSource == "" && src.ConfiguredLimit != nil {
			q.Limit = src.ConfiguredLimit(name)
		}
		if h, ok := held[name]; ok && h.Under(q.Limit) {
			q.Limited = &Limited{By: h.By, Since: h.Since, ForMS: max(0, now.Sub(h.Since).Milliseconds()),
				Running: h.Running, Groups: h.Groups}
		}
		q.Backlog = []int64{}
		if withRedis {
			if q.Backlog, err = src.Broker.QueueBacklog(ctx, name, max(st.Span, q.Shards)); err != nil {
				return nil, err
			}
		}
		for _, w := range live {
			if slices.Contains(w.Queues, name) {
				q.LiveWorkers++
			}
		}
		out.Queues = append(out.Queues, q)
	}
	for _, w := range live {
		sw := Worker{ID: w.ID, Node: w.Node, Host: w.Host, PID: w.PID, Queues: w.Queues,
			HeartbeatAgeSeconds: max(0, time.Since(w.LastBeat).Seconds()), Current: []int64{},
			ProcessedPerMin: int64(math.Round(perMin[w.ID])), ResultsStuckSeconds: w.ResultsStuck().Seconds()}
		if c := wc[w.ID]; c != nil {
			sw.Current = append(sw.Current, c.Running...)
		} else if !withMySQL {
			// The heartbeat's, up to a heartbeat interval old.
			for _, sl := range w.Slots {
				sw.Current = append(sw.Current, sl.TaskID)
			}
		}
		slices.Sort(sw.Current)
		sw.Busy = len(sw.Current)
		out.Workers = append(out.Workers, sw)
	}
	if withRedis {
		if m, err := src.Broker.Memory(ctx); err == nil {
			out.RedisMemory = &m
		}
	}
	return out, nil
}

// LimitedText says in a few words how a limit holds a queue back, for
// the CLI and tasktop: "LIMITED by rate 12s", "LIMITED 3 groups 40s".
func LimitedText(l *Limited) string {
	what := "by " + l.By
	if l.By == "group" {
		what = strconv.FormatInt(l.Groups, 10) + " groups"
		if l.Groups == 1 {
			what = "1 group"
		}
	}
	return "LIMITED " + what + " " + clock.Format(l.For().Round(time.Second))
}
