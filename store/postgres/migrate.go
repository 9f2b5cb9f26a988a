package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ackd/ackd/store"
)

// SchemaVersion is the highest applied migration.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var v int
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM ackd_migrations`).Scan(&v)
	if err != nil {
		return 0, s.classify(ctx, fmt.Errorf("schema version: %w", err))
	}
	return v, nil
}

// checkSchema is the open of a store that does not migrate: the database's
// version must be one this binary knows and the caller can work with
// (Options.MinSchema); nothing is written, not even ackd_migrations.
func (s *Store) checkSchema(ctx context.Context) error {
	ms, err := store.Migrations(s.opts.Schema)
	if err != nil {
		return err
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('ackd_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return s.classify(ctx, err)
	}
	v := 0
	if exists {
		if v, err = s.SchemaVersion(ctx); err != nil {
			return err
		}
	}
	return store.CheckSchema(v, ms[len(ms)-1].Version, s.opts.MinSchema)
}

// migrate applies the schema's sections newer than the database's, each in
// its own transaction with its row in ackd_migrations, while holding a
// session advisory lock keyed by the schema ackd lives in: replicas that
// start together queue on the lock, and each one after the first finds
// nothing left to do. The lock is a session lock on one connection, so a
// crashed migrator releases it with its connection.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := store.Migrations(s.opts.Schema)
	if err != nil {
		return err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	// Waiting for another replica's migration may take longer than a
	// statement may; this session's own default comes back at the end.
	if _, err := conn.Exec(ctx, `SET statement_timeout = 0`); err != nil {
		return fmt.Errorf("migration session: %w", err)
	}
	defer conn.Exec(context.Background(), `RESET statement_timeout`)
	const key = `hashtextextended('ackd migrate ' || current_schema(), 0)`
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+key+`)`); err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	defer func() {
		// A fresh context: an ended ctx must not leave the lock held on a
		// connection that goes back to the pool.
		if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock(`+key+`)`); err != nil {
			conn.Conn().Close(context.Background())
		}
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS ackd_migrations (
		version    integer     PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("migrations table: %w", err)
	}
	var cur int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM ackd_migrations`).Scan(&cur); err != nil {
		return err
	}
	latest := ms[len(ms)-1].Version
	if cur > latest {
		return fmt.Errorf("database schema version %d is newer than this ackd (%d)", cur, latest)
	}
	for _, m := range ms[cur:] {
		if s.opts.OnMigrate != nil {
			s.opts.OnMigrate(store.MigrationStep{Version: m.Version, Summary: m.Summary()})
		}
		took, err := s.migrateOne(ctx, conn, m)
		if s.opts.OnMigrate != nil {
			s.opts.OnMigrate(store.MigrationStep{Version: m.Version, Summary: m.Summary(), Done: true, Took: took, Err: err})
		}
		if err == nil && cur > 0 {
			// An existing database: how long the section held its locks
			// (from BEGIN to COMMIT of the try that applied it). A new
			// one is logged once below.
			s.opts.Logger.Info("schema migration applied", "version", m.Version,
				"lock_ms", float64(took.Microseconds())/1000, "summary", m.Summary())
		}
		if err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) {
				return fmt.Errorf("migration %d: %s (%s)", m.Version, pe.Message, pe.Code)
			}
			return fmt.Errorf("migration %d: %w", m.Version, err)
		}
	}
	if cur == 0 {
		s.opts.Logger.Info("database created", "schema_version", latest)
	}
	return nil
}

// migrateLockTries bounds how often a migration is tried again after it
// gave up waiting for a table lock.
const migrateLockTries = 60

// migrateOne applies one migration in its own transaction. Its statements
// wait for table locks at most migrateLockTimeout: an ALTER TABLE queued
// behind a transaction that holds outbox rows would otherwise make every
// outbox statement after it queue too (ingress included). It gives up,
// lets them pass, and tries again a second later, up to migrateLockTries
// times, logging what it waits for.
//
// took is how long the try that applied it took, from BEGIN to COMMIT: the
// time it held the locks it took (an ALTER TABLE's lasts to the commit).
func (s *Store) migrateOne(ctx context.Context, conn *pgxpool.Conn, m store.Migration) (took time.Duration, err error) {
	for try := 1; ; try++ {
		start := time.Now()
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`,
				strconv.FormatInt(migrateLockTimeout.Milliseconds(), 10)); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO ackd_migrations (version) VALUES ($1)`, m.Version)
			return err
		})
		took = time.Since(start)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "55P03" || try == migrateLockTries {
			return took, err
		}
		s.opts.Logger.Warn("migration waits for a table lock another transaction holds; trying again",
			"version", m.Version, "try", try, "lock_timeout", migrateLockTimeout.String(), "err", pe.Message)
		select {
		case <-ctx.Done():
			return took, err
		case <-time.After(time.Second):
		}
	}
}

// PendingMigrations reports what migrate would apply to the database at
// dsn, without writing anything (no migrations table is created, no lock
// taken): it reads ackd_migrations in the URL's schema. A database without
// ackd's schema is reported as not existing yet.
func PendingMigrations(ctx context.Context, dsn string) (store.Pending, error) {
	loc := Redact(dsn)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return store.Pending{}, errors.New("not a valid PostgreSQL URL")
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return store.Pending{}, fmt.Errorf("open database %s: %w", loc, reason(err))
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('ackd_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return store.Pending{}, fmt.Errorf("database %s: %w", loc, err)
	}
	var v int
	if exists {
		if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM ackd_migrations`).Scan(&v); err != nil {
			return store.Pending{}, fmt.Errorf("database %s: %w", loc, err)
		}
	}
	p, err := store.PendingFrom(Schema, exists, v)
	if err != nil || !exists {
		return p, err
	}
	p.Rows = map[int]int64{}
	for _, m := range p.Apply {
		if q := m.RowsSQL(); q != "" {
			var n int64
			if conn.QueryRow(ctx, q).Scan(&n) == nil {
				p.Rows[m.Version] = n
			}
		}
	}
	return p, nil
}
