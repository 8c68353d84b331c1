package worker

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/startstop"
)

// clockSyncEvery is how many beats pass between two syncs of the database
// clock (a minute at the default interval).
const clockSyncEvery = 12

// heartbeater publishes the worker's liveness every HeartbeatInterval: its
// heartbeat (with what each slot runs) and the per-minute counters; beside
// the beats it keeps the database clock in sync.
type heartbeater struct {
	w      *Worker
	runner startstop.Runner
	// sent holds the counts already added to the per-minute counters.
	sent  broker.Counts
	fails startstop.FailLog
}

// Start publishes the first heartbeat, so that the worker is registered
// before it takes any work, then beats until Stop.
func (h *heartbeater) Start(ctx context.Context) error {
	h.fails = startstop.FailLog{Log: h.w.log, Level: slog.LevelWarn, Failed: "heartbeat failed", Again: "heartbeats work again"}
	h.fails.Pass(ctx, h.runOnce(ctx))
	return h.runner.Start(ctx, h.loop)
}

// Stop stops beating; the heartbeat expires after its TTL.
func (h *heartbeater) Stop() { h.runner.Stop() }

// withdraw stops beating and deletes the heartbeat at once.
func (h *heartbeater) withdraw() {
	h.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), beatTimeout)
	defer cancel()
	if err := h.w.broker.Withdraw(ctx, h.w.cfg.ID); err != nil {
		h.w.log.Warn("withdraw heartbeat", "err", err)
	}
}

func (h *heartbeater) loop(ctx context.Context) {
	t := time.NewTicker(h.w.cfg.HeartbeatInterval)
	defer t.Stop()
	// The clock sync runs beside the beats: a database that hangs must not
	// hold back the heartbeat (the watchdog judges a worker whose MySQL
	// hangs by its fresh heartbeat).
	var syncs sync.WaitGroup
	defer syncs.Wait()
	var syncing atomic.Bool
	for beats := 1; ; beats++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.fails.Pass(ctx, h.runOnce(ctx))
		if beats%clockSyncEvery == 0 && syncing.CompareAndSwap(false, true) {
			syncs.Add(1)
			go func() {
				defer syncs.Done()
				defer syncing.Store(false)
				sctx, cancel := context.WithTimeout(ctx, beatTimeout)
				defer cancel()
				if err := h.w.db.Sync(sctx); err != nil && ctx.Err() == nil {
					h.w.log.Warn("database clock sync failed", "err", err)
				}
			}()
		}
	}
}

// runOnce publishes one heartbeat with the counts finished since the last
// one that reached Redis.
func (h *heartbeater) runOnce(ctx context.Context) error {
	w := h.w
	host, _ := os.Hostname()
	processed, failed := w.count.processed.Load(), w.count.failed.Load()
	now := broker.Counts{Processed: processed, Failed: failed, Dead: w.count.dead.Load()}
	hb := &broker.Heartbeat{
		ID: w.cfg.ID, Node: w.cfg.Node, Host: host, PID: os.Getpid(), Version: w.cfg.Version,
		Queues: w.Queues(), StartedAt: w.startedAt, Busy: int(w.slots.busy.Load()),
		Processed: processed, Failed: failed, Capacity: w.Capacity(), QueueSlots: w.cfg.Queues, Slots: w.busySlots(),
		ResultsWaitingMS: w.comp.waiting().Milliseconds(),
	}
	bctx, cancel := context.WithTimeout(ctx, beatTimeout)
	defer cancel()
	err := w.broker.BeatCounts(bctx, hb, w.cfg.HeartbeatTTL, w.clock.Now(), broker.Counts{
		Processed: now.Processed - h.sent.Processed, Failed: now.Failed - h.sent.Failed, Dead: now.Dead - h.sent.Dead})
	if err == nil {
		h.sent = now
	}
	// The leases of running attempts live as long as the heartbeat: a
	// worker that dies gives its capacity back within the TTL.
	if lerr := w.leaseLock.renew(bctx, w.leases, w.cfg.HeartbeatTTL); lerr != nil && err == nil {
		err = lerr
	}
	return err
}
