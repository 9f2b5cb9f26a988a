package sqlite

import (
	"context"
	"errors"

	"github.com/ackd/ackd/store"
)

// Route pauses and replay: not yet implemented (issue 31, being written).

func (s *Store) PauseRoute(ctx context.Context, route, by string) (bool, error) {
	return false, errors.ErrUnsupported
}

func (s *Store) ResumeRoute(ctx context.Context, route string) (bool, error) {
	return false, errors.ErrUnsupported
}

func (s *Store) PausedRoutes(ctx context.Context) ([]store.RoutePause, error) {
	return nil, errors.ErrUnsupported
}

func (s *Store) ReplayMatching(ctx context.Context, f store.ReplayFilter, limit int) ([]store.Row, int64, error) {
	return nil, 0, errors.ErrUnsupported
}

func (s *Store) Replay(ctx context.Context, f store.ReplayFilter) ([]store.Replayed, error) {
	return nil, errors.ErrUnsupported
}
