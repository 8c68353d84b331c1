// Package retention deletes old finished tasks and run history in small
// batches, on one node at a time: it runs only while holding a distributed
// lock, and stops when the lock is lost.
package retention

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/taskd/taskd/pkg/lock"
	"github.com/taskd/taskd/pkg/startstop"
	"github.com/taskd/taskd/pkg/store"
)

// Defaults of Config.
const (
	IntervalDefault  = 10 * time.Minute
	TaskAgeDefault   = 7 * 24 * time.Hour
	RunAgeDefault    = 30 * 24 * time.Hour
	BatchSizeDefault = 1000
	// LockName is the lock of the node that deletes (`taskd lock` refuses it).
	LockName           = "retention"
	lockTTL            = time.Minute
	pauseBetweenDelete = 10 * time.Millisecond
)

// Config configures retention.
type Config struct {
	Interval time.Duration
	// TaskAge: succeeded and cancelled tasks finished longer ago are
	// deleted. Dead tasks wait for an operator and are kept.
	TaskAge time.Duration
	// RunAge: task_run rows older than this are deleted.
	RunAge    time.Duration
	BatchSize int
	Logger    *slog.Logger
}

// Result counts what one pass deleted.
type Result struct {
	Tasks, Runs int
}

// Retention is the singleton clean-up duty.
type Retention struct {
	cfg    Config
	store  *store.Store
	locker lock.Locker
	log    *slog.Logger
	runner startstop.Runner
}

// New returns a retention duty that coordinates through locker.
func New(cfg Config, s *store.Store, l lock.Locker) *Retention {
	cfg.Interval = cmp.Or(cfg.Interval, IntervalDefault)
	cfg.TaskAge = cmp.Or(cfg.TaskAge, TaskAgeDefault)
	cfg.RunAge = cmp.Or(cfg.RunAge, RunAgeDefault)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, BatchSizeDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Retention{cfg: cfg, store: s, locker: l, log: cfg.Logger.With("component", "retention")}
}

// Start runs a pass every Interval until Stop.
func (r *Retention) Start(ctx context.Context) error {
	return r.runner.Start(ctx, func(ctx context.Context) {
		startstop.Every(ctx, r.cfg.Interval, func(ctx context.Context) {
			res, err := r.RunOnce(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				r.log.Error("retention pass failed", "err", err)
			case res.Tasks+res.Runs > 0:
				r.log.Info("old tasks deleted", "tasks", res.Tasks, "runs", res.Runs)
			}
		})
	})
}

// Stop stops the loop. Safe to call twice or without Start.
func (r *Retention) Stop() { r.runner.Stop() }

// RunOnce deletes everything past its age, in batches, if this node gets
// the lock; another node holding it is not an error.
func (r *Retention) RunOnce(ctx context.Context) (Result, error) {
	var res Result
	err := lock.Run(ctx, r.locker, LockName, lockTTL, func(ctx context.Context) error {
		for {
			n, err := r.store.TaskPurgeFinished(ctx, r.cfg.TaskAge, r.cfg.BatchSize)
			res.Tasks += n
			if err != nil {
				return err
			}
			if n < r.cfg.BatchSize {
				break
			}
			time.Sleep(pauseBetweenDelete) // let other writers in between batches
		}
		for {
			n, err := r.store.RunPurge(ctx, r.cfg.RunAge, r.cfg.BatchSize)
			res.Runs += n
			if err != nil {
				return err
			}
			if n < r.cfg.BatchSize {
				return nil
			}
			time.Sleep(pauseBetweenDelete)
		}
	})
	if errors.Is(err, lock.ErrNotAcquired) {
		return res, nil
	}
	return res, err
}
