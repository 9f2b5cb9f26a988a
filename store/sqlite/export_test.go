package sqlite

import (
	"context"
	"time"
)

// The statements whose query plans the tests read.
const (
	ClaimSQL         = claimSQL
	CompleteBatchSQL = completeBatchSQL
)

// SearchSQL is the console search's statement.
var (
	SearchSQL       = searchSQL(rowColumns)
	SearchWindowSQL = searchWindowSQL(rowColumns)
)

// SetPruneSleep replaces the wait between prune slices (see prunePause).
func (s *Store) SetPruneSleep(f func(ctx context.Context, d time.Duration) error) { s.pruneSleep = f }

// Commits is how many group commits the committer has run.
func (s *Store) Commits() int64 { return s.commits.Load() }
