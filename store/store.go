// Package store is ackd's storage contract: the one interface the rest of
// ackd (daemon, sweep, the commands) uses, the row and result types it
// speaks in, and the rules every engine must keep. Two engines implement it,
// each in its own package, and both pass the shared contract suite in
// store/storetest:
//
//	store/           the contract (this package): Store, Row, Intent, errors, backoff
//	store/sqlite/    the default: one file, WAL, one writer with group commit
//	store/postgres/  several replicas on one PostgreSQL (pgx v5)
//	store/storetest/ the contract suite every engine runs
//
// Receipts. RecordIntent commits a receipt keyed by event id (or operation
// id) and the outbox rows it implies in ONE transaction, and the database
// decides which delivery was first: INSERT … ON CONFLICT DO NOTHING and the
// row count of that statement, never a read before the write.
//
// Leases. A sweep claims rows with one statement that stamps a random claim
// token and a lease expiry on rows that are pending, due, and free (no lease,
// an expired lease, or already ours). Only the holder of the token may move a
// row on: Complete, CompleteBatch and Fail are fenced by "AND claim_token =
// ?" row by row, and a fence that matches nothing is reported (held ==
// false), never ignored. Nothing releases a lease early; a crashed sweep's
// rows come back when their lease expires.
//
//	          Claim(token)                 Complete(token)
//	pending ───────────────▶ pending+lease ───────────────▶ done ──Prune──▶ (gone)
//	   ▲  ▲                      │  │
//	   │  └── lease expires ─────┘  │ Fail(token): retryable → pending, later
//	   │                            │              rate limited → pending, at Retry-After
//	   ├── Requeue (operator) ◀── parked ◀──────── permanent, or attempts exhausted
//	   │                            │
//	   │                            └── Discard (operator) ──▶ discarded ──Prune──▶ (gone)
//	   │                                                          │
//	   └──────────── Requeue (operator: an undo) ◀────────────────┘
//
// An operator may also Discard a pending row that no live lease holds.
//
// Attempts. Each claim that performs a row is one attempt, recorded in the
// database (AttemptLog, attempts.go): by Complete, CompleteBatch and Fail in
// their own transaction (fenced, changing nothing else, when the lease was
// lost), or as unknown by the claim that takes the row from an expired
// lease, which also counts it against max_attempts (and parks the row
// when that spends them: a row whose effect kills its process ends). They
// are deleted with their row. Every claim numbers its request to the
// handler one past the row's last (Row.Deliveries, X-Ackd-Attempt).
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"
)

// Store is what ackd needs from a database. Implementations are safe for
// concurrent use.
type Store interface {
	// RecordIntent commits in.EventID's receipt, in.Request (if any) and
	// in.Rows in one transaction and reports whether this call was the
	// first delivery. Rows with a ClaimToken are inserted already leased. It
	// returns only after the commit (or its failure). If ctx ends before the
	// intent reached a transaction, nothing is ever written.
	//
	// Its answer is exact: nil means committed; an error means nothing was
	// written, except ErrCommitUnknown, which means the commit was asked
	// for and whether it happened could not be learnt by in.ResolveBy
	// (the intent may be recorded; a redelivery is deduplicated).
	RecordIntent(ctx context.Context, in Intent) (first bool, err error)

	// Claim leases up to limit due, free rows (and the rows token already
	// holds) to token until now+lease, in one statement, and returns every
	// row token holds, in id order. A non-nil filter restricts the claim to
	// rows whose effect it accepts (see ClaimFilter). Rows that name a
	// stored request come back with Row.Request filled in, read in the same
	// transaction as the claim (RETURNING cannot join).
	//
	// Times from the future: a lease ending more than twice its own length
	// from now (each claim records the length it stamped), or a due time
	// more than lease + BackoffMax from now, cannot have been set with a
	// right clock (the clock was ahead, or was since set back); Claim treats
	// such a lease as expired and such a row as due, and logs each one
	// (Options.Logger). The one lease period of slack keeps a small clock
	// step from taking rows a sweeper is working on; judging a lease by its
	// own length keeps a claimer with a shorter lease setting from taking a
	// live longer one.
	//
	// A claim records what an attempt needs to know about the ones before
	// it: FirstClaimedAt (the first claim's time, kept), and OutcomeUnknown
	// when it takes a row whose lease another token held and let expire
	// (that claimer neither completed nor failed the row: it may have
	// performed the effect and died before saying so).
	//
	// Attempts count across crashes (issue 38): such a takeover counts the
	// dead attempt (Row.Attempts + 1, recorded as AttemptUnknown; not for
	// the lease a row was written with, NewRow.ClaimToken, which the
	// intent's other rows share unperformed), and
	// when that spends Options.MaxAttempts it parks the row in the same
	// statement instead of claiming it (last_error says why; it is logged,
	// LogParkedByClaim, and not returned), so a row whose effect kills its
	// process each time ends. Every claim of a row numbers its request
	// (Row.Deliveries, X-Ackd-Attempt) one past the row's last; a re-claim
	// by the same token keeps it.
	Claim(ctx context.Context, token string, limit int, lease time.Duration, filter *ClaimFilter) ([]Row, error)
	// Complete marks row id done if token still holds it, counting the
	// successful attempt (attempts+1: a row done on its first attempt shows
	// 1), storing result and enqueueing followUps in the same transaction.
	// last_error is kept: it is the last failed attempt's. held == false: the
	// lease was lost, nothing was written but the attempt (fenced). The
	// attempt is recorded with no AttemptNote: CompleteBatch takes one.
	Complete(ctx context.Context, id int64, token, result string, followUps []NewRow) (held bool, err error)
	// CompleteBatch is Complete for many rows of one claim, in one
	// transaction: each row is marked done (its attempt counted, as
	// Complete does, and its Note stored) only if token still holds it, and
	// its follow-ups are enqueued only then. held[i] reports the fence
	// of done[i] (false: that row's lease was lost and nothing of it was
	// written); the other rows are unaffected. An error means nothing was
	// written.
	CompleteBatch(ctx context.Context, token string, done []Completion) (held []bool, err error)
	// Fail records a failed attempt if token still holds the row. Kind
	// FailUnknown also marks the row OutcomeUnknown. The attempt is
	// recorded (retry, parked; fenced when the lease was lost) in the same
	// transaction, unless f.GivenBack.
	Fail(ctx context.Context, id int64, token string, f Failure) (FailResult, error)
	// SaveStepReply stores reply as the result of pending row id while
	// token holds it, leaving everything else as it is: a workflow step's
	// handler answered, and what it said is kept before Slack is told, so
	// that a later attempt (after a failed or lost functions.complete*
	// call, or a crash) repeats only that call instead of asking the
	// handler again. Fail keeps it; Complete replaces it with the final
	// result. held == false: the lease was lost and nothing was written.
	SaveStepReply(ctx context.Context, id int64, token, reply string) (held bool, err error)

	// Progress: what a long effect (an agent's streamed answer) has done
	// so far, kept in the row (column progress) so that the attempt after a
	// crash or a lost lease finishes it instead of starting again.
	//
	// SaveProgress stores progress on row id if token still holds it
	// (pending, claim_token = token), fenced like Complete: held == false
	// means the lease was lost and nothing was written. The text is the
	// effect's own (sweep's JSON); the store keeps it as it is, through
	// completion and failure, until the row is pruned.
	SaveProgress(ctx context.Context, id int64, token, progress string) (held bool, err error)
	// Progress returns what SaveProgress last stored on row id ("" when
	// nothing), or ErrNotFound when there is no such row.
	Progress(ctx context.Context, id int64) (string, error)

	// Get and GetByKey return one row, with Row.Request filled in when the
	// row names a stored request that is still there; ErrNotFound if none.
	Get(ctx context.Context, id int64) (Row, error)
	GetByKey(ctx context.Context, key string) (Row, error)
	List(ctx context.Context, status string, limit int) ([]Row, error)
	// Requeue puts one parked or discarded row back to pending with a
	// fresh attempt budget, due now (a discard is undone this way while the
	// row exists); ErrNotFound if no parked or discarded row has that id
	// (the caller may Get the row to say why).
	Requeue(ctx context.Context, id int64) error
	// RequeueParked requeues every row f selects (parked ones, or
	// discarded ones with f.Discarded) and says how many.
	RequeueParked(ctx context.Context, f ParkedFilter) (int64, error)
	// Discard gives up on one row: a parked row, or a pending row that no
	// sweep holds under a live lease (it waits for its next attempt, or for
	// a process with a credential). Its status becomes discarded,
	// completed_at now, and no sweep performs it again; ErrNotFound if no
	// such row has that id (a leased row: the caller may Get it to say
	// until when). The discard clears the claim token in the same
	// statement that checks the lease, so a sweep whose lease ran out
	// cannot complete or fail the row afterwards (its fence finds another
	// status), and a claim after it finds nothing to take.
	// DiscardParked discards every parked row f selects and says how many
	// (only parked ones: f.Discarded is refused).
	Discard(ctx context.Context, id int64) error
	DiscardParked(ctx context.Context, f ParkedFilter) (int64, error)
	// Matching returns the first limit rows f selects, in id order, and how
	// many it selects in all: what RequeueParked or DiscardParked would
	// change now (`--dry-run`).
	Matching(ctx context.Context, f ParkedFilter, limit int) ([]Row, int64, error)
	// FilterNames returns the routes (payload "route") and effects of the
	// rows of status, each sorted and distinct: the names a filter over
	// those rows can match.
	FilterNames(ctx context.Context, status string) (routes, effects []string, err error)

	// Prune deletes receipts older than receipts, and done and discarded
	// rows completed more than done ago, in bounded batches. Pending and
	// parked rows are never pruned. A stored request (Intent.Request) is deleted once it is
	// older than receipts AND no pending or parked row names it: a row that
	// waits (or is parked for an operator) keeps the bytes it needs.
	Prune(ctx context.Context, receipts, done time.Duration, batch int) (PruneResult, error)

	Queue(ctx context.Context) (Queue, error)
	Stats(ctx context.Context) (Stats, error)
	HasReceipt(ctx context.Context, eventID string) (bool, error)
	// CheckEvents verifies, after a load test, that acked ids have their
	// receipt and rows.
	CheckEvents(ctx context.Context, ids []string) (EventCheck, error)
	// CheckWrite commits a real write: the health check.
	CheckWrite(ctx context.Context) error
	SchemaVersion(ctx context.Context) (int, error)
	// BusyErrors counts lock-contention errors seen (a metric).
	BusyErrors() int64

	// Instances: the running `ackd serve` processes on this database.
	//
	// Heartbeat inserts or refreshes in's row (heartbeat_at = now) and
	// deletes rows whose heartbeat is older than a day (crashed daemons).
	Heartbeat(ctx context.Context, in Instance) error
	// Instances returns the instances whose heartbeat is at most fresh old,
	// oldest start first.
	Instances(ctx context.Context, fresh time.Duration) ([]Instance, error)
	// Retire deletes instance id's row (a clean shutdown).
	Retire(ctx context.Context, id string) error

	// Catch-up's marks and recovered messages (see marks.go).
	MarkStore

	// Installations: many workspaces ([oauth]), see installs.go.
	Installations

	// The operator's verbs and the console (issue 31): attempts.go,
	// pauses.go, search.go.
	AttemptLog
	RoutePauses
	Replayer
	Browser

	// Users' stops of agents' answers (agent_session_stopped): stops.go.
	StreamStops

	// Now is the clock the store stamps rows with.
	Now() time.Time
	// Engine names the engine ("sqlite", "postgres"); Location says where
	// the data is (a file path, or a URL without its password).
	Engine() string
	Location() string
	Close() error
}

// LogParkedByClaim logs each row a claim parked because the attempt whose
// lease it took spent the row's budget (see Store.Claim).
func LogParkedByClaim(log *slog.Logger, parked []Row) {
	for _, r := range parked {
		log.Error("effect parked: its attempts ended with no word from their process (it died or was stopped mid-effect); needs an operator (ackd outbox show / retry)",
			"id", r.ID, "key", r.Key, "effect", r.Effect, "attempts", r.Attempts, "outcome", StatusParked, "err", r.LastError)
	}
}

// Completion is one row's successful attempt, for CompleteBatch.
type Completion struct {
	ID        int64
	Result    string   // stored in result; "" stores NULL
	FollowUps []NewRow // enqueued in the same transaction, only if the fence holds
	Note      string   // stored in note (Row.Note); "" stores NULL
	// Attempt is recorded with the row's attempt (done, or fenced when the
	// lease was lost), in the same transaction.
	Attempt AttemptNote
}

// ClaimFilter restricts a claim to rows a process can perform. A sweep
// that lacks a credential some effects need (a hand-run `ackd sweep --once`
// without SLACK_BOT_TOKEN) leaves those rows alone instead of parking them.
type ClaimFilter struct {
	// Effects, when non-nil, lists the effects that may be claimed.
	Effects []string
}

// Sentinel errors callers branch on.
var (
	ErrNotFound = errors.New("outbox row not found")
	ErrClosed   = errors.New("store is closed")
	// ErrBusy: another connection or process holds the write lock.
	ErrBusy = errors.New("database busy")
	// ErrReadOnly: the database refuses writes.
	ErrReadOnly = errors.New("database is read-only")
	// ErrUnavailable: the database cannot be reached or cannot write (server
	// down, disk full, I/O error). Nothing of the failed call was committed.
	ErrUnavailable = errors.New("database unavailable")
	// ErrFilter: a ParkedFilter that cannot be used where it was given
	// (DiscardParked of discarded rows).
	ErrFilter = errors.New("filter not allowed here")
	// ErrCommitUnknown: COMMIT was sent, its answer was lost or cut off
	// (a reply lost on the network, a synchronous standby that does not
	// confirm), and the database could not say in time whether the
	// transaction committed. The call's writes may or may not be there.
	// It never wraps ErrUnavailable, whose promise is "nothing written".
	ErrCommitUnknown = errors.New("commit outcome unknown")
)

// Roles a process opens a store for (Options.Role). PostgreSQL picks its
// sessions' server-side timeouts by role (see store/postgres).
const (
	RoleServe = "serve" // ackd serve: Slack ingress, sweep, pruner (the default)
	RoleCLI   = "cli"   // a hand-run command: sweep --once, status, outbox, prune, migrate
)

// SchemaError refuses a database whose schema version a process opened
// without migrating cannot work with. Its message is one line naming both
// versions and what to do.
type SchemaError struct {
	Found  int // the database's version
	Known  int // the newest version this binary knows
	Needed int // the oldest version the caller can work with
}

func (e *SchemaError) Error() string {
	if e.Found > e.Known {
		return fmt.Sprintf("database schema version %d is newer than this ackd knows (%d): a newer ackd migrated it, and `ackd migrate` never downgrades; use that ackd", e.Found, e.Known)
	}
	need := fmt.Sprintf("this ackd's (%d)", e.Known)
	if e.Needed < e.Known {
		need = fmt.Sprintf("this command needs (%d; this ackd knows %d)", e.Needed, e.Known)
	}
	return fmt.Sprintf("database schema version %d is older than %s: run `ackd migrate` to upgrade it (an older ackd serve then refuses the file), or use the ackd that runs on it", e.Found, need)
}

// CheckSchema returns a *SchemaError unless found is within [needed, known]
// (needed 0: known).
func CheckSchema(found, known, needed int) error {
	if needed <= 0 || needed > known {
		needed = known
	}
	if found > known || found < needed {
		return &SchemaError{Found: found, Known: known, Needed: needed}
	}
	return nil
}

// IsBusy reports whether err is lock contention (ErrBusy).
func IsBusy(err error) bool { return errors.Is(err, ErrBusy) }

// IsReadOnly reports whether err is a refused write (ErrReadOnly).
func IsReadOnly(err error) bool { return errors.Is(err, ErrReadOnly) }

// Options tune a Store. The zero value (plus Schema) is the production default.
type Options struct {
	// Synchronous (SQLite) is "FULL" (default: an ack survives power loss)
	// or "NORMAL" (an ack survives a process crash only).
	Synchronous string
	// BusyTimeout (SQLite) is how long a statement waits for another
	// connection's write lock (default 5s).
	BusyTimeout time.Duration
	// Now is the clock; tests move it. Default time.Now. SQLite judges
	// leases and stamps rows on it; PostgreSQL uses the database's clock
	// for both and Now only for durations inside the process.
	Now func() time.Time
	// MaxAttempts parks a row after this many retryable failures (default 8).
	MaxAttempts int
	// BackoffBase is the delay before the second attempt; it doubles per
	// attempt up to BackoffMax (defaults 10s and 1h). Each delay is
	// jittered into [d/2, d].
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// Schema is SQLite's schema text (the binary embeds schema.sql); the
	// PostgreSQL engine ignores it and applies its own embedded
	// store/postgres/schema.sql.
	Schema string
	// MaxBatch caps how many ops one group commit carries (default 256).
	MaxBatch int
	// CommitDelay (SQLite) is how long a group commit of fewer than 8 ops
	// waits for more before it begins (default 0: it begins at once), like
	// PostgreSQL's commit_delay: at moderate rates acks that arrive a few
	// hundred microseconds apart then share one transaction, one fsync and
	// one copy of the tables' hot pages.
	CommitDelay time.Duration
	// PruneShare (SQLite) is the largest share of the writer's time pruning
	// takes while acks are being recorded: after a slice that took d, while
	// intents were committed meanwhile, Prune waits d×(1/PruneShare − 1)
	// (at most a second) before the next one. With no acks arriving (an
	// idle daemon, a hand-run `ackd prune`) slices run back to back.
	// Default 0.2; 1 never waits.
	PruneShare float64
	// MustExist refuses to create a missing database (inspection commands
	// must not leave an empty database behind a mistyped path).
	MustExist bool
	// NoMigrate opens the database as it is: its schema is never changed.
	// Only ackd serve and ackd migrate migrate; every other command works on
	// the schema it finds, so that an older ackd serve can still start on
	// the file after a newer binary inspected it. A schema outside
	// [MinSchema, the engine's latest] is refused with a *SchemaError.
	NoMigrate bool
	// ReadOnly (implies NoMigrate and MustExist) opens for inspection only:
	// no write of any kind (SQLite: mode=ro, query_only; PostgreSQL:
	// default_transaction_read_only). Write methods fail with ErrReadOnly.
	ReadOnly bool
	// MinSchema is the oldest schema version a NoMigrate or ReadOnly caller
	// can work with; 0 means the engine's latest (a caller that writes
	// rows needs every column this binary writes).
	MinSchema int
	// Logger receives what the store itself has to tell an operator: writes
	// failing on a storage fault (disk full, I/O error) and their recovery,
	// and a lease found stamped further ahead than now+lease (see Claim).
	// Default slog.Default().
	Logger *slog.Logger
	// Role is RoleServe (default) or RoleCLI: what the process opens the
	// database for (PostgreSQL's session timeouts differ by role).
	Role string
	// OnMigrate, when set, is told of each migration Open applies as it
	// begins and as it ends (MigrationStep); it must return quickly.
	// `ackd serve` keeps systemd's start timeout from running out while one
	// runs. Each applied migration is also logged with its duration.
	OnMigrate func(MigrationStep)
}

// WithDefaults validates o and fills in the defaults.
func (o Options) WithDefaults() (Options, error) {
	switch strings.ToUpper(o.Synchronous) {
	case "":
		o.Synchronous = "FULL"
	case "FULL", "NORMAL":
		o.Synchronous = strings.ToUpper(o.Synchronous)
	default:
		return o, fmt.Errorf("synchronous must be FULL or NORMAL, not %q", o.Synchronous)
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 8
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = 10 * time.Second
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = time.Hour
	}
	if o.BackoffMax < o.BackoffBase {
		o.BackoffMax = o.BackoffBase
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.PruneShare <= 0 || o.PruneShare > 1 {
		o.PruneShare = 0.2
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch o.Role {
	case "":
		o.Role = RoleServe
	case RoleServe, RoleCLI:
	default:
		return o, fmt.Errorf("role must be %s or %s, not %q", RoleServe, RoleCLI, o.Role)
	}
	if o.Schema == "" {
		return o, errors.New("no schema given")
	}
	if o.ReadOnly {
		o.NoMigrate, o.MustExist = true, true
	}
	return o, nil
}

// Backoff is the delay before attempt n+1 after n failed attempts:
// base·2^(n-1) capped at max, jittered into [d/2, d].
func (o Options) Backoff(n int) time.Duration {
	d := o.BackoffBase
	for i := 1; i < n && d < o.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, o.BackoffMax)
	half := d / 2
	return half + rand.N(d-half+1)
}

// RetryAfter is when a rate-limited row is due again: Retry-After, at least
// a second, never past the longest backoff (a bogus value must not hold a
// row beyond an operator's notice).
func (o Options) RetryAfter(d time.Duration) time.Duration {
	return min(max(d, time.Second), o.BackoffMax)
}

// Next decides what a failed attempt does to a row that has had attempts
// failed attempts before this one: its new status, attempt count and due time.
func (o Options) Next(kind FailKind, attempts int, now time.Time, retryAfter time.Duration) FailResult {
	out := FailResult{Held: true, Status: StatusPending, Attempts: attempts + 1, NextAttemptAt: now}
	switch {
	case kind == FailRateLimited:
		out.Attempts = attempts
		out.NextAttemptAt = now.Add(o.RetryAfter(retryAfter))
	case kind == FailPermanent || attempts+1 >= o.MaxAttempts:
		out.Status = StatusParked
	default:
		out.NextAttemptAt = now.Add(o.Backoff(attempts + 1))
	}
	return out
}

// LockHolder is another session that holds locks on the outbox inside an
// open transaction, as the database reports it.
type LockHolder struct {
	PID         int
	Application string // application_name ("ackd" for ackd's own sessions)
	Client      string // client address, or "local"
	State       string // "idle in transaction", "active", …
	XactAge     time.Duration
	StateAge    time.Duration // how long it has been in State
}

// ClaimBlockers is implemented by engines whose claims pass over rows that
// other transactions lock (PostgreSQL's FOR UPDATE SKIP LOCKED), to say
// why a claim took nothing: waiting counts the rows due and free that
// filter accepts (a claim would take them were they not locked; not a
// paused route's, which no claim takes), holders
// the sessions holding outbox locks in an open transaction, oldest first.
type ClaimBlockers interface {
	ClaimBlockers(ctx context.Context, filter *ClaimFilter) (waiting int64, holders []LockHolder, err error)
}

// IsPostgresURL reports whether a database setting names PostgreSQL (a
// postgres:// or postgresql:// URL) rather than an SQLite file.
func IsPostgresURL(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// RedactURL is a PostgreSQL URL fit for a log line: its password, in the
// user part or as a query parameter, is masked.
func RedactURL(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://(unparseable URL)"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
