package postgres

import (
	"context"
	"errors"

	"github.com/ackd/ackd/store"
)

// Attempts: not yet implemented (issue 31, being written).
func (s *Store) Attempts(ctx context.Context, id int64) ([]store.Attempt, error) {
	return nil, errors.ErrUnsupported
}
