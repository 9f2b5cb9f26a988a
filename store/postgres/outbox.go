package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

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
	return strings.Replace(rowColumns, "outcome_unknown, first_claimed_at, note", "false, NULL::bigint, NULL::text", 1)
}

func scanRow(sc pgx.Row) (store.Row, error) {
	var (
		r                      store.Row
		token, lastErr, result *string
		requestID, note        *string
		claimExp, completed    *int64
		firstClaimed           *int64
		next, created          int64
	)
	err := sc.Scan(&r.ID, &r.Key, &r.Effect, &r.Payload, &r.Status, &r.Attempts, &token,
		&claimExp, &next, &lastErr, &result, &created, &completed, &requestID,
		&r.OutcomeUnknown, &firstClaimed, &note)
	if err != nil {
		return store.Row{}, err
	}
	deref := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	r.ClaimToken, r.LastError, r.Result = deref(token), deref(lastErr), deref(result)
	r.RequestID, r.Note = deref(requestID), deref(note)
	r.ClaimExpiresAt, r.CompletedAt = fromMS(claimExp), fromMS(completed)
	r.FirstClaimedAt = fromMS(firstClaimed)
	r.NextAttemptAt, r.CreatedAt = time.UnixMilli(next), time.UnixMilli(created)
	return r, nil
}

func collect(rows pgx.Rows) ([]store.Row, error) {
	defer rows.Close()
	var out []store.Row
	for rows.Next() {
		r, err := scanRow(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// collectClaimed reads a claim's RETURNING (the row and its deliveries):
// the rows claimed, and those the claim parked (issue 38).
func collectClaimed(rows pgx.Rows) (claimed, parked []store.Row, err error) {
	defer rows.Close()
	for rows.Next() {
		var n int
		r, err := scanRow(scanFunc(func(dest ...any) error { return rows.Scan(append(dest, &n)...) }))
		if err != nil {
			return nil, nil, err
		}
		r.Deliveries = n
		if r.Status == store.StatusParked {
			parked = append(parked, r)
			continue
		}
		claimed = append(claimed, r)
	}
	return claimed, parked, rows.Err()
}

type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

// claimSQL: $1 clock offset, $2 token, $3 lease (ms), $4 limit, $5 the
// effects a claim may take (NULL: every effect), $6 max_attempts.
//
// Eligible rows: pending, due, and either already ours or free (no lease, an
// expired lease, or a lease from the future: ending more than twice its own length away,
// see store.Store.Claim). Both kinds are locked FOR UPDATE SKIP LOCKED: a
// row another claimer is stamping right now is skipped, never waited for,
// and a row whose lease changed under our snapshot is re-checked on its new
// version; the future test reads the clock afresh (ackd_now_ms() per row,
// not the statement's clock), so a lease another claim stamped after our
// clock was read is never mistaken for one from the future.
// Our own rows come first (a re-claim returns the same rows and a token
// never holds more than limit), then free rows in due order off the
// outbox_claimable index.
const claimSQL = `WITH ` + clockCTE + `,
	picked AS (
		SELECT id FROM (
			SELECT id, 0 AS theirs, due FROM (
				SELECT o.id, o.next_attempt_at AS due FROM outbox o, clock
				 WHERE o.claim_token = $2 AND o.status = 'pending' AND o.next_attempt_at <= clock.now
				 ORDER BY o.next_attempt_at, o.id
				 LIMIT $4
				   FOR UPDATE OF o SKIP LOCKED) mine
			UNION ALL
			SELECT id, 1, due FROM (
				SELECT o.id, o.next_attempt_at AS due FROM outbox o, clock
				 WHERE o.status = 'pending' AND o.next_attempt_at <= clock.now
				   AND (o.claim_token IS NULL OR o.claim_expires_at IS NULL
				        OR o.claim_expires_at <= clock.now
				        OR o.claim_expires_at > ackd_now_ms() + $1::bigint + 2 * coalesce(o.claim_lease_ms, $3::bigint))
				   AND o.claim_token IS DISTINCT FROM $2
				   AND ($5::text[] IS NULL OR o.effect = ANY($5::text[]))` +
	// Issue 31: no row of a paused route (pauses.go, notPausedTerm); the
	// rows this token holds already (mine, above) finish their attempt.
	notPausedTerm + `
				 ORDER BY o.next_attempt_at, o.id
				 LIMIT $4
				   FOR UPDATE OF o SKIP LOCKED) free
		) c
		ORDER BY theirs, due, id
		LIMIT $4)
	UPDATE outbox o
	   SET claim_token = CASE WHEN ` + parkTerm + ` THEN NULL ELSE $2 END,
	       claim_expires_at = CASE WHEN ` + parkTerm + ` THEN NULL ELSE clock.now + $3::bigint END,
	       claim_lease_ms = $3::bigint,
	       first_claimed_at = coalesce(o.first_claimed_at, clock.now),
	       outcome_unknown = o.outcome_unknown OR ` + takeoverTerm + `,
	       attempts = o.attempts + ` + countTerm + `::int,
	       status = CASE WHEN ` + parkTerm + ` THEN 'parked' ELSE o.status END,
	       last_error = CASE WHEN ` + parkTerm + ` THEN format(` + parkedDeadMsg + `, o.attempts + 1) ELSE o.last_error END,
	       deliveries = CASE WHEN o.claim_token IS NOT DISTINCT FROM $2 OR ` + parkTerm + ` THEN o.deliveries
	                         WHEN o.deliveries > 0 THEN o.deliveries + 1
	                         WHEN o.attempts = 0 AND o.first_claimed_at IS NULL THEN 1 + ` + takeoverTerm + `::int
	                         ELSE greatest(o.attempts, coalesce((SELECT max(a.n) FROM outbox_attempts a WHERE a.row_id = o.id), 0))
	                              + ` + takeoverTerm + `::int + 1 END
	  FROM clock
	 WHERE o.id IN (SELECT id FROM picked)
	RETURNING o.id, o.idempotency_key, o.effect, o.payload, o.status, o.attempts, o.claim_token,
	          o.claim_expires_at, o.next_attempt_at, o.last_error, o.result, o.created_at, o.completed_at,
	          o.request_id, o.outcome_unknown, o.first_claimed_at, o.note, o.deliveries`

// takeoverTerm is true in the claim for a row it takes from another
// token's lease (which ran out, or was stamped from the future): issue 38,
// as on SQLite (store/sqlite/group.go), the claim counts that claim's dead
// attempt, and parks the row (parkTerm) when that spends its budget ($6,
// max_attempts). deliveries numbers the claim's request (X-Ackd-Attempt).
const takeoverTerm = `(o.claim_token IS NOT NULL AND o.claim_token IS DISTINCT FROM $2)`

// countTerm: a takeover of a lease a claim stamped, whose attempt is
// counted (not the lease a row was written with: see SQLite's).
const countTerm = `(` + takeoverTerm + ` AND o.first_claimed_at IS NOT NULL)`

// parkTerm: a counted takeover whose dead attempt spends the row's budget.
const parkTerm = `(` + countTerm + ` AND o.attempts + 1 >= $6::int)`

// parkedDeadMsg is the last_error of a row parked by the claim, a format()
// string of the attempts spent (the same text as SQLite's).
const parkedDeadMsg = `'parked after %s attempts (max_attempts): the last one ended with no word from its process (it died or was stopped mid-effect, and its lease ran out), so its effect may have happened; a row whose effect kills its process parks instead of running forever'`

// Claim leases up to limit rows that are pending, due and free to token
// until the database's now+lease, in one statement, and returns every row
// the token now holds, in id order. See claimSQL. Once per lease period it
// first looks for times from the future (fixFutureTimes). Rows that name a
// stored request get Row.Request, read in the claim's transaction
// (attachRequests).
func (s *Store) Claim(ctx context.Context, token string, limit int, lease time.Duration, filter *store.ClaimFilter) ([]store.Row, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if token == "" {
		return nil, errors.New("claim: empty token")
	}
	if limit <= 0 || lease <= 0 {
		return nil, fmt.Errorf("claim: limit %d and lease %s must be positive", limit, lease)
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	var effects []string // nil → NULL: every effect
	if filter != nil && filter.Effects != nil {
		effects = append([]string{}, filter.Effects...)
	}
	if err := s.fixFutureTimes(ctx, lease); err != nil {
		return nil, fmt.Errorf("claim outbox: fix times from the future: %w", s.classify(ctx, err))
	}
	var rows, parked []store.Row
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		res, err := tx.Query(ctx, claimSQL, s.offset.Load(), token, lease.Milliseconds(), limit, effects, s.opts.MaxAttempts)
		if err != nil {
			return err
		}
		if rows, parked, err = collectClaimed(res); err != nil {
			return err
		}
		return attachRequests(ctx, tx, rows)
	})
	if err != nil {
		return nil, fmt.Errorf("claim outbox: %w", err)
	}
	store.LogParkedByClaim(s.opts.Logger, parked)
	sortByID(rows)
	return rows, nil
}

// attachRequests fills in Row.Request for claimed rows that name a stored
// request, reading each request once, in the claim's transaction. A row
// whose request is gone (or was never written) keeps Request nil: the
// performer parks it.
func attachRequests(ctx context.Context, tx pgx.Tx, rows []store.Row) error {
	var names []string
	seen := map[string]bool{}
	for _, r := range rows {
		if r.RequestID != "" && !seen[r.RequestID] {
			seen[r.RequestID] = true
			names = append(names, r.RequestID)
		}
	}
	if len(names) == 0 {
		return nil
	}
	res, err := tx.Query(ctx, `SELECT event_id, content_type, body FROM slack_requests WHERE event_id = ANY($1)`, names)
	if err != nil {
		return fmt.Errorf("read stored requests: %w", err)
	}
	defer res.Close()
	got := make(map[string]*store.Request, len(names))
	for res.Next() {
		var id string
		var r store.Request
		if err := res.Scan(&id, &r.ContentType, &r.Body); err != nil {
			return fmt.Errorf("read stored requests: %w", err)
		}
		got[id] = &r
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("read stored requests: %w", err)
	}
	for i := range rows {
		if id := rows[i].RequestID; id != "" {
			rows[i].Request = got[id]
		}
	}
	return nil
}

// Complete marks a row done if token still holds it, counting the
// successful attempt (attempts+1), storing result and enqueueing followUps
// in the same transaction; last_error is kept. held is false when the
// lease was lost (another token claimed the row, or it is no longer
// pending): then nothing is written and no follow-up is enqueued. A COMMIT
// without an answer is resolved (commit.go): an error wrapping
// store.ErrCommitUnknown means the row may or may not be done.
func (s *Store) Complete(ctx context.Context, id int64, token, result string, followUps []store.NewRow) (held bool, err error) {
	var res *string
	if result != "" {
		res = &result
	}
	off := s.offset.Load()
	err = s.inTxResolving(ctx, func(tx pgx.Tx) (string, error) {
		held = false
		var xid string
		// The attempt is recorded by the UPDATE's own statement (a
		// data-modifying WITH): no statement or round trip of its own.
		err := tx.QueryRow(ctx, `WITH `+clockCTE+`,
			u AS (UPDATE outbox
			         SET status = 'done', attempts = attempts + 1, completed_at = clock.now, result = $2,
			             claim_expires_at = NULL
			        FROM clock
			       WHERE id = $3 AND claim_token = $4 AND status = 'pending'
			      RETURNING outbox.id, pg_current_xact_id()::text AS xid),
			a AS (`+attemptUpsert(`SELECT u.id, $4, `+nextN("u.id")+`, clock.now, clock.now, 'done', NULL, NULL, NULL FROM u, clock`)+`)
			SELECT xid FROM u`, off, res, id, token).Scan(&xid)
		if errors.Is(err, pgx.ErrNoRows) {
			// Lease lost: nothing of the row is written; the attempt is
			// recorded fenced (one statement, on this rare path only).
			b := &pgx.Batch{}
			queueAttempts(b, off, token, []attemptRecord{{id: id, outcome: store.AttemptFenced}})
			return "", tx.SendBatch(ctx, b).Close()
		}
		if err != nil {
			return "", err
		}
		if held = true; len(followUps) == 0 {
			return xid, nil
		}
		b := &pgx.Batch{}
		queueRows(b, off, followUps)
		return xid, tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return false, fmt.Errorf("complete outbox row %d: %w", id, err)
	}
	return held, nil
}

// CompleteBatch is Complete for many rows of one claim in one statement of
// one transaction: each row is marked done (its attempt counted) only if
// token still holds it, and only those rows' follow-ups are enqueued.
// held[i] reports done[i]'s fence; the ids must be distinct. The same
// statement records each row's attempt: done, or fenced for a row whose
// fence failed.
func (s *Store) CompleteBatch(ctx context.Context, token string, done []store.Completion) (held []bool, err error) {
	if len(done) == 0 {
		return nil, nil
	}
	n := len(done)
	ids, starts := make([]int64, n), make([]*int64, n)
	results, notes := make([]*string, n), make([]*string, n)
	statuses, produced := make([]*string, n), make([]*string, n)
	for i, c := range done {
		ids[i] = c.ID
		results[i], notes[i] = optional(c.Result), optional(c.Note)
		statuses[i], produced[i] = optional(c.Attempt.Status), optional(c.Attempt.Result)
		if !c.Attempt.StartedAt.IsZero() {
			v := c.Attempt.StartedAt.UnixMilli()
			starts[i] = &v
		}
	}
	off := s.offset.Load()
	held = make([]bool, len(done))
	err = s.inTxResolving(ctx, func(tx pgx.Tx) (string, error) {
		clear(held)
		var xid string
		rows, err := tx.Query(ctx, `WITH `+clockCTE+`,
			c AS (SELECT * FROM unnest($2::bigint[], $3::text[], $5::text[], $6::bigint[], $7::text[], $8::text[])
			                 AS c(id, result, note, started_at, status, produced)),
			u AS (UPDATE outbox AS o
			         SET status = 'done', attempts = o.attempts + 1, completed_at = clock.now, result = c.result,
			             claim_expires_at = NULL, note = c.note
			        FROM clock, c
			       WHERE o.id = c.id AND o.claim_token = $4 AND o.status = 'pending'
			      RETURNING o.id, pg_current_xact_id()::text AS xid),
			a AS (`+attemptUpsert(`SELECT o.id, $4, `+nextN("o.id")+`, coalesce(c.started_at, clock.now), clock.now,
			             CASE WHEN u.id IS NULL THEN 'fenced' ELSE 'done' END, NULL, c.status, c.produced
			        FROM c JOIN outbox o ON o.id = c.id CROSS JOIN clock LEFT JOIN u ON u.id = c.id`)+`)
			SELECT id, xid FROM u`, off, ids, results, token, notes, starts, statuses, produced)
		if err != nil {
			return "", err
		}
		got := make(map[int64]bool, len(done))
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id, &xid); err != nil {
				rows.Close()
				return "", err
			}
			got[id] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return "", err
		}
		b := &pgx.Batch{}
		for i, c := range done {
			if held[i] = got[c.ID]; held[i] {
				queueRows(b, off, c.FollowUps)
			}
		}
		if b.Len() == 0 {
			return xid, nil
		}
		return xid, tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, fmt.Errorf("complete %d outbox rows: %w", len(done), err)
	}
	return held, nil
}

// Fail records a failed attempt if token still holds the row: it keeps msg
// as last_error and either reschedules the row (releasing the lease) or
// parks it (store.Options.Next decides, on the database's clock).
//
// The attempt is recorded (retry or parked; fenced when the lease was lost)
// by one more statement, sent in the same pipeline as the UPDATE, unless
// f.GivenBack.
func (s *Store) Fail(ctx context.Context, id int64, token string, f store.Failure) (store.FailResult, error) {
	kind, msg := f.Kind, f.Msg
	var out store.FailResult
	off := s.offset.Load()
	err := s.inTxResolving(ctx, func(tx pgx.Tx) (string, error) {
		out = store.FailResult{}
		var attempts int
		var nowMS int64
		err := tx.QueryRow(ctx, `WITH `+clockCTE+`
			SELECT attempts, clock.now FROM outbox, clock
			 WHERE id = $2 AND claim_token = $3 AND status = 'pending'
			   FOR UPDATE OF outbox`, off, id, token).Scan(&attempts, &nowMS)
		b := &pgx.Batch{}
		if errors.Is(err, pgx.ErrNoRows) {
			// Lease lost: the row is left as it is, the attempt is told.
			if f.GivenBack {
				return "", nil
			}
			queueAttempts(b, off, token, []attemptRecord{{id: id, outcome: store.AttemptFenced, errText: msg, note: f.Attempt}})
			return "", tx.SendBatch(ctx, b).Close()
		}
		if err != nil {
			return "", err
		}
		out = s.opts.Next(kind, attempts, time.UnixMilli(nowMS), f.RetryAfter)
		// The row is locked since the read above; the fence is repeated anyway.
		var xid string
		b.Queue(`UPDATE outbox
			    SET status = $1, attempts = $2, next_attempt_at = $3, last_error = $4,
			        claim_token = NULL, claim_expires_at = NULL,
			        outcome_unknown = outcome_unknown OR $7
			  WHERE id = $5 AND claim_token = $6
			RETURNING pg_current_xact_id()::text`,
			out.Status, out.Attempts, out.NextAttemptAt.UnixMilli(), msg, id, token, kind == store.FailUnknown).QueryRow(func(r pgx.Row) error {
			return r.Scan(&xid)
		})
		if !f.GivenBack {
			outcome := store.AttemptRetry
			if out.Status == store.StatusParked {
				outcome = store.AttemptParked
			}
			queueAttempts(b, off, token, []attemptRecord{{id: id, outcome: outcome, errText: msg, note: f.Attempt}})
		}
		err = tx.SendBatch(ctx, b).Close()
		return xid, err
	})
	if err != nil {
		return store.FailResult{}, fmt.Errorf("fail outbox row %d: %w", id, err)
	}
	return out, nil
}

// Get returns one row by id, or store.ErrNotFound.
func (s *Store) Get(ctx context.Context, id int64) (store.Row, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	r, err := scanRow(s.pool.QueryRow(ctx, `SELECT `+s.readColumns+` FROM outbox WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Row{}, fmt.Errorf("outbox row %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Row{}, fmt.Errorf("get outbox row %d: %w", id, s.classify(ctx, err))
	}
	return s.withRequest(ctx, r)
}

// GetByKey returns one row by idempotency key, or store.ErrNotFound.
func (s *Store) GetByKey(ctx context.Context, key string) (store.Row, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	r, err := scanRow(s.pool.QueryRow(ctx, `SELECT `+s.readColumns+` FROM outbox WHERE idempotency_key = $1`, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Row{}, fmt.Errorf("outbox row %q: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return store.Row{}, fmt.Errorf("get outbox row %q: %w", key, s.classify(ctx, err))
	}
	return s.withRequest(ctx, r)
}

// withRequest fills in r.Request for Get and GetByKey.
func (s *Store) withRequest(ctx context.Context, r store.Row) (store.Row, error) {
	if r.RequestID == "" {
		return r, nil
	}
	var q store.Request
	err := s.pool.QueryRow(ctx, `SELECT content_type, body FROM slack_requests WHERE event_id = $1`, r.RequestID).
		Scan(&q.ContentType, &q.Body)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return store.Row{}, fmt.Errorf("get outbox row %d: read stored request %s: %w", r.ID, r.RequestID, s.classify(ctx, err))
	default:
		r.Request = &q
	}
	return r, nil
}

// List returns up to limit rows, newest first, optionally of one status.
func (s *Store) List(ctx context.Context, status string, limit int) ([]store.Row, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if limit <= 0 {
		limit = 50
	}
	res, err := s.pool.Query(ctx, `SELECT `+s.readColumns+` FROM outbox
		 WHERE ($1::text = '' OR status = $1) ORDER BY id DESC LIMIT $2`, status, limit)
	if err != nil {
		return nil, fmt.Errorf("list outbox: %w", s.classify(ctx, err))
	}
	rows, err := collect(res)
	if err != nil {
		return nil, fmt.Errorf("list outbox: %w", s.classify(ctx, err))
	}
	return rows, nil
}

// Requeue puts one parked or discarded row back to pending with a fresh
// attempt budget, due now. It returns store.ErrNotFound if no parked or
// discarded row has that id.
func (s *Store) Requeue(ctx context.Context, id int64) error {
	n, err := s.requeue(ctx, 0, `id = $2 AND status IN ('parked', 'discarded')`, id)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("parked or discarded outbox row %d: %w", id, store.ErrNotFound)
	}
	return nil
}

// RequeueParked puts every row f selects back to pending and returns how
// many.
func (s *Store) RequeueParked(ctx context.Context, f store.ParkedFilter) (int64, error) {
	where, args := parkedWhere(f)
	return s.requeue(ctx, f.Expect, where, args...)
}

// parkedWhere is the WHERE clause (arguments from $2, after the clock's
// offset) selecting the rows f names: parked ones, or discarded ones.
func parkedWhere(f store.ParkedFilter) (string, []any) {
	where, args := `status = 'parked'`, []any{}
	if f.Discarded {
		where = `status = 'discarded'`
	}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args)+1)
	}
	if f.Effect != "" {
		where += ` AND effect = ` + arg(f.Effect)
	}
	if f.Route != "" {
		where += ` AND ackd_payload_route(payload) = ` + arg(f.Route)
	}
	if f.OlderThan > 0 {
		where += ` AND created_at < clock.now - ` + arg(f.OlderThan.Milliseconds()) + `::bigint`
	}
	if f.Discarded && !f.DiscardedSince.IsZero() {
		where += ` AND completed_at >= ` + arg(f.DiscardedSince.UnixMilli()) + `::bigint`
	}
	return where, args
}

func (s *Store) requeue(ctx context.Context, expect int64, where string, args ...any) (int64, error) {
	n, err := s.update(ctx, expect, `SET status = 'pending', attempts = 0, next_attempt_at = clock.now,
		       claim_token = NULL, claim_expires_at = NULL, completed_at = NULL`, where, args...)
	if err != nil {
		return 0, fmt.Errorf("requeue: %w", err)
	}
	return n, nil
}

// Discard moves one row to discarded (completed_at now): a parked row, or
// a pending row under no live lease (judged on the database's clock). It
// returns store.ErrNotFound if no such row has that id. One statement: a
// claim that locked the row first makes this one re-read it (READ
// COMMITTED) and find it leased; a claim after it finds it discarded.
// Clearing the claim token fences out a sweep whose lease had run out.
func (s *Store) Discard(ctx context.Context, id int64) error {
	n, err := s.discard(ctx, 0, `id = $2 AND (status = 'parked' OR (status = 'pending'
		    AND (claim_token IS NULL OR claim_expires_at IS NULL OR claim_expires_at <= clock.now)))`, id)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("parked or unleased pending outbox row %d: %w", id, store.ErrNotFound)
	}
	return nil
}

// DiscardParked discards every parked row f selects and returns how many.
func (s *Store) DiscardParked(ctx context.Context, f store.ParkedFilter) (int64, error) {
	if f.Discarded {
		return 0, fmt.Errorf("discard: rows already discarded: %w", store.ErrFilter)
	}
	where, args := parkedWhere(f)
	return s.discard(ctx, f.Expect, where, args...)
}

func (s *Store) discard(ctx context.Context, expect int64, where string, args ...any) (int64, error) {
	// A token still on the row is a claim that never said how its attempt
	// ended (its lease ran out: a live one is refused): the attempt may
	// have taken effect, as a claim that found it would have recorded, so
	// a retry after the discard confirms a post before making it again.
	n, err := s.update(ctx, expect, `SET status = 'discarded', completed_at = clock.now,
		       outcome_unknown = (outcome_unknown OR claim_token IS NOT NULL),
		       claim_token = NULL, claim_expires_at = NULL`, where, args...)
	if err != nil {
		return 0, fmt.Errorf("discard: %w", err)
	}
	return n, nil
}

// Matching returns the first limit rows f selects, in id order, and how
// many it selects.
func (s *Store) Matching(ctx context.Context, f store.ParkedFilter, limit int) ([]store.Row, int64, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	where, args := parkedWhere(f)
	args = append([]any{s.offset.Load()}, args...)
	var total int64
	if err := s.pool.QueryRow(ctx, `WITH `+clockCTE+` SELECT count(*) FROM outbox, clock WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("matching rows: %w", s.classify(ctx, err))
	}
	res, err := s.pool.Query(ctx, `WITH `+clockCTE+` SELECT `+s.readColumns+` FROM outbox, clock WHERE `+where+
		fmt.Sprintf(` ORDER BY id LIMIT $%d`, len(args)+1), append(args, limit)...)
	if err != nil {
		return nil, 0, fmt.Errorf("matching rows: %w", s.classify(ctx, err))
	}
	rows, err := collect(res)
	if err != nil {
		return nil, 0, fmt.Errorf("matching rows: %w", s.classify(ctx, err))
	}
	return rows, total, nil
}

// FilterNames returns the distinct routes and effects of the rows of
// status, sorted.
func (s *Store) FilterNames(ctx context.Context, status string) (routes, effects []string, err error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	err = s.pool.QueryRow(ctx, `SELECT coalesce(array_agg(DISTINCT ackd_payload_route(payload) ORDER BY ackd_payload_route(payload))
		                                         FILTER (WHERE ackd_payload_route(payload) IS NOT NULL), '{}'),
		                               coalesce(array_agg(DISTINCT effect ORDER BY effect), '{}')
		  FROM outbox WHERE status = $1`, status).Scan(&routes, &effects)
	if err != nil {
		return nil, nil, fmt.Errorf("filter names: %w", s.classify(ctx, err))
	}
	return routes, effects, nil
}

// update runs "UPDATE outbox {set} FROM clock WHERE {where}" (the clock's
// offset is $1) and returns the rows changed. expect > 0 is the count a
// preview showed: a statement that changes another number of rows is
// rolled back (*store.SelectionChanged), so a bulk change acts on what was
// previewed or not at all.
func (s *Store) update(ctx context.Context, expect int64, set, where string, args ...any) (int64, error) {
	q := `WITH ` + clockCTE + `
		UPDATE outbox ` + set + `
		  FROM clock
		 WHERE ` + where
	args = append([]any{s.offset.Load()}, args...)
	if expect > 0 {
		var n int64
		err := s.inTx(ctx, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, q, args...)
			if err != nil {
				return err
			}
			if n = tag.RowsAffected(); n != expect {
				return &store.SelectionChanged{Previewed: expect, Now: n}
			}
			return nil
		})
		if err != nil {
			return 0, err // inTx classified it
		}
		return n, nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.check(); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, q, args...)
	if err != nil {
		return 0, s.classify(ctx, err)
	}
	return tag.RowsAffected(), nil
}

// fixFutureTimes makes every pending row leased beyond now + twice its lease length expire
// now, and every pending row due beyond now + lease + the longest backoff
// due now (no rule of this configuration sets a later time; the database's
// clock was set back, or a replica with a longer lease stamped it), and
// logs each such row once with both times. It runs at a store's first
// claim and then at most once per lease period: every replica looks, so
// one of them finds such a row within a lease period of its appearance.
func (s *Store) fixFutureTimes(ctx context.Context, lease time.Duration) error {
	now := time.Now().UnixMilli()
	if last := s.futureChecked.Load(); last != 0 && now >= last && now < last+lease.Milliseconds() {
		return nil
	}
	res, err := s.pool.Query(ctx, `WITH `+clockCTE+`,
		future AS (
			SELECT o.id, o.idempotency_key, o.claim_expires_at, o.claim_lease_ms, o.next_attempt_at FROM outbox o, clock
			 WHERE o.status = 'pending'
			   AND (o.claim_expires_at > clock.now + 2 * coalesce(o.claim_lease_ms, $2::bigint) OR o.next_attempt_at > clock.now + $2::bigint + $3::bigint)
			   FOR UPDATE OF o SKIP LOCKED)
		UPDATE outbox o
		   SET claim_expires_at = CASE WHEN f.claim_expires_at > clock.now + 2 * coalesce(f.claim_lease_ms, $2::bigint) THEN clock.now ELSE o.claim_expires_at END,
		       next_attempt_at = CASE WHEN f.next_attempt_at > clock.now + $2::bigint + $3::bigint THEN clock.now ELSE o.next_attempt_at END
		  FROM future f, clock
		 WHERE o.id = f.id
		RETURNING f.id, f.idempotency_key, f.claim_expires_at, f.next_attempt_at, clock.now`,
		s.offset.Load(), lease.Milliseconds(), s.opts.BackoffMax.Milliseconds())
	if err != nil {
		return err
	}
	defer res.Close()
	for res.Next() {
		var id, next, at int64
		var key string
		var until *int64
		if err := res.Scan(&id, &key, &until, &next, &at); err != nil {
			return err
		}
		nowText := time.UnixMilli(at).UTC().Format(time.RFC3339Nano)
		if until != nil && *until > at+2*lease.Milliseconds() {
			s.opts.Logger.Warn("lease ends further ahead than this configuration can stamp (the clock was ahead when it was stamped, or a replica has a longer lease); treated as expired",
				"id", id, "key", key, "lease_until", time.UnixMilli(*until).UTC().Format(time.RFC3339Nano), "now", nowText, "lease", lease.String())
		}
		if next > at+(lease+s.opts.BackoffMax).Milliseconds() {
			s.opts.Logger.Warn("row is due further ahead than this configuration can schedule (the clock was ahead when it was scheduled); made due now",
				"id", id, "key", key, "next_attempt_at", time.UnixMilli(next).UTC().Format(time.RFC3339Nano), "now", nowText, "lease", lease.String())
		}
	}
	if err := res.Err(); err != nil {
		return err
	}
	s.futureChecked.Store(now)
	return nil
}
