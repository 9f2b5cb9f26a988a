package postgres

// ClaimSQL is the claim statement, for TestClaimPlanWithPauses.
const ClaimSQL = claimSQL

// The console's statements, whose plans the tests read.
var (
	SearchSQL       = searchSQL(rowColumns)
	SearchWindowSQL = searchWindowSQL(rowColumns)
	RouteCountsSQL  = routeCountsSQL
)
