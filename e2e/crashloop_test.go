package e2e

import (
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Issue 38 §2 (DESIGN §12 "Attempts count across crashes"): the real
// binary is SIGKILLed during the same row's effect, again and again. Each
// restart's claim takes the dead lease, records the dead attempt and counts
// it, and numbers its request past the last (X-Ackd-Attempt never
// repeats); once the deaths spend max_attempts the row parks, saying why,
// instead of killing the process for ever. Before the fix every restart
// sent X-Ackd-Attempt 1 and the row never parked.
func TestCrashLoopParksAtMaxAttempts(t *testing.T) {
	t.Parallel()
	const maxAttempts = 3
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	addr := freeAddr(t, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 38)))
	h := newDeadlyHandler(t)
	cfg := filepath.Join(dir, "ackd.toml")
	// The effect's timeout is far longer than the kill takes (it never
	// fires); the lease a little longer still, so a restart takes the
	// dead lease soon.
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`listen = %q
db     = %q

[sweep]
interval     = "200ms"
lease        = "4s"
max_attempts = %d

[[route]]
name    = "deadly"
event   = "app_mention"
effect  = "forward"
url     = %q
timeout = "3s"
`, addr, db, maxAttempts, h.srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, ackdBin, dir, cfg, addr, map[string]string{"SLACK_SIGNING_SECRET": signingSecret, "ACKD_FORWARD_SECRET": forwardSecret})
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	if code := postMention(t, addr, "EvCRASH1"); code != http.StatusOK {
		t.Fatalf("ack %d", code)
	}
	for i := 1; i <= maxAttempts; i++ {
		select {
		case <-h.arrived:
		case <-time.After(60 * time.Second):
			t.Fatalf("delivery %d never came (handler saw %v)", i, h.seen())
		}
		// The effect kills its process: SIGKILL while the handler holds
		// the request.
		if err := r.kill("kill-inflight"); err != nil {
			t.Fatal(err)
		}
		if err := r.start(); err != nil {
			t.Fatal(err)
		}
	}
	key := "EvCRASH1:deadly"
	var status, lastErr string
	var attempts int
	waitUntil(t, "the row parked", 60*time.Second, func() bool {
		status, attempts, lastErr = rowState(t, db, key)
		return status == "parked"
	})
	got := h.seen()
	want := []string{"1", "2", "3"}
	if !slices.Equal(got.attempts, want) {
		t.Errorf("X-Ackd-Attempt of the deliveries %v, want %v: a number repeated, or a delivery after the budget was spent", got.attempts, want)
	}
	for _, k := range got.keys {
		if k != key {
			t.Errorf("Idempotency-Key %q, want %q", k, key)
		}
	}
	if attempts != maxAttempts || !strings.Contains(lastErr, "no word from its process") {
		t.Errorf("parked row: attempts %d, last_error %q; want %d and why", attempts, lastErr, maxAttempts)
	}
	// outbox show agrees with itself: the count beside three unknown attempts.
	id := rowID(t, db, key)
	out, errOut, err := runAckd(t, ackdBin, []string{"ACKD_CONFIG=" + cfg}, "outbox", "show", strconv.FormatInt(id, 10))
	if err != nil {
		t.Fatalf("outbox show: %v\n%s", err, errOut)
	}
	if !saysAttempts(out, maxAttempts) {
		t.Errorf("outbox show does not say attempts %d:\n%s", maxAttempts, out)
	}
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[3] == "unknown" {
			n++
		}
	}
	if n != maxAttempts {
		t.Errorf("outbox show lists %d unknown attempts, want %d:\n%s", n, maxAttempts, out)
	}
}

// saysAttempts reports whether outbox show's text says "attempts N" on a
// line of its own.
func saysAttempts(out string, n int) bool {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && f[0] == "attempts" && f[1] == strconv.Itoa(n) {
			return true
		}
	}
	return false
}

// deadlyHandler holds every request until its client goes away (the
// daemon is killed meanwhile) and records what each one said.
type deadlyHandler struct {
	srv     *httptest.Server
	arrived chan struct{}
	mu      sync.Mutex
	got     deliveries
}

type deliveries struct{ attempts, keys []string }

func newDeadlyHandler(t *testing.T) *deadlyHandler {
	h := &deadlyHandler{arrived: make(chan struct{}, 16)}
	quit := make(chan struct{})
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read whole, so that the server notices the client going away.
		_, _ = io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		h.got.attempts = append(h.got.attempts, r.Header.Get("X-Ackd-Attempt"))
		h.got.keys = append(h.got.keys, r.Header.Get("Idempotency-Key"))
		h.mu.Unlock()
		h.arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-quit:
		}
	}))
	t.Cleanup(h.srv.Close)
	t.Cleanup(func() { close(quit) }) // runs first
	return h
}

func (h *deadlyHandler) seen() deliveries {
	h.mu.Lock()
	defer h.mu.Unlock()
	return deliveries{slices.Clone(h.got.attempts), slices.Clone(h.got.keys)}
}

// rowState reads one row's status, attempts and last_error past ackd.
func rowState(t *testing.T, path, key string) (status string, attempts int, lastErr string) {
	t.Helper()
	h, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var le sql.NullString
	err = h.QueryRow(`SELECT status, attempts, last_error FROM outbox WHERE idempotency_key = ?`, key).Scan(&status, &attempts, &le)
	if err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	return status, attempts, le.String
}

func rowID(t *testing.T, path, key string) int64 {
	t.Helper()
	h, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var id int64
	if err := h.QueryRow(`SELECT id FROM outbox WHERE idempotency_key = ?`, key).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
