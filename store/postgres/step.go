package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SaveStepReply stores reply as pending row id's result while token holds
// it (see store.Store.SaveStepReply). A COMMIT without an answer is
// resolved (commit.go): an error wrapping store.ErrCommitUnknown means the
// reply may or may not be stored.
func (s *Store) SaveStepReply(ctx context.Context, id int64, token, reply string) (held bool, err error) {
	err = s.inTxResolving(ctx, func(tx pgx.Tx) (string, error) {
		held = false
		var xid string
		err := tx.QueryRow(ctx, `UPDATE outbox SET result = $1
			 WHERE id = $2 AND claim_token = $3 AND status = 'pending'
			RETURNING pg_current_xact_id()::text`, reply, id, token).Scan(&xid)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", nil // lease lost: nothing written
		}
		if err != nil {
			return "", err
		}
		held = true
		return xid, nil
	})
	if err != nil {
		return false, fmt.Errorf("save step reply of outbox row %d: %w", id, err)
	}
	return held, nil
}
