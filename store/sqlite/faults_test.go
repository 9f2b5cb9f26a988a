package sqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/diskfull"
	"github.com/ackd/ackd/internal/testreq"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/sqlite"
)

// Storage faults: whatever the disk does, an intent told "recorded" is on
// disk with all its rows, and one told "not recorded" left nothing.

// outcome is what one RecordIntent call was told.
type outcome struct {
	id  string
	err error
}

// faultIntent is an intent of about 8 KB: two routes with ~4 KB payloads,
// the size of a long Slack message forwarded whole.
func faultIntent(rng *rand.Rand, id string) store.Intent {
	in := store.Intent{EventID: id, EventType: "message"}
	for _, route := range []string{"forward", "eyes"} {
		pad := make([]byte, 4000)
		for i := range pad {
			pad[i] = 'a' + byte(rng.IntN(26))
		}
		in.Rows = append(in.Rows, store.NewRow{
			Key: id + ":" + route, Effect: "log", Payload: fmt.Sprintf(`{"route":%q,"text":%q}`, route, pad),
		})
	}
	return in
}

// burst records n intents at once, ids prefix-0…, and returns what each
// caller was told. If hold is not nil, it holds the write lock while the
// intents queue up, so that they arrive in full group commits (large
// transactions, which SQLite spills to the WAL before the commit) as they
// do behind a slow disk.
func burst(s store.Store, hold *sql.Conn, seed uint64, prefix string, n int) ([]outcome, error) {
	if hold != nil {
		if _, err := hold.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
			return nil, err
		}
	}
	out := make([]outcome, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("%s-%04d", prefix, i)
			in := faultIntent(rand.New(rand.NewPCG(seed, uint64(i))), id)
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			first, err := s.RecordIntent(ctx, in)
			if err == nil && !first {
				err = fmt.Errorf("a fresh id was told duplicate")
			}
			out[i] = outcome{id, err}
		}()
	}
	close(start)
	var err error
	if hold != nil {
		time.Sleep(300 * time.Millisecond) // lets them queue; the assertions do not depend on it
		_, err = hold.ExecContext(context.Background(), "ROLLBACK")
	}
	wg.Wait()
	return out, err
}

// checkTruth compares what each caller was told with the file: "recorded"
// means the receipt and both rows are there, "not recorded" means none of
// them is. It returns how many were recorded.
func checkTruth(tb testing.TB, db *sql.DB, prefix string, outs []outcome) (recorded int) {
	tb.Helper()
	receipts := keys(tb, db, `SELECT event_id FROM slack_event_receipts WHERE event_id LIKE ? || '-%'`, prefix)
	rows := keys(tb, db, `SELECT idempotency_key FROM outbox WHERE idempotency_key LIKE ? || '-%'`, prefix)
	lies := 0
	for _, o := range outs {
		have := 0
		if receipts[o.id] {
			have++
		}
		for _, route := range []string{"forward", "eyes"} {
			if rows[o.id+":"+route] {
				have++
			}
		}
		switch {
		case o.err == nil && have != 3:
			lies++
			if lies <= 5 {
				tb.Errorf("%s was told recorded but the file has %d of its 3 rows", o.id, have)
			}
		case o.err != nil && have != 0:
			lies++
			if lies <= 5 {
				tb.Errorf("%s was told not recorded (%v) but the file has %d of its 3 rows", o.id, o.err, have)
			}
		case o.err == nil:
			recorded++
		}
	}
	if lies > 5 {
		tb.Errorf("… %d callers of %d told something the file contradicts", lies, len(outs))
	}
	return recorded
}

func keys(tb testing.TB, db *sql.DB, q string, args ...any) map[string]bool {
	tb.Helper()
	res, err := db.Query(q, args...)
	if err != nil {
		tb.Fatalf("%s: %v", q, err)
	}
	defer res.Close()
	m := map[string]bool{}
	for res.Next() {
		var k string
		if err := res.Scan(&k); err != nil {
			tb.Fatal(err)
		}
		m[k] = true
	}
	if err := res.Err(); err != nil {
		tb.Fatal(err)
	}
	return m
}

func mustIntegrity(tb testing.TB, db *sql.DB) {
	tb.Helper()
	var v string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&v); err != nil {
		tb.Fatalf("integrity_check: %v", err)
	}
	if v != "ok" {
		tb.Fatalf("integrity_check: %s", v)
	}
}

func TestFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a filesystem")
	}
	t.Run("bursts across the full boundary: every caller told the truth, and ackd records again once space is back", func(t *testing.T) {
		dir := diskfull.Mount(t, 160<<20)
		path := filepath.Join(dir, "ackd.db")
		s := mustOpen(t, path, store.Options{})
		db := rawDB(t, path)
		mustIntegrity(t, db) // the reader's connection exists before the disk is full
		hold, err := rawDB(t, path).Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer hold.Close()
		filler := diskfull.Fill(t, dir, 64<<10)
		filler.Free(t, 8)
		rng := rand.New(rand.NewPCG(11, 11))

		// How much of a burst a freed gap takes depends on what the WAL
		// file already holds (it is reused, not regrown, after a
		// checkpoint), so the loop goes on until enough bursts crossed the
		// boundary part way, and a burst that fit whole makes the next one
		// larger.
		const minBursts, maxBursts, maxSize = 12, 40, 600
		size := 300
		bursts, full, mixed, recorded := 0, 0, 0, 0
		for b := 0; b < maxBursts && (b < minBursts || full < minBursts/3 || mixed < minBursts/6); b++ {
			bursts++
			prefix := fmt.Sprintf("EvFull%02d", b)
			h := hold // every other burst in one or two large transactions
			if b%2 == 1 {
				h = nil
			}
			outs, err := burst(s, h, uint64(b), prefix, size)
			if err != nil {
				t.Fatal(err)
			}
			n := checkTruth(t, db, prefix, outs)
			if n < size {
				full++
				if n > 0 {
					mixed++
				}
			} else {
				size = min(2*size, maxSize)
			}
			recorded += n
			mustIntegrity(t, db)

			// Space is back (8 MiB more than the -wal file, which SQLite
			// must be able to checkpoint): the next intent commits.
			filler.FreeForWAL(t, path)
			probe := prefix + "-probe"
			if _, err := s.RecordIntent(context.Background(), faultIntent(rand.New(rand.NewPCG(1, 1)), probe)); err != nil {
				t.Fatalf("burst %d: space freed, but a new intent still fails: %v", b, err)
			}
			if n := checkTruth(t, db, prefix, []outcome{{id: probe}}); n != 1 {
				t.Fatalf("burst %d: the probe intent is not on disk", b)
			}
			// Then only a little room for the next burst, between 128 KiB
			// and 1.5 MiB: some bursts fit whole, most fill the disk part way.
			filler.Top(t)
			filler.Free(t, 2+rng.IntN(22))
			if t.Failed() {
				t.Fatalf("burst %d: stopping", b)
			}
		}
		t.Logf("%d bursts: %d filled the disk (%d of them part way), %d recorded", bursts, full, mixed, recorded)
		if full < minBursts/3 || mixed < minBursts/6 || recorded == 0 {
			t.Fatal("too few bursts filled the disk part way: the test is not testing the full boundary")
		}
	})
}

// TestInjectedEIO runs bursts in a child process under strace, which makes
// every so many pwrite64 (or fsync) calls fail with EIO for a while and then
// lets the device work again.
//
// A failed fsync is the case a "no false 200" rule has to get right: the
// frames of that commit were written, so SQLite must not count them as
// committed (it does not: the commit returns SQLITE_IOERR_FSYNC before the
// WAL index learns of them, and the next commit overwrites them), and ackd
// must answer every caller of that batch "not recorded". The checkpointer's
// fsyncs of the database file fail too, so a checkpoint that could not make
// its copy durable must leave the frames in the WAL.
func TestInjectedEIO(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child under strace")
	}
	strace, err := exec.LookPath("strace")
	testreq.Need(t, err == nil, "strace is not installed (apt-get install strace; .ci/with-strace.sh does it in CI)")
	for _, c := range []struct{ name, syscall, when string }{
		// In each thread, every 31st pwrite64 from the 10th to the 400th fails.
		{"EIO on writes", "pwrite64", "10..400+31"},
		// In each thread, every 5th fsync from the 3rd to the 300th fails.
		{"EIO on fsync", "fsync", "3..300+5"},
	} {
		t.Run(c.name+": every caller told the truth, and ackd records again once the device works", func(t *testing.T) {
			injectedEIO(t, strace, c.syscall, c.when)
		})
	}
}

func injectedEIO(t *testing.T, strace, syscall, when string) {
	path := filepath.Join(t.TempDir(), "ackd.db")
	mustOpen(t, path, store.Options{}).Close()
	schemaPath, _ := filepath.Abs("../../schema.sql")
	cmd := exec.Command(strace, "-f", "-qq", "-o", "/dev/null",
		"-e", "trace="+syscall, "-e", "inject="+syscall+":error=EIO:when="+when,
		os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ACKD_STORE_CHILD=eio", "ACKD_DB="+path, "ACKD_SCHEMA="+schemaPath)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	byBurst := map[string][]outcome{}
	var order []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		// "<id> ok" or "<id> fail <error>"
		id, rest, _ := strings.Cut(sc.Text(), " ")
		prefix, _, _ := strings.Cut(id, "-")
		o := outcome{id: id}
		if rest != "ok" {
			o.err = fmt.Errorf("%s", strings.TrimPrefix(rest, "fail "))
		}
		if _, ok := byBurst[prefix]; !ok {
			order = append(order, prefix)
		}
		byBurst[prefix] = append(byBurst[prefix], o)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	db := rawDB(t, path)
	mustIntegrity(t, db)
	failed, mixed, recoveredAt := 0, 0, -1
	for i, prefix := range order {
		outs := byBurst[prefix]
		n := checkTruth(t, db, prefix, outs)
		if n > 0 && n < len(outs) {
			mixed++
		}
		if n < len(outs) {
			failed += len(outs) - n
			recoveredAt = -1
		} else if failed > 0 && recoveredAt < 0 {
			recoveredAt = i
		}
	}
	t.Logf("%d bursts (%d partly recorded), %d intents refused, recovered at burst %d", len(order), mixed, failed, recoveredAt)
	if failed == 0 {
		t.Fatal("no intent failed: strace injected nothing")
	}
	if recoveredAt < 0 {
		t.Fatal("after the injected errors stopped, the process never recorded a whole burst again")
	}
}

// eioChild runs in the test binary re-executed under strace: bursts until one
// burst after a failure records every intent (the injection has ended), or
// a bound is reached. It prints every caller's outcome.
func eioChild() int {
	sch, err := os.ReadFile(os.Getenv("ACKD_SCHEMA"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s, err := sqlite.Open(context.Background(), os.Getenv("ACKD_DB"), store.Options{Schema: string(sch)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// The store is never closed: the child exits as if it crashed after its
	// last answer, so the parent's open recovers the database from the WAL
	// file as the device left it, frames of the failed commits included.
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	sawFailure := false
	for b := range 200 {
		outs, err := burst(s, nil, uint64(b), fmt.Sprintf("EvEIO%02d", b), 200)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		clean := true
		for _, o := range outs {
			if o.err != nil {
				fmt.Fprintf(w, "%s fail %s\n", o.id, strings.ReplaceAll(o.err.Error(), "\n", " "))
				clean, sawFailure = false, true
			} else {
				fmt.Fprintf(w, "%s ok\n", o.id)
			}
		}
		if clean && sawFailure {
			return 0
		}
	}
	return 0
}
