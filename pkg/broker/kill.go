package broker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// KillRequest asks the worker running attempt Attempt of task ID to cancel
// it.
type KillRequest struct {
	ID      int64 `json:"id"`
	Attempt int   `json:"attempt"`
}

// How long, and how many, kill requests are kept in Keys.Killed for the
// workers that did not hear them: a worker that starts after the kill, or
// whose subscription was down, drops a killed attempt's message when it
// takes it instead of running it once. Past them, a worker confirms a
// message older than an hour against the task center before it runs it
// (worker.confirmAfter); a younger one runs once, and the fence rejects
// its result.
const (
	KillKeep = 24 * time.Hour
	KillMax  = 100000
)

// ErrKillNotKept: the kill requests reached the workers listening, but
// were not kept for those that start later (Redis refused the write: at
// maxmemory).
var ErrKillNotKept = errors.New("kill not kept for workers that start later")

// Kill publishes kill requests to every worker and keeps them in
// Keys.Killed, pipelined in chunks. The publishes go first: Redis at
// maxmemory still delivers them, and refuses only the keeping
// (ErrKillNotKept).
func (b *Broker) Kill(ctx context.Context, rs ...KillRequest) error {
	const chunk = 1000
	var notKept error
	for len(rs) > 0 {
		n := min(len(rs), chunk)
		now := time.Now()
		pipe := b.rdb.Pipeline()
		pubs := make([]*redis.IntCmd, n)
		members := make([]redis.Z, n)
		for i, r := range rs[:n] {
			raw, _ := json.Marshal(r)
			pubs[i] = pipe.Publish(ctx, b.Keys.Kill(), raw)
			members[i] = redis.Z{Score: float64(now.UnixMilli()), Member: killedMember(r)}
		}
		keep := pipe.ZAdd(ctx, b.Keys.Killed(), members...)
		pipe.ZRemRangeByScore(ctx, b.Keys.Killed(), "-inf", strconv.FormatInt(now.Add(-KillKeep).UnixMilli(), 10))
		pipe.ZRemRangeByRank(ctx, b.Keys.Killed(), 0, -KillMax-1)
		_, _ = pipe.Exec(ctx)
		for _, p := range pubs {
			if err := p.Err(); err != nil {
				return fmt.Errorf("publish kill of task %d: %w", rs[0].ID, err)
			}
		}
		if err := keep.Err(); err != nil && notKept == nil {
			notKept = fmt.Errorf("%w: %w", ErrKillNotKept, err)
		}
		rs = rs[n:]
	}
	return notKept
}

func killedMember(r KillRequest) string {
	return strconv.FormatInt(r.ID, 10) + ":" + strconv.Itoa(r.Attempt)
}

// Killed is a kill request as Keys.Killed keeps it.
type Killed struct {
	KillRequest
	At time.Time
}

// Killed returns the kill requests kept since since (at most KillMax, of
// the last KillKeep), oldest first. Malformed members are skipped.
func (b *Broker) Killed(ctx context.Context, since time.Time) ([]Killed, error) {
	zs, err := b.rdb.ZRangeByScoreWithScores(ctx, b.Keys.Killed(), &redis.ZRangeBy{
		Min: strconv.FormatInt(since.UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("read kill requests: %w", err)
	}
	out := make([]Killed, 0, len(zs))
	for _, z := range zs {
		s, _ := z.Member.(string)
		id, attempt, ok := strings.Cut(s, ":")
		r := KillRequest{}
		r.ID, err = strconv.ParseInt(id, 10, 64)
		if !ok || err != nil || r.ID <= 0 {
			continue
		}
		if r.Attempt, err = strconv.Atoi(attempt); err != nil {
			continue
		}
		out = append(out, Killed{KillRequest: r, At: time.UnixMilli(int64(z.Score))})
	}
	return out, nil
}

// Kills subscribes to kill requests until the returned close function is
// called. It returns once Redis confirmed the subscription, so that a read
// of Killed after it misses nothing, or when Redis did not answer within
// a dial and two reads (down or hanging: the subscription is made when it
// answers). Malformed requests are skipped.
func (b *Broker) Kills(ctx context.Context) (<-chan KillRequest, func() error) {
	cctx, cancel := context.WithTimeout(ctx, cmp.Or(b.answerWait, 3*time.Second))
	sub := b.rdb.Subscribe(cctx, b.Keys.Kill())
	_, _ = sub.Receive(cctx) // the confirmation; a failure is retried by the channel
	cancel()
	out := make(chan KillRequest, 16)
	go func() {
		defer close(out)
		for msg := range sub.Channel() {
			var r KillRequest
			if json.Unmarshal([]byte(msg.Payload), &r) != nil || r.ID <= 0 {
				continue
			}
			out <- r
		}
	}()
	return out, sub.Close
}
