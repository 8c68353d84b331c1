package scheduler

import (
	"context"
	"time"

	"github.com/taskd/taskd/pkg/store"
)

// ClaimRound runs one claim of the loop: with the claim-ahead, holding the
// messages of tasks not due yet.
func (s *Scheduler) ClaimRound(ctx context.Context) (int, error) {
	n, _, _, err := s.runOnce(ctx, s.cfg.ClaimAhead)
	return n, err
}

// ReleaseOnce is one pass of the releaser.
func (s *Scheduler) ReleaseOnce(ctx context.Context) (int, time.Duration, error) {
	return s.releaseOnce(ctx)
}

// UseDatabaseClock makes the releaser read the database clock from src.
func (s *Scheduler) UseDatabaseClock(src store.TimeSource) { s.db = store.NewClock(src, s.clock) }

// NextClaimIn is how long the loop sleeps after a claim.
var NextClaimIn = nextClaimIn

// UntilNextDue is how long the loop sleeps after a claim that took claimed
// tasks.
func (s *Scheduler) UntilNextDue(ctx context.Context, claimed int, ahead time.Duration) time.Duration {
	return s.untilNextDue(ctx, claimed, ahead)
}
