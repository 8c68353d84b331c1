package store

// For the scan-cost tests of package store_test.
var (
	ClaimCandidatesSQL   = qClaimCandidates
	ClaimCandidateLimits = claimCandidateArgs + 1
	NextDueSQL           = qNextDue
)

// UsePerRowColumns makes s render every column of a batched write as a
// per-row lookup, even where the entries agree.
func (s *Store) UsePerRowColumns() { s.perRow = true }

// MaxBatchRows is the most entries one batched write statement carries.
const MaxBatchRows = maxBatchRows

// UseNoWait switches s to locking batches with NOWAIT, bisected, as on
// servers without SKIP LOCKED.
func (s *Store) UseNoWait() { s.lock = lockNoWait }
