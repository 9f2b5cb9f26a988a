package store

import (
	"context"
	"errors"
	"slices"
	"time"
)

// Installations is the part of the contract that serves many workspaces
// ([oauth]): one installation per team (or per enterprise for an org-wide
// install) with its tokens sealed by the caller, the one-use states of the
// install flow, and named leases (one refresher per installation across
// processes). The store never sees a token in clear: Installation.Secret is
// ciphertext (package oauth seals it), stored and returned as is.
//
// Times are the store's: SQLite's Options.Now, PostgreSQL's clock.
type Installations interface {
	// PutInstallation inserts in, or replaces the installation with its
	// key (a reinstall), with installed_at = now and a new version.
	PutInstallation(ctx context.Context, in Installation) error
	// GetInstallation returns the installation with key (a team id, or an
	// enterprise id for an org-wide install); ErrNoInstallation if none.
	GetInstallation(ctx context.Context, key string) (Installation, error)
	// ListInstallations returns every installation, by key.
	ListInstallations(ctx context.Context) ([]Installation, error)
	// DeleteInstallation removes key's installation and reports whether
	// there was one.
	DeleteInstallation(ctx context.Context, key string) (bool, error)
	// UpdateInstallationSecret replaces key's sealed secret (a refreshed
	// token pair, a rekey) and clears its error, only if its version is
	// still version; the new version is returned. ok == false: another
	// writer changed (or removed) it first, nothing was written.
	UpdateInstallationSecret(ctx context.Context, key string, version int64, secret []byte) (newVersion int64, ok bool, err error)
	// SetInstallationError records why key's tokens cannot be used (a
	// refresh Slack refused for good); "" clears it.
	SetInstallationError(ctx context.Context, key, msg string) error

	// ParkInstallRows parks every pending row of installation key (the
	// payload's facts.install), leased or not, with reason as last_error,
	// and returns how many.
	ParkInstallRows(ctx context.Context, key, reason string) (int64, error)
	// WaitingRows counts pending rows whose last attempt found no
	// installation for their team (last_error starting "not_installed").
	WaitingRows(ctx context.Context) (int64, error)

	// OAuthStateUsed reports whether an install flow's state (its hash)
	// was used already: an installation was stored with it
	// (PutInstallationWithState) and its record has not expired. It only
	// reads: the redirect asks it of any caller before anything is sent to
	// Slack, and anyone may call the redirect.
	OAuthStateUsed(ctx context.Context, state string) (bool, error)
	// PutInstallationWithState stores in as PutInstallation does and, in
	// the same transaction, records that state (its hash) was used, for
	// ttl: the database decides (INSERT … ON CONFLICT DO NOTHING), so of
	// two redirects with one state that both exchanged a code, only the
	// first to commit stores its installation; the other writes nothing
	// and gets first == false. Records older than their ttl are deleted
	// (the caller refuses expired states itself). Nothing else writes a
	// state: a redirect whose code exchange failed leaves no trace.
	PutInstallationWithState(ctx context.Context, in Installation, state string, ttl time.Duration) (first bool, err error)

	// RecordInstallEnd is RecordIntent for a Slack event that ends an
	// installation (app_uninstalled, tokens_revoked): in the same
	// transaction as in's receipt and rows, and only when this delivery is
	// the first, it removes end.Key's installation and parks its pending
	// rows with end.Reason — unless the installation was made after the
	// event (end.EventTime is before its SlackInstalledAt, or before its
	// InstalledAt when Slack's time of it is unknown), or end.BotUsers
	// names other bot users. A retry of the event (a duplicate) changes
	// nothing; a crash can neither lose the change nor repeat it. Errors
	// are RecordIntent's.
	RecordInstallEnd(ctx context.Context, in Intent, end InstallEnd) (InstallEndResult, error)

	// AcquireLease takes the lease name for holder until now+ttl if it is
	// free, expired, or already holder's (renewed); false: another holder
	// has it.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	// ReleaseLease ends holder's lease name (nothing if it is not held by
	// holder).
	ReleaseLease(ctx context.Context, name, holder string) error
}

// ErrNoInstallation: no installation has that key.
var ErrNoInstallation = errors.New("no installation for this team")

// Installation is one workspace's (or one enterprise's) install of the app.
// Everything but Secret is in clear: an operator may list it.
type Installation struct {
	Key               string // TeamID, or EnterpriseID when EnterpriseInstall
	TeamID            string // empty for an org-wide install
	EnterpriseID      string
	EnterpriseInstall bool
	AppID             string
	BotUserID         string
	BotID             string
	Scopes            string // granted bot scopes, comma-separated as Slack sends them
	UserScopes        string
	InstallerUserID   string
	InstalledAt       time.Time // set by the store at PutInstallation (the store's clock)
	// SlackInstalledAt is Slack's clock when the install's code was
	// exchanged (the Date of oauth.v2.access's answer, whole seconds):
	// what an uninstall's event_time, also Slack's, is compared with.
	// Zero when unknown (an installation stored by an older ackd).
	SlackInstalledAt time.Time
	UpdatedAt        time.Time // set by the store at every write
	// Secret is the sealed token bundle (bot token, refresh token, expiry):
	// ciphertext the store keeps as bytes.
	Secret []byte
	// Version counts writes of Secret; UpdateInstallationSecret compares it.
	Version int64
	// Error, when set, says why the tokens cannot be used (a refresh that
	// Slack refused for good); the effects park rather than call Slack.
	Error string
}

// InstallEnd is a Slack event that ends an installation, for
// RecordInstallEnd.
type InstallEnd struct {
	Key string // the installation the event is for
	// EventTime is the event's event_time: Slack's clock, whole seconds.
	EventTime time.Time
	// BotUsers, when not nil, limits the end to an installation whose bot
	// user is one of them, or that has none recorded (tokens_revoked names
	// the bot users whose tokens were revoked). Nil: any (app_uninstalled).
	BotUsers []string
	// Reason is the parked rows' last_error.
	Reason string
}

// What RecordInstallEnd did (InstallEndResult.Outcome).
const (
	EndRemoved   = "removed"   // the installation was removed and its pending rows parked
	EndDuplicate = "duplicate" // a redelivery: the first delivery decided, nothing changed
	EndNone      = "none"      // no installation has that key: nothing changed
	EndNewer     = "newer"     // the installation was made after the event: kept
	EndOtherBot  = "other_bot" // tokens_revoked named other bot users: kept
)

// InstallEndResult is what RecordInstallEnd did.
type InstallEndResult struct {
	First   bool   // this delivery's receipt was the first
	Outcome string // one of the End* outcomes
	// Made is when the installation found was made: Slack's time of it
	// when known (SlackClock true), else the store's InstalledAt.
	Made       time.Time
	SlackClock bool
	Parked     int64 // rows parked (EndRemoved)
}

// EndOf decides what an installation-ending event does to the
// installation found (found false: none): the engines' one rule.
// eventTime and the installation's times are compared in milliseconds.
func EndOf(found bool, installedAt, slackInstalledAt time.Time, botUser string, end InstallEnd) InstallEndResult {
	if !found {
		return InstallEndResult{First: true, Outcome: EndNone}
	}
	r := InstallEndResult{First: true, Made: installedAt}
	if !slackInstalledAt.IsZero() {
		r.Made, r.SlackClock = slackInstalledAt, true
	}
	switch {
	case end.EventTime.UnixMilli() < r.Made.UnixMilli():
		r.Outcome = EndNewer
	case end.BotUsers != nil && botUser != "" && !slices.Contains(end.BotUsers, botUser):
		r.Outcome = EndOtherBot
	default:
		r.Outcome = EndRemoved
	}
	return r
}
