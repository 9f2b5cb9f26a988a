package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// SaveStepReply stores reply as pending row id's result while token holds
// it (see store.Store.SaveStepReply). One fenced statement in the group
// commit; held is false when the lease was lost.
func (s *Store) SaveStepReply(ctx context.Context, id int64, token, reply string) (held bool, err error) {
	err = s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, _ int64) error {
		r, err := tx.ExecContext(ctx, `UPDATE outbox SET result = ?
			 WHERE id = ? AND claim_token = ? AND status = 'pending'`, reply, id, token)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		held = err == nil && n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("save step reply of outbox row %d: %w", id, classify(err))
	}
	return held, nil
}
