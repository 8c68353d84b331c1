package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/taskd/taskd/pkg/startstop"
)

// killListener cancels attempts that an operator killed. Every worker gets
// every request; the one running that attempt acts, and every other one
// remembers it in early, so that an attempt killed while its message
// waited (dispatched, or held by a claim ahead) is dropped when it is
// taken instead of run.
type killListener struct {
	broker Broker
	log    *slog.Logger
	// kill cancels the attempt if a slot runs it, returning its job.
	kill   func(id int64, attempt int) *job
	early  *killedSet
	runner startstop.Runner
}

// Start subscribes until Stop.
func (k *killListener) Start(ctx context.Context) error {
	return k.runner.Start(ctx, k.loop)
}

// Stop unsubscribes.
func (k *killListener) Stop() { k.runner.Stop() }

func (k *killListener) loop(ctx context.Context) {
	kills, closeKills := k.broker.Kills(ctx)
	stop := context.AfterFunc(ctx, func() { closeKills() })
	defer func() {
		if stop() { // the subscription ended by itself
			closeKills()
		}
	}()
	for r := range kills {
		if j := k.kill(r.ID, r.Attempt); j != nil {
			k.log.Warn("killing task on operator request", "task_id", r.ID, "task_code", j.msg.Code, "attempt", r.Attempt)
		} else {
			k.early.add(r.ID, r.Attempt)
		}
	}
}

// Bounds of the attempts a worker remembers as killed before they started.
// Past them a killed attempt whose message was still queued may run once;
// its result is rejected by the fence all the same.
const (
	killedKeep = 10 * time.Minute
	killedMax  = 10000
)

// killedSet holds the attempts killed before a slot of this worker took
// them, each for killedKeep, at most killedMax of them.
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

func (k *killedSet) add(id int64, attempt int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	if len(k.at) >= killedMax {
		for a, t := range k.at {
			if now.Sub(t) > killedKeep {
				delete(k.at, a)
			}
		}
		for a := range k.at { // still full: forget any one
			if len(k.at) < killedMax {
				break
			}
			delete(k.at, a)
		}
	}
	k.at[killedAttempt{id, attempt}] = now
}

// take reports whether the attempt was killed (within killedKeep), and
// forgets it.
func (k *killedSet) take(id int64, attempt int) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	a := killedAttempt{id, attempt}
	t, ok := k.at[a]
	if !ok {
		return false
	}
	delete(k.at, a)
	return k.now().Sub(t) <= killedKeep
}
