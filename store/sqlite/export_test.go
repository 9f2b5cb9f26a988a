package sqlite

// CompleteBatchSQL lets the tests read the plan of CompleteBatch's statement.
const CompleteBatchSQL = completeBatchSQL
