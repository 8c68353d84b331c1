package tui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	localclock "github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/stats"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// eventsShown bounds the events read at each refresh.
const eventsShown = 100

// DeadShownDefault is how long a dead worker stays in the Workers view
// after its last heartbeat, once recovery drained it.
const DeadShownDefault = 10 * time.Minute

// Loader is the production Source: it reads the task center and Redis
// with the functions `taskd stats`, `taskd list` and `taskd show` use.
type Loader struct {
	// Store is the task center; nil until Connect reached it.
	Store *store.Store
	// Connect, when set, opens the task center while Store is nil: a
	// tasktop started while MySQL does not answer connects at the first
	// refresh it does.
	Connect func(ctx context.Context) (*store.Store, error)
	Broker  *broker.Broker
	// Queues are shown even when nothing of them is in the task center
	// (the configured ones).
	Queues []string
	// Configured returns a queue's configured shard count (0: none).
	Configured func(queue string) int
	// ConfiguredLimit returns a queue's configured limit (nil: none).
	ConfiguredLimit func(queue string) limit.Limit
	// Alerts reads the alert states (nil: none are shown).
	Alerts func(ctx context.Context) ([]Alert, error)
	// DeadShown is how long a drained dead worker is still listed
	// (DeadShownDefault).
	DeadShown time.Duration

	connMu sync.Mutex // over Store while Connect may set it

	mu sync.Mutex
	// series caches ended attempts per queue and minute, so a refresh
	// reads only the last two minutes of task_run.
	series     map[string]map[int64]int64
	seriesLast int64 // the minute that was current at the last read (0: none)
	// texts are still reads of the tasks whose detail is shown, by id: a
	// refresh reads their payload and last result again only when the
	// row changed (store.TaskGetStill).
	texts map[int64]*task.Task
}

// textsKept bounds the tasks whose texts are kept (tasktop serve shows
// several details at once).
const textsKept = 8

var _ Source = (*Loader)(nil)

// Overview implements Source. When Redis does not answer, it returns the
// task center's figures alone, with RedisErr saying why; when the task
// center does not, Redis's figures alone, with MySQLErr saying why.
func (l *Loader) Overview(ctx context.Context) (*Overview, error) {
	// Tell which service does not answer before reading anything else,
	// each within half of what is left of ctx's deadline: one that hangs
	// must leave the other time to answer the refresh.
	st, mysqlErr := l.reach(ctx)
	redisErr := l.ping(ctx)
	if mysqlErr != nil {
		if redisErr != nil {
			return nil, fmt.Errorf("%w; Redis: %w", mysqlErr, redisErr)
		}
		return l.overviewWithoutMySQL(ctx, mysqlErr)
	}
	src := stats.Source{Store: st, Broker: l.Broker, Queues: l.Queues, Configured: l.Configured,
		ConfiguredLimit: l.ConfiguredLimit}
	var s *stats.Stats
	var err error
	if redisErr != nil {
		redisErr = fmt.Errorf("Redis: %w", redisErr)
		s, err = stats.CollectWithoutRedis(ctx, src, redisErr)
	} else {
		s, err = stats.Collect(ctx, src)
	}
	if err != nil {
		return nil, err
	}
	ov := &Overview{Stats: s, RedisErr: redisErr}
	if ov.Series, err = l.readSeries(ctx, st, s.At); err != nil {
		return nil, fromMySQL(err)
	}
	if redisErr == nil {
		if err := l.readRedis(ctx, ov); err != nil {
			return nil, fmt.Errorf("Redis: %w", err)
		}
		if l.Alerts != nil {
			if ov.Alerts, err = l.Alerts(ctx); err != nil {
				return nil, fromMySQL(err)
			}
		}
	}
	return ov, nil
}

// overviewWithoutMySQL reads what Redis holds while the task center does
// not answer: workers, backlogs, throughput, events.
func (l *Loader) overviewWithoutMySQL(ctx context.Context, mysqlErr error) (*Overview, error) {
	src := stats.Source{Broker: l.Broker, Queues: l.Queues, Configured: l.Configured, ConfiguredLimit: l.ConfiguredLimit}
	s, err := stats.CollectWithoutMySQL(ctx, src, mysqlErr)
	if err != nil {
		return nil, err
	}
	ov := &Overview{Stats: s, MySQLErr: mysqlErr}
	if err := l.readRedis(ctx, ov); err != nil {
		return nil, fmt.Errorf("Redis: %w", err)
	}
	return ov, nil
}

// reach returns the task center once it answers, connecting to it
// first while it never did, within half of what is left of ctx's
// deadline.
func (l *Loader) reach(ctx context.Context) (*store.Store, error) {
	ctx, cancel := localclock.HalfLeft(ctx)
	defer cancel()
	st, err := l.store(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := st.Now(ctx); err != nil {
		return nil, fromMySQL(err)
	}
	return st, nil
}

// store returns the task center, connecting to it while it never
// answered (Connect).
func (l *Loader) store(ctx context.Context) (*store.Store, error) {
	l.connMu.Lock()
	defer l.connMu.Unlock()
	if l.Store == nil {
		if l.Connect == nil {
			return nil, fromMySQL(errors.New("no task center"))
		}
		st, err := l.Connect(ctx)
		if err != nil {
			return nil, err
		}
		l.Store = st
	}
	return l.Store, nil
}

// readRedis reads what only Redis holds: workers, nodes, events.
func (l *Loader) readRedis(ctx context.Context, ov *Overview) (err error) {
	if ov.Workers, err = l.Broker.Workers(ctx, SeriesMinutes); err != nil {
		return err
	}
	// A node that vanished stays in sight, as dead workers, after
	// recovery drained them from the registry.
	gone, err := l.Broker.GoneWorkers(ctx, cmp.Or(l.DeadShown, DeadShownDefault))
	if err != nil {
		return err
	}
	for _, g := range gone {
		if !slices.ContainsFunc(ov.Workers, func(w broker.WorkerStatus) bool { return w.ID == g.ID }) {
			ov.Workers = append(ov.Workers, g)
		}
	}
	procs, err := l.Broker.Processes(ctx, time.Hour)
	if err != nil {
		return err
	}
	for _, p := range procs {
		if p.Node != "" { // the heartbeat document is there: alive
			ov.NodesUp++
		}
	}
	ov.Events, err = l.Broker.Events(ctx, eventsShown)
	return err
}

// ping asks Redis whether it answers, within half of what is left of
// ctx's deadline: a Redis that hangs must leave the task center time to
// answer the refresh.
func (l *Loader) ping(ctx context.Context) error {
	ctx, cancel := localclock.HalfLeft(ctx)
	defer cancel()
	return l.Broker.Ping(ctx)
}

// fromMySQL names the server of a task center error.
func fromMySQL(err error) error { return fmt.Errorf("MySQL: %w", err) }

// readSeries brings the per-minute cache up to the database clock now and
// returns the last SeriesMinutes of each queue.
func (l *Loader) readSeries(ctx context.Context, st *store.Store, now time.Time) (map[string][]int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := now.Unix() / 60
	first := cur - SeriesMinutes + 1
	from := first
	if l.seriesLast >= first {
		// The minute current at the last read was partial, and results
		// are written in batches: read it and the one before again.
		from = max(first, l.seriesLast-1)
	}
	rows, err := st.RunSeries(ctx, from)
	if err != nil {
		return nil, err
	}
	if l.series == nil {
		l.series = map[string]map[int64]int64{}
	}
	for _, m := range l.series {
		for minute := range m {
			if minute < first || minute >= from {
				delete(m, minute)
			}
		}
	}
	for _, r := range rows {
		if l.series[r.Queue] == nil {
			l.series[r.Queue] = map[int64]int64{}
		}
		l.series[r.Queue][r.Minute] = r.Ended
	}
	l.seriesLast = cur
	out := make(map[string][]int64, len(l.series))
	for q, m := range l.series {
		s := make([]int64, SeriesMinutes)
		for i := range s {
			s[i] = m[first+int64(i)]
		}
		out[q] = s
	}
	return out, nil
}

// Tasks implements Source.
func (l *Loader) Tasks(ctx context.Context, q TaskQuery) ([]*task.Task, error) {
	st, err := l.store(ctx)
	if err != nil {
		return nil, err
	}
	ts, err := st.TaskList(ctx, &store.TaskListParams{Status: q.Status, Queue: q.Queue, Code: q.Code,
		Search: q.Search, BeforeID: q.BeforeID, Limit: q.Limit, Brief: true})
	if err != nil {
		return nil, fmt.Errorf("MySQL: %w", err)
	}
	return ts, nil
}

// Count implements Source.
func (l *Loader) Count(ctx context.Context, q TaskQuery) (int, error) {
	st, err := l.store(ctx)
	if err != nil {
		return 0, err
	}
	n, err := st.TaskCount(ctx, store.TaskListParams{Status: q.Status, Queue: q.Queue, Code: q.Code, Search: q.Search})
	if err != nil {
		return 0, fmt.Errorf("MySQL: %w", err)
	}
	return n, nil
}

// runsShown bounds the run history of the detail view.
const runsShown = 50

// Task implements Source.
func (l *Loader) Task(ctx context.Context, id int64) (*task.Task, []*task.Run, error) {
	st, err := l.store(ctx)
	if err != nil {
		return nil, nil, err
	}
	t, err := l.task(ctx, st, id)
	if err != nil {
		return nil, nil, fmt.Errorf("MySQL: %w", err)
	}
	runs, err := st.RunList(ctx, id, runsShown)
	if err != nil {
		return nil, nil, fmt.Errorf("MySQL: %w", err)
	}
	return t, runs, nil
}

// task reads task id, its payload and last result only when its row
// changed since a still read of them: a payload of 8 MB was read at each
// refresh of the detail, and it changes only by a submit that replaces
// it (--on-conflict replace, debounce) or a periodic task's update.
func (l *Loader) task(ctx context.Context, st *store.Store, id int64) (*task.Task, error) {
	l.mu.Lock()
	was := l.texts[id]
	l.mu.Unlock()
	if was != nil {
		t, _, err := st.TaskGetStill(ctx, id, true)
		if err != nil {
			return nil, err
		}
		if t.UpdatedAt.Equal(was.UpdatedAt) && t.CreatedAt.Equal(was.CreatedAt) {
			t.Payload, t.LastResult = was.Payload, was.LastResult
			return t, nil
		}
	}
	t, still, err := st.TaskGetStill(ctx, id, false)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.texts, id)
	if still {
		if l.texts == nil {
			l.texts = map[int64]*task.Task{}
		}
		for other := range l.texts {
			if len(l.texts) < textsKept {
				break
			}
			delete(l.texts, other)
		}
		l.texts[id] = t
	}
	return t, nil
}

// Audit implements Source.
func (l *Loader) Audit(ctx context.Context, beforeID int64, limit int) ([]store.AuditEntry, error) {
	st, err := l.store(ctx)
	if err != nil {
		return nil, err
	}
	es, err := st.AuditList(ctx, beforeID, limit)
	if err != nil {
		return nil, fmt.Errorf("MySQL: %w", err)
	}
	return es, nil
}

// Tail implements Source.
func (l *Loader) Tail(ctx context.Context, id int64) (*broker.TaskTail, error) {
	t, err := l.Broker.Tail(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("Redis: %w", err)
	}
	return t, nil
}
