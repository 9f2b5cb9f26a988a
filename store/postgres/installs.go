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

const installColumns = `install_key, team_id, enterprise_id, is_enterprise_install, app_id, bot_user_id, bot_id,
	scopes, user_scopes, installer_user_id, installed_at, updated_at, secret, version, error, slack_installed_at`

// installSelect is what GetInstallation and ListInstallations select:
// installColumns, or on a schema from before slack_installed_at (a
// read-only store on a database not migrated yet) 0 in its place.
func (s *Store) installSelect() string {
	if s.installsOld {
		return strings.Replace(installColumns, "slack_installed_at", "0", 1)
	}
	return installColumns
}

func scanInstall(row pgx.Row) (store.Installation, error) {
	var in store.Installation
	var installed, updated, slackInstalled int64
	err := row.Scan(&in.Key, &in.TeamID, &in.EnterpriseID, &in.EnterpriseInstall, &in.AppID, &in.BotUserID, &in.BotID,
		&in.Scopes, &in.UserScopes, &in.InstallerUserID, &installed, &updated, &in.Secret, &in.Version, &in.Error, &slackInstalled)
	in.InstalledAt, in.UpdatedAt = time.UnixMilli(installed), time.UnixMilli(updated)
	if slackInstalled > 0 {
		in.SlackInstalledAt = time.UnixMilli(slackInstalled)
	}
	return in, err
}

// putInstallation inserts or replaces an installation ($2… the columns,
// $12 the secret, $13 Slack's time of the install in ms).
const putInstallation = `WITH ` + clockCTE + `
		INSERT INTO ackd_installations (` + installColumns + `)
		SELECT $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, now, now, $12, 1, '', $13 FROM clock
		ON CONFLICT (install_key) DO UPDATE SET
		  team_id = excluded.team_id, enterprise_id = excluded.enterprise_id,
		  is_enterprise_install = excluded.is_enterprise_install, app_id = excluded.app_id,
		  bot_user_id = excluded.bot_user_id, bot_id = excluded.bot_id, scopes = excluded.scopes,
		  user_scopes = excluded.user_scopes, installer_user_id = excluded.installer_user_id,
		  installed_at = excluded.installed_at, updated_at = excluded.updated_at,
		  secret = excluded.secret, version = ackd_installations.version + 1, error = '',
		  slack_installed_at = excluded.slack_installed_at`

func putArgs(off int64, in store.Installation) []any {
	var slackAt int64
	if !in.SlackInstalledAt.IsZero() {
		slackAt = in.SlackInstalledAt.UnixMilli()
	}
	return []any{off, in.Key, in.TeamID, in.EnterpriseID, in.EnterpriseInstall, in.AppID, in.BotUserID, in.BotID,
		in.Scopes, in.UserScopes, in.InstallerUserID, in.Secret, slackAt}
}

// PutInstallation inserts or replaces in (a reinstall gets a new version).
func (s *Store) PutInstallation(ctx context.Context, in store.Installation) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if in.Key == "" || len(in.Secret) == 0 {
		return errors.New("put installation: key and secret are required")
	}
	if err := s.check(); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, putInstallation, putArgs(s.offset.Load(), in)...); err != nil {
		return fmt.Errorf("put installation: %w", s.classify(ctx, err))
	}
	return nil
}

// PutInstallationWithState stores in and records state's use in one
// transaction, if state was not used already.
func (s *Store) PutInstallationWithState(ctx context.Context, in store.Installation, state string, ttl time.Duration) (bool, error) {
	if in.Key == "" || len(in.Secret) == 0 || state == "" {
		return false, errors.New("put installation: key, secret and state are required")
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var first bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		first = false
		off := s.offset.Load()
		if _, err := tx.Exec(ctx, `WITH `+clockCTE+` DELETE FROM ackd_oauth_states USING clock WHERE expires_at <= clock.now`, off); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `WITH `+clockCTE+`
			INSERT INTO ackd_oauth_states (state_hash, expires_at) SELECT $2, now + $3::bigint FROM clock
			ON CONFLICT (state_hash) DO NOTHING`, off, state, ttl.Milliseconds())
		if err != nil || tag.RowsAffected() != 1 {
			return err // used already: nothing more is written
		}
		first = true
		_, err = tx.Exec(ctx, putInstallation, putArgs(off, in)...)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("put installation: %w", err)
	}
	return first, nil
}

// OAuthStateUsed reports whether state's use is recorded and unexpired.
func (s *Store) OAuthStateUsed(ctx context.Context, state string) (bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.check(); err != nil {
		return false, err
	}
	var used bool
	err := s.pool.QueryRow(ctx, `WITH `+clockCTE+`
		SELECT EXISTS (SELECT 1 FROM ackd_oauth_states, clock WHERE state_hash = $2 AND expires_at > clock.now)`,
		s.offset.Load(), state).Scan(&used)
	if err != nil {
		return false, fmt.Errorf("read oauth state: %w", s.classify(ctx, err))
	}
	return used, nil
}

// GetInstallation returns key's installation, or ErrNoInstallation.
func (s *Store) GetInstallation(ctx context.Context, key string) (store.Installation, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.check(); err != nil {
		return store.Installation{}, err
	}
	in, err := scanInstall(s.pool.QueryRow(ctx, `SELECT `+s.installSelect()+` FROM ackd_installations WHERE install_key = $1`, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Installation{}, fmt.Errorf("installation %s: %w", key, store.ErrNoInstallation)
	}
	if err != nil {
		return store.Installation{}, fmt.Errorf("get installation: %w", s.classify(ctx, err))
	}
	return in, nil
}

// ListInstallations returns every installation by key.
func (s *Store) ListInstallations(ctx context.Context) ([]store.Installation, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.check(); err != nil {
		return nil, err
	}
	res, err := s.pool.Query(ctx, `SELECT `+s.installSelect()+` FROM ackd_installations ORDER BY install_key`)
	if err != nil {
		return nil, fmt.Errorf("list installations: %w", s.classify(ctx, err))
	}
	out, err := pgx.CollectRows(res, func(r pgx.CollectableRow) (store.Installation, error) { return scanInstall(r) })
	if err != nil {
		return nil, fmt.Errorf("list installations: %w", s.classify(ctx, err))
	}
	return out, nil
}

// DeleteInstallation removes key's installation.
func (s *Store) DeleteInstallation(ctx context.Context, key string) (bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.check(); err != nil {
		return false, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM ackd_installations WHERE install_key = $1`, key)
	if err != nil {
		return false, fmt.Errorf("delete installation: %w", s.classify(ctx, err))
	}
	return tag.RowsAffected() > 0, nil
}

// UpdateInstallationSecret replaces key's secret if its version is version.
func (s *Store) UpdateInstallationSecret(ctx context.Context, key string, version int64, secret []byte) (int64, bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.check(); err != nil {
		return 0, false, err
	}
	var nv int64
	err := s.pool.QueryRow(ctx, `WITH `+clockCTE+`
		UPDATE ackd_installations SET secret = $2, version = version + 1, updated_at = clock.now, error = ''
		  FROM clock WHERE install_key = $3 AND version = $4 RETURNING version`,
		s.offset.Load(), secret, key, version).Scan(&nv)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("update installation secret: %w", s.classify(ctx, err))
	}
	return nv, true, nil
}

// SetInstallationError records (or clears) why key's tokens are unusable.
func (s *Store) SetInstallationError(ctx context.Context, key, msg string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.check(); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `WITH `+clockCTE+`
		UPDATE ackd_installations SET error = $2, updated_at = clock.now FROM clock WHERE install_key = $3`,
		s.offset.Load(), msg, key)
	if err != nil {
		return fmt.Errorf("set installation error: %w", s.classify(ctx, err))
	}
	return nil
}

// parkRows parks installation $3's pending rows with reason $2.
const parkRows = `WITH ` + clockCTE + `
		UPDATE outbox SET status = 'parked', last_error = $2, claim_token = NULL, claim_expires_at = NULL,
		       next_attempt_at = clock.now
		  FROM clock
		 WHERE status = 'pending' AND payload::jsonb -> 'facts' ->> 'install' = $3`

// ParkInstallRows parks key's pending rows with reason.
func (s *Store) ParkInstallRows(ctx context.Context, key, reason string) (int64, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.check(); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, parkRows, s.offset.Load(), reason, key)
	if err != nil {
		return 0, fmt.Errorf("park rows of installation %s: %w", key, s.classify(ctx, err))
	}
	return tag.RowsAffected(), nil
}

// WaitingRows counts pending rows waiting for an installation.
func (s *Store) WaitingRows(ctx context.Context) (int64, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.check(); err != nil {
		return 0, err
	}
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE status = 'pending' AND last_error LIKE 'not_installed%'`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count waiting rows: %w", s.classify(ctx, err))
	}
	return n, nil
}

// AcquireLease takes (or renews) the lease name for holder until now+ttl,
// on the database's clock.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.check(); err != nil {
		return false, err
	}
	tag, err := s.pool.Exec(ctx, `WITH `+clockCTE+`
		INSERT INTO ackd_leases (name, holder, expires_at) SELECT $2, $3, now + $4::bigint FROM clock
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		 WHERE ackd_leases.expires_at <= excluded.expires_at - $4::bigint OR ackd_leases.holder = excluded.holder`,
		s.offset.Load(), name, holder, ttl.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", name, s.classify(ctx, err))
	}
	return tag.RowsAffected() > 0, nil
}

// ReleaseLease ends holder's lease name.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.check(); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM ackd_leases WHERE name = $1 AND holder = $2`, name, holder); err != nil {
		return fmt.Errorf("release lease %s: %w", name, s.classify(ctx, err))
	}
	return nil
}
