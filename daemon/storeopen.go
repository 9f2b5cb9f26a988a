package daemon

import (
	"context"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
	"github.com/ackd/ackd/store/sqlite"
)

// OpenStore opens the engine the database setting names: a PostgreSQL URL
// (the engine's own embedded schema; opts.Schema is ignored), or else an
// SQLite file path (opts.Schema is then schema.sql's text).
func OpenStore(ctx context.Context, db string, opts store.Options) (store.Store, error) {
	if config.IsPostgres(db) {
		return postgres.Open(ctx, db, opts)
	}
	st, err := sqlite.Open(ctx, db, opts)
	if err != nil {
		return nil, accessError(db, err)
	}
	return st, nil
}

// PendingMigrations reports, without writing anything, what migrate would
// apply to the database the setting names (schema is SQLite's schema.sql;
// PostgreSQL uses its own).
func PendingMigrations(ctx context.Context, db, schema string) (store.Pending, error) {
	if config.IsPostgres(db) {
		return postgres.PendingMigrations(ctx, db)
	}
	return sqlite.PendingMigrations(ctx, db, schema)
}
