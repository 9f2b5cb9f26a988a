package daemon

import (
	"fmt"
	"sync"
	"time"

	"github.com/ackd/ackd/store"
)

// DefaultMigrateNotifyAfter is how long a schema migration runs at start
// before serve tells systemd it is still starting (Options.MigrateNotifyAfter).
const DefaultMigrateNotifyAfter = 2 * time.Second

// migrateExtend is how much more start time each report asks systemd for;
// a migration still running asks again every third of it.
const migrateExtend = 30 * time.Second

// migrationNotifier keeps systemd from giving up on a start that is
// migrating the database (Type=notify: no READY=1 before TimeoutStartSec=,
// 90 s by default, and the unit is killed). A migration that runs longer
// than after is reported with EXTEND_TIMEOUT_USEC (the start may take
// extend more from now) and a STATUS= line naming it, renewed every
// extend/3 until it ends. Migrations that end sooner, every one ackd has
// today (milliseconds each; see schema.sql), send nothing. Its step is
// the store's Options.OnMigrate; a nil or disabled Notifier sends nothing.
type migrationNotifier struct {
	n      *Notifier
	after  time.Duration // negative: report at once
	extend time.Duration

	stop chan struct{} // closed when the running migration ends
	wg   sync.WaitGroup
	mu   sync.Mutex
}

// step is called by the store as each migration begins and ends.
func (m *migrationNotifier) step(st store.MigrationStep) {
	if !m.n.Enabled() {
		return
	}
	if st.Done {
		m.close()
		return
	}
	report := func() {
		_ = m.n.Notify(fmt.Sprintf("EXTEND_TIMEOUT_USEC=%d\nSTATUS=migrating the database schema to version %d: %s",
			m.extend.Microseconds(), st.Version, st.Summary))
	}
	first := m.after
	if first < 0 {
		report() // before the step runs: the report never races its end
		first = m.extend / 3
	}
	stop := make(chan struct{})
	m.mu.Lock()
	m.stop = stop
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTimer(first)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				report()
				t.Reset(m.extend / 3)
			}
		}
	}()
}

// close ends the reports of the running migration, if any, and waits
// until none is being sent.
func (m *migrationNotifier) close() {
	m.mu.Lock()
	if m.stop != nil {
		close(m.stop)
		m.stop = nil
	}
	m.mu.Unlock()
	m.wg.Wait()
}
