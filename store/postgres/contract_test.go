package postgres_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
	"github.com/ackd/ackd/store/storetest"
)

// TestContract runs the store contract suite on the test server, each test
// in its own schema. Time is the database's clock plus an offset the suite
// moves (Store.SetClockOffset) on every store of the database.
func TestContract(t *testing.T) {
	pgtest.Need(t)
	storetest.Run(t, func(t *testing.T) storetest.DB {
		return &contractDB{url: pgtest.URL(t)}
	})
}

type contractDB struct {
	url    string
	mu     sync.Mutex
	stores []*postgres.Store
	offset atomic.Int64
}

func mustOpen(tb testing.TB, url string, opts store.Options) *postgres.Store {
	tb.Helper()
	s, err := postgres.Open(context.Background(), url, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return s
}

func (d *contractDB) Open(t *testing.T, opts store.Options) store.Store {
	s := mustOpen(t, d.url, opts)
	d.mu.Lock()
	defer d.mu.Unlock()
	s.SetClockOffset(time.Duration(d.offset.Load()))
	d.stores = append(d.stores, s)
	return s
}

func (d *contractDB) TryOpen(t *testing.T, opts store.Options) (store.Store, error) {
	s, err := postgres.Open(context.Background(), d.url, opts)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { s.Close() })
	d.mu.Lock()
	defer d.mu.Unlock()
	s.SetClockOffset(time.Duration(d.offset.Load()))
	d.stores = append(d.stores, s)
	return s, nil
}

func (d *contractDB) SetSchemaVersion(t *testing.T, v int) {
	pgtest.Exec(t, d.url, `DELETE FROM ackd_migrations WHERE version > $1`, v)
	pgtest.Exec(t, d.url, `INSERT INTO ackd_migrations (version) SELECT g FROM generate_series(1, $1::int) g ON CONFLICT DO NOTHING`, v)
}

func (d *contractDB) Now(t *testing.T) time.Time {
	d.mu.Lock()
	s := d.stores[0]
	d.mu.Unlock()
	now, err := s.DBNow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return now
}

func (d *contractDB) StoredRequests(t *testing.T) []string {
	d.mu.Lock()
	s := d.stores[0]
	d.mu.Unlock()
	res, err := s.Pool().Query(context.Background(), `SELECT event_id FROM slack_requests ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(res, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func (d *contractDB) Advance(dur time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	off := time.Duration(d.offset.Add(int64(dur)))
	for _, s := range d.stores {
		s.SetClockOffset(off)
	}
}
