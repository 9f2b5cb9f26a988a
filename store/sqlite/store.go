// Package sqlite is ackd's default store engine: one SQLite file (WAL,
// synchronous=FULL by default), opened with the right pragmas, migrated from
// schema.sql, with one writer connection whose small writes are
// group-committed (group.go). It implements store.Store; the lease and
// receipt rules are the contract's (package store).
//
// Writes go through one writer connection with BEGIN IMMEDIATE; ops that
// arrive together are group-committed in one transaction. Reads for
// inspection and metrics use a separate read-only pool. Other processes (a
// hand-run `ackd sweep --once`) share the file through WAL and busy_timeout.
// Leases are judged on this process's wall clock (one machine).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/ackd/ackd/store"
)

// Options are the store options (see store.Options).
type Options = store.Options

// Store is an open ackd database.
type Store struct {
	path string
	opts Options
	w    *sql.DB // exactly one connection: every write, BEGIN IMMEDIATE
	r    *sql.DB // read-only pool for inspection and metrics

	st     stmts    // prepared on the writer connection
	ops    chan *op // group commit queue (group.go)
	wg     sync.WaitGroup
	mu     sync.RWMutex // guards closed against sends on ops
	closed bool

	ckpt *checkpointer // checkpoints off the writer (checkpoint.go)

	commits    atomic.Int64                                     // group commits run (tests)
	intents    atomic.Int64                                     // intents committed (prune.go paces itself by them)
	pruneSleep func(ctx context.Context, d time.Duration) error // tests: replaces prunePause's timer

	busy atomic.Int64 // SQLITE_BUSY / SQLITE_LOCKED errors seen
	lost atomic.Int64 // write transactions lost in a row (group.go); 0 when writes work

	// Leases from the future (see Claim): the clock at the last claim and
	// at the last look for such leases (0: not yet), unix ms.
	lastClaim, leasesChecked atomic.Int64

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
	// deliveries: the outbox has its deliveries column (schema 15; a store
	// migrated only so far, in tests of older migrations, has not).
	deliveries bool
}

// Open opens (creating if needed) the database at path and migrates it.
// Every error names the path.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	s, err := open(ctx, path, opts)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	return s, nil
}

func open(ctx context.Context, path string, opts Options) (*Store, error) {
	opts, err := opts.WithDefaults()
	if err != nil {
		return nil, err
	}
	if path == "" {
		return nil, errors.New("empty path")
	}
	if dir := filepath.Dir(path); dir != "" {
		st, err := os.Stat(dir)
		if err != nil {
			return nil, fmt.Errorf("directory %s: %w", dir, errors.Unwrap(err))
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("%s is not a directory", dir)
		}
	}
	if opts.MustExist {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return nil, errors.New("no database file here (ackd serve or ackd migrate creates it)")
		}
	}
	if opts.ReadOnly {
		return openReadOnly(ctx, path, opts)
	}
	// Create the file ourselves so it is 0600 whatever the umask; SQLite
	// gives the -wal and -shm files the database file's permissions.
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrExist) {
		return nil, errors.Unwrap(err)
	}

	w, err := sql.Open("sqlite", dsn(path, opts, false))
	if err != nil {
		return nil, err
	}
	// One writer connection: SQLite has one write lock per file anyway, and a
	// single connection lets group commit batch intents without contention.
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	s := &Store{path: path, opts: opts, w: w, ops: make(chan *op, 4096), instanceEffects: true, instanceState: true, readColumns: rowColumns, catchupMarks: true, routePauses: true}
	if opts.NoMigrate {
		err = s.checkSchema(ctx, w)
	} else {
		err = s.migrate(ctx)
	}
	if err != nil {
		w.Close()
		return nil, sqliteReason(err)
	}
	// A store migrated only so far (tests of older migrations) has no
	// pauses table: its claims and counts leave the pause term out.
	var pauses int
	if err := w.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'ackd_route_pauses'`).Scan(&pauses); err != nil {
		w.Close()
		return nil, sqliteReason(err)
	}
	s.routePauses = pauses == 1
	var deliveries int
	if err := w.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('outbox') WHERE name = 'deliveries'`).Scan(&deliveries); err != nil {
		w.Close()
		return nil, sqliteReason(err)
	}
	s.deliveries = deliveries == 1
	if err := s.prepare(ctx); err != nil {
		w.Close()
		return nil, sqliteReason(err)
	}

	r, err := sql.Open("sqlite", dsn(path, opts, true))
	if err != nil {
		w.Close()
		return nil, err
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	s.r = r

	c, err := sql.Open("sqlite", dsn(path, opts, false))
	if err != nil {
		w.Close()
		r.Close()
		return nil, err
	}
	c.SetMaxOpenConns(1)
	c.SetMaxIdleConns(1)
	s.ckpt = newCheckpointer(c)

	s.wg.Add(1)
	go s.committer()
	return s, nil
}

// openReadOnly opens path for inspection only: one read-only pool (SQLite's
// mode=ro, and query_only), no writer, no committer, no checkpoints, no
// migration. Nothing it does changes the file, so an older ackd serve still
// starts on it afterwards.
func openReadOnly(ctx context.Context, path string, opts Options) (*Store, error) {
	r, err := sql.Open("sqlite", readOnlyDSN(path, opts))
	if err != nil {
		return nil, err
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	s := &Store{path: path, opts: opts, r: r}
	if err := s.checkSchema(ctx, r); err != nil {
		r.Close()
		return nil, sqliteReason(err)
	}
	var n int
	if err := r.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('ackd_instances') WHERE name = 'effects'`).Scan(&n); err != nil {
		r.Close()
		return nil, sqliteReason(err)
	}
	s.instanceEffects = n == 1
	if err := r.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('ackd_instances') WHERE name = 'state'`).Scan(&n); err != nil {
		r.Close()
		return nil, sqliteReason(err)
	}
	s.instanceState = n == 1
	if err := r.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('ackd_installations') WHERE name = 'slack_installed_at'`).Scan(&n); err != nil {
		r.Close()
		return nil, sqliteReason(err)
	}
	s.installsOld = n == 0
	if err := r.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('outbox') WHERE name = 'outcome_unknown'`).Scan(&n); err != nil {
		r.Close()
		return nil, sqliteReason(err)
	}
	s.readColumns = outboxReadColumns(n == 1)
	if err := r.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'catchup_marks'`).Scan(&n); err != nil {
		r.Close()
		return nil, sqliteReason(err)
	}
	s.catchupMarks = n == 1
	if err := r.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'ackd_route_pauses'`).Scan(&n); err != nil {
		r.Close()
		return nil, sqliteReason(err)
	}
	s.routePauses = n == 1
	return s, nil
}

// readOnlyDSN is a file: URI with mode=ro (SQLite opens the file read-only
// and never creates it) and query_only; it sets no journal mode, which
// would be a write on a file not yet in WAL mode.
func readOnlyDSN(path string, o Options) string {
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", o.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "query_only(1)")
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// dsn builds the modernc DSN. Each pragma runs on every new connection:
//   - busy_timeout: wait for another process's write lock instead of failing
//     at once (the daemon and `ackd sweep --once` share the file);
//   - journal_mode=WAL: readers (sqlite3 CLI, metrics) never block the writer;
//   - synchronous: FULL fsyncs every commit (an ack survives power loss),
//     NORMAL only at checkpoints (an ack survives a process crash);
//   - foreign_keys: on, as SQLite should have defaulted to;
//   - wal_autocheckpoint=0: checkpoints run off the writer (checkpoint.go);
//   - cache_size: 16 MiB of pages for the writer (SQLite's default is 2 MiB),
//     so more of the random pages Slack's event ids land on in the key
//     indexes are found in memory: saturation throughput 6.1k → 8.1k acks/s
//     for about 30 MiB more peak RSS (32 MiB: 9.0k/s at 94 MiB, too close to
//     the 100 MiB budget); it is only filled as the database grows;
//   - _txlock=immediate: database/sql's BEGIN becomes BEGIN IMMEDIATE, so a
//     write transaction takes the write lock up front and never fails midway
//     upgrading a read lock;
//   - query_only on the read pool: inspection can never write by mistake.
func dsn(path string, o Options, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", o.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+o.Synchronous+")")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "wal_autocheckpoint(0)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "cache_size(-16384)")
		q.Set("_txlock", "immediate")
	}
	return path + "?" + q.Encode()
}

// Path is the database file's path.
func (s *Store) Path() string { return s.path }

// Engine is "sqlite".
func (s *Store) Engine() string { return "sqlite" }

// Location is the database file's path.
func (s *Store) Location() string { return s.path }

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.opts.Now() }

// Options returns the effective options.
func (s *Store) Options() Options { return s.opts }

// BusyErrors counts SQLITE_BUSY and SQLITE_LOCKED errors seen so far.
func (s *Store) BusyErrors() int64 { return s.busy.Load() }

// Close stops the group committer after it has answered every queued intent,
// then closes both pools. It reports every error.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.opts.ReadOnly {
		s.mu.Unlock()
		return s.r.Close()
	}
	close(s.ops)
	s.mu.Unlock()
	s.wg.Wait()
	var errs []error
	errs = append(errs, s.ckpt.close())
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	for _, st := range []*sql.Stmt{s.st.savepoint, s.st.rollbackTo, s.st.release, s.st.receipt,
		s.st.changes, s.st.outbox, s.st.claim, s.st.complete, s.st.completeBatch, s.st.request, s.st.storeRequest, s.st.attempt, s.st.attempts} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	// A clean close checkpoints the WAL into the main file.
	errs = append(errs, s.w.Close())
	return errors.Join(errs...)
}

// inTx runs fn in one BEGIN IMMEDIATE transaction on the writer connection,
// rolling back on error and on panic.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	if s.opts.ReadOnly {
		return s.errReadOnly()
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return s.note(fmt.Errorf("begin: %w", err))
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback()
			panic(p)
		}
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err = fn(tx); err != nil {
		return s.note(err)
	}
	if err = tx.Commit(); err != nil {
		return s.note(fmt.Errorf("commit: %w", err))
	}
	return nil
}

// errReadOnly is a write refused by a store opened ReadOnly.
func (s *Store) errReadOnly() error {
	return fmt.Errorf("database %s was opened read-only: %w", s.path, store.ErrReadOnly)
}

// note counts busy/locked errors and names the file in read-only errors
// (the driver's message does not say which database it means).
func (s *Store) note(err error) error {
	if IsBusy(err) {
		s.busy.Add(1)
	}
	if IsReadOnly(err) {
		return fmt.Errorf("database %s is read-only: %w", s.path, err)
	}
	return err
}

// classify marks err with the contract's sentinel (store.ErrBusy,
// store.ErrReadOnly, store.ErrUnavailable) that callers branch on, keeping
// the driver's error.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case IsBusy(err) && !errors.Is(err, store.ErrBusy):
		return fmt.Errorf("%w: %w", store.ErrBusy, err)
	case IsReadOnly(err) && !errors.Is(err, store.ErrReadOnly):
		return fmt.Errorf("%w: %w", store.ErrReadOnly, err)
	case IsStorageFault(err) && !errors.Is(err, store.ErrUnavailable):
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// IsStorageFault reports whether err is the disk or the machine failing
// SQLite rather than contention or a bad statement: the disk is full
// (SQLITE_FULL), an I/O error (SQLITE_IOERR*), no memory (SQLITE_NOMEM), a
// corrupt page (SQLITE_CORRUPT).
func IsStorageFault(err error) bool {
	var se *msqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_CORRUPT:
			return true
		}
	}
	return false
}

// IsBusy reports whether err is SQLite's "database is locked/busy".
func IsBusy(err error) bool {
	var se *msqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
	}
	return false
}

// IsReadOnly reports whether err is SQLite's "attempt to write a readonly database".
func IsReadOnly(err error) bool {
	var se *msqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_READONLY
}

// sqliteReason turns driver errors into one readable line.
func sqliteReason(err error) error {
	var se *msqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_NOTADB:
			return fmt.Errorf("not an SQLite database: %w", err)
		case sqlite3.SQLITE_READONLY:
			return fmt.Errorf("database is read-only: %w", err)
		case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM:
			return fmt.Errorf("cannot open the file: %w", err)
		}
	}
	return err
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64)
}

func (s *Store) backoff(n int) time.Duration { return s.opts.Backoff(n) }
