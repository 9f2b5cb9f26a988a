package e2e

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Issue 25.9: a backup taken with `ackd backup` while the real daemon acks a
// steady load of signed events, restored the way docs/howto/backups-and-upgrades.md says (daemon
// stopped, the old file and its WAL moved away, the backup put in its
// place), holds every intent acked before the backup began, passes
// integrity_check, is 0600, and the daemon starts on it.
func TestBackupUnderLoadRestores(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real daemon under load")
	}
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	addr := freeAddr(t, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 25)))
	cfg := filepath.Join(dir, "ackd.toml")
	writeLogConfig(t, cfg, addr, db)
	r := newRig(t, ackdBin, dir, cfg, addr, map[string]string{"SLACK_SIGNING_SECRET": signingSecret})
	if err := r.start(); err != nil {
		t.Fatal(err)
	}

	// The load: signed app_mentions from four clients, each id recorded
	// once its 200 arrived.
	var (
		mu    sync.Mutex
		acked []string
		n     atomic.Int64
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	ackedCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: 5 * time.Second}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("EvB%d-%d", c, i)
				n.Add(1)
				if code, _ := postSignedMention(client, addr, id); code == http.StatusOK {
					mu.Lock()
					acked = append(acked, id)
					mu.Unlock()
				}
			}
		}()
	}
	stopLoad := func() { close(stop); wg.Wait() }
	waitUntil(t, "300 acks before the backup", 60*time.Second, func() bool { return ackedCount() >= 300 })

	// Every id in ackedBefore had its 200 before the backup process started.
	mu.Lock()
	ackedBefore := append([]string(nil), acked...)
	mu.Unlock()
	backup := filepath.Join(dir, "backups", "ackd-1.db")
	if err := os.Mkdir(filepath.Dir(backup), 0o700); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runAckd(t, ackdBin, []string{"ACKD_CONFIG=" + cfg}, "backup", backup)
	during := ackedCount() - len(ackedBefore)
	if err != nil {
		stopLoad()
		t.Fatalf("ackd backup under load: %v\n%s%s", err, out, errOut)
	}
	waitUntil(t, "acks after the backup", 60*time.Second, func() bool { return ackedCount() >= len(ackedBefore)+during+100 })
	stopLoad()
	t.Logf("%s; %d acked before it began, %d while it ran, %d in all (%d sent)",
		strings.TrimSpace(out), len(ackedBefore), during, ackedCount(), n.Load())
	st, err := os.Stat(backup)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("backup mode %v, want 0600", st.Mode().Perm())
	}

	// The restore, as docs/howto/backups-and-upgrades.md shows it.
	if err := r.stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Rename(db+suffix, db+suffix+".before-restore"); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.start(); err != nil {
		t.Fatalf("the daemon does not start on the restored file: %v", err)
	}
	if err := r.stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}

	h, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if problems := integrityCheck(t, h); len(problems) != 1 || problems[0] != "ok" {
		t.Fatalf("integrity_check of the restored file: %v", problems)
	}
	var missing []string
	for _, id := range ackedBefore {
		var receipts, rows int
		if err := h.QueryRow(`SELECT (SELECT count(*) FROM slack_event_receipts WHERE event_id = ?),
			(SELECT count(*) FROM outbox WHERE idempotency_key = ?)`, id, id+":log").Scan(&receipts, &rows); err != nil {
			t.Fatal(err)
		}
		if receipts != 1 || rows != 1 {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d intents acked before the backup began are not in the restored file, e.g. %v",
			len(missing), len(ackedBefore), missing[:min(5, len(missing))])
	}
}
