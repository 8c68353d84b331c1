// Package batch finishes batches: it finds open batches whose members have
// all ended and creates their callback task (store.BatchFinish). The write
// of a member's end already finishes its batch when it was the last; this
// pass catches the ends written without that (recovery, an operator's
// cancel or delete, a hand-written UPDATE, a finish that failed), so no
// batch waits for its callback longer than one interval. Any number of
// nodes may run it: each batch is finished once, under its row's lock.
package batch

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/taskd/taskd/pkg/startstop"
)

// Defaults of Config.
const (
	IntervalDefault  = time.Second
	BatchSizeDefault = 1000
)

// Config configures a Finisher.
type Config struct {
	// Interval between passes.
	Interval time.Duration
	// BatchSize bounds the batches one pass finishes.
	BatchSize int
	Logger    *slog.Logger
}

// Store is what the finisher needs from the task center.
type Store interface {
	BatchListFinishable(ctx context.Context, limit int) ([]int64, error)
	BatchFinish(ctx context.Context, ids []int64) ([]int64, error)
}

// Finisher is the batch finisher.
type Finisher struct {
	cfg    Config
	store  Store
	log    *slog.Logger
	fails  *startstop.FailLog
	runner startstop.Runner
}

// New returns a finisher.
func New(cfg Config, s Store) *Finisher {
	cfg.Interval = cmp.Or(cfg.Interval, IntervalDefault)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, BatchSizeDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	log := cfg.Logger.With("component", "batch")
	return &Finisher{cfg: cfg, store: s, log: log,
		fails: &startstop.FailLog{Log: log, Level: slog.LevelError, Failed: "batch pass failed", Again: "batch pass works again", Limit: passTimeout}}
}

// Start runs passes every Interval until Stop.
func (f *Finisher) Start(ctx context.Context) error {
	return f.runner.Start(ctx, func(ctx context.Context) {
		startstop.Every(ctx, f.cfg.Interval, func(ctx context.Context) {
			n, err := f.RunOnce(ctx)
			f.fails.Pass(ctx, err)
			if err == nil && n > 0 {
				f.log.Info("finished batches", "batches", n)
			}
		})
	})
}

// Stop stops the loop. Safe to call twice or without Start.
func (f *Finisher) Stop() { f.runner.Stop() }

// passTimeout bounds one pass.
const passTimeout = 30 * time.Second

// RunOnce finishes the open batches whose members have all ended, at most
// BatchSize of them, and returns how many it finished.
func (f *Finisher) RunOnce(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, passTimeout)
	defer cancel()
	ids, err := f.store.BatchListFinishable(ctx, f.cfg.BatchSize)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	done, err := f.store.BatchFinish(ctx, ids)
	return len(done), err
}
