// Package sweep performs outbox rows: one sweep claims a bounded batch under
// a fresh random claim token, performs each row's effect with a bounded
// number of workers and a per-effect timeout shorter than the lease, and
// completes or fails each row fenced by that token.
//
// The same RunOnce serves the daemon's ticker, its immediate trigger after a
// first delivery, and `ackd sweep --once`; a row carries everything needed to
// perform it, so sweep never needs the routes and never imports daemon.
//
// Delivery is at-least-once: the effect happens before its completion is
// written, so a crash (or a lost lease) between the two repeats the effect.
//
// A sweep touches only rows it can perform: effects whose credential the
// process lacks (EffectConfig.Unavailable, passed as Config.Skip) are left
// out of the claim, and a performer that finds a row it cannot do (a signed
// forward without the secret) gives it back untouched (class Unavailable,
// outcome skipped) rather than parking it.
package sweep

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ackd/ackd/store"
)

// Config bounds one sweep.
type Config struct {
	Batch          int           // rows claimed per sweep (default 100)
	Workers        int           // effects performed at once (default 4)
	Lease          time.Duration // claim lease (default 10m); must exceed every effect timeout
	DefaultTimeout time.Duration // effect timeout when the row names none (default 10s)
	// Skip names effects this process must not claim, each with the reason
	// (EffectConfig.Unavailable: a credential it lacks). Their rows stay
	// pending for a process that can perform them.
	Skip map[string]string
	// Mask gives the mask of every text stored or logged about a row: the
	// secrets ackd knows for it (SecretMask, mask.go); nil masks only
	// what is shaped like a Slack token.
	Mask func(ctx context.Context, row store.Row, withInstall bool) func(string) string
	// InstanceFresh: an ackd_instances row whose heartbeat is at most this
	// old is a live instance, when a sweep past HandBackLimit asks whether
	// anyone can still perform a row it gives back (default 30s, the
	// daemon's daemon.InstanceStale).
	InstanceFresh time.Duration
}

func (c *Config) setDefaults() {
	if c.Batch <= 0 {
		c.Batch = 100
	}
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.Lease <= 0 {
		c.Lease = 10 * time.Minute
	}
	if c.DefaultTimeout <= 0 {
		c.DefaultTimeout = 10 * time.Second
	}
	if c.InstanceFresh <= 0 {
		c.InstanceFresh = 30 * time.Second
	}
}

// Outcomes of one attempt, as logged and observed.
const (
	OutcomeDone        = "done"
	OutcomeRetry       = "retry"
	OutcomeRateLimited = "rate_limited"
	OutcomeParked      = "parked"
	OutcomeFenced      = "fenced"    // the lease was lost before the result was written
	OutcomeAbandoned   = "abandoned" // not started or cut short (shutdown, lease too short); the lease will expire
	OutcomeError       = "error"     // the result could not be written to the database
	OutcomeSkipped     = "skipped"   // given back untouched: this process lacks what the row needs
	OutcomeWaiting     = "waiting"   // the row's team has no usable installation yet ([oauth]: none, or its tokens do not open with the key); tried again soon
)

// Observer receives what a sweep did (metrics). Implementations must be safe
// for concurrent use.
type Observer interface {
	Attempt(effect, outcome string, took time.Duration)
	Swept(took time.Duration, r Result, err error)
}

// Result counts one sweep's rows by what happened to them.
type Result struct {
	Claimed, Done, Retried, Parked, Fenced, Abandoned, Skipped int
	// FollowUps counts rows enqueued by completions (a forward's reply):
	// they are due at once, so the immediate trigger sweeps again for them.
	FollowUps int
}

// String is the summary `ackd sweep --once` prints; skipped=N is added only
// when a row was given back.
func (r Result) String() string {
	s := fmt.Sprintf("claimed=%d done=%d retried=%d parked=%d fenced=%d",
		r.Claimed, r.Done, r.Retried, r.Parked, r.Fenced)
	if r.Skipped > 0 {
		s += fmt.Sprintf(" skipped=%d", r.Skipped)
	}
	return s
}

// handBack is how long a row given back by a process that lacks its
// credential waits before it is due again.
const handBack = 5 * time.Second

// HandBackLimit is how long after its recording a row may still be given
// back for a credential this process lacks. A row older than that parks
// instead, naming what is missing, unless a live instance (a fresh
// heartbeat in ackd_instances) records that it can perform it
// (Failure.Needs in its Performs, or an instance that recorded nothing):
// such a row is still being retried by a process that has the credential
// (its handler may be down for hours), and parking it would take it from
// that process. With no such instance, nobody will perform it, so it needs
// an operator, and a parked row is what alerts and `ackd outbox list
// --status parked` show. Without the limit a daemon that lost its
// ACKD_FORWARD_SECRET would hand the same rows back every few seconds
// forever.
const HandBackLimit = time.Hour

// Skipped returns the effects this sweeper does not claim, with the reason.
func (s *Sweeper) Skipped() map[string]string { return s.cfg.Skip }

// Sweeper runs sweeps over one store.
type Sweeper struct {
	store store.Store
	reg   Registry
	cfg   Config
	log   *slog.Logger
	obs   Observer
	claim *store.ClaimFilter // nil: every effect
}

// New returns a Sweeper. obs may be nil.
func New(st store.Store, reg Registry, cfg Config, log *slog.Logger, obs Observer) *Sweeper {
	cfg.setDefaults()
	s := &Sweeper{store: st, reg: reg, cfg: cfg, log: log.With("component", "sweep"), obs: obs}
	s.claim = &store.ClaimFilter{Effects: claimable(reg, cfg.Skip)}
	return s
}

// ClaimFilter is the filter this sweeper's claims use (the effects it can
// perform).
func (s *Sweeper) ClaimFilter() *store.ClaimFilter { return s.claim }

// Config returns the effective configuration.
func (s *Sweeper) Config() Config { return s.cfg }

// NewToken returns a random claim token (128 bits, base32).
func NewToken() string { return rand.Text() }

// RunOnce claims one batch and performs it. Its error is for the database
// failing; effect failures are recorded on their rows and counted in Result.
// Cancelling ctx cancels in-flight effects; their rows are left to lease
// expiry rather than marked failed. It ends in bounded time whatever the
// database does: the claim has a deadline (claimTimeout), every effect its
// timeout inside the lease, every result write writeTimeout.
func (s *Sweeper) RunOnce(ctx context.Context) (Result, error) {
	start := time.Now()
	res, err := s.runOnce(ctx)
	if s.obs != nil {
		s.obs.Swept(time.Since(start), res, err)
	}
	return res, err
}

func (s *Sweeper) runOnce(ctx context.Context) (Result, error) {
	token := NewToken()
	// Taken before the claim, so never later than the expiry the store
	// stamps: every effect of this batch must end by then. Wall clock, as
	// the database stamps and compares leases (Round(0) drops the monotonic
	// reading, which stops while a VM is suspended).
	leaseEnd := s.store.Now().Round(0).Add(s.cfg.Lease)
	// The claim has a deadline of its own: a connection that went silent
	// mid-claim must not stop this loop (its rows come back when the
	// server ends the silent session, or by lease expiry).
	claimFor := min(s.cfg.Lease/2, claimTimeout)
	cctx, cancel := context.WithTimeout(ctx, claimFor)
	rows, err := s.store.Claim(cctx, token, s.cfg.Batch, s.cfg.Lease, s.claim)
	cancel()
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			// Our own deadline, not the caller's: say what it means.
			err = fmt.Errorf("%w: no answer from the database within %s (its write lock held elsewhere, or the connection went silent); nothing was claimed", err, claimFor)
		}
		return Result{}, err
	}
	res := Result{Claimed: len(rows)}
	if len(rows) == 0 {
		return res, nil
	}
	outcomes := make([]string, len(rows))
	followUps := make([]int, len(rows))
	errs := make([]error, len(rows))
	c := s.newCompleter(ctx, token, outcomes, followUps, errs)
	// A fixed set of workers takes the rows in claim order; a successful
	// attempt is handed to the completer and the worker moves on.
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= len(rows) {
				return
			}
			a := attempt{token: token, leaseEnd: leaseEnd, i: i, row: rows[i]}
			if r := s.perform(ctx, a, c); !r.handed {
				outcomes[i], errs[i] = r.outcome, r.err
			}
		}
	}
	var wg sync.WaitGroup
	for range min(s.cfg.Workers, len(rows)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	c.close()
	var dbErr error
	for i, o := range outcomes {
		switch o {
		case OutcomeDone:
			res.Done++
			res.FollowUps += followUps[i]
		case OutcomeRetry, OutcomeRateLimited, OutcomeWaiting:
			res.Retried++
		case OutcomeParked:
			res.Parked++
		case OutcomeFenced:
			res.Fenced++
		case OutcomeAbandoned:
			res.Abandoned++
		case OutcomeSkipped:
			res.Skipped++
		}
		if errs[i] != nil && dbErr == nil {
			dbErr = errs[i]
		}
	}
	return res, dbErr
}

// logRow logs one line about a row, building its attributes only when the
// level is enabled (a successful row is logged at debug, and a busy sweep
// must not pay for lines nobody reads).
func (s *Sweeper) logRow(level slog.Level, row store.Row, msg string, args ...any) {
	if !s.log.Enabled(context.Background(), level) {
		return
	}
	args = maskArgs(args, s.masker(context.Background(), row, false))
	s.log.Log(context.Background(), level, msg, append([]any{"id", row.ID, "key", row.Key,
		"effect", row.Effect, "attempt", attemptNumber(row)}, args...)...)
}

// Attempt is what performing one claimed row came to.
type Attempt struct {
	Outcome string // OutcomeDone, OutcomeRetry, OutcomeParked…
	// Reply and ReplyType are the target's answer when the effect has one
	// (redeliver) and the attempt was done.
	Reply     []byte
	ReplyType string
}

// PerformClaimed performs one row that token already holds, on the same
// path a sweep takes (perform → fenced complete, or fenced fail): the inline
// first attempt of a synchronous answer, whose row RecordIntent wrote
// already claimed (store.NewRow.ClaimToken). leaseEnd is that lease's end;
// limit, if positive, shortens the effect's timeout (what is left of the
// ack budget). writeBy, if not zero, is when recording the result must be
// over (Slack's deadline for the answer that waits on it); it must come
// before leaseEnd, so that no other process may take the row while its
// result is still being written. A failure is recorded as any attempt's
// is, so the sweep retries the row after its backoff. The error is a
// database error (store.ErrCommitUnknown: the result may be recorded).
func (s *Sweeper) PerformClaimed(ctx context.Context, token string, leaseEnd time.Time, row store.Row, limit time.Duration, writeBy time.Time) (Attempt, error) {
	r := s.perform(ctx, attempt{token: token, leaseEnd: leaseEnd, row: row, limit: limit, writeBy: writeBy}, nil)
	a := Attempt{Outcome: r.outcome}
	if r.outcome == OutcomeDone {
		a.Reply, a.ReplyType = r.out.Reply, r.out.ReplyType
	}
	return a, r.err
}

// attempt is one claimed row on its way from the claim to the record of
// how its performance ended (store.Attempt).
type attempt struct {
	token    string    // the claim's token: every write about the row is fenced by it
	leaseEnd time.Time // the claim's lease end: no effect may start that would outlast it
	i        int       // the row's place in the batch (the completer's slot)
	row      store.Row
	limit    time.Duration // if positive, caps the effect's timeout (an inline attempt)
	writeBy  time.Time     // if not zero, when recording the result must be over
	// started is the attempt's start as its history records it: the
	// claim's time, or (an inline attempt) when perform began, on the
	// store's clock. Set by perform.
	started time.Time
}

// performed is how perform left an attempt.
type performed struct {
	outcome string // OutcomeDone, OutcomeRetry, …; "" with err: the database failed
	err     error  // a database error (the effect's own failure is recorded on the row)
	out     Outcome
	// handed: the success went to the completer, which fills in the
	// outcome (perform's outcome and err are then empty).
	handed bool
}

// perform runs one row's effect. A success is handed to c, which records
// it fenced by the token and fills in its outcome, or, with no c (one row
// answered inline), recorded here and returned with the effect's Outcome;
// anything else is recorded here. Every attempt that ends is recorded in
// the row's history (store.Attempt) by the same write.
func (s *Sweeper) perform(ctx context.Context, a attempt, c *completer) (res performed) {
	row, token := a.row, a.token
	start := time.Now()
	defer func() {
		if s.obs != nil && !res.handed {
			outcome := res.outcome
			if outcome == "" {
				outcome = OutcomeError
			}
			s.obs.Attempt(row.Effect, outcome, time.Since(start))
		}
	}()
	job := Job{Row: row, Attempt: attemptNumber(row), Progress: rowProgress{st: s.store, id: row.ID, token: token}, Stops: s.store}
	if !row.ClaimExpiresAt.IsZero() && c != nil {
		// A sweep's own claim stamped now+Lease; an inline attempt's row
		// was written leased for another length.
		job.ClaimedAt = row.ClaimExpiresAt.Add(-s.cfg.Lease)
	}
	a.started = job.ClaimedAt
	if a.started.IsZero() {
		a.started = s.store.Now().Round(0)
	}
	var effErr error
	var out Outcome
	p, decErr := DecodePayload(row.Payload)
	perf, known := s.reg[row.Effect]
	switch {
	case decErr != nil:
		effErr = &Failure{Class: Permanent, Code: "bad_payload", Err: decErr}
	case !known:
		effErr = &Failure{Class: Permanent, Code: "unknown_effect",
			Err: fmt.Errorf("no performer for effect %q in this ackd", row.Effect)}
	default:
		if len(p.Raw) == 0 && row.Request != nil && row.Effect != "redeliver" {
			p.Raw = RequestRaw(p.Source, row.Request)
		}
		job.Payload = p
		// The effect's deadline stays inside the lease, so a row is never
		// performed twice at once because its effect overran the lease.
		timeout := min(p.Timeout(s.cfg.DefaultTimeout), s.cfg.Lease*9/10)
		if a.limit > 0 {
			timeout = min(timeout, a.limit)
		}
		// Rows wait in the batch for a free worker while the lease runs. A
		// row whose whole timeout no longer fits in what is left is not
		// started: once the lease expires another sweep may claim it, and
		// both would perform it at once. It comes back at expiry.
		if a.leaseEnd.Sub(s.store.Now().Round(0)) < timeout {
			s.logRow(slog.LevelWarn, row, "effect not started: too little of the lease is left after waiting in the batch; the row is retried when its lease expires (lease too short for batch/workers × timeout)",
				"outcome", OutcomeAbandoned, "lease", s.cfg.Lease, "timeout", timeout)
			return performed{outcome: OutcomeAbandoned}
		}
		if ctx.Err() != nil {
			// Shutdown began while the row waited for a worker: it is not
			// started at all (an effect that ignores ctx would still run),
			// and comes back when its lease expires.
			return performed{outcome: OutcomeAbandoned}
		}
		job.Timeout = timeout
		ectx, cancel := context.WithTimeout(ctx, timeout)
		out, effErr = perf.Perform(ectx, job)
		cancel()
	}
	took := time.Since(start)

	if effErr == nil {
		// Recorded even if shutdown began after the effect finished.
		if c == nil {
			outcome, err := s.completeOne(ctx, a, out, start)
			return performed{outcome: outcome, err: err, out: out}
		}
		c.add(completion{attempt: a, out: out, start: start})
		return performed{handed: true}
	}
	if ctx.Err() != nil {
		// An effect cut short by shutdown is left to its lease.
		s.logRow(slog.LevelWarn, row, "effect cancelled by shutdown; the row is retried when its lease expires",
			"outcome", OutcomeAbandoned, "latency_ms", took.Milliseconds())
		return performed{outcome: OutcomeAbandoned}
	}
	outcome, err := s.fail(ctx, a, effErr, took)
	return performed{outcome: outcome, err: err}
}

// writeCtx bounds recording one result: by writeBy when set, else within
// writeTimeout, also after shutdown began.
func writeCtx(ctx context.Context, writeBy time.Time) (context.Context, context.CancelFunc) {
	if !writeBy.IsZero() {
		return context.WithDeadline(context.WithoutCancel(ctx), writeBy)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
}

// completeOne records one successful attempt, fenced by its token. It goes
// through CompleteBatch, which stores a note and the attempt's details.
func (s *Sweeper) completeOne(ctx context.Context, a attempt, out Outcome, start time.Time) (string, error) {
	row := a.row
	done := maskCompletion(out.completion(row.ID, a.started), s.masker(ctx, row, false))
	hs, err := s.completeHeld(ctx, a.token, a.leaseEnd, a.writeBy, []store.Completion{done})
	held := err == nil && len(hs) == 1 && hs[0]
	took := time.Since(start)
	switch {
	case errors.Is(err, store.ErrCommitUnknown):
		s.logRow(slog.LevelError, row, "effect performed; whether its completion was recorded is unknown: if it was not, the effect repeats after the lease",
			"outcome", OutcomeError, "latency_ms", took.Milliseconds(), "err", err)
		return "", err
	case err != nil:
		s.logRow(slog.LevelError, row, "effect performed but completion not recorded; it will repeat after the lease",
			"outcome", OutcomeError, "latency_ms", took.Milliseconds(), "err", err)
		return "", err
	case !held:
		s.logRow(slog.LevelWarn, row, "lease lost before completion: another sweep holds the row and will repeat the effect; the lease is too short for this effect",
			"outcome", OutcomeFenced, "latency_ms", took.Milliseconds(), "lease", s.cfg.Lease)
		return OutcomeFenced, nil
	}
	s.logRow(slog.LevelDebug, row, "effect done", "outcome", OutcomeDone,
		"latency_ms", took.Milliseconds(), "follow_ups", len(out.FollowUps))
	return OutcomeDone, nil
}

// completeHeld records done (successful attempts of one claim) with
// CompleteBatch, fenced by token. A write that fails (the database briefly
// away, its write lock held elsewhere) is made again, with backoff, while
// the claim's lease holds (until leaseEnd, or writeBy when set), so that an
// effect that succeeded is not performed again for want of a write when
// the database comes back in time; shutdown (ctx) ends the retries. After
// a commit whose outcome was unknown, the rows are read first: one found
// done under token was recorded, and is not written again (a second write
// would find its fence gone and call it lost). The error is the last
// write's, when none succeeded in time.
func (s *Sweeper) completeHeld(ctx context.Context, token string, leaseEnd, writeBy time.Time, done []store.Completion) ([]bool, error) {
	// The lease's end, on the process's monotonic clock from here on.
	until := time.Now().Add(leaseEnd.Sub(s.store.Now()))
	if !writeBy.IsZero() && writeBy.Before(until) {
		until = writeBy
	}
	held := make([]bool, len(done))
	todo := make([]int, len(done)) // indexes into done still to be written
	for i := range todo {
		todo[i] = i
	}
	wait := completeRetryFirst
	for try := 1; ; try++ {
		batch := make([]store.Completion, len(todo))
		for j, i := range todo {
			batch[j] = done[i]
		}
		// Each write within writeTimeout (or writeBy), and within what is
		// left of the lease once it is retried.
		d := writeTimeout
		if !writeBy.IsZero() {
			d = time.Until(writeBy)
		}
		if left := time.Until(until); try > 1 && left < d {
			d = left
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
		hs, err := s.store.CompleteBatch(wctx, token, batch)
		cancel()
		if err == nil {
			for j, i := range todo {
				held[i] = hs[j]
			}
			if try > 1 {
				s.log.Info("completion recorded after the database came back", "rows", len(todo), "tries", try)
			}
			return held, nil
		}
		if errors.Is(err, store.ErrClosed) || ctx.Err() != nil || time.Now().Add(wait).After(until) {
			return nil, err
		}
		s.log.Warn("completion not recorded; writing it again while the lease holds", "rows", len(todo), "try", try, "retry_in", wait, "lease_until", leaseEnd, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
		wait = min(2*wait, completeRetryMax)
		if errors.Is(err, store.ErrCommitUnknown) {
			todo = s.notYetDone(ctx, token, done, todo, held)
			if len(todo) == 0 {
				return held, nil
			}
		}
	}
}

// Backoff between writes of a completion (completeHeld).
const (
	completeRetryFirst = 100 * time.Millisecond
	completeRetryMax   = 5 * time.Second
)

// notYetDone returns the indexes of todo whose row is not found done under
// token (those are marked held: their unknown commit happened). A row that
// cannot be read stays to be written.
func (s *Sweeper) notYetDone(ctx context.Context, token string, done []store.Completion, todo []int, held []bool) []int {
	var left []int
	for _, i := range todo {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		r, err := s.store.Get(rctx, done[i].ID)
		cancel()
		if err == nil && r.Status == store.StatusDone && r.ClaimToken == token {
			held[i] = true
			continue
		}
		left = append(left, i)
	}
	return left
}

// fail records a failed attempt, fenced by its token.
func (s *Sweeper) fail(ctx context.Context, a attempt, effErr error, took time.Duration) (string, error) {
	row := a.row
	wctx, cancel := writeCtx(ctx, a.writeBy)
	defer cancel()
	f := AsFailure(effErr)
	kind, retryAfter := store.FailRetryable, f.RetryAfter
	switch f.Class {
	case Retryable:
		if !f.NotSent {
			// The request went out and no definite answer came back:
			// it may have taken effect (a post is then confirmed
			// before it is made again).
			kind = store.FailUnknown
		}
	case Permanent:
		kind = store.FailPermanent
	case RateLimited, Waiting:
		kind = store.FailRateLimited
	case Unavailable:
		// Given back without spending an attempt, due again soon, for a
		// process that has what this one lacks; parked once that has gone
		// on for HandBackLimit.
		kind, retryAfter = store.FailRateLimited, handBack
		if age := s.store.Now().Sub(row.CreatedAt); age > HandBackLimit {
			if peer, ok := s.livePerformer(ctx, f.Needs); ok {
				if peer.ID != "" {
					s.logRow(slog.LevelDebug, row, "past the hand-back limit, but a live instance can perform it; not parked",
						"needs", f.Needs, "other_pid", peer.PID, "other_host", peer.Host)
				}
			} else {
				kind = store.FailPermanent
				f = &Failure{Class: Permanent, Code: f.Code, Err: fmt.Errorf("%w; no process that has it performed the row within %s of its recording, and no running ackd can", f.Err, HandBackLimit)}
			}
		}
	}
	mask := s.masker(ctx, row, true) // logRow masks the lines below too
	fr, err := s.store.Fail(wctx, row.ID, a.token, store.Failure{Kind: kind, Msg: mask(f.Error()), RetryAfter: retryAfter,
		Attempt: store.AttemptNote{StartedAt: a.started, Status: mask(f.status())},
		// A row handed back was not attempted: no attempt is recorded
		// (unless it parks, which an operator must see).
		GivenBack: f.Class == Unavailable && kind != store.FailPermanent})
	if err != nil {
		s.logRow(slog.LevelError, row, "effect failed and the failure was not recorded", "code", f.Code, "err", err)
		return "", err
	}
	switch {
	case !fr.Held:
		s.logRow(slog.LevelWarn, row, "lease lost before the failure was recorded; the lease is too short for this effect",
			"outcome", OutcomeFenced, "code", f.Code, "latency_ms", took.Milliseconds(), "lease", s.cfg.Lease)
		return OutcomeFenced, nil
	case fr.Status == store.StatusParked:
		s.logRow(slog.LevelError, row, "effect parked: needs an operator (ackd outbox show / retry)",
			"outcome", OutcomeParked, "class", f.Class.String(), "code", f.Code,
			"latency_ms", took.Milliseconds(), "err", f.Error())
		return OutcomeParked, nil
	case f.Class == Unavailable:
		s.logRow(slog.LevelWarn, row, "effect skipped: this process lacks what the row needs; the row is left for one that has it",
			"outcome", OutcomeSkipped, "code", f.Code, "err", f.Error())
		return OutcomeSkipped, nil
	case f.Class == Waiting:
		s.logRow(slog.LevelInfo, row, "effect waiting: the row's team has no usable installation yet", "outcome", OutcomeWaiting,
			"code", f.Code, "retry_after", f.RetryAfter, "err", f.Error())
		return OutcomeWaiting, nil
	case f.Class == RateLimited:
		s.logRow(slog.LevelWarn, row, "effect rate limited", "outcome", OutcomeRateLimited, "code", f.Code,
			"retry_after", f.RetryAfter, "latency_ms", took.Milliseconds())
		return OutcomeRateLimited, nil
	default:
		s.logRow(slog.LevelWarn, row, "effect failed; will retry", "outcome", OutcomeRetry, "code", f.Code,
			"next_attempt_at", fr.NextAttemptAt, "latency_ms", took.Milliseconds(), "err", f.Error())
		return OutcomeRetry, nil
	}
}

// claimTimeout bounds one claim (at most half the lease).
const claimTimeout = 30 * time.Second

// livePerformer finds a live instance that can perform need (a capability
// instances record). An empty need, or instances that cannot be read, find
// none when nothing says otherwise: an unreadable table keeps the row
// handed back (the failure's own write is likely to fail too).
func (s *Sweeper) livePerformer(ctx context.Context, need string) (store.Instance, bool) {
	if need == "" {
		return store.Instance{}, false
	}
	ins, err := s.store.Instances(ctx, s.cfg.InstanceFresh)
	if err != nil {
		s.log.Warn("could not read the running instances; handing the row back instead of parking it", "err", err)
		return store.Instance{}, true
	}
	for _, in := range ins {
		if in.CanPerform(need) {
			return in, true
		}
	}
	return store.Instance{}, false
}

// writeTimeout bounds recording one result (or one batch of them), also
// after shutdown began.
const writeTimeout = 10 * time.Second

// completion is a successful attempt waiting to be recorded.
type completion struct {
	attempt
	out   Outcome
	start time.Time // when the performer began (process clock, for latency)
}

// completer records the successful attempts of one sweep in batches, each
// row still fenced by the token on its own (store.CompleteBatch). A worker
// hands its row over and moves on; whatever piled up while one batch was
// being written goes into the next, so a burst of fast effects costs a few
// statements, not one per row, and a single row waits for nothing.
type completer struct {
	s         *Sweeper
	ctx       context.Context
	token     string
	in        chan completion
	done      chan struct{}
	outcomes  []string // written for the rows handed over, read after close
	followUps []int
	errs      []error
}

func (s *Sweeper) newCompleter(ctx context.Context, token string, outcomes []string, followUps []int, errs []error) *completer {
	c := &completer{s: s, ctx: ctx, token: token, in: make(chan completion, len(outcomes)),
		done: make(chan struct{}), outcomes: outcomes, followUps: followUps, errs: errs}
	go c.run()
	return c
}

// add never blocks: the channel holds the whole batch.
func (c *completer) add(x completion) { c.in <- x }

// close waits until every row handed over is recorded.
func (c *completer) close() {
	close(c.in)
	<-c.done
}

func (c *completer) run() {
	defer close(c.done)
	var batch []completion
	for x := range c.in {
		batch = append(batch[:0], x)
	drain:
		for {
			select {
			case x, ok := <-c.in:
				if !ok {
					break drain
				}
				batch = append(batch, x)
			default:
				break drain
			}
		}
		c.write(batch)
	}
}

func (c *completer) write(batch []completion) {
	s := c.s
	done := make([]store.Completion, len(batch))
	for j, x := range batch {
		done[j] = maskCompletion(x.out.completion(x.row.ID, x.started), s.masker(c.ctx, x.row, false))
	}
	held, err := s.completeHeld(c.ctx, c.token, batch[0].leaseEnd, time.Time{}, done)
	for j, x := range batch {
		took := time.Since(x.start)
		outcome := OutcomeDone
		switch {
		case errors.Is(err, store.ErrCommitUnknown):
			outcome, c.errs[x.i] = OutcomeError, err
			s.logRow(slog.LevelError, x.row, "effect performed; whether its completion was recorded is unknown: if it was not, the effect repeats after the lease",
				"outcome", OutcomeError, "latency_ms", took.Milliseconds(), "err", err)
		case err != nil:
			outcome, c.errs[x.i] = OutcomeError, err
			s.logRow(slog.LevelError, x.row, "effect performed but completion not recorded; it will repeat after the lease",
				"outcome", OutcomeError, "latency_ms", took.Milliseconds(), "err", err)
		case !held[j]:
			outcome = OutcomeFenced
			s.logRow(slog.LevelWarn, x.row, "lease lost before completion: another sweep holds the row and will repeat the effect; the lease is too short for this effect",
				"outcome", OutcomeFenced, "latency_ms", took.Milliseconds(), "lease", s.cfg.Lease)
		default:
			c.followUps[x.i] = len(x.out.FollowUps)
			s.logRow(slog.LevelDebug, x.row, "effect done", "outcome", OutcomeDone,
				"latency_ms", took.Milliseconds(), "follow_ups", len(x.out.FollowUps))
		}
		if outcome != OutcomeError {
			c.outcomes[x.i] = outcome
		}
		if s.obs != nil {
			s.obs.Attempt(x.row.Effect, outcome, took)
		}
	}
}
