package tui

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// SharedMaxAgeDefault is how long Shared serves a result again.
const SharedMaxAgeDefault = time.Second

// Shared is a Source many tasktops read through at once (tasktop serve's
// sessions): reads of the same thing that overlap run one query, and a
// result is served again for MaxAge, so ten sessions refreshing every two
// seconds cost the task center and Redis what one or two do. Results are
// shared between the sessions: nothing may modify them.
type Shared struct {
	Source Source
	// MaxAge is how long a result is served again (SharedMaxAgeDefault).
	MaxAge time.Duration
	// Now is the clock results age by (time.Now).
	Now func() time.Time

	mu      sync.Mutex
	gen     uint64 // Invalidate's count: results of older ones are stale
	entries map[string]sharedEntry
	flights singleflight.Group
}

type sharedEntry struct {
	gen uint64
	at  time.Time
	val any
	err error
}

var _ Source = (*Shared)(nil)

// NewShared returns a Shared reading src.
func NewShared(src Source) *Shared {
	return &Shared{Source: src, MaxAge: SharedMaxAgeDefault, Now: time.Now}
}

// Invalidate makes the next reads query afresh: an operator's action
// changed what they show.
func (s *Shared) Invalidate() {
	s.mu.Lock()
	s.gen++
	s.mu.Unlock()
}

// read returns key's result: the kept one while it is fresh, else that of
// the one read of it under way, else a new read. A read runs with its
// first caller's deadline but not its cancellation, so a session that
// ends does not fail the others waiting for the same read; a caller whose
// context ends stops waiting.
func (s *Shared) read(ctx context.Context, key string, fn func(ctx context.Context) (any, error)) (any, error) {
	s.mu.Lock()
	gen := s.gen
	e, ok := s.fresh(key, gen)
	s.mu.Unlock()
	if ok {
		return e.val, e.err
	}

	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(TimeoutDefault) // a deadline is wall-clock time, not Now's

	}
	flight := fmt.Sprintf("%s#%d", key, gen) // an Invalidate starts new reads
	ch := s.flights.DoChan(flight, func() (any, error) {
		// A read that ended between this caller's look and its flight
		// kept its result: use it rather than read again.
		s.mu.Lock()
		e, ok := s.fresh(key, gen)
		s.mu.Unlock()
		if ok {
			return e.val, e.err
		}
		rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
		defer cancel()
		v, err := fn(rctx)
		s.keep(key, gen, v, err)
		return v, err
	})
	select {
	case r := <-ch:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fresh returns the kept result of key, if one of generation gen younger
// than MaxAge is kept. s.mu must be held.
func (s *Shared) fresh(key string, gen uint64) (sharedEntry, bool) {
	e, ok := s.entries[key]
	return e, ok && e.gen == gen && s.Now().Sub(e.at) < s.MaxAge
}

// keep stores a result, errors too (a task center that does not answer
// is not asked once per session), and drops the stale ones.
func (s *Shared) keep(key string, gen uint64, v any, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.Now()
	if s.entries == nil {
		s.entries = map[string]sharedEntry{}
	}
	for k, e := range s.entries {
		if e.gen != s.gen || now.Sub(e.at) >= s.MaxAge {
			delete(s.entries, k)
		}
	}
	if gen == s.gen {
		s.entries[key] = sharedEntry{gen: gen, at: now, val: v, err: err}
	}
}

// Overview implements Source.
func (s *Shared) Overview(ctx context.Context) (*Overview, error) {
	v, err := s.read(ctx, "overview", func(ctx context.Context) (any, error) { return s.Source.Overview(ctx) })
	ov, _ := v.(*Overview)
	return ov, err
}

// queryKey names a task query (Status by its value, not its address).
func queryKey(kind string, q TaskQuery) string {
	status := "-"
	if q.Status != nil {
		status = q.Status.String()
	}
	q.Status = nil
	return fmt.Sprintf("%s %s %+v", kind, status, q)
}

// Tasks implements Source.
func (s *Shared) Tasks(ctx context.Context, q TaskQuery) ([]*task.Task, error) {
	v, err := s.read(ctx, queryKey("tasks", q), func(ctx context.Context) (any, error) { return s.Source.Tasks(ctx, q) })
	ts, _ := v.([]*task.Task)
	return ts, err
}

// Count implements Source.
func (s *Shared) Count(ctx context.Context, q TaskQuery) (int, error) {
	v, err := s.read(ctx, queryKey("count", q), func(ctx context.Context) (any, error) { return s.Source.Count(ctx, q) })
	n, _ := v.(int)
	return n, err
}

type taskWithRuns struct {
	t    *task.Task
	runs []*task.Run
}

// Task implements Source.
func (s *Shared) Task(ctx context.Context, id int64) (*task.Task, []*task.Run, error) {
	v, err := s.read(ctx, fmt.Sprintf("task %d", id), func(ctx context.Context) (any, error) {
		t, runs, err := s.Source.Task(ctx, id)
		return taskWithRuns{t, runs}, err
	})
	r, _ := v.(taskWithRuns)
	return r.t, r.runs, err
}

// Audit implements Source.
func (s *Shared) Audit(ctx context.Context, beforeID int64, limit int) ([]store.AuditEntry, error) {
	v, err := s.read(ctx, fmt.Sprintf("audit %d %d", beforeID, limit), func(ctx context.Context) (any, error) {
		return s.Source.Audit(ctx, beforeID, limit)
	})
	es, _ := v.([]store.AuditEntry)
	return es, err
}

// Tail implements Source.
func (s *Shared) Tail(ctx context.Context, id int64) (*broker.TaskTail, error) {
	v, err := s.read(ctx, fmt.Sprintf("tail %d", id), func(ctx context.Context) (any, error) {
		return s.Source.Tail(ctx, id)
	})
	t, _ := v.(*broker.TaskTail)
	return t, err
}
