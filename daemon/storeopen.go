package daemon

import (
	"context"
	"errors"
	"strings"

	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/sqlite"
)

// IsPostgres reports whether a database setting names PostgreSQL
// (postgres:// or postgresql:// URL) rather than an SQLite file.
func IsPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// OpenStore opens the engine the database setting names: a PostgreSQL URL,
// or else an SQLite file path (opts.Schema is then schema.sql's text).
func OpenStore(ctx context.Context, db string, opts store.Options) (store.Store, error) {
	if IsPostgres(db) {
		return nil, errors.New("postgres engine not available in this build")
	}
	return sqlite.Open(ctx, db, opts)
}
