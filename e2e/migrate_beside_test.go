package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/oldbuild"
	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/internal/testreq"
)

// migrateRows is how many done rows TestMigrateBesideTheOldDaemon puts in
// the outbox before migrating: ACKD_TEST_MIGRATE_ROWS for both engines, or
// by default 300000 on SQLite (the size at which migration 10's rebuild of
// the outbox stalled acks for 10–15 s) and 100000 on PostgreSQL (whose
// migrations since the release touch the catalog only: the store's
// TestMigrationsSinceTheReleaseScanNoTable holds every statement's plan to
// that, and measures 300000 on request; fewer rows keep this test, filling
// both, well under a minute on two cores). The rows are copied in one
// statement from a row the old daemon itself recorded, so their payloads
// are the size a real forward row's is (1.3 KB: 0.1.0 kept the envelope in
// the row); 300000 make a 630 MB file.
func migrateRows(t *testing.T, def int) int {
	t.Helper()
	if v := os.Getenv("ACKD_TEST_MIGRATE_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			t.Fatalf("ACKD_TEST_MIGRATE_ROWS=%q is not a row count", v)
		}
		return n
	}
	return def
}

// besideEngine is one database engine of TestMigrateBesideTheOldDaemon.
type besideEngine struct {
	db string // the config's db
	// fill copies the template event's receipt, outbox row and stored
	// request (if any) n times under new ids, as done rows of the last
	// hour (younger than any retention, so the old daemon prunes none).
	fill func(t *testing.T, template string, n int)
	// receipts counts the receipts of ids.
	receipts func(t *testing.T, ids []string) int
	// size is the database's size on disk now (SQLite: the file and its
	// WAL; 0 where it is not measured).
	size func() int64
}

// Issue 29.2: `ackd migrate` of this release, run while the previous
// release's daemon serves the database (the upgrade order of docs/howto/backups-and-upgrades.md), does
// not stall that daemon's acks. The database is at the previous release's
// schema with ACKD_TEST_MIGRATE_ROWS done rows; the old daemon answers 20
// signed events a second before, during and after the migration. Every
// answer is 200 within Slack's deadline, every acked event has its receipt,
// and on SQLite the file (with its WAL) never grows past 1.2 times its size
// (a rebuild of the outbox doubled it). The migration's log lines give each
// step's lock time; the test logs them.
func TestMigrateBesideTheOldDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release and fills a large database")
	}
	t.Parallel()
	version, rev := previousRelease(t)
	old := oldbuild.Build(t, rev)
	t.Logf("previous release %s (%s)", version, rev[:7])

	// Not parallel with each other: the old daemon's answer times are the
	// measure, on a machine with two cores.
	t.Run("sqlite", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "ackd.db")
		open := func(t *testing.T) *sql.DB {
			h, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
			if err != nil {
				t.Fatal(err)
			}
			h.SetMaxOpenConns(1)
			return h
		}
		size := func() int64 {
			var total int64
			for _, f := range []string{db, db + "-wal"} {
				if fi, err := os.Stat(f); err == nil {
					total += fi.Size()
				}
			}
			return total
		}
		migrateBeside(t, old, migrateRows(t, 300000), besideEngine{db: db, size: size,
			fill: func(t *testing.T, template string, n int) {
				// Through the sqlite3 CLI: in this process, under -race,
				// SQLite (transpiled to Go) fills a few hundred MB in minutes.
				sqlite3, err := exec.LookPath("sqlite3")
				testreq.Need(t, err == nil, "the sqlite3 CLI fills the database (apt-get install sqlite3)")
				h := open(t)
				var payload, request int
				if err := h.QueryRow(`SELECT (SELECT length(payload) FROM outbox WHERE idempotency_key > ?1 || ':' AND idempotency_key < ?1 || ';'),
				                             (SELECT coalesce(sum(length(body)), 0) FROM slack_requests WHERE event_id = ?1)`, template).Scan(&payload, &request); err != nil {
					t.Fatal(err)
				}
				h.Close()
				t.Logf("the old daemon's row: payload %d bytes, stored request %d bytes", payload, request)
				// The old daemon is stopped: no other connection needs the
				// WAL while the rows go in, unjournaled. Times spread over
				// the last hour (younger than any retention).
				script := fmt.Sprintf(`PRAGMA journal_mode = OFF;
PRAGMA synchronous = OFF;
PRAGMA cache_size = -65536;
CREATE TEMP TABLE n (i INTEGER PRIMARY KEY);
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < %[2]d) INSERT INTO n SELECT i FROM c;
BEGIN;
INSERT INTO slack_event_receipts (event_id, event_type, received_at)
SELECT printf('EvFill%%07d', n.i), r.event_type, r.received_at - 3600000 + n.i * 3600000 / %[2]d
  FROM n, slack_event_receipts r WHERE r.event_id = '%[1]s';
INSERT INTO slack_requests (event_id, content_type, body, received_at)
SELECT printf('EvFill%%07d', n.i), q.content_type, q.body, q.received_at
  FROM n, slack_requests q WHERE q.event_id = '%[1]s';
INSERT INTO outbox (idempotency_key, effect, payload, status, attempts, next_attempt_at, last_error, result,
                    created_at, completed_at, request_id)
SELECT printf('EvFill%%07d', n.i) || substr(o.idempotency_key, length('%[1]s') + 1), o.effect, o.payload, 'done', 1,
       o.next_attempt_at, NULL, o.result, o.created_at - 3600000 + n.i * 3600000 / %[2]d,
       coalesce(o.completed_at, o.created_at) - 3600000 + n.i * 3600000 / %[2]d,
       CASE WHEN o.request_id IS NOT NULL THEN printf('EvFill%%07d', n.i) END
  FROM n, outbox o WHERE o.idempotency_key > '%[1]s:' AND o.idempotency_key < '%[1]s;';
COMMIT;
PRAGMA journal_mode = WAL;
`, template, n)
				cmd := exec.Command(sqlite3, "-bail", db)
				cmd.Stdin = strings.NewReader(script)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("sqlite3: %v\n%s", err, out)
				}
			},
			receipts: func(t *testing.T, ids []string) int {
				h := open(t)
				defer h.Close()
				got := 0
				for _, id := range ids {
					var c int
					if err := h.QueryRow(`SELECT count(*) FROM slack_event_receipts WHERE event_id = ?`, id).Scan(&c); err != nil {
						t.Fatal(err)
					}
					got += c
				}
				return got
			},
		})
	})

	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t)
		migrateBeside(t, old, migrateRows(t, 100000), besideEngine{db: url, size: func() int64 { return 0 },
			fill: func(t *testing.T, template string, n int) {
				for _, q := range []string{
					`INSERT INTO slack_event_receipts (event_id, event_type, received_at)
					 SELECT 'EvFill' || lpad(i::text, 7, '0'), r.event_type, r.received_at - 3600000 + i::bigint * 3600000 / $2
					   FROM generate_series(1, $2::int) AS i, slack_event_receipts r WHERE r.event_id = $1`,
					`INSERT INTO slack_requests (event_id, content_type, body, received_at)
					 SELECT 'EvFill' || lpad(i::text, 7, '0'), q.content_type, q.body, q.received_at
					   FROM generate_series(1, $2::int) AS i, slack_requests q WHERE q.event_id = $1`,
					`INSERT INTO outbox (idempotency_key, effect, payload, status, attempts, next_attempt_at, last_error, result,
					                     created_at, completed_at, request_id)
					 SELECT 'EvFill' || lpad(i::text, 7, '0') || substr(o.idempotency_key, length($1) + 1), o.effect, o.payload, 'done', 1,
					        o.next_attempt_at, NULL, o.result, o.created_at - 3600000 + i::bigint * 3600000 / $2,
					        coalesce(o.completed_at, o.created_at) - 3600000 + i::bigint * 3600000 / $2,
					        CASE WHEN o.request_id IS NOT NULL THEN 'EvFill' || lpad(i::text, 7, '0') END
					   FROM generate_series(1, $2::int) AS i, outbox o WHERE o.idempotency_key LIKE $1 || ':%'`,
				} {
					pgtest.Exec(t, url, q, template, n)
				}
				// As autovacuum would have by the time of an upgrade.
				pgtest.Exec(t, url, `ANALYZE outbox`)
				pgtest.Exec(t, url, `ANALYZE slack_event_receipts`)
			},
			receipts: func(t *testing.T, ids []string) int {
				return pgtest.Count(t, url, `SELECT count(*) FROM slack_event_receipts WHERE event_id = ANY($1)`, ids)
			},
		})
	})
}

// ack is one answer of the old daemon during the migration test.
type ack struct {
	id     string
	status int
	took   time.Duration
	err    error
	at     time.Time
}

func migrateBeside(t *testing.T, old string, n int, eng besideEngine) {
	handler := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	defer handler.Close()
	dir := t.TempDir()
	addr := freeAddr(t, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 29)))
	config := filepath.Join(dir, "ackd.toml")
	// Keys both releases know.
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`listen = %q
db = %q

[sweep]
interval = "200ms"

[[route]]
name   = "mention-to-app"
event  = "app_mention"
effect = "forward"
url    = %q
timeout = "5s"
`, addr, eng.db, handler.URL+"/slack")), 0o644); err != nil {
		t.Fatal(err)
	}
	const secret = "migrate-beside-signing-secret"
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "SLACK_SIGNING_SECRET=" + secret,
		"ACKD_FORWARD_SECRET=migrate-beside-forward-secret"}
	client := &http.Client{Timeout: 10 * time.Second}
	send := func(id string) ack {
		text := "<@U0BOT1234> the deploy of " + id + " failed again, can you look at the logs and tell the channel what broke?"
		body, _ := json.Marshal(map[string]any{"token": "XXYYZZ", "type": "event_callback", "team_id": "T0123ABCD", "api_app_id": "A0123ABCD",
			"event_id": id, "event_time": time.Now().Unix(), "event_context": "4-eyJldCI6ImFwcF9tZW50aW9uIiwidGlkIjoiVDAxMjNBQkNEIn0",
			"authorizations": []map[string]any{{"enterprise_id": nil, "team_id": "T0123ABCD", "user_id": "U0BOT1234", "is_bot": true, "is_enterprise_install": false}},
			"event": map[string]any{"type": "app_mention", "user": "U0123ABCD", "text": text, "ts": "1700000000.000100",
				"channel": "C0123ABCD", "event_ts": "1700000000.000100", "client_msg_id": "7b0c5ba6-1f67-4a36-9e4a-6b0f4e8c2d11",
				"blocks": []map[string]any{{"type": "rich_text", "block_id": "a1b2", "elements": []map[string]any{{"type": "rich_text_section",
					"elements": []map[string]any{{"type": "user", "user_id": "U0BOT1234"}, {"type": "text", "text": text}}}}}}}})
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/slack/events", bytes.NewReader(body))
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Slack-Request-Timestamp", ts)
		req.Header.Set("X-Slack-Signature", slackSign(secret, ts, body))
		start := time.Now()
		resp, err := client.Do(req)
		a := ack{id: id, took: time.Since(start), err: err, at: start}
		if err == nil {
			a.status = resp.StatusCode
			resp.Body.Close()
		}
		return a
	}

	// The old daemon creates the database and records (and performs) the
	// event every filled row is copied from.
	d := startUpgradeDaemon(t, old, config, addr, env)
	if a := send("EvTemplate"); a.err != nil || a.status != http.StatusOK {
		t.Fatalf("the template event: %d %v", a.status, a.err)
	}
	d.stop(t)
	start := time.Now()
	eng.fill(t, "EvTemplate", n)
	size0 := eng.size()
	if size0 > 0 {
		t.Logf("filled %d done rows in %s; database %d MB", n, time.Since(start).Round(time.Millisecond), size0>>20)
	} else {
		t.Logf("filled %d done rows in %s", n, time.Since(start).Round(time.Millisecond))
	}

	d = startUpgradeDaemon(t, old, config, addr, env)
	var (
		mu      sync.Mutex
		acks    []ack
		maxSize = size0
		wg      sync.WaitGroup
	)
	answered := func() int { mu.Lock(); defer mu.Unlock(); return len(acks) }
	ctx, stopLoad := context.WithCancel(context.Background())
	loadStart := time.Now()
	loadDone := make(chan struct{})
	go func() { // 20 events a second, each on its own, as Slack sends them
		defer close(loadDone)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				wg.Wait()
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func(id string) {
				defer wg.Done()
				a := send(id)
				mu.Lock()
				acks = append(acks, a)
				mu.Unlock()
			}(fmt.Sprintf("EvLoad%05d", i))
			if s := eng.size(); s > maxSize {
				maxSize = s
			}
		}
	}()
	waitUntil(t, "20 answers before the migration", 30*time.Second, func() bool { return answered() >= 20 })

	// Today's migrate, beside it.
	migStart := time.Now()
	cmd := exec.Command(ackdBin, "migrate", "--config", config)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		stopLoad()
		<-loadDone
		t.Fatalf("ackd migrate beside the old daemon: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	migEnd := time.Now()
	before := answered()
	waitUntil(t, "20 answers after the migration", 30*time.Second, func() bool { return answered() >= before+20 })
	stopLoad()
	<-loadDone
	d.stop(t)
	if s := eng.size(); s > maxSize {
		maxSize = s
	}

	// What each migration held the lock for, from its log line.
	sc := bufio.NewScanner(&stderr)
	var steps []string
	for sc.Scan() {
		var line struct {
			Msg     string  `json:"msg"`
			Version int     `json:"version"`
			LockMS  float64 `json:"lock_ms"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "schema migration applied" {
			steps = append(steps, fmt.Sprintf("%d: %.1f ms", line.Version, line.LockMS))
		}
	}
	if len(steps) == 0 {
		t.Errorf("migrate logged no \"schema migration applied\" line:\n%s", stderr.String())
	}
	t.Logf("migrate took %s beside the old daemon; lock time per migration: %s", migEnd.Sub(migStart).Round(time.Millisecond), strings.Join(steps, ", "))

	var bad []string
	var ids []string
	var slowest ack
	var during, earlier, later int
	for _, a := range acks {
		if a.at.Before(migEnd) && a.at.Add(a.took).After(migStart) {
			during++
		}
		if a.at.Add(a.took).Before(migStart) {
			earlier++
		}
		if a.at.After(migEnd) {
			later++
		}
		if a.took > slowest.took {
			slowest = a
		}
		if a.err != nil || a.status != http.StatusOK || a.took > 3*time.Second {
			bad = append(bad, fmt.Sprintf("%s: %d %v in %s", a.id, a.status, a.err, a.took.Round(time.Millisecond)))
			continue
		}
		ids = append(ids, a.id)
	}
	// The daemon's own ack latency of the slowest answer (its log line):
	// what the database made it wait, without the client's side.
	server := "?"
	for _, line := range strings.Split(d.log.String(), "\n") {
		var l struct {
			Msg     string  `json:"msg"`
			EventID string  `json:"event_id"`
			Latency float64 `json:"latency_ms"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "ack" && l.EventID == slowest.id {
			server = fmt.Sprintf("%.0fms", l.Latency)
		}
	}
	t.Logf("%d answers, %d of them while migrate ran (%s to %s after the load began); slowest %s (%s in the daemon), sent %s after the load began",
		len(acks), during, migStart.Sub(loadStart).Round(time.Millisecond), migEnd.Sub(loadStart).Round(time.Millisecond),
		slowest.took.Round(time.Millisecond), server, slowest.at.Sub(loadStart).Round(time.Millisecond))
	// The load must bracket the migration (it is over in milliseconds, so
	// few answers overlap it): else it proves nothing about a live daemon.
	if earlier == 0 || later == 0 {
		t.Errorf("the load did not surround the migration: %d answers before it, %d after", earlier, later)
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d answers were not 200 within 3 s: %s\nold daemon log:\n%s", len(bad), len(acks), strings.Join(bad[:min(len(bad), 10)], "; "), lastLines(d.log.String(), 20))
	}
	if got := eng.receipts(t, ids); got != len(ids) {
		t.Errorf("%d of %d acked events have their receipt", got, len(ids))
	}
	if size0 > 0 {
		t.Logf("database %d MB before, at most %d MB (with its WAL) during and after", size0>>20, maxSize>>20)
		if float64(maxSize) > 1.2*float64(size0) {
			t.Errorf("the database grew from %d to %d bytes (%.2f×)", size0, maxSize, float64(maxSize)/float64(size0))
		}
	}
	if slices.ContainsFunc(acks, func(a ack) bool { return a.status == 0 && a.err == nil }) {
		t.Error("an answer without a status")
	}
}
