package postgres

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/store"
)

// syncBuf is a log sink safe for concurrent writers.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestMigrationGivesWayToHeldLocks: a migration whose ALTER TABLE waits
// behind a transaction that holds outbox rows (a claim on a connection
// that went silent) gives up its lock request every migrateLockTimeout, so
// the intents queued behind that request keep committing within the ack
// budget; it applies once the rows are free.
func TestMigrationGivesWayToHeldLocks(t *testing.T) {
	u := pgtest.URL(t)
	var logs syncBuf
	s, err := Open(context.Background(), u, store.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in := func(id string) store.Intent {
		return store.Intent{EventID: id, EventType: "app_mention",
			Rows: []store.NewRow{{Key: id + ":r", Effect: "log", Payload: `{}`}}}
	}
	if _, err := s.RecordIntent(context.Background(), in("EvHeld")); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	holder, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT id FROM outbox FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	done := make(chan error, 1)
	go func() {
		_, err := s.migrateOne(ctx, conn, store.Migration{Version: 1000, SQL: `ALTER TABLE outbox ADD COLUMN probe int`})
		done <- err
	}()
	waitLog := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "migration waits for a table lock") {
		if time.Now().After(waitLog) {
			t.Fatalf("the migration never gave way; log:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 5 {
		ictx, icancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := s.RecordIntent(ictx, in("EvQueued"+string(rune('A'+i))))
		icancel()
		if err != nil {
			t.Fatalf("an intent behind the waiting migration: %v", err)
		}
	}
	tx.Rollback(context.Background())
	if err := <-done; err != nil {
		t.Fatalf("the migration after the rows were freed: %v", err)
	}
	if n := pgtest.Count(t, u, `SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'outbox' AND column_name = 'probe'`); n != 1 {
		t.Fatal("the migration was not applied")
	}
}
