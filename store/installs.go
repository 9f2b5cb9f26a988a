package store

import (
	"context"
	"errors"
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

	// UseOAuthState records that an install flow's state (its hash) was
	// used, for ttl, and reports whether this call was the first use: the
	// database decides (INSERT … ON CONFLICT DO NOTHING), so a state is
	// accepted once however many replicas see it at once. Records older
	// than their ttl are deleted (the caller refuses expired states itself).
	UseOAuthState(ctx context.Context, state string, ttl time.Duration) (first bool, err error)

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
	InstalledAt       time.Time // set by the store at PutInstallation
	UpdatedAt         time.Time // set by the store at every write
	// Secret is the sealed token bundle (bot token, refresh token, expiry):
	// ciphertext the store keeps as bytes.
	Secret []byte
	// Version counts writes of Secret; UpdateInstallationSecret compares it.
	Version int64
	// Error, when set, says why the tokens cannot be used (a refresh that
	// Slack refused for good); the effects park rather than call Slack.
	Error string
}
