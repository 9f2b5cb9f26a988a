package store

import "time"

// Status values of an outbox row.
const (
	StatusPending = "pending"
	StatusDone    = "done"
	StatusParked  = "parked"
)

// Row is one outbox row as the sweep and the operator commands see it.
type Row struct {
	ID             int64
	Key            string // idempotency_key
	Effect         string
	Payload        string // JSON; carries everything needed to perform the effect
	Status         string
	Attempts       int
	ClaimToken     string
	ClaimExpiresAt time.Time // zero when not claimed
	NextAttemptAt  time.Time
	LastError      string
	Result         string
	CreatedAt      time.Time
	CompletedAt    time.Time // zero until done
}

// NewRow is an outbox row to enqueue. Enqueueing is idempotent by Key.
type NewRow struct {
	Key     string
	Effect  string
	Payload string // must be valid JSON (the schema checks it)
}

// Intent is what an accepted Slack request commits before it is acked: one
// receipt keyed by EventID (an event_id, or an operation id for commands and
// interactions) and the outbox rows it implies.
type Intent struct {
	EventID   string
	EventType string
	Rows      []NewRow
}
