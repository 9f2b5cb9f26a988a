package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

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

func scanInstall(sc scanner) (store.Installation, error) {
	var in store.Installation
	var installed, updated, slackInstalled int64
	err := sc.Scan(&in.Key, &in.TeamID, &in.EnterpriseID, &in.EnterpriseInstall, &in.AppID, &in.BotUserID, &in.BotID,
		&in.Scopes, &in.UserScopes, &in.InstallerUserID, &installed, &updated, &in.Secret, &in.Version, &in.Error, &slackInstalled)
	in.InstalledAt, in.UpdatedAt = time.UnixMilli(installed), time.UnixMilli(updated)
	if slackInstalled > 0 {
		in.SlackInstalledAt = time.UnixMilli(slackInstalled)
	}
	return in, err
}

// PutInstallation inserts or replaces in (a reinstall gets a new version).
func (s *Store) PutInstallation(ctx context.Context, in store.Installation) error {
	if in.Key == "" || len(in.Secret) == 0 {
		return errors.New("put installation: key and secret are required")
	}
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		return putInstallation(ctx, tx, in, now)
	})
	if err != nil {
		return fmt.Errorf("put installation: %w", classify(err))
	}
	return nil
}

func putInstallation(ctx context.Context, tx *sql.Tx, in store.Installation, now int64) error {
	var slackAt int64
	if !in.SlackInstalledAt.IsZero() {
		slackAt = in.SlackInstalledAt.UnixMilli()
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO ackd_installations (`+installColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, '', ?)
		ON CONFLICT (install_key) DO UPDATE SET
		  team_id = excluded.team_id, enterprise_id = excluded.enterprise_id,
		  is_enterprise_install = excluded.is_enterprise_install, app_id = excluded.app_id,
		  bot_user_id = excluded.bot_user_id, bot_id = excluded.bot_id, scopes = excluded.scopes,
		  user_scopes = excluded.user_scopes, installer_user_id = excluded.installer_user_id,
		  installed_at = excluded.installed_at, updated_at = excluded.updated_at,
		  secret = excluded.secret, version = ackd_installations.version + 1, error = '',
		  slack_installed_at = excluded.slack_installed_at`,
		in.Key, in.TeamID, in.EnterpriseID, in.EnterpriseInstall, in.AppID, in.BotUserID, in.BotID,
		in.Scopes, in.UserScopes, in.InstallerUserID, now, now, in.Secret, slackAt)
	return err
}

// PutInstallationWithState stores in and records state's use in one
// transaction, if state was not used already.
func (s *Store) PutInstallationWithState(ctx context.Context, in store.Installation, state string, ttl time.Duration) (bool, error) {
	if in.Key == "" || len(in.Secret) == 0 || state == "" {
		return false, errors.New("put installation: key, secret and state are required")
	}
	var first bool
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		first = false
		if _, err := tx.ExecContext(ctx, `DELETE FROM ackd_oauth_states WHERE expires_at <= ?`, now); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO ackd_oauth_states (state_hash, expires_at) VALUES (?, ?)
			ON CONFLICT (state_hash) DO NOTHING`, state, now+ttl.Milliseconds())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n != 1 {
			return err // used already: nothing more is written
		}
		first = true
		return putInstallation(ctx, tx, in, now)
	})
	if err != nil {
		return false, fmt.Errorf("put installation: %w", classify(err))
	}
	return first, nil
}

// OAuthStateUsed reports whether state's use is recorded and unexpired.
func (s *Store) OAuthStateUsed(ctx context.Context, state string) (bool, error) {
	var used bool
	err := s.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM ackd_oauth_states WHERE state_hash = ? AND expires_at > ?)`,
		state, ms(s.opts.Now())).Scan(&used)
	if err != nil {
		return false, fmt.Errorf("read oauth state: %w", classify(err))
	}
	return used, nil
}

// GetInstallation returns key's installation, or ErrNoInstallation.
func (s *Store) GetInstallation(ctx context.Context, key string) (store.Installation, error) {
	in, err := scanInstall(s.r.QueryRowContext(ctx, `SELECT `+s.installSelect()+` FROM ackd_installations WHERE install_key = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Installation{}, fmt.Errorf("installation %s: %w", key, store.ErrNoInstallation)
	}
	if err != nil {
		return store.Installation{}, fmt.Errorf("get installation: %w", classify(err))
	}
	return in, nil
}

// ListInstallations returns every installation by key.
func (s *Store) ListInstallations(ctx context.Context) ([]store.Installation, error) {
	res, err := s.r.QueryContext(ctx, `SELECT `+s.installSelect()+` FROM ackd_installations ORDER BY install_key`)
	if err != nil {
		return nil, fmt.Errorf("list installations: %w", classify(err))
	}
	defer res.Close()
	var out []store.Installation
	for res.Next() {
		in, err := scanInstall(res)
		if err != nil {
			return nil, fmt.Errorf("list installations: %w", err)
		}
		out = append(out, in)
	}
	return out, res.Err()
}

// DeleteInstallation removes key's installation.
func (s *Store) DeleteInstallation(ctx context.Context, key string) (bool, error) {
	var n int64
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, _ int64) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM ackd_installations WHERE install_key = ?`, key)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("delete installation: %w", classify(err))
	}
	return n > 0, nil
}

// UpdateInstallationSecret replaces key's secret if its version is version.
func (s *Store) UpdateInstallationSecret(ctx context.Context, key string, version int64, secret []byte) (int64, bool, error) {
	var nv int64
	var ok bool
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		err := tx.QueryRowContext(ctx, `UPDATE ackd_installations
			   SET secret = ?, version = version + 1, updated_at = ?, error = ''
			 WHERE install_key = ? AND version = ? RETURNING version`, secret, now, key, version).Scan(&nv)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		ok = err == nil
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("update installation secret: %w", classify(err))
	}
	return nv, ok, nil
}

// SetInstallationError records (or clears) why key's tokens are unusable.
func (s *Store) SetInstallationError(ctx context.Context, key, msg string) error {
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		_, err := tx.ExecContext(ctx, `UPDATE ackd_installations SET error = ?, updated_at = ? WHERE install_key = ?`, msg, now, key)
		return err
	})
	if err != nil {
		return fmt.Errorf("set installation error: %w", classify(err))
	}
	return nil
}

// ParkInstallRows parks key's pending rows with reason.
func (s *Store) ParkInstallRows(ctx context.Context, key, reason string) (int64, error) {
	var n int64
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		var err error
		n, err = parkInstallRows(ctx, tx, key, reason, now)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("park rows of installation %s: %w", key, classify(err))
	}
	return n, nil
}

func parkInstallRows(ctx context.Context, tx *sql.Tx, key, reason string, now int64) (int64, error) {
	res, err := tx.ExecContext(ctx, `UPDATE outbox
		   SET status = 'parked', last_error = ?, claim_token = NULL, claim_expires_at = NULL, next_attempt_at = ?
		 WHERE status = 'pending' AND json_valid(payload) AND payload ->> '$.facts.install' = ?`, reason, now, key)
	if err != nil {
		return 0, fmt.Errorf("park rows of installation %s: %w", key, err)
	}
	return res.RowsAffected()
}

// WaitingRows counts pending rows waiting for an installation.
func (s *Store) WaitingRows(ctx context.Context) (int64, error) {
	var n int64
	err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE status = 'pending' AND last_error LIKE 'not_installed%'`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count waiting rows: %w", classify(err))
	}
	return n, nil
}

// AcquireLease takes (or renews) the lease name for holder until now+ttl.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	var ok bool
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO ackd_leases (name, holder, expires_at) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
			 WHERE ackd_leases.expires_at <= ? OR ackd_leases.holder = excluded.holder`,
			name, holder, now+ttl.Milliseconds(), now)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		ok = n > 0
		return err
	})
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", name, classify(err))
	}
	return ok, nil
}

// ReleaseLease ends holder's lease name.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, _ int64) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM ackd_leases WHERE name = ? AND holder = ?`, name, holder)
		return err
	})
	if err != nil {
		return fmt.Errorf("release lease %s: %w", name, classify(err))
	}
	return nil
}
