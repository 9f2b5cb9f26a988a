package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
)

var migrateMarker = regexp.MustCompile(`(?m)^-- migrate: (\d+)\s*$`)

type migration struct {
	version int
	sql     string
}

// migrations splits schema.sql at its "-- migrate: N" markers.
func migrations(schema string) ([]migration, error) {
	locs := migrateMarker.FindAllStringSubmatchIndex(schema, -1)
	if len(locs) == 0 {
		return nil, fmt.Errorf("schema has no \"-- migrate: N\" section")
	}
	var out []migration
	for i, loc := range locs {
		v, _ := strconv.Atoi(schema[loc[2]:loc[3]])
		end := len(schema)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		if want := i + 1; v != want {
			return nil, fmt.Errorf("schema migration %d found where %d was expected", v, want)
		}
		out = append(out, migration{version: v, sql: schema[loc[1]:end]})
	}
	return out, nil
}

// SchemaVersion is the database's applied migration version (PRAGMA user_version).
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.w.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	return v, err
}

// migrate applies the sections of the schema newer than user_version, each
// in its own transaction together with the version bump. It is idempotent and
// safe against a concurrent migrate in another process (BEGIN IMMEDIATE, then
// the version is read again inside the transaction).
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations(s.opts.Schema)
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
	latest := ms[len(ms)-1].version
	for _, m := range ms {
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			var cur int
			if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&cur); err != nil {
				return err
			}
			if cur > latest {
				return fmt.Errorf("database schema version %d is newer than this ackd (%d)", cur, latest)
			}
			if cur >= m.version {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("migration %d: %w", m.version, err)
			}
			_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.version))
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}
