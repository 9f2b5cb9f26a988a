package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Group commit. Every small write (an intent, a claim, a completion, a
// failure) is an op sent to one committer goroutine, which runs whatever ops
// are waiting in ONE BEGIN IMMEDIATE transaction on the writer connection:
// one fsync for all of them. An op whose statements fail is rolled back alone
// (see commitBatch) and only its caller sees the error; the others commit.
// Each caller learns its own result only after the commit (or its failure).

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
	claim, complete                *sql.Stmt
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
		outbox: p(`INSERT INTO outbox (idempotency_key, effect, payload, next_attempt_at, created_at)
		           VALUES (?, ?, ?, ?, ?)
		           ON CONFLICT (idempotency_key) DO NOTHING`),
		complete: p(`UPDATE outbox
		                SET status = 'done', attempts = attempts + 1, completed_at = ?, result = ?, claim_expires_at = NULL
		              WHERE id = ? AND claim_token = ? AND status = 'pending'`),
		// ?1 token, ?2 lease expiry, ?3 now, ?4 limit, ?5 the effects a
		// claim may take as a JSON array, or NULL for every effect. See Claim.
		claim: p(`UPDATE outbox
		             SET claim_token = ?1, claim_expires_at = ?2
		           WHERE id IN (
		                 SELECT id FROM (
		                        SELECT id, 0 AS theirs, next_attempt_at AS due FROM outbox INDEXED BY outbox_claim_token
		                         WHERE claim_token = ?1 AND status = 'pending' AND next_attempt_at <= ?3
		                        UNION ALL
		                        SELECT id, 1, due FROM (
		                               SELECT id, next_attempt_at AS due FROM outbox
		                                WHERE status = 'pending' AND next_attempt_at <= ?3
		                                  AND (claim_token IS NULL OR claim_expires_at IS NULL OR claim_expires_at <= ?3)
		                                  AND claim_token IS NOT ?1
		                                  AND (?5 IS NULL OR effect IN (SELECT value FROM json_each(?5)))
		                                ORDER BY next_attempt_at, id
		                                LIMIT ?4))
		                  ORDER BY theirs, due, id
		                  LIMIT ?4)
		          RETURNING ` + rowColumns),
	}
	return err
}

// inGroup runs fn in the next group commit and returns its error, or the
// commit's. If ctx ends before the committer takes the op, the op is
// abandoned and ctx's error returned: nothing of it is ever written. If ctx
// ends after the op was taken, inGroup waits for that commit (statements and
// an fsync; the write lock is already held) and reports its outcome, so the
// answer always matches the database.
func (s *Store) inGroup(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx, now int64) error) error {
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
		s.commitBatch(batch)
		clear(batch)
	}
}

// errOpFailed makes inTx roll back an optimistic batch in which an op failed.
var errOpFailed = errors.New("an op of the batch failed")

// commitBatch runs a group of ops in one transaction and answers each.
//
// It first runs the ops back to back without savepoints (the common case:
// nothing fails, and three statements per op are saved). If any op fails,
// that transaction is rolled back whole and the batch runs again with each
// op in its own savepoint, so only the failing op fails. Ops are pure
// functions of the database state, so running one twice is the same as once.
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
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.BusyTimeout+30*time.Second)
		now := ms(s.opts.Now())
		run := func(savepoints bool) error {
			return s.inTx(ctx, func(tx *sql.Tx) error {
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
						errs[i] = s.runOp(ctx, tx, o, now)
					} else if errs[i] = o.fn(ctx, tx, now); errs[i] != nil {
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
		cancel()
		if err != nil {
			for i := range errs {
				if errs[i] == nil {
					errs[i] = err // not committed: begin or commit failed
				}
			}
		}
	}
	for i, o := range batch {
		o.done <- errs[i]
	}
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

// runOp runs one op inside its own savepoint of the batch transaction; on
// failure it rolls back to the savepoint, leaving the rest of the batch.
func (s *Store) runOp(ctx context.Context, tx *sql.Tx, o *op, now int64) (err error) {
	if _, err := tx.StmtContext(ctx, s.st.savepoint).ExecContext(ctx); err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in store op: %v", p)
		}
		if err != nil {
			_, rbErr := tx.StmtContext(ctx, s.st.rollbackTo).ExecContext(ctx)
			err = errors.Join(err, rbErr)
		}
		if _, relErr := tx.StmtContext(ctx, s.st.release).ExecContext(ctx); relErr != nil && err == nil {
			err = relErr
		}
	}()
	return o.fn(ctx, tx, now)
}
