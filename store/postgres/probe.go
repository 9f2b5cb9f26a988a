package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Probe connects to the database the URL names and reads ackd's schema
// version (0: no schema yet), without migrating or writing anything
// (`ackd config check`). Errors never quote the password.
func Probe(ctx context.Context, dsn string) (int, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return 0, errors.New("not a valid PostgreSQL URL")
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, fmt.Errorf("connect to %s: %w", Redact(dsn), err)
	}
	defer conn.Close(context.Background())
	var v int
	err = conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM ackd_migrations`).Scan(&v)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" { // undefined_table: a database ackd has not migrated yet
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read schema version on %s: %w", Redact(dsn), err)
	}
	return v, nil
}

// Settings are what ackd's startup line shows of this engine, as slog
// key-value pairs: the server's version, its synchronous_commit (how durable
// a commit is: "on" survives a crash of the server), and the pool size.
func (s *Store) Settings(ctx context.Context) []any {
	var version, syncCommit string
	err := s.pool.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('synchronous_commit')`).Scan(&version, &syncCommit)
	if err != nil {
		version, syncCommit = "unknown", "unknown"
	}
	return []any{"server_version", version, "synchronous_commit", syncCommit, "pool_max_conns", s.pool.Config().MaxConns}
}
