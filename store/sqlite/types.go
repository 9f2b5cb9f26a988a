package sqlite

import "github.com/ackd/ackd/store"

// The contract's types, spelled without the package name in this engine.
type (
	Row         = store.Row
	NewRow      = store.NewRow
	Intent      = store.Intent
	Completion  = store.Completion
	FailKind    = store.FailKind
	FailResult  = store.FailResult
	PruneResult = store.PruneResult
	Queue       = store.Queue
	Stats       = store.Stats
	EventCheck  = store.EventCheck
	Instance    = store.Instance
)

const (
	StatusPending   = store.StatusPending
	StatusDone      = store.StatusDone
	StatusParked    = store.StatusParked
	StatusDiscarded = store.StatusDiscarded

	FailRetryable   = store.FailRetryable
	FailPermanent   = store.FailPermanent
	FailRateLimited = store.FailRateLimited
	FailUnknown     = store.FailUnknown
)

var (
	ErrNotFound = store.ErrNotFound
	ErrClosed   = store.ErrClosed
)

var _ store.Store = (*Store)(nil)
