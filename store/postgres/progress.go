package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/ackd/ackd/store"
)

// SaveProgress stores progress on row id if token still holds it, fenced
// like Complete. held is false when the lease was lost; then nothing is
// written.
func (s *Store) SaveProgress(ctx context.Context, id int64, token, progress string) (held bool, err error) {
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx,
			`UPDATE outbox SET progress = $1 WHERE id = $2 AND claim_token = $3 AND status = 'pending'`,
			progress, id, token)
		held = err == nil && tag.RowsAffected() == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("save progress of outbox row %d: %w", id, err)
	}
	return held, nil
}

// Progress returns row id's saved progress ("" when none).
func (s *Store) Progress(ctx context.Context, id int64) (string, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.check(); err != nil {
		return "", err
	}
	var p *string
	err := s.pool.QueryRow(ctx, `SELECT progress FROM outbox WHERE id = $1`, id).Scan(&p)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("outbox row %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("read progress of outbox row %d: %w", id, s.classify(ctx, err))
	}
	if p == nil {
		return "", nil
	}
	return *p, nil
}
