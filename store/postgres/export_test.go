package postgres

// The console's statements, whose plans the tests read.
var (
	SearchSQL       = searchSQL(rowColumns)
	SearchWindowSQL = searchWindowSQL(rowColumns)
	RouteCountsSQL  = routeCountsSQL
)
