package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// SaveProgress stores progress on row id if token still holds it: one
// UPDATE fenced like Complete, in the next group commit. held is false when
// the lease was lost (another token holds the row, or it is no longer
// pending); then nothing is written.
func (s *Store) SaveProgress(ctx context.Context, id int64, token, progress string) (held bool, err error) {
	err = s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, _ int64) error {
		r, err := tx.ExecContext(ctx,
			`UPDATE outbox SET progress = ? WHERE id = ? AND claim_token = ? AND status = 'pending'`,
			progress, id, token)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		held = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("save progress of outbox row %d: %w", id, classify(err))
	}
	return held, nil
}

// Progress returns row id's saved progress ("" when none), read on the
// read pool: the row's holder wrote it and committed before it asks.
func (s *Store) Progress(ctx context.Context, id int64) (string, error) {
	var p sql.NullString
	err := s.r.QueryRowContext(ctx, `SELECT progress FROM outbox WHERE id = ?`, id).Scan(&p)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("outbox row %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("read progress of outbox row %d: %w", id, err)
	}
	return p.String, nil
}
