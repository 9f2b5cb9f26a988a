package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/pgtest"
)

// Issue 31.2 and 31.3: a paused route's requests are acked and its rows
// wait, in the daemon and in a hand-run sweep; resume delivers them; a
// replay of a done forward reaches the handler under a new key. Refusals
// change nothing. Real processes on SQLite and PostgreSQL.
func TestRoutePauseAndReplay(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { testRoutePauseAndReplay(t, filepath.Join(t.TempDir(), "ackd.db")) })
	t.Run("postgres", func(t *testing.T) { testRoutePauseAndReplay(t, pgtest.URL(t)) })
}

func testRoutePauseAndReplay(t *testing.T, db string) {
	dir := t.TempDir()
	hook := procNewHook(t, http.StatusOK, false)
	cfg := procLogAndForwardConfig(t, dir, hook.URL) // routes "log" and "fwd"
	d := procServe(t, procServeOpts{Config: cfg, DB: db})
	sdb := procOpenDB(t, db)
	ackd := func(args ...string) procResult {
		t.Helper()
		return procRun(t, procEnv(), append(args, "--db", db, "--config", cfg)...)
	}
	status := func(key string) string {
		t.Helper()
		var s string
		if err := sdb.QueryRow(`SELECT status FROM outbox WHERE idempotency_key = '` + key + `'`).Scan(&s); err != nil {
			return "(none: " + err.Error() + ")"
		}
		return s
	}
	rows := func() int64 { return procQueryInt(t, sdb, `SELECT count(*) FROM outbox`) }
	pauses := func() int64 { return procQueryInt(t, sdb, `SELECT count(*) FROM ackd_route_pauses`) }
	keys := func() []string {
		var out []string
		for _, r := range hook.requests() {
			out = append(out, r.Key)
		}
		return out
	}

	// Empty and mistyped names: refused, nothing paused.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"route", "pause", ""}, "the route name is empty"},
		{[]string{"route", "pause"}, "give one route name"},
		{[]string{"route", "pause", "fwdd"}, `did you mean "fwd"?`},
		{[]string{"route", "resume", "lgo"}, `did you mean "log"?`},
		{[]string{"route", "pause", "fwd", "--by", ""}, "--by is empty"},
	} {
		if r := ackd(tc.args...); r.Code == 0 || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("ackd %q: exit %d, stderr %q; want a refusal saying %q", tc.args, r.Code, r.Stderr, tc.want)
		}
	}
	if n := pauses(); n != 0 {
		t.Fatalf("%d routes paused after refused commands", n)
	}

	r := ackd("route", "pause", "fwd", "--by", "tester@ci")
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "paused route fwd (by tester@ci at ") {
		t.Fatalf("route pause fwd: exit %d, %q %q", r.Code, r.Stdout, r.Stderr)
	}
	if r := ackd("route", "pause", "fwd"); r.Code != 0 || !strings.Contains(r.Stdout, "route fwd is already paused") || !strings.Contains(r.Stdout, "by tester@ci") {
		t.Errorf("a second pause: exit %d, %q %q; want exit 0 saying who paused it", r.Code, r.Stdout, r.Stderr)
	}

	// Acked and recorded; the other route delivers, the paused one waits.
	d.mustPostEvent(procMention("EvPause1", "hi"))
	procWaitFor(t, "the log route's row done", 20*time.Second, func() bool { return status("EvPause1:log") == "done" })
	if s := status("EvPause1:fwd"); s != "pending" {
		t.Fatalf("the paused route's row is %s, want pending", s)
	}
	// A hand-run sweep beside the daemon leaves it too.
	sw := procRun(t, procEnv(), "sweep", "--once", "--db", db, "--config", cfg)
	if sw.Code != 0 || !strings.Contains(sw.Stderr, "route fwd is paused") || !strings.Contains(sw.Stdout, "claimed=0") {
		t.Errorf("sweep --once: exit %d, %q %q", sw.Code, sw.Stdout, sw.Stderr)
	}
	if s := status("EvPause1:fwd"); s != "pending" || len(hook.requests()) != 0 {
		t.Fatalf("after a hand sweep the paused row is %s and the handler got %q", s, keys())
	}

	// What the operator sees: route list, status, outbox show, /metrics.
	var list []map[string]any
	if r := ackd("route", "list", "--json"); r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &list) != nil || len(list) != 2 {
		t.Fatalf("route list --json: exit %d, %q %q", r.Code, r.Stdout, r.Stderr)
	}
	if l := list[0]; l["route"] != "log" || l["effect"] != "log" || l["paused"] != false {
		t.Errorf("route list: %v", l)
	}
	if f := list[1]; f["route"] != "fwd" || f["effect"] != "forward" || f["paused"] != true || f["paused_by"] != "tester@ci" || f["pending"] != float64(1) {
		t.Errorf("route list: %v", f)
	}
	if r := ackd("route", "list"); !strings.Contains(r.Stdout, "by tester@ci") {
		t.Errorf("route list: %q", r.Stdout)
	}
	// A paused route the config does not name (another config's) is listed too.
	logOnly := procWriteConfig(t, dir, "log-only.toml", "[[route]]\nname = \"log\"\nevent = \"app_mention\"\neffect = \"log\"\n")
	if r := procRun(t, procEnv(), "route", "list", "--db", db, "--config", logOnly); r.Code != 0 ||
		!regexp.MustCompile(`(?m)^fwd +\(not in the config\) +since .* by tester@ci .* 1$`).MatchString(r.Stdout) {
		t.Errorf("route list with a config without fwd: exit %d, %q %q", r.Code, r.Stdout, r.Stderr)
	}
	var st struct {
		Paused []struct {
			Route    string
			PausedBy string `json:"paused_by"`
			Pending  int64
		} `json:"paused_routes"`
		Waiting []any `json:"waiting"`
	}
	if r := ackd("status", "--json"); json.Unmarshal([]byte(r.Stdout), &st) != nil || len(st.Paused) != 1 || st.Paused[0].PausedBy != "tester@ci" || st.Paused[0].Pending != 1 || len(st.Waiting) != 0 {
		t.Errorf("status --json: %q", r.Stdout)
	}
	if r := ackd("status"); !strings.Contains(r.Stdout, "route fwd since ") || !strings.Contains(r.Stdout, "1 pending row") {
		t.Errorf("status: %q", r.Stdout)
	}
	fwdID := fmt.Sprint(procQueryInt(t, sdb, `SELECT id FROM outbox WHERE idempotency_key = 'EvPause1:fwd'`))
	if r := ackd("outbox", "show", fwdID); !strings.Contains(r.Stdout, "its route fwd to be resumed") {
		t.Errorf("outbox show of the paused row: %q", r.Stdout)
	}
	resp, err := procClient.Get(d.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`ackd_route_paused{route="fwd"} 1`, `ackd_route_paused{route="log"} 0`, `ackd_route_paused_pending_rows{route="fwd"} 1`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// Resume: delivered.
	if r := ackd("route", "resume", "fwd"); r.Code != 0 || !strings.HasPrefix(r.Stdout, "resumed route fwd (paused by tester@ci") {
		t.Fatalf("route resume: exit %d, %q %q", r.Code, r.Stdout, r.Stderr)
	}
	procWaitFor(t, "the resumed row delivered", 20*time.Second, func() bool { return status("EvPause1:fwd") == "done" })
	if got := keys(); !slices.Equal(got, []string{"EvPause1:fwd"}) {
		t.Fatalf("the handler got %q", got)
	}
	if r := ackd("route", "resume", "fwd"); r.Code != 0 || !strings.Contains(r.Stdout, "route fwd is not paused") {
		t.Errorf("a second resume: exit %d, %q %q", r.Code, r.Stdout, r.Stderr)
	}

	// Replay refusals change nothing.
	before := rows()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"outbox", "replay"}, "give row IDs, or --route R --since T"},
		{[]string{"outbox", "replay", "--route", "fwd"}, "--route needs --since"},
		{[]string{"outbox", "replay", "--route", "", "--since", "1h"}, "--route is empty"},
		{[]string{"outbox", "replay", "--route", "fwdd", "--since", "1h"}, `did you mean "fwd"?`},
		{[]string{"outbox", "replay", "--route", "fwd", "--since", "yesterday"}, "neither an RFC 3339 time"},
		{[]string{"outbox", "replay", "--route", "fwd", "--since", "1h", "--status", "pending"}, "a pending row is not replayed"},
		{[]string{"outbox", "replay", "--route", "fwd", "--since", "1h", "--status", "doen"}, `did you mean "done"?`},
		{[]string{"outbox", "replay", "99999"}, "no such row: 99999"},
		{[]string{"outbox", "replay", "x1"}, `"x1" is not a row id`},
		{[]string{"outbox", "replay", fwdID, "--route", "fwd"}, "not both"},
	} {
		if r := ackd(tc.args...); r.Code == 0 || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("ackd %q: exit %d, stderr %q; want a refusal saying %q", tc.args, r.Code, r.Stderr, tc.want)
		}
	}
	if n := rows(); n != before {
		t.Fatalf("refused replays changed the outbox: %d rows → %d", before, n)
	}
	dry := ackd("outbox", "replay", "--route", "fwd", "--since", "1h", "--dry-run")
	if dry.Code != 0 || !strings.HasPrefix(dry.Stdout, "would replay 1 row\n") || !strings.Contains(dry.Stdout, "EvPause1:fwd") ||
		!strings.HasSuffix(dry.Stdout, "dry run: nothing changed\n") || !strings.Contains(dry.Stderr, "a post posts again") {
		t.Errorf("replay --dry-run: exit %d, %q %q", dry.Code, dry.Stdout, dry.Stderr)
	}
	if n := rows(); n != before {
		t.Fatalf("a dry run changed the outbox: %d rows → %d", before, n)
	}

	// Replay of the done forward: the handler sees the new key.
	rep := ackd("outbox", "replay", fwdID)
	if rep.Code != 0 || !strings.Contains(rep.Stdout, "row "+fwdID+" → row ") || !strings.Contains(rep.Stdout, "key EvPause1:fwd#r1") ||
		!strings.Contains(rep.Stderr, "warning: a replay performs each row's effect again") {
		t.Fatalf("replay: exit %d, %q %q", rep.Code, rep.Stdout, rep.Stderr)
	}
	procWaitFor(t, "the replay delivered", 20*time.Second, func() bool { return status("EvPause1:fwd#r1") == "done" })
	if got := keys(); !slices.Equal(got, []string{"EvPause1:fwd", "EvPause1:fwd#r1"}) {
		t.Fatalf("the handler got keys %q, want the original then EvPause1:fwd#r1", got)
	}
	if s := status("EvPause1:fwd"); s != "done" {
		t.Errorf("the original is %s after the replay", s)
	}
	if n := procQueryInt(t, sdb, `SELECT count(*) FROM slack_event_receipts WHERE event_id = 'EvPause1'`); n != 1 {
		t.Errorf("%d receipts for EvPause1", n)
	}
	d.stop()
}

// The command line acts on what it previewed too: --dry-run prints the
// selection as a command with absolute times and --expect N, and a run
// whose selection no longer has N rows changes nothing and says both
// numbers (issue 38.1).
func TestReplayActsOnWhatItPreviewed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	hook := procNewHook(t, http.StatusOK, false)
	cfg := procLogAndForwardConfig(t, dir, hook.URL) // routes "log" and "fwd"
	d := procServe(t, procServeOpts{Config: cfg, DB: db})
	sdb := procOpenDB(t, db)
	for _, id := range []string{"EvPrev1", "EvPrev2"} {
		d.mustPostEvent(procMention(id, "hi"))
	}
	procWaitFor(t, "both log rows done", 20*time.Second, func() bool {
		return procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE effect = 'log' AND status = 'done'`) == 2
	})
	ackd := func(args ...string) procResult {
		t.Helper()
		return procRun(t, procEnv(), append(args, "--db", db, "--config", cfg)...)
	}
	r := ackd("outbox", "replay", "--route", "log", "--since", "1h", "--dry-run")
	m := regexp.MustCompile(`to replay exactly these: ackd (outbox replay --route log --since (\S+) --until (\S+) --status done --expect 2)\n`).FindStringSubmatch(r.Stdout)
	if r.Code != 0 || m == nil {
		t.Fatalf("replay --dry-run: exit %d, stdout %q; want the selection as a command with --expect 2", r.Code, r.Stdout)
	}
	for _, ts := range m[2:4] {
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			t.Errorf("the printed window %q is not an absolute time: %v", ts, err)
		}
	}
	rows := func() int64 { return procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE effect = 'log'`) }
	wrong := ackd(strings.Fields(strings.Replace(m[1], "--expect 2", "--expect 3", 1))...)
	if wrong.Code == 0 || !strings.Contains(wrong.Stderr, "the preview counted 3 rows, the same filter selects 2 now") {
		t.Errorf("replay --expect 3 of 2 rows: exit %d, stderr %q; want a refusal naming both numbers", wrong.Code, wrong.Stderr)
	}
	if n := rows(); n != 2 {
		t.Fatalf("%d log rows after a refused replay, want 2", n)
	}
	if ok := ackd(strings.Fields(m[1])...); ok.Code != 0 || rows() != 4 {
		t.Fatalf("the printed command: exit %d (%s), %d log rows; want 4", ok.Code, ok.Stderr, rows())
	}
	// A new event inside a relative window does not join the printed one.
	d.mustPostEvent(procMention("EvPrev3", "later"))
	procWaitFor(t, "the third log row done", 20*time.Second, func() bool {
		return procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE idempotency_key = 'EvPrev3:log' AND status = 'done'`) == 1
	})
	if again := ackd(strings.Fields(m[1])...); again.Code != 0 || rows() != 7 {
		t.Errorf("the printed command again: exit %d (%s), %d log rows; want 7 (the two originals once more, not EvPrev3 nor the replays)", again.Code, again.Stderr, rows())
	}
}
