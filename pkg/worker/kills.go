package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/startstop"
)

// killListener cancels attempts that an operator killed. Every worker gets
// every request; the one running that attempt acts, and every other one
// remembers it in early, so that an attempt killed while its message
// waited (dispatched, or held by a claim ahead) is dropped when it is
// taken instead of run. The requests of the last broker.KillKeep are
// also read from Redis when the worker starts and every killedReread, so
// a worker started after the kill (a restart during an incident), or
// whose subscription was down meanwhile, drops them too.
type killListener struct {
	broker Broker
	log    *slog.Logger
	// kill cancels the attempt if a slot runs it, returning its job.
	kill   func(id int64, attempt int) *job
	early  *killedSet
	runner startstop.Runner
	// read is when the kept requests were last read (local clock).
	read time.Time
	// readFails logs failed reads without a line each 30 s while Redis is
	// down.
	readFails startstop.FailLog
}

const (
	// killedReread is how often the kept requests are read again: a
	// request published while the subscription was down is heard then.
	killedReread = 30 * time.Second
	// killedSkew is how far back a read reaches before the last one: the
	// requests are scored by the clocks of the hosts that killed.
	killedSkew = 5 * time.Minute
)

// Start subscribes, reads the kept requests, then listens until Stop.
func (k *killListener) Start(ctx context.Context) error {
	kills, closeKills := k.broker.Kills(ctx)
	k.reread(ctx, time.Now().Add(-broker.KillKeep))
	return k.runner.Start(ctx, func(ctx context.Context) { k.loop(ctx, kills, closeKills) })
}

// Stop unsubscribes.
func (k *killListener) Stop() { k.runner.Stop() }

func (k *killListener) loop(ctx context.Context, kills <-chan broker.KillRequest, closeKills func() error) {
	stop := context.AfterFunc(ctx, func() { closeKills() })
	defer func() {
		if stop() { // the subscription ended by itself
			closeKills()
		}
	}()
	tick := time.NewTicker(killedReread)
	defer tick.Stop()
	for {
		select {
		case r, ok := <-kills:
			if !ok {
				return
			}
			k.heard(r.ID, r.Attempt, k.early.now())
		case <-tick.C:
			k.reread(ctx, k.read.Add(-killedSkew))
		}
	}
}

// heard acts on a kill request: cancels the attempt if a slot runs it,
// else remembers it.
func (k *killListener) heard(id int64, attempt int, at time.Time) {
	if j := k.kill(id, attempt); j != nil {
		k.log.Warn("killing task on operator request", "task_id", id, "task_code", j.msg.Code, "attempt", attempt)
		return
	}
	k.early.add(id, attempt, at)
}

// reread acts on the kept requests since since, as on those heard: one
// whose attempt runs here is killed (its publish was missed), the others
// are remembered (an attempt already dropped is not taken again).
// The read is bounded by the Redis client's timeouts, which a slow link
// is configured to survive, and by ctx.
func (k *killListener) reread(ctx context.Context, since time.Time) {
	now := time.Now()
	rs, err := k.broker.Killed(ctx, since)
	k.readFails.Pass(ctx, err)
	if err != nil {
		return
	}
	k.read = now
	for _, r := range rs {
		k.heard(r.ID, r.Attempt, r.At)
	}
}

// killedSet holds the attempts killed before a slot of this worker took
// them, each for broker.KillKeep, at most broker.KillMax of them.
type killedSet struct {
	mu  sync.Mutex
	now func() time.Time
	at  map[killedAttempt]time.Time
}

type killedAttempt struct {
	id      int64
	attempt int
}

func newKilledSet(now func() time.Time) *killedSet {
	return &killedSet{now: now, at: map[killedAttempt]time.Time{}}
}

// add remembers an attempt killed at at.
func (k *killedSet) add(id int64, attempt int, at time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.at) >= broker.KillMax {
		now := k.now()
		for a, t := range k.at {
			if now.Sub(t) > broker.KillKeep {
				delete(k.at, a)
			}
		}
		// Still full: forget a tenth, any of them, so that the scan
		// above runs once per tenth of adds, not once per add.
		for a := range k.at {
			if len(k.at) < broker.KillMax*9/10 {
				break
			}
			delete(k.at, a)
		}
	}
	k.at[killedAttempt{id, attempt}] = at
}

// take reports whether the attempt was killed (within broker.KillKeep),
// and forgets it.
func (k *killedSet) take(id int64, attempt int) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	a := killedAttempt{id, attempt}
	t, ok := k.at[a]
	if !ok {
		return false
	}
	delete(k.at, a)
	return k.now().Sub(t) <= broker.KillKeep
}
