package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

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
	var created bool // a new database: one log line for all its sections
	createStart := time.Now()
	for _, m := range ms {
		var applied bool
		var start time.Time // the write lock is held from here (BEGIN IMMEDIATE)
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			start = time.Now()
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
			created = created || cur == 0
			applied = true
			s.migrateStep(store.MigrationStep{Version: m.Version, Summary: m.Summary()}, created)
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %d: %w", m.Version, err)
			}
			_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.Version))
			return err
		})
		if applied {
			s.migrateStep(store.MigrationStep{Version: m.Version, Summary: m.Summary(), Done: true, Took: time.Since(start), Err: err}, created)
		}
		if err != nil {
			return err
		}
	}
	if created {
		s.opts.Logger.Info("database created", "schema_version", latest, "took_ms", time.Since(createStart).Milliseconds())
	}
	return nil
}

// migrateStep reports a migration's start or end to Options.OnMigrate and
// logs each one applied to an existing database with the time it held the
// write lock: `ackd migrate` beside a running daemon makes that daemon's
// acks wait that long.
func (s *Store) migrateStep(step store.MigrationStep, created bool) {
	if step.Done && step.Err == nil && !created {
		s.opts.Logger.Info("schema migration applied", "version", step.Version,
			"lock_ms", float64(step.Took.Microseconds())/1000, "summary", step.Summary)
	}
	if s.opts.OnMigrate != nil {
		s.opts.OnMigrate(step)
	}
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
	p, err := store.PendingFrom(schema, true, v)
	if err != nil {
		return p, err
	}
	p.Rows = map[int]int64{}
	for _, m := range p.Apply {
		if q := m.RowsSQL(); q != "" {
			var n int64
			if db.QueryRowContext(ctx, q).Scan(&n) == nil {
				p.Rows[m.Version] = n
			}
		}
	}
	return p, nil
}
