package store

// For the scan-cost tests of package store_test.
var (
	ClaimCandidatesSQL   = qClaimCandidates
	ClaimCandidateLimits = claimCandidateArgs + 1
	NextDueSQL           = qNextDue
)
