package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ThroughputKeep is how long a worker's per-minute counters are kept after
// its last heartbeat, and how far back they reach.
const ThroughputKeep = 2 * time.Hour

// eventsKeep bounds the list of recorded events.
const eventsKeep = 1000

// Slot is one busy worker slot: the attempt it runs and since when.
type Slot struct {
	Queue   string    `json:"queue"`
	TaskID  int64     `json:"task_id"`
	Code    string    `json:"code"`
	Attempt int       `json:"attempt"`
	Since   time.Time `json:"since"`
	// Abandoned: the watchdog gave up on this attempt (its handler ignored
	// cancellation); the slot was replaced and the task recovered.
	Abandoned bool `json:"abandoned,omitempty"`
}

// Counts are attempts a worker finished: Failed and Dead are among
// Processed (Dead: a failure with no retry left).
type Counts struct {
	Processed, Failed, Dead int64
}

// BeatCounts publishes a heartbeat like Beat and adds c to the worker's
// counters of the minute that contains at.
func (b *Broker) BeatCounts(ctx context.Context, hb *Heartbeat, ttl time.Duration, at time.Time, c Counts) error {
	pipe := b.rdb.Pipeline()
	if err := b.beat(ctx, pipe, hb, ttl); err != nil {
		return err
	}
	if !at.IsZero() {
		// A beat at least once a minute keeps the hash at ThroughputKeep.
		m := at.Unix() / 60
		b.addMinute(ctx, pipe, b.Keys.Throughput(hb.ID), ThroughputKeep, m, m-1, "pfd", c.Processed, c.Failed, c.Dead)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	return nil
}

// Minute is one minute of a worker's throughput.
type Minute struct {
	At        time.Time `json:"at"` // start of the minute
	Processed int64     `json:"processed"`
	Failed    int64     `json:"failed"`
	Dead      int64     `json:"dead"`
}

// WorkerStatus is what the registry and the heartbeat say about a worker.
type WorkerStatus struct {
	ID string `json:"id"`
	// Node is the node id of the `taskd run` process the worker is part of.
	Node string `json:"node,omitempty"`
	// LastBeat is the time of its last heartbeat (the beating host's clock).
	LastBeat time.Time `json:"last_beat"`
	// Heartbeat is nil once the heartbeat key expired: the worker is dead.
	Heartbeat *Heartbeat `json:"heartbeat,omitempty"`
	// Drained: recovery handed back its work and removed it from the
	// registry (GoneWorkers).
	Drained bool `json:"drained,omitempty"`
	// Series holds the last minutes asked for, oldest first, zeros included;
	// the last element is the current, unfinished minute.
	Series []Minute `json:"series"`
}

// GoneKeep is how long the set of drained workers remembers one.
const GoneKeep = time.Hour

// GoneWorkers returns the dead workers recovery drained whose last
// heartbeat is within the last within, newest first, with their node:
// what an operator still wants to see of a node that vanished.
func (b *Broker) GoneWorkers(ctx context.Context, within time.Duration) ([]WorkerStatus, error) {
	from := strconv.FormatInt(time.Now().Add(-within).UnixMilli(), 10)
	zs, err := b.rdb.ZRevRangeByScoreWithScores(ctx, b.Keys.WorkersGone(), &redis.ZRangeBy{Min: from, Max: "+inf", Count: 1000}).Result()
	if err != nil {
		return nil, fmt.Errorf("list drained workers: %w", err)
	}
	pipe := b.rdb.Pipeline()
	nodes := make([]*redis.StringCmd, len(zs))
	for i, z := range zs {
		nodes[i] = pipe.Get(ctx, b.Keys.WorkerNode(z.Member.(string)))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read drained workers: %w", err)
	}
	out := make([]WorkerStatus, len(zs))
	for i, z := range zs {
		out[i] = WorkerStatus{ID: z.Member.(string), Node: nodes[i].Val(), LastBeat: time.UnixMilli(int64(z.Score)), Drained: true}
	}
	return out, nil
}

// Alive reports whether the worker's heartbeat is live.
func (s *WorkerStatus) Alive() bool { return s.Heartbeat != nil }

// Workers returns every registered worker with its heartbeat and its
// per-minute counters for the last minutes (at most ThroughputKeep), in
// id order. It is what `taskd stats`, tasktop and the watchdog read.
func (b *Broker) Workers(ctx context.Context, minutes int) ([]WorkerStatus, error) {
	zs, err := b.rdb.ZRangeWithScores(ctx, b.Keys.Workers(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	minutes = min(max(minutes, 0), int(ThroughputKeep/time.Minute))
	pipe := b.rdb.Pipeline()
	beats := make([]*redis.StringCmd, len(zs))
	nodes := make([]*redis.StringCmd, len(zs))
	series := make([]*redis.SliceCmd, len(zs))
	now := time.Now().Unix() / 60
	for i, z := range zs {
		id, _ := z.Member.(string)
		beats[i] = pipe.Get(ctx, b.Keys.Worker(id))
		nodes[i] = pipe.Get(ctx, b.Keys.WorkerNode(id))
		if minutes > 0 {
			series[i] = readMinutes(ctx, pipe, b.Keys.Throughput(id), now-int64(minutes)+1, now, "pfd")
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read heartbeats: %w", err)
	}
	out := make([]WorkerStatus, 0, len(zs))
	for i, z := range zs {
		id, _ := z.Member.(string)
		ws := WorkerStatus{ID: id, LastBeat: time.UnixMilli(int64(z.Score)), Node: nodes[i].Val()}
		if raw, err := beats[i].Result(); err == nil {
			var hb Heartbeat
			if json.Unmarshal([]byte(raw), &hb) == nil {
				ws.Heartbeat, ws.Node = &hb, hb.Node
			}
		}
		if minutes > 0 {
			ws.Series = fillSeries(series[i], now, minutes)
		}
		out = append(out, ws)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// fillSeries turns the counters read by readMinutes into the minutes up to
// now.
func fillSeries(cmd *redis.SliceCmd, now int64, minutes int) []Minute {
	first := now - int64(minutes) + 1
	out := make([]Minute, minutes)
	counts := minuteCounts(cmd, "pfd")
	for i := range out {
		out[i].At = time.Unix((first+int64(i))*60, 0)
		if i < len(counts) {
			out[i].Processed, out[i].Failed, out[i].Dead = counts[i][0], counts[i][1], counts[i][2]
		}
	}
	return out
}

// Process is the heartbeat of one `taskd run` process.
type Process struct {
	ID      string `json:"id"`
	Node    string `json:"node"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Version string `json:"version"`
	// Schema is the latest migration the process's binary knows
	// (store.LatestVersion); a process of a release before it says
	// nothing. `taskd migrate` runs a contract step only once every live
	// process knows it.
	Schema    int       `json:"schema,omitempty"`
	Roles     []string  `json:"roles"`
	StartedAt time.Time `json:"started_at"`
	// Zone is the host's time zone ("Asia/Shanghai +08:00"), CronTimezone
	// the node's cron.timezone: `taskd doctor` tells nodes that differ.
	Zone         string `json:"zone,omitempty"`
	CronTimezone string `json:"cron_timezone,omitempty"`
	// MySQLConns is the process's mysql.max_open_conns: `taskd doctor`
	// adds them up against the server's max_connections.
	MySQLConns int `json:"mysql_conns,omitempty"`
	// Pools are the process's pool handlers, as of the beat.
	Pools []PoolState `json:"pools,omitempty"`
	// LastBeat is filled in by Processes from the registry; the stored
	// record has none.
	LastBeat time.Time `json:"last_beat,omitzero"`
}

// PoolState is a pool handler of a process, as its heartbeat tells it:
// what `taskd doctor` and tasktop need to say that a pool is down.
type PoolState struct {
	Code           string `json:"code"`
	Size           int    `json:"size"`
	Processes      int    `json:"processes"`
	Busy           int    `json:"busy"`
	FailedStarts   int64  `json:"failed_starts"`
	FailuresInARow int    `json:"failures_in_a_row,omitempty"`
	CrashLooping   bool   `json:"crash_looping"`
	LastError      string `json:"last_error,omitempty"`
}

// Hostname is the process's host; an expired heartbeat no longer says, but
// process ids start with it (host-pid-random).
func (p *Process) Hostname() string {
	if p.Host != "" {
		return p.Host
	}
	if i := strings.LastIndexByte(p.ID, '-'); i > 0 {
		if j := strings.LastIndexByte(p.ID[:i], '-'); j > 0 {
			return p.ID[:j]
		}
	}
	return p.ID
}

// BeatProcess publishes a process heartbeat with a TTL.
func (b *Broker) BeatProcess(ctx context.Context, p *Process, ttl time.Duration) error {
	raw, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("process heartbeat: %w", err)
	}
	pipe := b.rdb.Pipeline()
	b.write(ctx, pipe, "SET", b.Keys.Process(p.ID), raw, "PX", ttl.Milliseconds())
	b.write(ctx, pipe, "ZADD", b.Keys.Processes(), time.Now().UnixMilli(), p.ID)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("process heartbeat: %w", err)
	}
	return nil
}

// EndProcess withdraws a process that exits cleanly: only processes that
// vanished without it count as stale.
func (b *Broker) EndProcess(ctx context.Context, id string) error {
	pipe := b.rdb.Pipeline()
	pipe.Del(ctx, b.Keys.Process(id))
	pipe.ZRem(ctx, b.Keys.Processes(), id)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("end process heartbeat: %w", err)
	}
	return nil
}

// ProcessesKeep is how long a process that vanished stays in the registry:
// the longest window Processes is read with (the monitor behind metrics
// and alerts, tasktop), so a dead process stays listed, and its stale
// heartbeat alert firing, for that long.
const ProcessesKeep = time.Hour

// Processes returns the registered processes whose last heartbeat is more
// recent than within (at most ProcessesKeep), with the time of that beat;
// the heartbeat document of an expired process is gone, so it carries only
// its id. A short window filters: it does not remove what a longer one
// still reads. Only entries older than ProcessesKeep are removed.
// Both cuts are on Redis's clock, one for every reader, so a reader whose
// clock runs ahead neither drops nor removes live processes.
func (b *Broker) Processes(ctx context.Context, within time.Duration) ([]Process, error) {
	read := b.rdb.Pipeline()
	clock := read.Time(ctx)
	all := read.ZRangeWithScores(ctx, b.Keys.Processes(), 0, -1)
	if _, err := read.Exec(ctx); err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	now := clock.Val()
	from := now.Add(-min(within, ProcessesKeep)).UnixMilli()
	keep := now.Add(-ProcessesKeep).UnixMilli()
	zs := all.Val() // ascending by score: the oldest first
	pipe := b.rdb.Pipeline()
	if len(zs) > 0 && int64(zs[0].Score) < keep {
		pipe.ZRemRangeByScore(ctx, b.Keys.Processes(), "-inf", "("+strconv.FormatInt(keep, 10))
	}
	zs = slices.DeleteFunc(zs, func(z redis.Z) bool { return int64(z.Score) < from })
	cmds := make([]*redis.StringCmd, len(zs))
	for i, z := range zs {
		cmds[i] = pipe.Get(ctx, b.Keys.Process(z.Member.(string)))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read process heartbeats: %w", err)
	}
	out := make([]Process, 0, len(zs))
	for i, z := range zs {
		p := Process{ID: z.Member.(string)}
		if raw, err := cmds[i].Result(); err == nil {
			_ = json.Unmarshal([]byte(raw), &p)
		}
		p.LastBeat = time.UnixMilli(int64(z.Score))
		out = append(out, p)
	}
	return out, nil
}

// Event is something the watchdog did, recorded for operators and alerts.
type Event struct {
	At       time.Time `json:"at"`
	Kind     string    `json:"kind"`
	Node     string    `json:"node"`
	WorkerID string    `json:"worker_id"`
	Queue    string    `json:"queue,omitempty"`
	TaskID   int64     `json:"task_id,omitempty"`
	Code     string    `json:"code,omitempty"`
	Attempt  int       `json:"attempt,omitempty"`
	Detail   string    `json:"detail"`
}

// RecordEvent prepends e to the event list, which keeps the newest 1000.
// Events are best effort (callers log a failure and go on), yet bounded
// by the client's own wait for a reply on a new connection, not by a
// shorter one of their own: a bound of 2 s lost every event over a link
// with a second added each way (FAULTS.md row 21).
func (b *Broker) RecordEvent(ctx context.Context, e *Event) error {
	raw, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("record event: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, b.answerWait)
	defer cancel()
	pipe := b.rdb.Pipeline()
	b.write(ctx, pipe, "LPUSH", b.Keys.Events(), raw) // trimmed: bounded
	pipe.LTrim(ctx, b.Keys.Events(), 0, eventsKeep-1)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("record event: %w", err)
	}
	return nil
}

// Events returns up to limit recorded events, newest first.
func (b *Broker) Events(ctx context.Context, limit int) ([]Event, error) {
	raws, err := b.rdb.LRange(ctx, b.Keys.Events(), 0, int64(limit)-1).Result()
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	out := make([]Event, 0, len(raws))
	for _, raw := range raws {
		var e Event
		if json.Unmarshal([]byte(raw), &e) == nil {
			out = append(out, e)
		}
	}
	return out, nil
}

// TailKeep is how long a task's published output outlives its last
// publication: the end of a finished attempt stays readable for a while,
// and the tail of a worker that died expires.
const TailKeep = 2 * time.Minute

// TaskTail is the latest output of a task's attempt, published by the
// worker running it while it runs (handler.Tail).
type TaskTail struct {
	ID      int64     `json:"id"`
	Attempt int       `json:"attempt"`
	Worker  string    `json:"worker"`
	At      time.Time `json:"at"`
	// Done: the attempt ended; Output is its last output.
	Done   bool   `json:"done,omitempty"`
	Output string `json:"output"`
}

// PublishTail stores t as its task's latest output, kept TailKeep.
func (b *Broker) PublishTail(ctx context.Context, t *TaskTail) error {
	raw, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("publish output of task %d: %w", t.ID, err)
	}
	if err := b.rdb.Set(ctx, b.Keys.Tail(t.ID), raw, TailKeep).Err(); err != nil {
		return fmt.Errorf("publish output of task %d: %w", t.ID, err)
	}
	return nil
}

// Tail returns task id's latest published output, nil when there is none
// (it never ran with a tail, or that ended more than TailKeep ago).
func (b *Broker) Tail(ctx context.Context, id int64) (*TaskTail, error) {
	raw, err := b.rdb.Get(ctx, b.Keys.Tail(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read output of task %d: %w", id, err)
	}
	var t TaskTail
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("read output of task %d: %w", id, err)
	}
	return &t, nil
}
