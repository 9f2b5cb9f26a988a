package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Issue 31.1: attempts are history. The daemon is SIGKILLed while its
// forward waits on the handler; the restarted daemon takes the row when the
// dead one's lease runs out and the handler answers. `ackd outbox show`
// lists both attempts: the first unknown (its process said nothing), the
// second done with the handler's status; --json carries them as an array.
func TestAttemptsOfADaemonKilledMidForward(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	hook := procNewHook(t, http.StatusAccepted, true) // the first request never gets an answer
	route := fmt.Sprintf(`
[[route]]
name    = "fwd"
event   = "app_mention"
effect  = "forward"
url     = %q
timeout = "2s"
`, hook.URL)
	cfg := procWriteConfig(t, dir, "ackd.toml", "[sweep]\ninterval = \"200ms\"\nlease = \"3s\"\n"+route)

	d := procServe(t, procServeOpts{Config: cfg, DB: db})
	d.mustPostEvent(procMention("EvAttempt1", "<@UBOT> deploy"))
	select {
	case <-hook.arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler never received the forward")
	}
	d.kill() // mid-forward: the handler still holds the request

	sdb := procOpenDB(t, db)
	id := procQueryInt(t, sdb, `SELECT id FROM outbox WHERE idempotency_key = 'EvAttempt1:fwd'`)
	if n := procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE id = ? AND status = 'pending' AND claim_token IS NOT NULL`, id); n != 1 {
		t.Fatalf("after SIGKILL the row is not pending under the dead daemon's lease")
	}

	d2 := procServe(t, procServeOpts{Config: cfg, DB: db})
	procWaitFor(t, "the restarted daemon to complete the row after the lease ran out", 30*time.Second, func() bool {
		return procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE id = ? AND status = 'done'`, id) == 1
	})
	d2.stop()
	if n := len(hook.requests()); n != 2 {
		t.Fatalf("the handler received %d requests, want 2 (the killed attempt and the repeat)", n)
	}

	var shown struct {
		Status   string `json:"status"`
		Attempts []struct {
			N          int     `json:"n"`
			StartedAt  string  `json:"started_at"`
			EndedAt    *string `json:"ended_at"`
			DurationMS *int64  `json:"duration_ms"`
			Outcome    string  `json:"outcome"`
			Status     string  `json:"status"`
			Result     string  `json:"result"`
			Error      string  `json:"error"`
		} `json:"attempts"`
	}
	out := procMustRun(t, procEnv(), "outbox", "show", "--json", fmt.Sprint(id), "--db", db).Stdout
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatalf("outbox show --json: %v\n%s", err, out)
	}
	a := shown.Attempts
	if shown.Status != "done" || len(a) != 2 {
		t.Fatalf("outbox show --json: status %q, %d attempts, want done with 2:\n%s", shown.Status, len(a), out)
	}
	if a[0].N != 1 || a[0].Outcome != "unknown" || a[0].EndedAt != nil || a[0].DurationMS != nil || a[0].StartedAt == "" {
		t.Errorf("attempt 1 = %+v, want unknown with a start and no end", a[0])
	}
	if a[1].N != 2 || a[1].Outcome != "done" || a[1].Status != "202" || a[1].Result != "202" || a[1].EndedAt == nil || a[1].Error != "" {
		t.Errorf("attempt 2 = %+v, want done with the handler's status 202", a[1])
	}
	first, _ := time.Parse(time.RFC3339Nano, a[0].StartedAt)
	second, _ := time.Parse(time.RFC3339Nano, a[1].StartedAt)
	if !second.After(first.Add(2 * time.Second)) {
		t.Errorf("attempt 2 started %s, not after attempt 1's lease (started %s, lease 3s)", second, first)
	}

	text := procMustRun(t, procEnv(), "outbox", "show", fmt.Sprint(id), "--db", db).Stdout
	for _, want := range []string{"attempts:", "OUTCOME", "  1  ", "unknown", "  2  ", "done", "202"} {
		if !strings.Contains(text, want) {
			t.Errorf("outbox show lacks %q:\n%s", want, text)
		}
	}
}
