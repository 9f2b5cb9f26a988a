package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/sqlite"
	"github.com/ackd/ackd/store/storetest"
)

// TestContract runs the store contract suite on SQLite files in t.TempDir().
// Time is the stores' Options.Now: one settable clock per database.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.DB {
		return &contractDB{path: filepath.Join(t.TempDir(), "ackd.db"), clock: newClock()}
	})
}

type contractDB struct {
	path  string
	clock *clock
}

func (d *contractDB) Open(t *testing.T, opts store.Options) store.Store {
	opts.Now = d.clock.Now
	return mustOpen(t, d.path, opts)
}

func (d *contractDB) TryOpen(t *testing.T, opts store.Options) (store.Store, error) {
	opts.Now = d.clock.Now
	opts.Schema = schema(t)
	s, err := sqlite.Open(context.Background(), d.path, opts)
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

func (d *contractDB) SetSchemaVersion(t *testing.T, v int) {
	if _, err := rawDB(t, d.path).Exec(fmt.Sprintf("PRAGMA user_version = %d", v)); err != nil {
		t.Fatal(err)
	}
}

func (d *contractDB) Now(*testing.T) time.Time { return d.clock.Now() }

func (d *contractDB) Advance(dur time.Duration) { d.clock.Advance(dur) }

func (d *contractDB) StoredRequests(t *testing.T) []string {
	res, err := rawDB(t, d.path).Query(`SELECT event_id FROM slack_requests ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	var ids []string
	for res.Next() {
		var id string
		if err := res.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}
