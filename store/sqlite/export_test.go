package sqlite

// The statements whose query plans the tests read.
const (
	ClaimSQL         = claimSQL
	CompleteBatchSQL = completeBatchSQL
)
