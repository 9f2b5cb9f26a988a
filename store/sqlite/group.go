package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Group commit. Every small write (an intent, a claim, a completion, a
// failure) is an op sent to one committer goroutine, which runs whatever ops
// are waiting in ONE BEGIN IMMEDIATE transaction on the writer connection:
// one fsync for all of them. An op whose statements fail with an error that
// SQLite confines to the statement (a constraint, a bad value, an SQL
// error) is rolled back alone (see commitBatch) and only its caller sees the
// error; the others commit. Each caller learns its own result only after
// the commit (or its failure).
//
// A lost transaction fails the whole batch. SQLite may end a transaction by
// itself in the middle: a write that finds the disk full (SQLITE_FULL), an
// I/O error (SQLITE_IOERR*), no memory (SQLITE_NOMEM), an interrupt or a
// corrupt page roll the WHOLE transaction back, not just the statement
// (https://sqlite.org/lang_transaction.html#response_to_errors_within_a_transaction).
// The connection is then in autocommit mode, and any later statement of the
// batch — an op's SAVEPOINT included — would open a transaction of its own
// and commit it outside the batch, while ops that ran before the loss would
// be told "committed" by the final COMMIT. So the rule is: as soon as a
// statement fails with any error other than the statement-confined ones
// above, or an op's ROLLBACK TO or RELEASE fails (its savepoint went with
// the transaction), or COMMIT fails, nothing more runs in that batch. It is
// rolled back (a no-op if SQLite already did it; the driver also rolls back
// a COMMIT that failed with the transaction still open), every op in it is
// answered with that error — none of its rows was committed, and no op whose
// rows committed is told otherwise — and the writer connection is discarded,
// so the next batch starts on a fresh connection with no transaction open:
// ackd records again as soon as the disk takes writes. An op must return
// every error its statements return; one that swallowed an error could not
// be told apart from a success.

type op struct {
	ctx   context.Context
	fn    func(ctx context.Context, tx *sql.Tx, now int64) error
	done  chan error   // buffered: the committer never blocks on a caller that gave up
	state atomic.Int32 // opQueued → opTaken (committer) or opAbandoned (caller or committer)
}

// An op is taken by the committer or abandoned by its caller, never both:
// whoever moves it out of opQueued first decides. So a caller whose deadline
// passes either abandons an op that will never run (and answers "not
// recorded"), or learns that the op is already in a transaction and waits
// for that commit's verdict, which is then the truth.
const (
	opQueued int32 = iota
	opTaken
	opAbandoned
)

// stmts are the writer connection's prepared statements for the hot path.
type stmts struct {
	savepoint, rollbackTo, release *sql.Stmt
	receipt, changes, outbox       *sql.Stmt
	claim, complete, completeBatch *sql.Stmt
	request, storeRequest          *sql.Stmt
	attempt, attempts              *sql.Stmt // attempts.go
}

func (s *Store) prepare(ctx context.Context) error {
	var err error
	p := func(q string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var st *sql.Stmt
		st, err = s.w.PrepareContext(ctx, q)
		return st
	}
	s.st = stmts{
		savepoint:  p("SAVEPOINT op"),
		rollbackTo: p("ROLLBACK TO op"),
		release:    p("RELEASE op"),
		receipt: p(`INSERT INTO slack_event_receipts (event_id, event_type, received_at)
		            VALUES (?, ?, ?)
		            ON CONFLICT (event_id) DO NOTHING`),
		changes: p("SELECT changes()"),
		outbox:  p(s.insertSQL()),
		storeRequest: p(`INSERT INTO slack_requests (event_id, content_type, body, received_at)
		                 VALUES (?, ?, ?, ?)
		                 ON CONFLICT (event_id) DO NOTHING`),
		request: p(requestSQL),
		complete: p(`UPDATE outbox
		                SET status = 'done', attempts = attempts + 1, completed_at = ?, result = ?, claim_expires_at = NULL
		              WHERE id = ? AND claim_token = ? AND status = 'pending'`),
		completeBatch: p(completeBatchSQL),
		claim:         p(s.claimSQL()),
	}
	if err != nil {
		return err
	}
	// A store opened without migrating on an older schema (Options.MinSchema)
	// has no attempts table: it records none.
	var n int
	if err := s.w.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'outbox_attempts'`).Scan(&n); err != nil || n == 0 {
		return err
	}
	s.st.attempt, s.st.attempts = p(attemptSQL), p(attemptsSQL)
	return err
}

// insertSQL is the statement that enqueues one row: ?6 request_id, ?7
// claim token, ?8 lease expiry, ?9 lease length: NULL unless the row is
// written already claimed (an inline attempt), which is then its first
// request to the handler (deliveries 1; not on a schema before 15).
func (s *Store) insertSQL() string {
	if !s.deliveries {
		return `INSERT INTO outbox (idempotency_key, effect, payload, next_attempt_at, created_at,
		                            request_id, claim_token, claim_expires_at, claim_lease_ms)
		        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		        ON CONFLICT (idempotency_key) DO NOTHING`
	}
	return `INSERT INTO outbox (idempotency_key, effect, payload, next_attempt_at, created_at,
	                            request_id, claim_token, claim_expires_at, claim_lease_ms, deliveries)
	        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, CASE WHEN ?7 IS NULL THEN 0 ELSE 1 END)
	        ON CONFLICT (idempotency_key) DO NOTHING`
}

// requestSQL reads one stored request (slack_requests) by its event id.
const requestSQL = `SELECT content_type, body FROM slack_requests WHERE event_id = ?`

// claimSQL is the claim statement (see Claim): ?1 token, ?2 lease expiry,
// ?3 now, ?4 limit, ?5 the effects a claim may take as a JSON array, or
// NULL for every effect, ?6 max_attempts.
//
// Issue 38: a claim that takes a row from another token's expired lease
// (takeover) counts that claim's attempt, which ended with no word (its
// process died or stopped mid-effect): attempts + 1, recorded as unknown
// by the trigger outbox_attempt_unknown. When that spends the row's budget
// (?6, max_attempts) the row is parked (parkTerm) instead of claimed,
// returned with status parked and no token. deliveries numbers the claim's
// request to the handler (X-Ackd-Attempt, deliveriesSet).
const claimSQL = `UPDATE outbox
		             SET claim_token = CASE WHEN ` + parkTerm + ` THEN NULL ELSE ?1 END,
		                 claim_expires_at = CASE WHEN ` + parkTerm + ` THEN NULL ELSE ?2 END,
		                 claim_lease_ms = ?2 - ?3,
		                 first_claimed_at = coalesce(first_claimed_at, ?3),
		                 outcome_unknown = outcome_unknown OR ` + takeoverTerm + `,
		                 attempts = attempts + ` + countTerm + `,
		                 status = CASE WHEN ` + parkTerm + ` THEN 'parked' ELSE status END,
		                 last_error = CASE WHEN ` + parkTerm + ` THEN printf(` + parkedDeadMsg + `, attempts + 1) ELSE last_error END` +
	deliveriesSet + `
		           WHERE id IN (
		                 SELECT id FROM (
		                        SELECT id, 0 AS theirs, next_attempt_at AS due FROM outbox INDEXED BY outbox_leased
		                         WHERE claim_token = ?1 AND status = 'pending' AND next_attempt_at <= ?3
		                        UNION ALL
		                        SELECT id, 1, due FROM (
		                               SELECT id, next_attempt_at AS due FROM outbox
		                                WHERE status = 'pending' AND next_attempt_at <= ?3
		                                  AND (claim_token IS NULL OR claim_expires_at IS NULL OR claim_expires_at <= ?3)
		                                  AND claim_token IS NOT ?1
		                                  AND (?5 IS NULL OR effect IN (SELECT value FROM json_each(?5)))` +
	// Issue 31: no row of a paused route (pauses.go, notPausedTerm); the
	// rows this token holds already (above) finish their attempt.
	notPausedTerm + `
		                                ORDER BY next_attempt_at, id
		                                LIMIT ?4))
		                  ORDER BY theirs, due, id
		                  LIMIT ?4)
		          RETURNING ` + rowColumns + `, deliveries`

// takeoverTerm is true (1) in the claim for a row it takes from another
// token's lease (which ran out, or was stamped from the future).
const takeoverTerm = `(claim_token IS NOT NULL AND claim_token IS NOT ?1)`

// countTerm: a takeover of a lease a claim stamped (first_claimed_at is
// set by every claim), whose attempt is counted. A lease a row was written
// with (RecordIntent's inline attempt: the intent's other rows share it
// and were never performed under it) is not counted.
const countTerm = `(` + takeoverTerm + ` AND first_claimed_at IS NOT NULL)`

// parkTerm: a counted takeover whose dead attempt spends the row's budget (?6).
const parkTerm = `(` + countTerm + ` AND attempts + 1 >= ?6)`

// parkedDeadMsg is the last_error of a row parked by the claim (parkTerm),
// a printf format of the attempts spent.
const parkedDeadMsg = `'parked after %d attempts (max_attempts): the last one ended with no word from its process (it died or was stopped mid-effect, and its lease ran out), so its effect may have happened; a row whose effect kills its process parks instead of running forever'`

// deliveriesSet sets the number of the claim's request to the handler (the
// X-Ackd-Attempt it carries): the row's last one plus one, unchanged on a
// re-claim by the same token or a park. A row never numbered (0) whose
// attempts began before schema 15 is numbered on from its attempts and its
// history (plus the takeover's dead attempt), so an upgraded row repeats
// no number either; a row never claimed starts at 1 without reading them.
const deliveriesSet = `,
		                 deliveries = CASE WHEN claim_token IS ?1 OR ` + parkTerm + ` THEN deliveries
		                                   WHEN deliveries > 0 THEN deliveries + 1
		                                   WHEN attempts = 0 AND first_claimed_at IS NULL THEN 1 + ` + takeoverTerm + `
		                                   ELSE max(attempts, coalesce((SELECT max(a.n) FROM outbox_attempts AS a WHERE a.row_id = outbox.id), 0))
		                                        + ` + takeoverTerm + ` + 1 END`

// claimSQL is claimSQL on this store's schema: without the pause term on
// one migrated only as far as before route pauses (tests of older
// migrations; ackd serve and sweep always have the table).
func (s *Store) claimSQL() string {
	q := claimSQL
	if !s.deliveries {
		// Before schema 15 (tests of older migrations): no numbering.
		q = strings.Replace(q, deliveriesSet, "", 1)
		q = strings.Replace(q, "RETURNING "+rowColumns+", deliveries", "RETURNING "+rowColumns+", 0", 1)
	}
	if s.routePauses {
		return q
	}
	return strings.Replace(q, notPausedTerm, "", 1)
}

// completeBatchSQL is the statement behind CompleteBatch: ?1 now, ?2 token,
// ?3 the ids as a JSON array, ?4 the results that are not empty as a JSON
// array of [id, result] pairs (NULL when there are none), ?5 the notes
// likewise. Each row is fenced
// on its own: a row another token holds, or no longer pending, is neither
// changed nor returned. The rows are found through the lease index by rowid
// (TestQueryPlans checks).
const completeBatchSQL = `UPDATE outbox
   SET status = 'done', attempts = attempts + 1, completed_at = ?1, claim_expires_at = NULL,
       result = CASE WHEN ?4 IS NOT NULL THEN
                  (SELECT r.value ->> 1 FROM json_each(?4) AS r WHERE r.value ->> 0 = outbox.id) END,
       note = CASE WHEN ?5 IS NOT NULL THEN
                (SELECT n.value ->> 1 FROM json_each(?5) AS n WHERE n.value ->> 0 = outbox.id) END
 WHERE id IN (SELECT value FROM json_each(?3)) AND claim_token = ?2 AND status = 'pending'
RETURNING id`

// inGroup runs fn in the next group commit and returns its error, or the
// commit's. If ctx ends before the committer takes the op, the op is
// abandoned and ctx's error returned: nothing of it is ever written. If ctx
// ends after the op was taken, inGroup waits for that commit (statements and
// an fsync; the write lock is already held) and reports its outcome, so the
// answer always matches the database.
func (s *Store) inGroup(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx, now int64) error) error {
	if s.opts.ReadOnly {
		return s.errReadOnly()
	}
	o := &op{ctx: ctx, fn: fn, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	select {
	case s.ops <- o:
		s.mu.RUnlock()
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	select {
	case err := <-o.done:
		return err
	case <-ctx.Done():
		if o.state.CompareAndSwap(opQueued, opAbandoned) {
			return ctx.Err()
		}
		return <-o.done
	}
}

// committer drains the op queue into group commits until Close.
func (s *Store) committer() {
	defer s.wg.Done()
	batch := make([]*op, 0, s.opts.MaxBatch)
	for o := range s.ops {
		batch = append(batch[:0], o)
	fill:
		for len(batch) < s.opts.MaxBatch {
			select {
			case o, ok := <-s.ops:
				if !ok {
					break fill
				}
				batch = append(batch, o)
			default:
				break fill
			}
		}
		if len(batch) < smallBatch && s.opts.CommitDelay > 0 {
			batch = s.gather(batch)
		}
		s.commits.Add(1) // before its callers are answered
		s.commitBatch(batch)
		clear(batch)
		s.ckpt.committed()
		s.ckpt.restart(s.w)
	}
}

// smallBatch: a batch of fewer ops waits up to Options.CommitDelay for more.
// Commits of one or two intents each rewrite the tables' tail pages and pay
// an fsync. At 2,000 acks/s (one every 500µs), measured with bench compare:
// server CPU per request 404 µs without a delay, 321 µs with 100µs, 303 µs
// with 200µs, 270 µs with 500µs; median ack latency 1.3, 1.7, 2.0 and 2.9
// ms. The p99 of FULL was 11.8 ms in the median of five runs with 200µs
// against 5.8 ms of three without, so the default is no delay: it is the
// operator's trade (commit_delay). A saturated writer's batches are larger
// and never wait.
const smallBatch = 8

// gather waits up to CommitDelay for more ops to join a small batch.
func (s *Store) gather(batch []*op) []*op {
	t := time.NewTimer(s.opts.CommitDelay)
	defer t.Stop()
	for len(batch) < smallBatch {
		select {
		case o, ok := <-s.ops:
			if !ok {
				return batch
			}
			batch = append(batch, o)
		case <-t.C:
			return batch
		}
	}
	return batch
}

// errOpFailed makes inTx roll back an optimistic batch in which an op failed
// alone.
var errOpFailed = errors.New("an op of the batch failed")

// commitBatch runs a group of ops in one transaction and answers each.
//
// It first runs the ops back to back without savepoints (the common case:
// nothing fails, and three statements per op are saved). If an op fails
// alone, that transaction is rolled back whole and the batch runs again with
// each op in its own savepoint, so only the failing op fails. Ops are pure
// functions of the database state, so running one twice is the same as
// once. If the transaction is lost (see the rule at the top of this file),
// the whole batch fails in either pass.
func (s *Store) commitBatch(batch []*op) {
	errs := make([]error, len(batch))
	taken := make([]bool, len(batch))
	live := 0
	for i, o := range batch {
		if errs[i] = s.abandoned(o); errs[i] == nil {
			live++
		}
	}
	if live > 0 {
		// The transaction outlives any one caller's deadline on purpose: a
		// commit after a caller gave up is harmless, a torn batch is not.
		// Its context is never done: for a context that can end, the driver
		// starts a goroutine per statement to watch it (with five statements
		// an intent, a tenth of the writer's time at saturation, measured),
		// and nothing here needs interrupting. A BEGIN waiting for another
		// process's write lock gives up after busy_timeout; the statements
		// are small (pruning runs in slices).
		ctx := context.Background()
		run := func(savepoints bool) error {
			return s.inTx(ctx, func(tx *sql.Tx) error {
				// The clock is read once the write lock is held, never
				// before waiting for it: another process's commit then
				// always carries an earlier time than ours, and a lease it
				// just stamped never looks like one from the future (see
				// Claim).
				now := ms(s.opts.Now())
				for i, o := range batch {
					if !taken[i] {
						if errs[i] != nil {
							continue
						}
						// The write lock is held now; an op whose caller
						// gave up while we waited for it is skipped, never
						// written.
						if errs[i] = s.abandoned(o); errs[i] != nil {
							continue
						}
						if !o.state.CompareAndSwap(opQueued, opTaken) {
							errs[i] = context.Canceled
							continue
						}
						taken[i] = true
					}
					if savepoints {
						var lost error
						if errs[i], lost = s.runOp(ctx, tx, o, now); lost != nil {
							return fmt.Errorf("transaction lost: %w", lost)
						}
					} else if errs[i] = call(ctx, tx, o, now); errs[i] != nil {
						if !opLocal(errs[i]) {
							return fmt.Errorf("transaction lost: %w", errs[i])
						}
						return errOpFailed
					}
				}
				return nil
			})
		}
		err := run(false)
		if errors.Is(err, errOpFailed) {
			for i := range errs {
				if taken[i] {
					errs[i] = nil
				}
			}
			err = run(true)
		}
		if err != nil {
			// Nothing of this batch was committed: begin or commit failed,
			// or the transaction was lost.
			for i := range errs {
				if errs[i] == nil {
					errs[i] = err
				}
			}
			// A BEGIN that waited out busy_timeout behind another process
			// left nothing behind; after anything else, start afresh.
			if !IsBusy(err) {
				s.discardWriter()
				if s.lost.Add(1) == 1 {
					s.opts.Logger.Error("database write failed: its transaction was lost and every write in it was answered with the error; nothing of it was committed, and writes fail until the database can write again",
						"path", s.path, "err", err)
				}
			}
		} else if n := s.lost.Swap(0); n > 0 {
			s.opts.Logger.Info("database writes again", "path", s.path, "failed_transactions", n)
		}
	}
	for i, o := range batch {
		o.done <- errs[i]
	}
}

// opLocal reports whether err is one SQLite confines to the statement that
// returned it, leaving the transaction as it was: a constraint, a type or
// size error, an SQL error, or an error of the op's own Go code. Anything
// else may have rolled the whole transaction back (see the top of this file).
func opLocal(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, sql.ErrTxDone) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, driver.ErrBadConn) {
		return false // the driver interrupted a statement, or database/sql ended the transaction
	}
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return true
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_RANGE, sqlite3.SQLITE_ERROR:
		return true
	}
	return false
}

// discardWriter closes the writer connection; database/sql opens a fresh one
// (with the DSN's pragmas, re-preparing the statements) for the next batch,
// so nothing of a lost transaction — a transaction still open, a pager left
// in its error state — reaches it.
func (s *Store) discardWriter() {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.BusyTimeout)
	defer cancel()
	c, err := s.w.Conn(ctx)
	if err != nil {
		return
	}
	_ = c.Raw(func(any) error { return driver.ErrBadConn }) // makes database/sql close it
	_ = c.Close()
}

// abandoned returns an error if o's caller has given up: a queued op whose
// context has ended is marked abandoned here, so it can no longer be taken.
func (s *Store) abandoned(o *op) error {
	if o.ctx.Err() != nil {
		o.state.CompareAndSwap(opQueued, opAbandoned)
	}
	if o.state.Load() == opAbandoned {
		return cmp.Or(o.ctx.Err(), context.Canceled)
	}
	return nil
}

// call runs o's statements; a panic in them is o's error.
func call(ctx context.Context, tx *sql.Tx, o *op, now int64) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in store op: %v", p)
		}
	}()
	return o.fn(ctx, tx, now)
}

// runOp runs one op inside its own savepoint of the batch transaction. An op
// that fails alone is rolled back to its savepoint, leaving the rest of the
// batch: opErr is its error. lost is not nil when the batch's transaction
// is gone (the op's error was not statement-confined, or its savepoint no
// longer exists); then nothing more may run in the batch.
func (s *Store) runOp(ctx context.Context, tx *sql.Tx, o *op, now int64) (opErr, lost error) {
	if _, err := tx.StmtContext(ctx, s.st.savepoint).ExecContext(ctx); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	if opErr = call(ctx, tx, o, now); opErr != nil {
		if !opLocal(opErr) {
			return opErr, opErr
		}
		if _, err := tx.StmtContext(ctx, s.st.rollbackTo).ExecContext(ctx); err != nil {
			return opErr, fmt.Errorf("rollback to savepoint: %w", err)
		}
	}
	if _, err := tx.StmtContext(ctx, s.st.release).ExecContext(ctx); err != nil {
		return opErr, fmt.Errorf("release savepoint: %w", err)
	}
	return opErr, nil
}
