package store

// For the scan-cost tests of package store_test.
var (
	ClaimCandidatesSQL   = qClaimCandidates
	ClaimCandidateLimits = claimCandidateArgs + 1
	NextDueSQL           = qNextDue
)

// UseUnionBatches switches s to the batch form of servers without
// JSON_TABLE.
func (s *Store) UseUnionBatches() { s.values = unionValues }

// UseNoWait switches s to locking batches with NOWAIT, bisected, as on
// servers without SKIP LOCKED.
func (s *Store) UseNoWait() { s.lock = lockNoWait }
