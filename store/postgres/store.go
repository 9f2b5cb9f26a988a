// Package postgres is ackd's store engine for several replicas on one
// PostgreSQL server (pgx v5, a pgxpool). It implements store.Store and keeps
// the contract's rules (package store); what differs from SQLite is how:
//
//   - Dedup: INSERT … ON CONFLICT (event_id) DO NOTHING and that statement's
//     row count, sent with BEGIN, the transaction's id and the outbox
//     inserts as one pipelined batch, then COMMIT alone; RecordIntent
//     returns after the commit's answer (or, when none came, after
//     pg_xact_status gave one).
//   - Claims: one UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED)
//     statement; competing replicas skip each other's rows instead of
//     waiting on them.
//   - Time: leases, due times and stamps are judged on the database's clock
//     (ackd_now_ms(), clock_timestamp()), never on a replica's, because
//     replicas' clocks differ. store.Options.Now is not used for rows.
//   - Durability: each intent is its own transaction and PostgreSQL's WAL
//     flush is shared by concurrent commits (its own group commit); an ack
//     is as durable as the server's synchronous_commit makes a commit.
//   - A server that is down or unreachable: every call returns within its
//     context's deadline (or, when it has none, statement_timeout and a
//     margin) with store.ErrUnavailable; the pool reconnects by itself
//     when the server is back.
//   - A COMMIT whose answer does not come is resolved with pg_xact_status,
//     never guessed (commit.go); every session bounds what it may hold on
//     the server (session.go).
package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ackd/ackd/store"
)

// Schema is this engine's schema and migrations (schema.sql in this package).
//
//go:embed schema.sql
var Schema string

// Store is an open PostgreSQL database.
type Store struct {
	loc  string // the URL without its password
	opts store.Options
	pool *pgxpool.Pool
	// callTimeout is the deadline of a call whose context has none
	// (statement_timeout plus callMargin; see bound).
	callTimeout time.Duration

	offset atomic.Int64 // ms added to the database clock (tests; see SetClockOffset)
	// futureChecked is when (this process's clock, ms) Claim last looked
	// for times from the future; 0 = never.
	futureChecked atomic.Int64
	closed        atomic.Bool
	busy          atomic.Int64

	// instanceEffects: ackd_instances has its effects column (every schema
	// this binary migrates to; a read-only store may open an older one).
	instanceEffects bool
	// instanceState: ackd_instances has its state column (likewise).
	instanceState bool
	// installsOld: ackd_installations lacks slack_installed_at (likewise).
	installsOld bool
	// readColumns is what Get, GetByKey and List select: rowColumns, or on
	// an older schema a read-only store opened, the same with constants in
	// place of the columns it lacks (outboxReadColumns).
	readColumns string
	// catchupMarks: the catchup_marks table exists (likewise).
	catchupMarks bool
	// routePauses: the ackd_route_pauses table exists (likewise).
	routePauses bool
}

var _ store.Store = (*Store)(nil)

// DefaultMaxConns is the pool size unless the URL sets pool_max_conns:
// concurrent acks each hold a connection for one round trip, and more
// commits in flight share more WAL flushes.
const DefaultMaxConns = 16

// Open connects to the database at dsn (a postgres:// URL; libpq's
// parameters and pgxpool's pool_* parameters apply) and migrates it. The
// schema is this package's (opts.Schema, SQLite's, is ignored).
func Open(ctx context.Context, dsn string, opts store.Options) (*Store, error) {
	loc := Redact(dsn)
	s, err := open(ctx, dsn, loc, opts)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", loc, err)
	}
	return s, nil
}

func open(ctx context.Context, dsn, loc string, opts store.Options) (*Store, error) {
	opts.Schema = Schema
	opts, err := opts.WithDefaults()
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("not a valid PostgreSQL URL") // the parse error may quote the password
	}
	if u, err := url.Parse(dsn); err == nil && u.Query().Get("pool_max_conns") == "" {
		cfg.MaxConns = DefaultMaxConns
	}
	// A connection attempt to a host that does not answer must end even when
	// the caller's context has none: the pool dials in the background.
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	// A connection that sat idle may be dead (server restarted): check it
	// before handing it to an ack.
	cfg.PingTimeout = time.Second
	cfg.HealthCheckPeriod = 10 * time.Second
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "ackd"
	}
	if opts.ReadOnly {
		// The server itself refuses every write of this process's sessions.
		cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	var callTimeout time.Duration
	if statement := configureSessions(cfg, opts.Role); statement > 0 {
		callTimeout = statement + callMargin
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, reason(err)
	}
	s := &Store{loc: loc, opts: opts, pool: pool, callTimeout: callTimeout}
	if opts.MustExist {
		var ok bool
		if err := pool.QueryRow(ctx, `SELECT to_regclass('ackd_migrations') IS NOT NULL`).Scan(&ok); err != nil {
			pool.Close()
			return nil, reason(s.classify(ctx, err))
		}
		if !ok {
			pool.Close()
			return nil, errors.New("no ackd schema in this database (ackd serve or ackd migrate creates it)")
		}
	}
	if opts.NoMigrate {
		err = s.checkSchema(ctx)
	} else {
		err = s.migrate(ctx)
	}
	if err == nil {
		err = s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = 'ackd_instances' AND column_name = 'effects')`).Scan(&s.instanceEffects)
	}
	if err == nil {
		var confirm bool
		err = s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = 'outbox' AND column_name = 'outcome_unknown')`).Scan(&confirm)
		s.readColumns = outboxReadColumns(confirm)
		err = s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.tables
			WHERE table_schema = current_schema() AND table_name = 'catchup_marks')`).Scan(&s.catchupMarks)
		if err == nil {
			err = s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.tables
				WHERE table_schema = current_schema() AND table_name = 'ackd_route_pauses')`).Scan(&s.routePauses)
		}
		if err == nil {
			err = s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns
				WHERE table_schema = current_schema() AND table_name = 'ackd_instances' AND column_name = 'state')`).Scan(&s.instanceState)
		}
		if err == nil {
			var has bool
			err = s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns
				WHERE table_schema = current_schema() AND table_name = 'ackd_installations' AND column_name = 'slack_installed_at')`).Scan(&has)
			s.installsOld = !has
		}
	}
	if err != nil {
		pool.Close()
		return nil, reason(err)
	}
	return s, nil
}

// Redact returns dsn with its password replaced, for logs and Location.
func Redact(dsn string) string { return store.RedactURL(dsn) }

// Engine is "postgres".
func (s *Store) Engine() string { return "postgres" }

// Location is the URL without its password.
func (s *Store) Location() string { return s.loc }

// Now is this process's clock shifted like the database's (SetClockOffset).
// Rows are stamped on the database's clock; Now serves only durations
// measured inside this process (how much of a lease is left).
func (s *Store) Now() time.Time {
	return s.opts.Now().Add(time.Duration(s.offset.Load()) * time.Millisecond)
}

// SetClockOffset shifts the database clock as this store sees it by d: every
// statement judges time as the database's clock plus d. Tests use it to
// expire leases and reach due times without waiting; production never
// calls it.
func (s *Store) SetClockOffset(d time.Duration) {
	s.offset.Store(d.Milliseconds())
	s.futureChecked.Store(0) // a clock step: look for times from the future again
}

// DBNow is the database clock (plus the offset), for tests and checks.
func (s *Store) DBNow(ctx context.Context) (time.Time, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var ms int64
	err := s.pool.QueryRow(ctx, `SELECT ackd_now_ms() + $1::bigint`, s.offset.Load()).Scan(&ms)
	if err != nil {
		return time.Time{}, s.classify(ctx, err)
	}
	return time.UnixMilli(ms), nil
}

// BusyErrors counts serialization, deadlock and lock-timeout errors seen.
func (s *Store) BusyErrors() int64 { return s.busy.Load() }

// Pool is the connection pool (tests and bench read through it).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool, waiting for connections in use to be released.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.pool.Close()
	return nil
}

func (s *Store) check() error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

// inTx runs fn in one transaction, rolling back on error and on panic.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.inTxResolving(ctx, func(tx pgx.Tx) (string, error) { return "", fn(tx) })
}

// inTxResolving is inTx for a transaction whose outcome a caller acts on:
// fn returns the transaction's id (pg_current_xact_id()::text, read by one
// of its statements; "" if it wrote nothing), and a COMMIT whose answer
// does not come is resolved with it (settle) in the last part of ctx's
// time (commitWindow).
func (s *Store) inTxResolving(ctx context.Context, fn func(tx pgx.Tx) (xid string, err error)) (err error) {
	if err := s.check(); err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.classify(ctx, fmt.Errorf("begin: %w", err))
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback(context.Background())
			panic(p)
		}
		if err != nil {
			_ = tx.Rollback(context.Background())
		}
	}()
	xid, err := fn(tx)
	if err != nil {
		return s.classify(ctx, err)
	}
	if xid == "" {
		err = tx.Commit(ctx)
	} else {
		cctx, ccancel, by := commitWindow(ctx)
		err = s.settle(ctx, tx.Commit(cctx), xid, by)
		ccancel()
	}
	if err != nil {
		return s.classify(ctx, fmt.Errorf("commit: %w", err))
	}
	return nil
}

// classify marks err with the contract's sentinel callers branch on
// (store.ErrUnavailable, ErrReadOnly, ErrBusy), keeping the driver's error.
// A deadline that passed while talking to the server counts as
// unavailable: the server did not answer in time.
func (s *Store) classify(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrBusy) ||
		errors.Is(err, store.ErrReadOnly) || errors.Is(err, store.ErrClosed) || errors.Is(err, store.ErrCommitUnknown) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "25006": // read_only_sql_transaction: a standby, or default_transaction_read_only
			return fmt.Errorf("%w: %w", store.ErrReadOnly, err)
		case pe.Code == "40001" || pe.Code == "40P01" || pe.Code == "55P03":
			s.busy.Add(1)
			return fmt.Errorf("%w: %w", store.ErrBusy, err)
		case pe.Code[:2] == "08" || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || pe.Code == "53300":
			return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
		return err
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		pgconn.SafeToRetry(err), pgconn.Timeout(err), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	if ctx.Err() != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// reason turns connection errors into one readable line without the password.
func reason(err error) error {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return fmt.Errorf("%w: cannot connect: %w", store.ErrUnavailable, ce.Unwrap())
	}
	return err
}

// clockCTE is the one place a statement reads the clock: the database's,
// plus the store's offset ($1 in every statement that uses it). A volatile
// CTE is evaluated once per statement.
const clockCTE = `clock AS (SELECT ackd_now_ms() + $1::bigint AS now)`

func fromMS(v *int64) time.Time {
	if v == nil {
		return time.Time{}
	}
	return time.UnixMilli(*v)
}
