package daemon_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/internal/diskfull"
)

// Over HTTP with the real server, on a filesystem that keeps filling up:
// every 200 has its receipt and both rows on disk, every 500 left nothing,
// and once space is back the next event is acked.

const fullDiskConfig = `
[sweep]
interval = "50ms"

[[route]]
name   = "forward"
event  = "message"
effect = "log"

[[route]]
name   = "eyes"
event  = "message"
effect = "log"
`

func TestFullDiskOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a filesystem")
	}
	dir := diskfull.Mount(t, 160<<20)
	cfg := configFor(t, fullDiskConfig)
	cfg.DB = filepath.Join(dir, "ackd.db")
	s := startServer(t, cfg, daemon.Options{})
	db := s.db()
	mustIntegrityOK(t, db)
	filler := diskfull.Fill(t, dir, 64<<10)
	filler.Free(t, 8)
	rng := rand.New(rand.NewPCG(11, 11))

	// Holding the write lock while a burst arrives makes the group commits
	// as large as behind a slow disk (SQLite then spills them to the WAL
	// before the commit); it is released well inside the ack budget. Every
	// other burst arrives without it, in many smaller commits.
	hold, err := s.db().Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	// The server's one writer commits back to back while the sweep works
	// off the last burst, and SQLite's busy handler is not fair: a loaded
	// 2-core machine once kept this connection waiting past 5 s. Waiting
	// longer changes nothing the test asserts.
	if _, err := hold.ExecContext(context.Background(), "PRAGMA busy_timeout = 120000"); err != nil {
		t.Fatal(err)
	}

	// How much of a burst a freed gap takes depends on what the WAL file
	// already holds (it is reused, not regrown, after a checkpoint), so the
	// loop goes on until enough bursts crossed the boundary part way, and a
	// burst that fit whole makes the next one larger.
	// An event writes its ~8 KB text twice (the facts of both rows; no row
	// holds a copy of the request any more): 400–800 of them are a few MB
	// a burst, well past the room left and the WAL the file already holds.
	const minBursts, maxBursts, maxSize = 12, 40, 800
	size := 400
	bursts, full, mixed, acked := 0, 0, 0, 0
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: maxSize}}
	for b := 0; b < maxBursts && (b < minBursts || full < minBursts/3 || mixed < minBursts/6); b++ {
		bursts++
		held := b%2 == 0
		if held {
			if _, err := hold.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
				t.Fatal(err)
			}
		}
		status := make([]int, size)
		var wg sync.WaitGroup
		for i := range size {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status[i] = postLongMessage(t, client, s.URL, fmt.Sprintf("EvHTTP%02d-%04d", b, i), uint64(b*size+i))
			}()
		}
		if held {
			time.Sleep(300 * time.Millisecond) // lets the requests queue; the assertions do not depend on it
			if _, err := hold.ExecContext(context.Background(), "ROLLBACK"); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()

		prefix := fmt.Sprintf("EvHTTP%02d", b)
		receipts := idSet(t, db, `SELECT event_id FROM slack_event_receipts WHERE event_id LIKE ? || '-%'`, prefix)
		rows := idSet(t, db, `SELECT idempotency_key FROM outbox WHERE idempotency_key LIKE ? || '-%'`, prefix)
		ok := 0
		for i, st := range status {
			id := fmt.Sprintf("%s-%04d", prefix, i)
			have := 0
			for _, there := range []bool{receipts[id], rows[id+":forward"], rows[id+":eyes"]} {
				if there {
					have++
				}
			}
			switch st {
			case http.StatusOK:
				ok++
				if have != 3 {
					t.Errorf("%s was answered 200 but the file has %d of its 3 rows", id, have)
				}
			case http.StatusInternalServerError, http.StatusRequestTimeout, http.StatusServiceUnavailable, 0:
				// 500: not durable; 408/503: a loaded machine let the body
				// budget or its read deadline refuse it; 0: refused before its
				// body was read, the answer lost. Slack retries each.
				if have != 0 {
					t.Errorf("%s was answered %d but the file has %d of its 3 rows", id, st, have)
				}
			default:
				t.Errorf("%s was answered %d", id, st)
			}
		}
		if ok < size {
			full++
			if ok > 0 {
				mixed++
			}
		} else {
			size = min(2*size, maxSize)
		}
		acked += ok
		mustIntegrityOK(t, db)

		// Space is back (8 MiB more than the -wal file, which SQLite must
		// be able to checkpoint): the next event is acked.
		filler.FreeForWAL(t, cfg.DB)
		probe := prefix + "-probe"
		if st := postLongMessage(t, client, s.URL, probe, 1); st != http.StatusOK {
			t.Fatalf("burst %d: space freed, but the next event is answered %d: %v", b, st, s.Logs.Find("event_id", probe))
		}
		if n := s.count(`SELECT count(*) FROM outbox WHERE idempotency_key LIKE ? || ':%'`, probe); n != 2 {
			t.Fatalf("burst %d: the acked probe has %d rows", b, n)
		}
		// Then only a little room for the next burst, between 128 KiB and
		// 1.5 MiB: some bursts fit whole, most fill the disk part way.
		filler.Top(t)
		filler.Free(t, 2+rng.IntN(22))
		if t.Failed() {
			t.Fatalf("burst %d: stopping", b)
		}
	}
	t.Logf("%d bursts: %d filled the disk (%d of them part way), %d acked", bursts, full, mixed, acked)
	if full < minBursts/3 || mixed < minBursts/6 || acked == 0 {
		t.Fatal("too few bursts filled the disk part way: the test is not testing the full boundary")
	}
	// What the operator sees: a 500 logged with the cause, and counted.
	evWaitLog(t, s.Logs, "endpoint", "events", "status", 500, "reason", "database cannot write (disk full or I/O error)")
	evWaitLog(t, s.Logs, "component", "store", "level", "ERROR", "path", cfg.DB)
	evWaitLog(t, s.Logs, "component", "store", "msg", "database writes again")
	if n := s.scrape().value("ackd_requests_total", "endpoint", "events", "status", "500"); n == 0 {
		t.Fatal("/metrics does not count the 500s")
	}
}

// postLongMessage posts a signed message event of about 4 KB and returns
// the status.
func postLongMessage(t *testing.T, client *http.Client, base, id string, seed uint64) int {
	rng := rand.New(rand.NewPCG(seed, 7))
	text := make([]byte, 4000)
	for i := range text {
		text[i] = 'a' + byte(rng.IntN(26))
	}
	body := eventBody(id, message("C1", "1700000000."+strconv.FormatUint(seed, 10), string(text)))
	req, err := http.NewRequest(http.MethodPost, base+"/slack/events", bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0
	}
	ts := time.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("X-Slack-Signature", sign(testSecret, ts, body))
	resp, err := client.Do(req)
	if err != nil {
		// The server closed the connection while the body was still being
		// written: it refused the request before reading it (the body
		// budget of a loaded machine), and its answer could not be read.
		// The caller checks that nothing of it was written.
		if errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) {
			t.Logf("%s: refused mid-body: %v", id, err)
			return 0
		}
		t.Error(err)
		return -1
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func idSet(t *testing.T, db *sql.DB, q string, args ...any) map[string]bool {
	t.Helper()
	res, err := db.Query(q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	m := map[string]bool{}
	for res.Next() {
		var k string
		if err := res.Scan(&k); err != nil {
			t.Fatal(err)
		}
		m[k] = true
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

func mustIntegrityOK(t *testing.T, db *sql.DB) {
	t.Helper()
	var v string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&v); err != nil || v != "ok" {
		t.Fatalf("integrity_check: %q %v", v, err)
	}
}

func TestFullDiskKeepsTheWatchdog(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a filesystem")
	}
	t.Run("while the disk is full the watchdog keeps pinging and the status says why; once space is back events are acked", func(t *testing.T) {
		const watchdog = 400 * time.Millisecond
		dir := diskfull.Mount(t, 32<<20)
		ns := notifyListen(t, watchdog)
		cfg := configFor(t, metricsQuietSweep+fullDiskConfig[strings.Index(fullDiskConfig, "[[route]]"):])
		cfg.DB = filepath.Join(dir, "ackd.db")
		s := startServer(t, cfg, daemon.Options{Notifier: daemon.NewNotifier()})
		if d := ns.next(); d != "READY=1" {
			t.Fatalf("first datagram = %q, want READY=1", d)
		}
		ns.until("WATCHDOG=1")
		filler := diskfull.Fill(t, dir, 64<<10)

		// Events until the disk refuses them (the -wal file may have a few
		// free pages left), then the watchdog's status names the cause.
		client := &http.Client{}
		refused := false
		for i := 0; i < 2000 && !refused; i++ {
			refused = postLongMessage(t, client, s.URL, fmt.Sprintf("EvDog-%04d", i), uint64(i)) == http.StatusInternalServerError
		}
		if !refused {
			t.Fatal("a full disk took 2000 events")
		}
		deadline := time.Now().Add(10 * time.Second)
		for d := ns.next(); !strings.HasPrefix(d, "STATUS=unhealthy: database cannot write (disk full or I/O error)"); d = ns.next() {
			if time.Now().After(deadline) {
				t.Fatalf("no status naming the full disk within 10s; last %q", d)
			}
		}
		// And it keeps pinging: a restart could not even open the database.
		for range 3 {
			ns.until("WATCHDOG=1")
		}
		if n := notifyNotPinging(s); n != 0 {
			t.Fatalf("the watchdog skipped %d pings on a full disk", n)
		}

		filler.FreeForWAL(t, cfg.DB)
		if st := postLongMessage(t, client, s.URL, "EvDog-after", 1); st != http.StatusOK {
			t.Fatalf("space is back, but the next event is answered %d", st)
		}
	})
}
