package daemon_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/sweep"
)

// Issue 16.1: a daemon without SLACK_BOT_TOKEN does not claim the Web API
// rows its routes make (they stay pending, untouched, for a process with the
// token), still performs the rest, and says so at startup.
func TestDaemonWithoutTokenLeavesWebAPIRows(t *testing.T) {
	cfg := configFor(t, `
[sweep]
immediate = false
interval  = "1h"

[[route]]
name     = "eyes"
event    = "app_mention"
effect   = "react"
reaction = "eyes"

[[route]]
name   = "log"
event  = "app_mention"
effect = "log"
`)
	s := startServer(t, cfg, daemon.Options{})
	if r := s.postEvent(eventBody("EvNoTok", mention("C1", "1700000000.000100", "hi"))); r.Status != http.StatusOK {
		t.Fatalf("status %d", r.Status)
	}
	res, err := s.Sweeper().RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := (sweep.Result{Claimed: 1, Done: 1}); res != want {
		t.Fatalf("sweep: %+v, want only the log row", res)
	}
	if n := s.count(`SELECT count(*) FROM outbox WHERE effect = 'react' AND status = 'pending' AND attempts = 0 AND last_error IS NULL AND claim_token IS NULL`); n != 1 {
		t.Fatalf("untouched react rows: %d, want 1", n)
	}
	if l := s.Logs.Find("msg", "routes name effects this daemon cannot perform: their rows stay pending until a process with the credential sweeps them"); l == nil ||
		!strings.Contains(l["skipped"].(string), "react (SLACK_BOT_TOKEN is not set)") {
		t.Errorf("no startup warning naming react and the token:\n%s", s.Logs.String())
	}
}
