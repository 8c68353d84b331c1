package store

import (
	"context"
	"time"
)

// For the scan-cost tests of package store_test.
var (
	ClaimCandidatesSQL   = qClaimCandidates
	ClaimCandidateLimits = claimCandidateArgs + 1
	NextDueSQL           = qNextDue
	NextFutureDueSQL     = qNextFutureDue
)

// UsePerRowColumns makes s render every column of a batched write as a
// per-row lookup, even where the entries agree.
func (s *Store) UsePerRowColumns() { s.perRow = true }

// CapScans lowers the server's time limit of listings to d.
func (s *Store) CapScans(d time.Duration) { s.scanCap = d }

// MaxBatchRows is the most entries one batched write statement carries.
const MaxBatchRows = maxBatchRows

// UseNoWait switches s to locking batches with NOWAIT, bisected, as on
// servers without SKIP LOCKED.
func (s *Store) UseNoWait() { s.lock = lockNoWait }

// UsePreRead makes s lock every batch before writing it, as on servers
// without a zero lock wait (MySQL 8).
func (s *Store) UsePreRead() { s.zeroWait = false }

// ZeroWait reports whether s writes batches without locking them first.
func (s *Store) ZeroWait() bool { return s.zeroWait }

// PreReads returns how many locking reads s has run before a write.
func (s *Store) PreReads() int64 { return s.preReads.Load() }

// For the index-only tests of the waiting counts.
var (
	StatsWaitingSQL = qStatsWaiting
	QueueDepthSQL   = qQueueDepth
	WaitingCodesSQL = qWaitingCodes
	QueueNamedSQL   = qQueueNamed
)

// Candidates is how many candidate rows the claims have read.
func (s *Store) Candidates() int64 { return s.candidates.Load() }

// For the tests of contract steps, with migrations of their own.
var MigrationsFrom = migrationsFrom

// CheckSchemaOf is CheckSchema for a binary that knows migs.
func (s *Store) CheckSchemaOf(ctx context.Context, migs []Migration) error {
	return s.checkSchema(ctx, migs)
}

// PendingContractsOf is PendingContracts for a binary that knows migs.
func (s *Store) PendingContractsOf(ctx context.Context, migs []Migration) ([]Migration, error) {
	return s.pendingContracts(ctx, migs)
}

// For the tests of idx_lane: the hot statements that read it.
var (
	ClaimWindowSQL      = qClaimWindow
	StuckDispatchedSQL  = qStuckDispatched
	DispatchedBeforeSQL = qDispatchedBefore
	RunningSQL          = qRunning
	StatsInflightSQL    = qStatsInflight
	PurgeTasksSQL       = qPurgeTasks
)

// MigrateLockTimes sets how long one try for the migration lock waits and
// how long its holder may sit idle, until the test ends.
func MigrateLockTimes(t interface{ Cleanup(func()) }, poll, idle time.Duration) {
	p, i := migrateLockPoll, migrateHolderIdle
	migrateLockPoll, migrateHolderIdle = poll, idle
	t.Cleanup(func() { migrateLockPoll, migrateHolderIdle = p, i })
}
