package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ackd/ackd/store"
)

const rowColumns = `id, idempotency_key, effect, payload, status, attempts, claim_token,
	claim_expires_at, next_attempt_at, last_error, result, created_at, completed_at, request_id,
	outcome_unknown, first_claimed_at, note`

// outboxReadColumns is rowColumns for a schema that has the post
// confirmation columns (outcome_unknown…), else the same list with their
// values for a row that never had them: not marked, never claimed, no note.
func outboxReadColumns(confirm bool) string {
	if confirm {
		return rowColumns
	}
	return strings.Replace(rowColumns, "outcome_unknown, first_claimed_at, note", "0, NULL, NULL", 1)
}

type scanner interface{ Scan(dest ...any) error }

func scanRow(sc scanner) (Row, error) {
	var (
		r                         Row
		token, lastErr, result    sql.NullString
		requestID, note           sql.NullString
		claimExp, next, completed sql.NullInt64
		firstClaimed              sql.NullInt64
		created                   int64
	)
	err := sc.Scan(&r.ID, &r.Key, &r.Effect, &r.Payload, &r.Status, &r.Attempts, &token,
		&claimExp, &next, &lastErr, &result, &created, &completed, &requestID,
		&r.OutcomeUnknown, &firstClaimed, &note)
	if err != nil {
		return Row{}, err
	}
	r.ClaimToken, r.LastError, r.Result = token.String, lastErr.String, result.String
	r.RequestID, r.Note = requestID.String, note.String
	r.FirstClaimedAt = fromMS(firstClaimed)
	r.ClaimExpiresAt, r.NextAttemptAt, r.CompletedAt = fromMS(claimExp), fromMS(next), fromMS(completed)
	r.CreatedAt = time.UnixMilli(created)
	return r, nil
}

// scanClaimed is scanRow of a claim's RETURNING, which ends with the
// claim's number (deliveries).
func scanClaimed(sc scanner) (Row, error) {
	var n int
	r, err := scanRow(scanFunc(func(dest ...any) error { return sc.Scan(append(dest, &n)...) }))
	r.Deliveries = n
	return r, err
}

type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

// Claim leases up to limit rows that are pending, due and free (no lease, an
// expired lease, or already leased to token) to token until now+lease, and
// returns every row the token now holds, in id order.
//
// It is ONE statement: eligibility and the stamp cannot be separated by
// another claimer. Rows already held by token come first, so re-claiming
// with the same token returns the same rows (with a renewed lease) and never
// makes one token hold more than limit rows. Free rows are taken in due
// order (next_attempt_at, id) straight off the outbox_pending index, so a
// claim reads about limit rows however long the backlog is.
//
// A lease ending more than two lease periods from now cannot have been
// stamped by a claimer with this lease and a right clock: the clock was
// ahead when it was stamped (a VM booted with a wrong clock before NTP
// stepped it back) and would hold the row for the size of that error.
// Claim treats such a lease as expired. (The rule's "now + lease" gets one
// lease period of slack, so that a small step back — NTP stepping a clock by
// seconds — never takes rows from a sweeper still working on them; a row is
// held at most two lease periods whatever the error.) Likewise a row due
// more than a lease period past now + the longest backoff (recorded or
// rescheduled while the clock was ahead) is made due now. Claim looks for
// such rows when they can exist, before its own statement and in its
// transaction — at its first run after Open, whenever the clock reads
// earlier than at the previous claim, and at least once per lease period
// otherwise (index reads the hot path never pays for) — fixes them, and once
// that commits logs each such row once with both times.
func (s *Store) Claim(ctx context.Context, token string, limit int, lease time.Duration, filter *store.ClaimFilter) ([]Row, error) {
	if token == "" {
		return nil, errors.New("claim: empty token")
	}
	if limit <= 0 || lease <= 0 {
		return nil, fmt.Errorf("claim: limit %d and lease %s must be positive", limit, lease)
	}
	var effects any // NULL: every effect
	if filter != nil && filter.Effects != nil {
		b, err := json.Marshal(filter.Effects)
		if err != nil {
			return nil, fmt.Errorf("claim: %w", err)
		}
		effects = string(b)
	}
	var (
		rows     []Row
		parked   []Row
		future   []futureRow
		checked  bool
		claimNow int64
	)
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		rows, parked, future, checked, claimNow = rows[:0], parked[:0], future[:0], false, now
		if s.futureTimesPossible(now, lease) {
			var err error
			if future, err = s.fixFutureTimes(ctx, tx, now, lease); err != nil {
				return fmt.Errorf("fix times from the future: %w", err)
			}
			checked = true
		}
		res, err := tx.StmtContext(ctx, s.st.claim).QueryContext(ctx, token, now+lease.Milliseconds(), now, limit, effects, s.opts.MaxAttempts)
		if err != nil {
			return err
		}
		defer res.Close()
		for res.Next() {
			r, err := scanClaimed(res)
			if err != nil {
				return err
			}
			if r.Status == StatusParked {
				parked = append(parked, r) // its dead attempt spent the budget
				continue
			}
			rows = append(rows, r)
		}
		if err := res.Err(); err != nil {
			return err
		}
		res.Close()
		return s.attachRequests(ctx, tx, rows)
	})
	if err != nil {
		return nil, fmt.Errorf("claim outbox: %w", classify(err))
	}
	s.lastClaim.Store(claimNow)
	if checked {
		s.leasesChecked.Store(claimNow)
	}
	for _, f := range future {
		msg := "lease ends further ahead than this configuration can stamp (the clock was ahead when it was stamped); treated as expired"
		if f.what == "next_attempt_at" {
			msg = "row is due further ahead than this configuration can schedule (the clock was ahead when it was scheduled); made due now"
		}
		s.opts.Logger.Warn(msg, "id", f.id, "key", f.key, f.what, time.UnixMilli(f.until).UTC().Format(time.RFC3339Nano),
			"now", time.UnixMilli(claimNow).UTC().Format(time.RFC3339Nano), "lease", lease.String())
	}
	store.LogParkedByClaim(s.opts.Logger, parked)
	slices.SortFunc(rows, func(a, b Row) int { return cmp.Compare(a.ID, b.ID) })
	return rows, nil
}

// futureRow is a pending row whose lease end or due time lies further ahead
// than this configuration can set (see Claim).
type futureRow struct {
	id    int64
	key   string
	what  string // "lease_until" or "next_attempt_at"
	until int64  // the time it carried, ms
}

// futureTimesPossible reports whether a lease or due time from the future
// may exist: never looked since Open, the clock reads earlier than at the
// previous claim (it was stepped back), or a lease period has passed since
// the last look (another process, or a longer lease, may have stamped one).
func (s *Store) futureTimesPossible(now int64, lease time.Duration) bool {
	checked := s.leasesChecked.Load()
	return checked == 0 || now < s.lastClaim.Load() || now >= checked+lease.Milliseconds()
}

// fixFutureTimes, inside the claim's transaction, makes every pending row
// leased beyond now + twice its own lease length (the caller's lease for a
// row stamped before the length was recorded) expire now, and every pending row due beyond
// now + the longest backoff + lease (no rule of this configuration sets a
// later one) due now, and returns them (see Claim). It reads only rows that carry a claim token (the
// outbox_leased index) and the far end of the due order
// (outbox_pending).
func (s *Store) fixFutureTimes(ctx context.Context, tx *sql.Tx, now int64, lease time.Duration) ([]futureRow, error) {
	var found []futureRow
	collect := func(what, q string, args ...any) error {
		res, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		for res.Next() {
			f := futureRow{what: what}
			if err := res.Scan(&f.id, &f.key, &f.until); err != nil {
				res.Close()
				return err
			}
			found = append(found, f)
		}
		return errors.Join(res.Err(), res.Close())
	}
	leaseMS := lease.Milliseconds()
	dueHorizon := now + (s.opts.BackoffMax + lease).Milliseconds()
	if err := collect("lease_until",
		`SELECT id, idempotency_key, claim_expires_at FROM outbox INDEXED BY outbox_leased
		  WHERE claim_token IS NOT NULL AND status = 'pending'
		    AND claim_expires_at > ?1 + 2 * coalesce(claim_lease_ms, ?2)`, now, leaseMS); err != nil {
		return nil, err
	}
	leases := len(found)
	if err := collect("next_attempt_at",
		`SELECT id, idempotency_key, next_attempt_at FROM outbox INDEXED BY outbox_pending
		  WHERE status = 'pending' AND next_attempt_at > ?`, dueHorizon); err != nil {
		return nil, err
	}
	if leases > 0 {
		if _, err := tx.ExecContext(ctx,
			`UPDATE outbox INDEXED BY outbox_leased SET claim_expires_at = ?
			  WHERE claim_token IS NOT NULL AND status = 'pending'
			    AND claim_expires_at > ?1 + 2 * coalesce(claim_lease_ms, ?2)`, now, leaseMS); err != nil {
			return nil, err
		}
	}
	if len(found) > leases {
		if _, err := tx.ExecContext(ctx,
			`UPDATE outbox INDEXED BY outbox_pending SET next_attempt_at = ?
			  WHERE status = 'pending' AND next_attempt_at > ?`, now, dueHorizon); err != nil {
			return nil, err
		}
	}
	return found, nil
}

// attachRequests fills in Row.Request for claimed rows that name a stored
// request, reading each request once, in the claim's transaction.
func (s *Store) attachRequests(ctx context.Context, tx *sql.Tx, rows []Row) error {
	got := map[string]*store.Request{}
	st := tx.StmtContext(ctx, s.st.request)
	for i := range rows {
		id := rows[i].RequestID
		if id == "" {
			continue
		}
		req, seen := got[id]
		if !seen {
			var r store.Request
			err := st.QueryRowContext(ctx, id).Scan(&r.ContentType, &r.Body)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				// Gone (or never written): the performer parks the row.
			case err != nil:
				return fmt.Errorf("read stored request %s: %w", id, err)
			default:
				req = &r
			}
			got[id] = req
		}
		rows[i].Request = req
	}
	return nil
}

// Complete marks a row done if token still holds it, storing result and
// enqueueing followUps in the same transaction. held is false when the lease
// was lost (another token claimed the row, or it is no longer pending): then
// nothing is written and no follow-up is enqueued.
func (s *Store) Complete(ctx context.Context, id int64, token, result string, followUps []NewRow) (held bool, err error) {
	err = s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		held = false
		var res sql.NullString
		if result != "" {
			res = sql.NullString{String: result, Valid: true}
		}
		r, err := tx.StmtContext(ctx, s.st.complete).ExecContext(ctx, now, res, id, token)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected() // sqlite3_changes() of this statement
		if err != nil {
			return err
		}
		if held = n == 1; !held {
			return s.recordAttempt(ctx, tx, id, token, now, store.AttemptFenced, "", store.AttemptNote{})
		}
		if err := s.recordAttempt(ctx, tx, id, token, now, store.AttemptDone, "", store.AttemptNote{}); err != nil {
			return err
		}
		return s.insertRows(ctx, tx, followUps, now)
	})
	if err != nil {
		return false, fmt.Errorf("complete outbox row %d: %w", id, classify(err))
	}
	return held, nil
}

// CompleteBatch marks done, in one statement of one transaction, every row
// of done that token still holds, storing each row's result, and enqueues
// the follow-ups of exactly those rows in the same transaction. held[i] is
// false when done[i]'s lease was lost: nothing of that row is written, and
// the other rows are unaffected. The ids must be distinct (one claim's rows).
func (s *Store) CompleteBatch(ctx context.Context, token string, done []Completion) (held []bool, err error) {
	if len(done) == 0 {
		return nil, nil
	}
	ids, results, notes := completionsJSON(done)
	held = make([]bool, len(done))
	err = s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		clear(held)
		res, err := tx.StmtContext(ctx, s.st.completeBatch).QueryContext(ctx, now, token, ids, results, notes)
		if err != nil {
			return err
		}
		got := make(map[int64]bool, len(done))
		for res.Next() {
			var id int64
			if err := res.Scan(&id); err != nil {
				res.Close()
				return err
			}
			got[id] = true
		}
		if err := errors.Join(res.Err(), res.Close()); err != nil {
			return err
		}
		for i, c := range done {
			if held[i] = got[c.ID]; held[i] {
				if err := s.insertRows(ctx, tx, c.FollowUps, now); err != nil {
					return err
				}
			}
		}
		return s.recordAttempts(ctx, tx, token, now, done, held)
	})
	if err != nil {
		return nil, fmt.Errorf("complete %d outbox rows: %w", len(done), classify(err))
	}
	return held, nil
}

// completionsJSON returns the completeBatch statement's arguments: the ids
// as a JSON array, and the non-empty results and notes each as a JSON
// array of [id, text] pairs (nil, SQL NULL, when every one is empty).
func completionsJSON(done []Completion) (ids string, results, notes any) {
	b := make([]byte, 0, 12*len(done))
	b = append(b, '[')
	var r, n []byte
	for i, c := range done {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, c.ID, 10)
		r = appendPair(r, c.ID, c.Result)
		n = appendPair(n, c.ID, c.Note)
	}
	ids = string(append(b, ']'))
	if r != nil {
		results = string(append(r, ']'))
	}
	if n != nil {
		notes = string(append(n, ']'))
	}
	return ids, results, notes
}

// appendPair appends [id, text] to the JSON array being built in b (nil:
// not begun), unless text is empty.
func appendPair(b []byte, id int64, text string) []byte {
	if text == "" {
		return b
	}
	if b == nil {
		b = append(b, '[')
	} else {
		b = append(b, ',')
	}
	b = append(b, '[')
	b = strconv.AppendInt(b, id, 10)
	b = append(b, ',')
	q, _ := json.Marshal(text) // a Go string always marshals
	return append(append(b, q...), ']')
}

// Fail records a failed attempt if token still holds the row: it keeps msg
// as last_error and either reschedules the row (releasing the lease) or parks
// it. See FailKind.
//
// The attempt is recorded (retry or parked, fenced when the lease was
// lost) with one more statement in the same transaction, unless f.GivenBack.
func (s *Store) Fail(ctx context.Context, id int64, token string, f store.Failure) (FailResult, error) {
	kind, msg := f.Kind, f.Msg
	var out FailResult
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, nowMS int64) error {
		now := time.UnixMilli(nowMS)
		out = FailResult{}
		var attempts int
		err := tx.QueryRowContext(ctx,
			`SELECT attempts FROM outbox WHERE id = ? AND claim_token = ? AND status = 'pending'`,
			id, token).Scan(&attempts)
		if errors.Is(err, sql.ErrNoRows) {
			// Lease lost: the row is left as it is, the attempt is told.
			if f.GivenBack {
				return nil
			}
			return s.recordAttempt(ctx, tx, id, token, nowMS, store.AttemptFenced, msg, f.Attempt)
		}
		if err != nil {
			return err
		}
		out = s.opts.Next(kind, attempts, now, f.RetryAfter)
		// Still inside BEGIN IMMEDIATE: nobody can have moved the row since
		// the read above, and the fence is repeated anyway.
		_, err = tx.ExecContext(ctx,
			`UPDATE outbox
			    SET status = ?, attempts = ?, next_attempt_at = ?, last_error = ?,
			        claim_token = NULL, claim_expires_at = NULL,
			        outcome_unknown = outcome_unknown OR ?
			  WHERE id = ? AND claim_token = ?`,
			out.Status, out.Attempts, ms(out.NextAttemptAt), msg, kind == FailUnknown, id, token)
		if err != nil || f.GivenBack {
			return err
		}
		return s.recordAttempt(ctx, tx, id, token, nowMS, failOutcome(out), msg, f.Attempt)
	})
	if err != nil {
		return FailResult{}, fmt.Errorf("fail outbox row %d: %w", id, classify(err))
	}
	return out, nil
}

// failOutcome is the attempt outcome of a held Fail.
func failOutcome(r FailResult) string {
	if r.Status == StatusParked {
		return store.AttemptParked
	}
	return store.AttemptRetry
}

// Get returns one row by id, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id int64) (Row, error) {
	r, err := scanRow(s.r.QueryRowContext(ctx, `SELECT `+s.readColumns+` FROM outbox WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Row{}, fmt.Errorf("outbox row %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Row{}, fmt.Errorf("get outbox row %d: %w", id, err)
	}
	return s.withRequest(ctx, r)
}

// GetByKey returns one row by idempotency key, or ErrNotFound.
func (s *Store) GetByKey(ctx context.Context, key string) (Row, error) {
	r, err := scanRow(s.r.QueryRowContext(ctx, `SELECT `+s.readColumns+` FROM outbox WHERE idempotency_key = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return Row{}, fmt.Errorf("outbox row %q: %w", key, ErrNotFound)
	}
	if err != nil {
		return Row{}, fmt.Errorf("get outbox row %q: %w", key, err)
	}
	return s.withRequest(ctx, r)
}

// withRequest fills in r.Request for Get and GetByKey.
func (s *Store) withRequest(ctx context.Context, r Row) (Row, error) {
	if r.RequestID == "" {
		return r, nil
	}
	var q store.Request
	err := s.r.QueryRowContext(ctx, requestSQL, r.RequestID).
		Scan(&q.ContentType, &q.Body)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return Row{}, fmt.Errorf("get outbox row %d: read stored request %s: %w", r.ID, r.RequestID, err)
	default:
		r.Request = &q
	}
	return r, nil
}

// List returns up to limit rows, newest first, optionally of one status.
func (s *Store) List(ctx context.Context, status string, limit int) ([]Row, error) {
	if limit <= 0 {
		limit = 50
	}
	q := `SELECT ` + s.readColumns + ` FROM outbox`
	args := []any{}
	if status != "" {
		q += ` WHERE status = ?`
		args = append(args, status)
	}
	q += ` ORDER BY id DESC LIMIT ?`
	args = append(args, limit)
	res, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list outbox: %w", err)
	}
	defer res.Close()
	var rows []Row
	for res.Next() {
		r, err := scanRow(res)
		if err != nil {
			return nil, fmt.Errorf("list outbox: %w", err)
		}
		rows = append(rows, r)
	}
	return rows, res.Err()
}

// Requeue puts one parked or discarded row back to pending with a fresh
// attempt budget, due now. It returns ErrNotFound if no parked or
// discarded row has that id.
func (s *Store) Requeue(ctx context.Context, id int64) error {
	n, err := s.requeue(ctx, 0, `id = ? AND status IN ('parked', 'discarded')`, id)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("parked or discarded outbox row %d: %w", id, ErrNotFound)
	}
	return nil
}

// RequeueParked puts every row f selects back to pending and returns how
// many.
func (s *Store) RequeueParked(ctx context.Context, f store.ParkedFilter) (int64, error) {
	where, args := s.parkedWhere(f)
	return s.requeue(ctx, f.Expect, where, args...)
}

// parkedWhere is the WHERE clause (and its arguments) selecting the rows f
// names: parked ones, or discarded ones. The status term comes first and
// alone, so that SQLite reads the status's partial index (outbox_parked,
// outbox_discarded).
func (s *Store) parkedWhere(f store.ParkedFilter) (string, []any) {
	where, args := `status = 'parked'`, []any{}
	if f.Discarded {
		where = `status = 'discarded'`
	}
	if f.Effect != "" {
		where += ` AND effect = ?`
		args = append(args, f.Effect)
	}
	if f.Route != "" {
		// json_valid first: a payload that is not JSON (a row parked
		// because it could not be decoded) must not fail the statement.
		where += ` AND CASE WHEN json_valid(payload) THEN json_extract(payload, '$.route') END = ?`
		args = append(args, f.Route)
	}
	if f.OlderThan > 0 {
		where += ` AND created_at < ?`
		args = append(args, ms(s.opts.Now().Add(-f.OlderThan)))
	}
	if f.Discarded && !f.DiscardedSince.IsZero() {
		where += ` AND completed_at >= ?`
		args = append(args, ms(f.DiscardedSince))
	}
	return where, args
}

func (s *Store) requeue(ctx context.Context, expect int64, where string, args ...any) (int64, error) {
	n, err := s.update(ctx, expect, `SET status = 'pending', attempts = 0, next_attempt_at = ?,
		        claim_token = NULL, claim_expires_at = NULL, completed_at = NULL`, where, args...)
	if err != nil {
		return 0, fmt.Errorf("requeue: %w", err)
	}
	return n, nil
}

// Discard moves one row to discarded (completed_at now): a parked row, or
// a pending row under no live lease. It returns ErrNotFound if no such row
// has that id. Clearing the claim token fences out a sweep whose lease had
// run out (see store.Store).
func (s *Store) Discard(ctx context.Context, id int64) error {
	n, err := s.discard(ctx, 0, `id = ? AND (status = 'parked' OR (status = 'pending'
		    AND (claim_token IS NULL OR claim_expires_at IS NULL OR claim_expires_at <= ?)))`, id, ms(s.opts.Now()))
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("parked or unleased pending outbox row %d: %w", id, ErrNotFound)
	}
	return nil
}

// DiscardParked discards every parked row f selects and returns how many.
func (s *Store) DiscardParked(ctx context.Context, f store.ParkedFilter) (int64, error) {
	if f.Discarded {
		return 0, fmt.Errorf("discard: rows already discarded: %w", store.ErrFilter)
	}
	where, args := s.parkedWhere(f)
	return s.discard(ctx, f.Expect, where, args...)
}

func (s *Store) discard(ctx context.Context, expect int64, where string, args ...any) (int64, error) {
	// A token still on the row is a claim that never said how its attempt
	// ended (its lease ran out: a live one is refused): the attempt may
	// have taken effect, as a claim that found it would have recorded, so
	// a retry after the discard confirms a post before making it again.
	n, err := s.update(ctx, expect, `SET status = 'discarded', completed_at = ?,
		        outcome_unknown = (outcome_unknown OR claim_token IS NOT NULL),
		        claim_token = NULL, claim_expires_at = NULL`, where, args...)
	if err != nil {
		return 0, fmt.Errorf("discard: %w", err)
	}
	return n, nil
}

// Matching returns the first limit rows f selects, in id order, and how
// many it selects.
func (s *Store) Matching(ctx context.Context, f store.ParkedFilter, limit int) ([]Row, int64, error) {
	where, args := s.parkedWhere(f)
	var total int64
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("matching rows: %w", err)
	}
	res, err := s.r.QueryContext(ctx, `SELECT `+s.readColumns+` FROM outbox WHERE `+where+` ORDER BY id LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, 0, fmt.Errorf("matching rows: %w", err)
	}
	defer res.Close()
	var rows []Row
	for res.Next() {
		r, err := scanRow(res)
		if err != nil {
			return nil, 0, fmt.Errorf("matching rows: %w", err)
		}
		rows = append(rows, r)
	}
	return rows, total, res.Err()
}

// FilterNames returns the distinct routes and effects of the rows of
// status, sorted (read through the status's partial index).
func (s *Store) FilterNames(ctx context.Context, status string) (routes, effects []string, err error) {
	res, err := s.r.QueryContext(ctx, `SELECT DISTINCT effect, coalesce(CASE WHEN json_valid(payload) THEN json_extract(payload, '$.route') END, '')
		  FROM outbox WHERE status = ?`, status)
	if err != nil {
		return nil, nil, fmt.Errorf("filter names: %w", err)
	}
	defer res.Close()
	for res.Next() {
		var effect, route string
		if err := res.Scan(&effect, &route); err != nil {
			return nil, nil, fmt.Errorf("filter names: %w", err)
		}
		effects = append(effects, effect)
		if route != "" {
			routes = append(routes, route)
		}
	}
	if err := res.Err(); err != nil {
		return nil, nil, fmt.Errorf("filter names: %w", err)
	}
	slices.Sort(routes)
	slices.Sort(effects)
	return slices.Compact(routes), slices.Compact(effects), nil
}

// update runs "UPDATE outbox {set} WHERE {where}" with now as the first
// argument, in its own transaction, and returns the rows changed. expect >
// 0 is the count a preview showed: a statement that changes another number
// of rows is rolled back (*store.SelectionChanged), so a bulk change acts on
// what was previewed or not at all.
func (s *Store) update(ctx context.Context, expect int64, set, where string, args ...any) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE outbox `+set+` WHERE `+where,
			append([]any{ms(s.opts.Now())}, args...)...)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		if expect > 0 && n != expect {
			return &store.SelectionChanged{Previewed: expect, Now: n}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
