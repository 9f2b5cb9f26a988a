package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/pgtest"
)

// Issue 25.1: parked rows can be discarded, by id or filtered like retry,
// and a discarded row is never performed again; retry takes the same
// filters. Real processes on SQLite and PostgreSQL.
func TestOutboxDiscard(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { testOutboxDiscard(t, filepath.Join(t.TempDir(), "ackd.db")) })
	t.Run("postgres", func(t *testing.T) { testOutboxDiscard(t, pgtest.URL(t)) })
}

func testOutboxDiscard(t *testing.T, db string) {
	dir := t.TempDir()
	hook := procNewHook(t, http.StatusBadRequest, false)
	cfg := procLogAndForwardConfig(t, dir, hook.URL)
	d := procServe(t, procServeOpts{Config: cfg, DB: db})
	for i := range 3 {
		d.mustPostEvent(procMention(fmt.Sprintf("EvDis%d", i), "<@U1> x & y"))
	}
	sdb := procOpenDB(t, db)
	procWaitFor(t, "3 parked rows", 20*time.Second, func() bool {
		return procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE status = 'parked'`) == 3
	})
	d.stop()
	ackd := func(args ...string) procResult {
		t.Helper()
		return procRun(t, procEnv(), append(args, "--db", db, "--config", cfg)...)
	}
	id := func(key string) string {
		return fmt.Sprint(procQueryInt(t, sdb, `SELECT id FROM outbox WHERE idempotency_key = '`+key+`'`))
	}
	first := id("EvDis0:fwd")

	// Issue 25.7: list --json and show --json.
	var rows []map[string]any
	if out := ackd("outbox", "list", "--json", "--status", "parked").Stdout; json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 3 {
		t.Fatalf("outbox list --json: %q", out)
	}
	if r := rows[2]; fmt.Sprint(r["id"]) != first || r["key"] != "EvDis0:fwd" || r["status"] != "parked" || r["effect"] != "forward" ||
		r["route"] != "fwd" || r["attempts"] != float64(1) || r["next_attempt_at"] != nil || r["created_at"] == nil || !strings.Contains(fmt.Sprint(r["last_error"]), "400") {
		t.Errorf("outbox list --json, oldest row: %v", r)
	}
	var one map[string]any
	if out := ackd("outbox", "show", "--json", first).Stdout; json.Unmarshal([]byte(out), &one) != nil {
		t.Fatalf("outbox show --json: %q", out)
	} else {
		p, _ := one["payload"].(map[string]any)
		req, _ := one["request"].(map[string]any)
		body, _ := req["body"].(map[string]any)
		if one["key"] != "EvDis0:fwd" || p["route"] != "fwd" || req["stored"] != true || body["event_id"] != "EvDis0" || body["token"] != "(redacted)" {
			t.Errorf("outbox show --json: %s", out)
		}
	}
	if r := ackd("outbox", "show", "--json", "99999"); r.Code == 0 || !strings.Contains(r.Stderr, "no outbox row 99999") {
		t.Errorf("show --json of a missing row: exit %d %q", r.Code, r.Stderr)
	}
	// Issue 25.6: show prints the text as Slack sent it, not \u003c.
	if show := ackd("outbox", "show", first).Stdout; !strings.Contains(show, `"text": "<@U1> x & y"`) || strings.Contains(show, `\u003c`) {
		t.Errorf("outbox show escapes the text:\n%s", show)
	}
	if r := ackd("outbox", "discard", first); r.Code != 0 || r.Stdout != "discarded row "+first+"\n" {
		t.Fatalf("discard %s: exit %d, %q %q", first, r.Code, r.Stdout, r.Stderr)
	}
	if r := ackd("outbox", "discard", first); r.Code == 0 || !strings.Contains(r.Stderr, "row "+first+" was discarded") {
		t.Errorf("discard of a discarded row: exit %d, stderr %q", r.Code, r.Stderr)
	}
	if r := ackd("outbox", "retry", first); r.Code == 0 || !strings.Contains(r.Stderr, "was discarded") {
		t.Errorf("retry of a discarded row: exit %d, stderr %q", r.Code, r.Stderr)
	}
	if r := ackd("outbox", "discard", "--route", "fwd", first); r.Code == 0 || !strings.Contains(r.Stderr, "with --all-parked") {
		t.Errorf("a filter without --all-parked: exit %d, stderr %q", r.Code, r.Stderr)
	}
	for _, args := range [][]string{
		{"outbox", "discard", "--all-parked", "--route", "log"},
		{"outbox", "discard", "--all-parked", "--effect", "post"},
		{"outbox", "retry", "--all-parked", "--older-than", "24h"},
	} {
		if r := ackd(args...); r.Code != 0 || !strings.HasSuffix(r.Stdout, " 0 parked rows\n") {
			t.Errorf("%s: exit %d, %q %q; want 0 rows", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
		}
	}
	if r := ackd("outbox", "discard", "--all-parked", "--route", "fwd", "--effect", "forward"); r.Stdout != "discarded 2 parked rows\n" {
		t.Errorf("discard --all-parked --route fwd: exit %d, %q %q", r.Code, r.Stdout, r.Stderr)
	}
	list := ackd("outbox", "list", "--status", "discarded").Stdout
	if n := strings.Count(list, " discarded "); n != 3 {
		t.Errorf("outbox list --status discarded shows %d rows:\n%s", n, list)
	}
	if s := ackd("status").Stdout; !strings.Contains(s, "discarded  3") && !strings.Contains(s, "discarded       3") {
		if !strings.Contains(strings.Join(strings.Fields(s), " "), "parked 0 discarded 3") {
			t.Errorf("status:\n%s", s)
		}
	}
	// Fixed or not, a discarded row is never performed again.
	hook.status.Store(http.StatusOK)
	before := len(hook.requests())
	if r := ackd("sweep", "--once"); r.Stdout != "claimed=0 done=0 retried=0 parked=0 fenced=0\n" {
		t.Errorf("sweep after discard: %q %q", r.Stdout, r.Stderr)
	}
	if n := len(hook.requests()); n != before {
		t.Errorf("the forward target got %d more requests after the discard", n-before)
	}
	if r := ackd("prune"); r.Stdout != "pruned receipts=0 done=0 discarded=0 requests=0\n" {
		t.Errorf("prune of fresh discarded rows: %q", r.Stdout)
	}
}
