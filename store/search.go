package store

import "context"

// Browser is what the operator console reads beyond the rest of the
// contract: search, and a row's receipt.
type Browser interface {
	// Search returns up to limit rows (newest first) that q names: a row
	// id, an idempotency key, an event_id or operation/trigger id, a
	// channel id, a message ts, or a route name.
	Search(ctx context.Context, q string, limit int) ([]Row, error)
}
