package daemon

import (
	"time"

	"github.com/ackd/ackd/store"
)

// NewMigrationNotifier exposes migrationNotifier's step to the tests.
func NewMigrationNotifier(n *Notifier, after, extend time.Duration) func(store.MigrationStep) {
	m := &migrationNotifier{n: n, after: after, extend: extend}
	return m.step
}
