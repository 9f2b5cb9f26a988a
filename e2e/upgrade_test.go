package e2e

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/ackd/ackd/internal/oldbuild"
	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
)

// previousRelease is the commit CHANGELOG.md names for its newest release
// (the first "## [x.y.z]" section's "Commit `…`"): the binary an operator
// upgrades from.
func previousRelease(t *testing.T) (version, commit string) {
	t.Helper()
	b, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?m)^## \\[(\\d+\\.\\d+\\.\\d+)\\][^\\n]*\\n+Commit `([0-9a-f]{40})`").FindSubmatch(b)
	if m == nil {
		t.Fatal("CHANGELOG.md names no release with its commit (## [x.y.z] … then Commit `<40 hex>`)")
	}
	return string(m[1]), string(m[2])
}

// upgradeDaemon is one `ackd serve` process of the upgrade test.
type upgradeDaemon struct {
	cmd  *exec.Cmd
	log  lockedBuffer
	done chan struct{}
}

// lockedBuffer is a bytes.Buffer that a process writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startUpgradeDaemon(t *testing.T, bin, config, addr string, env []string) *upgradeDaemon {
	t.Helper()
	d := &upgradeDaemon{done: make(chan struct{})}
	d.cmd = exec.Command(bin, "serve", "--config", config)
	d.cmd.Env = env
	d.cmd.Stdout, d.cmd.Stderr = &d.log, &d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() { d.cmd.Process.Kill(); <-d.done })
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d
			}
		}
		select {
		case <-d.done:
			t.Fatalf("%s serve exited before it was healthy:\n%s", bin, d.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s serve not healthy within 60s:\n%s", bin, d.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop is systemctl stop: SIGTERM, then the graceful shutdown.
func (d *upgradeDaemon) stop(t *testing.T) {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop within 30s of SIGTERM:\n%s", d.log.String())
	}
}

// upgradeEngine is one database engine the upgrade test runs on.
type upgradeEngine struct {
	db      string             // the config's db
	schema  string             // the engine's schema text (its migrations)
	version func() int         // the database's schema version now
	count   func(q string) int // a count query on the database
	// rolling: the new daemon starts beside the old one, which stops after
	// (PostgreSQL replicas behind a load balancer); otherwise the old one
	// stops first (one VM, the package's restart).
	rolling bool
}

// Issue 26: the upgrade docs/howto/backups-and-upgrades.md describes, from the previous release
// (CHANGELOG.md) to this one, on a database that release wrote and with its
// daemon running: `ackd migrate --dry-run` names the migrations and writes
// nothing; `ackd migrate` by the new binary migrates under the running old
// daemon, which keeps acking and performing; the new daemon then starts on
// the database (after the old one stopped on SQLite; beside it, replica by
// replica, on PostgreSQL), performs the rows the old one recorded and left
// pending, and knows the old one's receipts (a retry is a duplicate). The
// older binary then refuses to start on the migrated database, as the
// the downgrade note of docs/howto/backups-and-upgrades.md says.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the previous release")
	}
	version, rev := previousRelease(t)
	old := oldbuild.Build(t, rev)
	t.Logf("previous release %s: commit %s", version, rev)

	t.Run("sqlite, one VM: migrate under the old daemon, then restart on the new binary", func(t *testing.T) {
		t.Parallel()
		db := filepath.Join(t.TempDir(), "ackd.db")
		query := func(q string) int {
			t.Helper()
			h, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			var n int
			if err := h.QueryRow(q).Scan(&n); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			return n
		}
		upgrade(t, old, upgradeEngine{db: db, schema: readSchema(t), count: query,
			version: func() int { return query("PRAGMA user_version") }})
	})

	t.Run("postgres replicas: migrate under the old replica, then a new replica beside it", func(t *testing.T) {
		t.Parallel()
		url := pgtest.URL(t)
		count := func(q string) int { t.Helper(); return pgtest.Count(t, url, q) }
		upgrade(t, old, upgradeEngine{db: url, schema: postgres.Schema, count: count, rolling: true,
			version: func() int { return count("SELECT coalesce(max(version), 0) FROM ackd_migrations") }})
	})
}

func upgrade(t *testing.T, old string, eng upgradeEngine) {
	// The team's forward handler: answers 503 for the events recorded
	// before the upgrade until the new daemon runs, 200 for the others;
	// counts the deliveries per event (the row's Idempotency-Key is
	// "{event_id}:{route}" in both releases).
	var mu sync.Mutex
	delivered := map[string]int{}
	holdOld := true
	handler := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id, _, _ := strings.Cut(r.Header.Get("Idempotency-Key"), ":")
		mu.Lock()
		defer mu.Unlock()
		if holdOld && strings.HasPrefix(id, "EvBefore") {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		delivered[id]++
		w.WriteHeader(http.StatusOK)
	}))
	defer handler.Close()

	dir := t.TempDir()
	loopbackAddr := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	// Keys both releases know; one config per daemon (its own listen).
	writeConfig := func(name, addr string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(fmt.Sprintf(`listen = %q
db = %q

[sweep]
interval = "200ms"
# A replica stopped mid-sweep gives its rows back only when their leases
# expire (nothing releases a lease early): short, above the 5s timeout.
lease = "8s"
backoff = "100ms"
max_backoff = "200ms"
max_attempts = 1000

[[route]]
name   = "mention-to-app"
event  = "app_mention"
effect = "forward"
url    = %q
timeout = "5s"
`, addr, eng.db, handler.URL+"/slack")), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	oldAddr, newAddr := loopbackAddr(), loopbackAddr()
	if !eng.rolling {
		newAddr = oldAddr // the same unit, restarted
	}
	oldConfig, newConfig := writeConfig("old.toml", oldAddr), writeConfig("new.toml", newAddr)

	const secret = "upgrade-test-signing-secret"
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "SLACK_SIGNING_SECRET=" + secret,
		"ACKD_FORWARD_SECRET=upgrade-forward-secret"}
	send := func(addr, id string, retry int) string {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"type": "event_callback", "team_id": "T1", "api_app_id": "A1",
			"event_id": id, "event_time": 1700000000, "event": map[string]any{"type": "app_mention", "user": "U1",
				"text": "<@UBOT> hi", "ts": "1700000000.000100", "channel": "C1", "event_ts": "1700000000.000100"}})
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/slack/events", bytes.NewReader(body))
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Slack-Request-Timestamp", ts)
		req.Header.Set("X-Slack-Signature", slackSign(secret, ts, body))
		if retry > 0 {
			req.Header.Set("X-Slack-Retry-Num", strconv.Itoa(retry))
			req.Header.Set("X-Slack-Retry-Reason", "http_timeout")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("event %s: %v", id, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("event %s: %s", id, resp.Status)
		}
		return resp.Header.Get("X-Ackd-Outcome")
	}
	waitDelivered := func(ids []string, timeout time.Duration, d *upgradeDaemon) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for {
			mu.Lock()
			missing := 0
			for _, id := range ids {
				if delivered[id] == 0 {
					missing++
				}
			}
			mu.Unlock()
			if missing == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d events not forwarded within %s; daemon log:\n%s", missing, len(ids), timeout, lastLines(d.log.String(), 30))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// The previous release creates the database and records events whose
	// forward cannot be delivered yet.
	oldD := startUpgradeDaemon(t, old, oldConfig, oldAddr, env)
	var before []string
	for i := range 5 {
		id := fmt.Sprintf("EvBefore%d", i)
		if got := send(oldAddr, id, 0); got != "first" {
			t.Fatalf("old daemon, %s: outcome %q", id, got)
		}
		before = append(before, id)
	}
	oldVersion := eng.version()

	ms, err := store.Migrations(eng.schema)
	if err != nil {
		t.Fatal(err)
	}
	latest := ms[len(ms)-1].Version
	if oldVersion >= latest {
		t.Fatalf("the previous release's schema is version %d, this one's %d: nothing to upgrade", oldVersion, latest)
	}

	// The upgrade page's order: the dry run first, which writes nothing.
	out := runBin(t, ackdBin, env, "migrate", "--dry-run", "--config", newConfig)
	for _, m := range ms {
		listed := strings.Contains(out, fmt.Sprintf("would apply migration %d:", m.Version))
		if listed != (m.Version > oldVersion) {
			t.Errorf("dry run lists migration %d: %v (database at %d):\n%s", m.Version, listed, oldVersion, out)
		}
	}
	if v := eng.version(); v != oldVersion {
		t.Fatalf("the dry run moved the schema from %d to %d", oldVersion, v)
	}

	// Migrate with the old daemon still running; it keeps acking and
	// performing on the migrated schema.
	runBin(t, ackdBin, env, "migrate", "--config", newConfig)
	if v := eng.version(); v != latest {
		t.Fatalf("after migrate the schema is %d, want %d", v, latest)
	}
	var during []string
	for i := range 3 {
		id := fmt.Sprintf("EvDuring%d", i)
		if got := send(oldAddr, id, 0); got != "first" {
			t.Errorf("old daemon on the migrated schema, %s: outcome %q", id, got)
		}
		during = append(during, id)
	}
	waitDelivered(during, 30*time.Second, oldD)

	// The new binary: the package upgrade's restart on one VM, the next
	// replica on PostgreSQL (the old one stops after).
	if !eng.rolling {
		oldD.stop(t)
	}
	newD := startUpgradeDaemon(t, ackdBin, newConfig, newAddr, env)
	mu.Lock()
	holdOld = false
	mu.Unlock()
	for _, id := range before {
		if got := send(newAddr, id, 1); got != "duplicate" {
			t.Errorf("a retry of %s, recorded by the previous release: outcome %q, want duplicate", id, got)
		}
	}
	var after []string
	for i := range 3 {
		id := fmt.Sprintf("EvAfter%d", i)
		if got := send(newAddr, id, 0); got != "first" {
			t.Errorf("new daemon, %s: outcome %q", id, got)
		}
		after = append(after, id)
	}
	if eng.rolling {
		oldD.stop(t)
	}
	waitDelivered(before, 30*time.Second, newD)
	waitDelivered(after, 30*time.Second, newD)
	newD.stop(t)

	pending := eng.count(`SELECT count(*) FROM outbox WHERE status = 'pending'`)
	parked := eng.count(`SELECT count(*) FROM outbox WHERE status = 'parked'`)
	done := eng.count(`SELECT count(*) FROM outbox WHERE status = 'done'`)
	if want := len(before) + len(during) + len(after); pending != 0 || parked != 0 || done != want {
		t.Errorf("outbox: pending=%d parked=%d done=%d, want 0, 0, %d", pending, parked, done, want)
	}

	// Downgrade: the previous release refuses the migrated database.
	cmd := exec.Command(old, "migrate", "--config", oldConfig)
	cmd.Env = env
	b, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), fmt.Sprintf("database schema version %d is newer than this ackd (%d)", latest, oldVersion)) {
		t.Errorf("the previous release on the migrated database: %v\n%s", err, b)
	}
}

func runBin(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(bin), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func readSchema(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
