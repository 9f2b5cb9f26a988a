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
	"time"

	"github.com/ackd/ackd/internal/testreq"
	"github.com/ackd/ackd/store"
)

// Checkpoints run off the writer (checkpoint.go), and a WAL under writes
// that never pause must still start over: the background checkpoint alone
// never catches up with a writer that keeps appending, so without the
// committer's own catch-up the -wal file would grow with every intent.
// 64 callers keep the writer busy without a gap while 12,000 intents (two
// rows each, random ids) go in; the -wal file must stay within a few times
// SQLite's 1000-page restart point, and the database file must have taken
// the checkpointed pages.
func TestWALStaysBoundedUnderConstantWrites(t *testing.T) {
	testreq.Short(t, "writes 12,000 intents")
	path := filepath.Join(t.TempDir(), "ackd.db")
	s := mustOpen(t, path, store.Options{})
	const callers, intents = 64, 12000
	payload := `{"route":"r","source":"event","facts":{"text":"` + strings.Repeat("x", 300) + `"}}`
	var n atomic.Int64
	var wg sync.WaitGroup
	var maxWAL atomic.Int64
	for range callers {
		wg.Go(func() {
			for {
				i := n.Add(1)
				if i > intents {
					return
				}
				id := randomID(i)
				_, err := s.RecordIntent(context.Background(), store.Intent{EventID: id, EventType: "message",
					Rows: []store.NewRow{{Key: id + ":a", Effect: "log", Payload: payload}, {Key: id + ":b", Effect: "log", Payload: payload}}})
				if err != nil {
					t.Error(err)
					return
				}
				if i%500 == 0 {
					if st, err := os.Stat(path + "-wal"); err == nil {
						for {
							cur := maxWAL.Load()
							if st.Size() <= cur || maxWAL.CompareAndSwap(cur, st.Size()) {
								break
							}
						}
					}
				}
			}
		})
	}
	wg.Wait()
	st, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	walMax := max(maxWAL.Load(), st.Size())
	db, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// 12,000 intents dirty well over 20,000 pages (80 MB of frames); a WAL
	// that starts over stays near 1000 pages plus what one background
	// checkpoint lets accumulate.
	const bound = 24 << 20
	t.Logf("-wal file at most %d bytes, database file %d bytes", walMax, db.Size())
	if walMax > bound {
		t.Errorf("-wal file grew to %d bytes under constant writes (bound %d): the WAL never started over", walMax, bound)
	}
	if db.Size() < 1<<20 {
		t.Errorf("database file is %d bytes after %d intents: nothing was checkpointed into it", db.Size(), intents)
	}
	var receipts int
	if err := rawDB(t, path).QueryRow(`SELECT count(*) FROM slack_event_receipts`).Scan(&receipts); err != nil {
		t.Fatal(err)
	}
	if receipts != intents {
		t.Errorf("%d receipts, want %d", receipts, intents)
	}
}

// A small group commit waits up to CommitDelay for more ops: two acks sent
// 20 ms apart share one commit with a long delay, and take two without one.
func TestCommitDelayGathersNearbyAcks(t *testing.T) {
	for _, tc := range []struct {
		delay time.Duration
		want  int64
	}{{300 * time.Millisecond, 1}, {0, 2}} {
		t.Run(fmt.Sprint("delay ", tc.delay), func(t *testing.T) {
			s := mustOpen(t, filepath.Join(t.TempDir(), "ackd.db"), store.Options{CommitDelay: tc.delay})
			mustRecord(t, s, intent("Ev0", "r")) // migrations and the first commit are behind us
			before := s.Commits()
			var wg sync.WaitGroup
			for i, id := range []string{"EvA", "EvB"} {
				if i > 0 {
					time.Sleep(20 * time.Millisecond)
				}
				wg.Go(func() {
					if !mustRecord(t, s, intent(id, "r")) {
						t.Errorf("%s: not first", id)
					}
				})
			}
			wg.Wait()
			if got := s.Commits() - before; got != tc.want {
				t.Errorf("the two acks took %d group commits, want %d", got, tc.want)
			}
		})
	}
}
