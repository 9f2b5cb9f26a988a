package sqlite

import (
	"context"
	"errors"

	"github.com/ackd/ackd/store"
)

// Search: not yet implemented (issue 31, being written).
func (s *Store) Search(ctx context.Context, q string, limit int) ([]store.Row, error) {
	return nil, errors.ErrUnsupported
}
