package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/sqlite"
)

func TestBackup(t *testing.T) {
	ctx := context.Background()
	t.Run("the copy is private, checked, and holds every committed intent while writes go on", func(t *testing.T) {
		dir := t.TempDir()
		src := filepath.Join(dir, "ackd.db")
		s := mustOpen(t, src, store.Options{})
		for i := range 50 {
			mustRecordIntent(t, s, fmt.Sprintf("Ev%d", i))
		}
		// Intents keep committing while the backup runs; the ones acked
		// before it began must all be in the copy.
		var acked atomic.Int64
		acked.Store(50)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 50; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.RecordIntent(ctx, store.Intent{EventID: fmt.Sprintf("Ev%d", i), EventType: "app_mention",
					Rows: []store.NewRow{{Key: fmt.Sprintf("Ev%d:r", i), Effect: "log", Payload: "{}"}}}); err != nil {
					t.Error(err)
					return
				}
				acked.Store(int64(i + 1))
			}
		}()
		before := acked.Load()
		dst := filepath.Join(dir, "backups", "ackd-1.db")
		if err := os.Mkdir(filepath.Dir(dst), 0o700); err != nil {
			t.Fatal(err)
		}
		info, err := sqlite.Backup(ctx, src, dst, false)
		close(stop)
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(dst)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 || info.Bytes != st.Size() || info.Path != dst {
			t.Fatalf("backup %+v, file mode %v size %d: want 0600 and the size reported", info, st.Mode().Perm(), st.Size())
		}
		if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), ".*")); len(leftovers) > 0 {
			t.Fatalf("temporary files left beside the backup: %v", leftovers)
		}
		b := mustOpen(t, dst, store.Options{ReadOnly: true})
		ids := make([]string, before)
		for i := range ids {
			ids[i] = fmt.Sprintf("Ev%d", i)
		}
		check, err := b.CheckEvents(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		if check.Receipts != len(ids) || check.WithRows != len(ids) {
			t.Fatalf("the backup lacks intents acked before it began: %+v", check)
		}
		if v, _ := b.SchemaVersion(ctx); v != info.SchemaVersion || v < 1 {
			t.Fatalf("backup schema %d, reported %d", v, info.SchemaVersion)
		}
	})

	t.Run("an existing file is refused unless forced, and left as it was", func(t *testing.T) {
		dir := t.TempDir()
		src := filepath.Join(dir, "ackd.db")
		s := mustOpen(t, src, store.Options{})
		mustRecordIntent(t, s, "Ev1")
		dst := filepath.Join(dir, "backup.db")
		if err := os.WriteFile(dst, []byte("precious"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := sqlite.Backup(ctx, src, dst, false)
		if err == nil || !strings.Contains(err.Error(), "--force") {
			t.Fatalf("backup onto an existing file: %v, want a refusal naming --force", err)
		}
		if b, _ := os.ReadFile(dst); string(b) != "precious" {
			t.Fatalf("the existing file was changed: %q", b)
		}
		if _, err := sqlite.Backup(ctx, src, dst, true); err != nil {
			t.Fatal(err)
		}
		b := mustOpen(t, dst, store.Options{ReadOnly: true})
		if ok, err := b.HasReceipt(ctx, "Ev1"); err != nil || !ok {
			t.Fatalf("forced backup: receipt %v, %v", ok, err)
		}
		if _, err := sqlite.Backup(ctx, src, src, true); err == nil {
			t.Fatal("a backup onto the database itself was not refused")
		}
		if leftovers, _ := filepath.Glob(filepath.Join(dir, ".*")); len(leftovers) > 0 {
			t.Fatalf("temporary files left: %v", leftovers)
		}
	})

	t.Run("a file that is not an ackd database is refused", func(t *testing.T) {
		dir := t.TempDir()
		src := filepath.Join(dir, "empty.db")
		if err := os.WriteFile(src, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := sqlite.Backup(ctx, src, filepath.Join(dir, "b.db"), false); err == nil || !strings.Contains(err.Error(), "not an ackd database") {
			t.Fatalf("backup of an empty file: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "b.db")); !os.IsNotExist(err) {
			t.Fatalf("a backup file was left: %v", err)
		}
	})
}

func mustRecordIntent(tb testing.TB, s store.Store, id string) {
	tb.Helper()
	if _, err := s.RecordIntent(context.Background(), store.Intent{EventID: id, EventType: "app_mention",
		Rows: []store.NewRow{{Key: id + ":r", Effect: "log", Payload: "{}"}}}); err != nil {
		tb.Fatal(err)
	}
}
