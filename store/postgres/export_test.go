package postgres

// ClaimSQL is the claim statement, for TestClaimPlanWithPauses.
const ClaimSQL = claimSQL
