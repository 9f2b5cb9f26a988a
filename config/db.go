package config

import "github.com/ackd/ackd/store"

// IsPostgres reports whether a database setting names PostgreSQL
// (postgres:// or postgresql:// URL) rather than an SQLite file.
func IsPostgres(db string) bool { return store.IsPostgresURL(db) }

// RedactDB is a database setting fit for a log line: a PostgreSQL URL
// without its password; a file path as it is.
func RedactDB(db string) string {
	if IsPostgres(db) {
		return store.RedactURL(db)
	}
	return db
}
