// Package queues follows the state of queues (paused, shards) that the
// task center holds, for the schedulers and workers of one process: it
// reads the small task_queue table about once a second, and at once when a
// change is announced on Redis, so an operator's pause or reshard reaches
// every node within milliseconds, and within a second if the announcement
// is lost. It is the broker's Layout.
package queues

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/startstop"
	"github.com/taskd/taskd/pkg/store"
)

// RefreshDefault is how often the state is read without an announcement.
const RefreshDefault = time.Second

// refreshTimeout bounds one read of the state. A slow server or link is
// no outage (FAULTS.md row 21): with a second added each way, a read that
// opens a connection takes a handshake and the session's settings before
// its own round trip, and one that waits for a connection of a busy pool
// takes the statements ahead of it. A read that fails is tried again at
// the next tick.
const refreshTimeout = 30 * time.Second

// Config configures a Cache.
type Config struct {
	// Configured is each queue's configured shard count
	// (queues.<name>.shards), in force while the queue has no row.
	Configured map[string]int
	// Limits are the configured limits, in force while a queue's row
	// has none recorded (a node records its own as it starts).
	Limits map[string]limit.Limit
	// Refresh is the time between reads of the task center.
	Refresh time.Duration
	Logger  *slog.Logger
}

// Cache is the state of every queue as last read.
type Cache struct {
	cfg    Config
	store  *store.Store
	broker *broker.Broker
	log    *slog.Logger
	fails  *startstop.FailLog
	runner startstop.Runner

	mu      sync.RWMutex
	rows    map[string]store.Queue
	changed chan struct{}
}

var _ broker.Layout = (*Cache)(nil)

// New returns a cache; Refresh or Start load it.
func New(cfg Config, s *store.Store, b *broker.Broker) *Cache {
	cfg.Refresh = cmp.Or(cfg.Refresh, RefreshDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	log := cfg.Logger.With("component", "queues")
	return &Cache{cfg: cfg, store: s, broker: b, log: log,
		fails: &startstop.FailLog{Log: log, Level: slog.LevelWarn, Failed: "read queue state", Again: "read queue state works again", Limit: refreshTimeout},
		rows:  map[string]store.Queue{}, changed: make(chan struct{})}
}

// Start loads the state and keeps it fresh until Stop.
func (c *Cache) Start(ctx context.Context) error {
	// The first read's failure is the first of the loop's: one line for
	// an outage that began before the start, and one when it ends.
	rctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	c.fails.Pass(ctx, c.Refresh(rctx))
	cancel()
	return c.runner.Start(ctx, func(ctx context.Context) {
		nudges, closeSub := c.broker.QueueNudges(ctx)
		defer closeSub()
		t := time.NewTicker(c.cfg.Refresh)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case _, ok := <-nudges:
				if !ok {
					nudges = nil
				}
			}
			rctx, cancel := context.WithTimeout(ctx, refreshTimeout)
			c.fails.Pass(ctx, c.Refresh(rctx))
			cancel()
		}
	})
}

// Stop stops refreshing. Safe to call twice or without Start.
func (c *Cache) Stop() { c.runner.Stop() }

// Refresh reads the state now.
func (c *Cache) Refresh(ctx context.Context) error {
	list, err := c.store.QueueList(ctx)
	if err != nil {
		return err
	}
	rows := make(map[string]store.Queue, len(list))
	for _, q := range list {
		q.UpdatedAt = time.Time{} // compared below: only the state counts
		rows[q.Name] = q
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !sameRows(rows, c.rows) {
		c.rows = rows
		close(c.changed)
		c.changed = make(chan struct{})
	}
	return nil
}

func sameRows(a, b map[string]store.Queue) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// State is one queue's state in force.
type State struct {
	Paused bool
	Shards int // new messages go to this many shards
	Span   int // workers consume this many (>= Shards)
}

// Get returns queue q's state.
func (c *Cache) Get(q string) State {
	c.mu.RLock()
	row, ok := c.rows[q]
	c.mu.RUnlock()
	st := State{Shards: max(1, c.cfg.Configured[q])}
	if ok {
		st.Paused = row.Paused
		if row.Shards > 0 {
			st.Shards = row.Shards
		}
		st.Span = row.Span
	}
	st.Span = max(st.Span, st.Shards)
	return st
}

// Shards implements broker.Layout.
func (c *Cache) Shards(q string) (shards, span int) {
	st := c.Get(q)
	return st.Shards, st.Span
}

// Paused implements broker.Layout.
func (c *Cache) Paused(q string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rows[q].Paused
}

// PausedSet returns the paused queues (nil when none).
func (c *Cache) PausedSet() map[string]bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out map[string]bool
	for name, r := range c.rows {
		if r.Paused {
			if out == nil {
				out = map[string]bool{}
			}
			out[name] = true
		}
	}
	return out
}

// Limit is queue q's flow control in force: its row's, else the
// configured one.
func (c *Cache) Limit(q string) limit.Limit {
	c.mu.RLock()
	row, ok := c.rows[q]
	c.mu.RUnlock()
	if ok && row.LimitSource != "" {
		return row.Limit
	}
	return c.cfg.Limits[q]
}

// Grouped returns the queues whose tasks with a group are claimed group
// by group (per-group limits, serial), with their limits (nil when none).
func (c *Cache) Grouped() map[string]limit.Limit {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out map[string]limit.Limit
	add := func(q string, l limit.Limit) {
		if l.Grouped() {
			if out == nil {
				out = map[string]limit.Limit{}
			}
			out[q] = l
		}
	}
	for q, l := range c.cfg.Limits {
		if r, ok := c.rows[q]; !ok || r.LimitSource == "" {
			add(q, l)
		}
	}
	for q, r := range c.rows {
		if r.LimitSource != "" {
			add(q, r.Limit)
		}
	}
	return out
}

// Changed implements broker.Layout.
func (c *Cache) Changed() <-chan struct{} {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.changed
}
