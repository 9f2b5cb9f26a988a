package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	"github.com/ackd/ackd/store"
)

// SchemaVersion is the database's applied migration version (PRAGMA user_version).
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.r.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	return v, err
}

// checkSchema is the open of a store that does not migrate: the file's
// user_version must be one this binary knows and the caller can work with
// (Options.MinSchema); nothing is written.
func (s *Store) checkSchema(ctx context.Context, db *sql.DB) error {
	ms, err := store.Migrations(s.opts.Schema)
	if err != nil {
		return err
	}
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	return store.CheckSchema(v, ms[len(ms)-1].Version, s.opts.MinSchema)
}

// migrate applies the sections of the schema newer than user_version, each
// in its own transaction together with the version bump. It is idempotent and
// safe against a concurrent migrate in another process (BEGIN IMMEDIATE, then
// the version is read again inside the transaction).
func (s *Store) migrate(ctx context.Context) error {
	ms, err := store.Migrations(s.opts.Schema)
	if err != nil {
		return err
	}
	var mode string
	if err := s.w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if mode != "wal" {
		return fmt.Errorf("journal_mode is %q, want wal", mode)
	}
	latest := ms[len(ms)-1].Version
	for _, m := range ms {
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			var cur int
			if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&cur); err != nil {
				return err
			}
			if cur > latest {
				return fmt.Errorf("database schema version %d is newer than this ackd (%d)", cur, latest)
			}
			if cur >= m.Version {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %d: %w", m.Version, err)
			}
			_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.Version))
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// PendingMigrations reports what migrate would apply to the database at
// path, without writing anything: it reads user_version on a read-only
// connection, and a missing file is reported as such, not created.
func PendingMigrations(ctx context.Context, path, schema string) (store.Pending, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return store.PendingFrom(schema, false, 0)
	} else if err != nil {
		return store.Pending{}, fmt.Errorf("database %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return store.Pending{}, err
	}
	defer db.Close()
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return store.Pending{}, fmt.Errorf("database %s: %w", path, sqliteReason(err))
	}
	return store.PendingFrom(schema, true, v)
}
