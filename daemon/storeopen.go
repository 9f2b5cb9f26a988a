package daemon

import (
	"context"
	"strings"

	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
	"github.com/ackd/ackd/store/sqlite"
)

// IsPostgres reports whether a database setting names PostgreSQL
// (postgres:// or postgresql:// URL) rather than an SQLite file.
func IsPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// OpenStore opens the engine the database setting names: a PostgreSQL URL
// (the engine's own embedded schema; opts.Schema is ignored), or else an
// SQLite file path (opts.Schema is then schema.sql's text).
func OpenStore(ctx context.Context, db string, opts store.Options) (store.Store, error) {
	if IsPostgres(db) {
		return postgres.Open(ctx, db, opts)
	}
	return sqlite.Open(ctx, db, opts)
}

// RedactDB is a database setting fit for a log line: a PostgreSQL URL
// without its password, or the SQLite path as it is.
func RedactDB(db string) string {
	if IsPostgres(db) {
		return postgres.Redact(db)
	}
	return db
}

// PendingMigrations reports, without writing anything, what migrate would
// apply to the database the setting names (schema is SQLite's schema.sql;
// PostgreSQL uses its own).
func PendingMigrations(ctx context.Context, db, schema string) (store.Pending, error) {
	if IsPostgres(db) {
		return postgres.PendingMigrations(ctx, db)
	}
	return sqlite.PendingMigrations(ctx, db, schema)
}
