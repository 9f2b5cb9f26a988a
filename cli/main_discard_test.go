package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
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
	// Issue 29.9: a discard is undone by retrying the row, while it exists.
	if r := ackd("outbox", "retry", first); r.Code != 0 || r.Stdout != "requeued row "+first+" (its discard undone)\n" {
		t.Errorf("retry of a discarded row: exit %d, %q %q", r.Code, r.Stdout, r.Stderr)
	}
	if n := procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE id = `+first+` AND status = 'pending' AND completed_at IS NULL AND attempts = 0`); n != 1 {
		t.Errorf("the retried discarded row is not pending afresh")
	}
	if r := ackd("outbox", "discard", first); r.Code != 0 || !strings.HasPrefix(r.Stdout, "discarded row "+first+" (it was pending") {
		t.Fatalf("discard of the row put back: exit %d, %q %q", r.Code, r.Stdout, r.Stderr)
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
	r := ackd("outbox", "discard", "--all-parked", "--route", "fwd", "--effect", "forward")
	undo, ok := strings.CutPrefix(r.Stdout, "discarded 2 parked rows\n"+
		"undo while they exist: ackd outbox retry --all-discarded --route fwd --effect forward --discarded-since ")
	if r.Code != 0 || !ok {
		t.Fatalf("discard --all-parked --route fwd: exit %d, %q %q", r.Code, r.Stdout, r.Stderr)
	}
	// The undo it prints selects this discard's two rows, not the one
	// discarded by id before it (on purpose, say).
	undoArgs := []string{"outbox", "retry", "--all-discarded", "--route", "fwd", "--effect", "forward", "--discarded-since", strings.TrimSpace(undo)}
	if r := ackd(append(undoArgs, "--dry-run")...); r.Code != 0 || !strings.HasPrefix(r.Stdout, "would retry 2 discarded rows\n") || strings.Contains(r.Stdout, "EvDis0:fwd") {
		t.Errorf("the printed undo, dry run: exit %d, %q %q; want this discard's 2 rows", r.Code, r.Stdout, r.Stderr)
	}
	if r := ackd("outbox", "retry", "--all-discarded", "--route", "fwd", "--effect", "forward", "--dry-run"); !strings.HasPrefix(r.Stdout, "would retry 3 discarded rows\n") {
		t.Errorf("without --discarded-since the undo would take 3 rows: %q %q", r.Stdout, r.Stderr)
	}
	for _, bad := range [][]string{
		{"outbox", "retry", "--all-discarded", "--discarded-since", "yesterday"},
		{"outbox", "retry", "--all-parked", "--discarded-since", strings.TrimSpace(undo)},
	} {
		if r := ackd(bad...); r.Code == 0 || !strings.Contains(r.Stderr, "--discarded-since") {
			t.Errorf("%s: exit %d, stderr %q; want a refusal naming --discarded-since", strings.Join(bad, " "), r.Code, r.Stderr)
		}
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

// Issue 29.9: a filter that could select the wrong rows is refused, with
// the exact message, exit 1 and nothing changed: an empty --route or
// --effect (an unset shell variable discarded every parked row), and a
// name neither the config nor the rows know ("did you mean" when one is
// close). --dry-run shows the count and the rows and changes nothing; a
// bulk discard says how to undo it, and the undo puts the rows back.
// Real processes on SQLite and PostgreSQL.
func TestOutboxFilterRefusals(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { testOutboxFilterRefusals(t, filepath.Join(t.TempDir(), "ackd.db")) })
	t.Run("postgres", func(t *testing.T) { testOutboxFilterRefusals(t, pgtest.URL(t)) })
}

func testOutboxFilterRefusals(t *testing.T, db string) {
	dir := t.TempDir()
	hook := procNewHook(t, http.StatusBadRequest, false)
	cfg := procLogAndForwardConfig(t, dir, hook.URL)
	d := procServe(t, procServeOpts{Config: cfg, DB: db})
	for i := range 3 {
		d.mustPostEvent(procMention(fmt.Sprintf("EvFil%d", i), "hi"))
	}
	sdb := procOpenDB(t, db)
	procWaitFor(t, "3 parked rows", 20*time.Second, func() bool {
		return procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE status = 'parked'`) == 3
	})
	d.stop()
	statuses := func() string {
		rows, err := sdb.Query(`SELECT id, status FROM outbox ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var b strings.Builder
		for rows.Next() {
			var id int64
			var st string
			if err := rows.Scan(&id, &st); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%d:%s ", id, st)
		}
		return b.String()
	}
	before := statuses()
	withConfig := func(args ...string) procResult {
		return procRun(t, procEnv(), append(args, "--db", db, "--config", cfg)...)
	}
	noConfig := func(args ...string) procResult { return procRun(t, procEnv(), append(args, "--db", db)...) }
	for _, tc := range []struct {
		run  func(...string) procResult
		args []string
		want string
	}{
		{withConfig, []string{"outbox", "discard", "--all-parked", "--route", ""},
			`outbox discard: --route is empty (an unset shell variable?) and would select every parked row: name one (known routes: fwd, log), or leave --route out to mean every route`},
		{withConfig, []string{"outbox", "retry", "--all-parked", "--route", ""},
			`outbox retry: --route is empty (an unset shell variable?) and would select every parked row: name one (known routes: fwd, log), or leave --route out to mean every route`},
		{withConfig, []string{"outbox", "discard", "--all-parked", "--effect", ""},
			`outbox discard: --effect is empty (an unset shell variable?) and would select every parked row: name one (known effects: forward, log, post, react, redeliver, respond, step, step_deadline, stream, stream_stop, update), or leave --effect out to mean every effect`},
		{withConfig, []string{"outbox", "discard", "--all-parked", "--route", "fwdd"},
			`outbox discard: --route "fwdd" is not a route of the config (` + cfg + `) or of the parked rows: did you mean "fwd"? Known routes: fwd, log`},
		{withConfig, []string{"outbox", "discard", "--all-parked", "--route", "billing"},
			`outbox discard: --route "billing" is not a route of the config (` + cfg + `) or of the parked rows. Known routes: fwd, log`},
		{noConfig, []string{"outbox", "discard", "--all-parked", "--route", "log"},
			`outbox discard: --route "log" is not a route of the parked rows (give --config to name the config's routes too). Known routes: fwd`},
		{withConfig, []string{"outbox", "retry", "--all-discarded", "--effect", "forwrd"},
			`outbox retry: --effect "forwrd" is not an effect ackd performs, nor one of the discarded rows: did you mean "forward"? Known effects: forward, log, post, react, redeliver, respond, step, step_deadline, stream, stream_stop, update`},
		{withConfig, []string{"outbox", "retry", "--all-parked", "--all-discarded"},
			`outbox retry: --all-parked and --all-discarded select different rows; give one`},
		{withConfig, []string{"outbox", "discard", "--all-discarded"}, `unknown flag: --all-discarded`},
	} {
		r := tc.run(tc.args...)
		if r.Code != 1 || r.Stderr != "ackd: "+tc.want+"\n" || r.Stdout != "" {
			t.Errorf("ackd %s: exit %d\nstdout %q\nstderr %q\nwant stderr %q", strings.Join(tc.args, " "), r.Code, r.Stdout, r.Stderr, "ackd: "+tc.want+"\n")
		}
		if now := statuses(); now != before {
			t.Fatalf("ackd %s changed rows: %s → %s", strings.Join(tc.args, " "), before, now)
		}
	}

	// --dry-run: the count and the rows, nothing changed.
	r := withConfig("outbox", "discard", "--all-parked", "--route", "fwd", "--dry-run")
	lines := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
	if r.Code != 0 || len(lines) != 7 || lines[0] != "would discard 3 parked rows" ||
		lines[1] != "to discard exactly these: ackd outbox discard --all-parked --route fwd --expect 3" || !strings.HasPrefix(lines[2], "ID  EFFECT   ROUTE  ATTEMPTS") ||
		!strings.Contains(lines[3], "EvFil0:fwd") || lines[6] != "dry run: nothing changed" {
		t.Errorf("discard --dry-run: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if now := statuses(); now != before {
		t.Fatalf("--dry-run changed rows: %s → %s", before, now)
	}
	if r := withConfig("outbox", "discard", "--all-parked", "--route", "fwd"); r.Code != 0 || !strings.HasPrefix(r.Stdout, "discarded 3 parked rows\nundo while they exist: ackd outbox retry --all-discarded --route fwd ") {
		t.Fatalf("discard --all-parked --route fwd: exit %d %q %q", r.Code, r.Stdout, r.Stderr)
	}
	if r := withConfig("outbox", "retry", "--all-discarded", "--route", "fwd", "--dry-run"); r.Code != 0 || !strings.HasPrefix(r.Stdout, "would retry 3 discarded rows\n") {
		t.Errorf("retry --all-discarded --dry-run: exit %d %q %q", r.Code, r.Stdout, r.Stderr)
	}
	if r := withConfig("outbox", "retry", "--all-discarded", "--route", "fwd"); r.Code != 0 || r.Stdout != "requeued 3 discarded rows\n" {
		t.Errorf("the undo: exit %d %q %q", r.Code, r.Stdout, r.Stderr)
	}
	if n := procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE status = 'pending' AND attempts = 0 AND completed_at IS NULL`); n != 3 {
		t.Errorf("%d rows pending afresh after the undo, want 3", n)
	}
}

// Issue 29.9: a row waiting for a credential the running daemon lacks (no
// SLACK_BOT_TOKEN for a post route) says so in `outbox show` and `status`,
// and can be discarded (and put back); a row a sweep holds under a live
// lease is refused, unchanged. Real processes on SQLite and PostgreSQL.
func TestOutboxWaitingForACredential(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { testOutboxWaiting(t, filepath.Join(t.TempDir(), "ackd.db")) })
	t.Run("postgres", func(t *testing.T) { testOutboxWaiting(t, pgtest.URL(t)) })
}

func testOutboxWaiting(t *testing.T, db string) {
	dir := t.TempDir()
	cfg := procWriteConfig(t, dir, "ackd.toml", `
[[route]]
name   = "answer"
event  = "app_mention"
effect = "post"
text   = "on it"
`)
	d := procServe(t, procServeOpts{Config: cfg, DB: db}) // procEnv: no SLACK_BOT_TOKEN
	d.mustPostEvent(procMention("EvWait1", "hi"))
	d.mustPostEvent(procMention("EvWait2", "hi"))
	sdb := procOpenDB(t, db)
	id := fmt.Sprint(procQueryInt(t, sdb, `SELECT id FROM outbox WHERE idempotency_key = 'EvWait1:answer'`))
	other := fmt.Sprint(procQueryInt(t, sdb, `SELECT id FROM outbox WHERE idempotency_key = 'EvWait2:answer'`))
	ackd := func(args ...string) procResult {
		t.Helper()
		return procRun(t, procEnv(), append(args, "--db", db, "--config", cfg)...)
	}
	waiting := regexp.MustCompile(`(?m)^waiting for +a process with SLACK_BOT_TOKEN \(or \[oauth\] installations\): the running daemons \(pid \d+ on [^)]+\) lack it, so none performs post rows`)
	if r := ackd("outbox", "show", id); r.Code != 0 || !waiting.MatchString(r.Stdout) {
		t.Errorf("outbox show of a row waiting for a token: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	var one map[string]any
	if r := ackd("outbox", "show", "--json", id); json.Unmarshal([]byte(r.Stdout), &one) != nil || !strings.HasPrefix(fmt.Sprint(one["waiting_for"]), "a process with SLACK_BOT_TOKEN") {
		t.Errorf("outbox show --json: %s", r.Stdout)
	}
	if r := ackd("status"); r.Code != 0 || !regexp.MustCompile(`(?m)^waiting +2 post rows due, for SLACK_BOT_TOKEN \(or \[oauth\] installations\): no running daemon has it`).MatchString(r.Stdout) {
		t.Errorf("status with rows waiting for a token: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	var st struct {
		Waiting []struct {
			Effect string `json:"effect"`
			Rows   int    `json:"rows"`
		} `json:"waiting"`
	}
	if r := ackd("status", "--json"); json.Unmarshal([]byte(r.Stdout), &st) != nil || len(st.Waiting) != 1 || st.Waiting[0].Effect != "post" || st.Waiting[0].Rows != 2 {
		t.Errorf("status --json: %s", r.Stdout)
	}

	// Discarded while it waits, and put back.
	if r := ackd("outbox", "discard", id); r.Code != 0 || r.Stdout != "discarded row "+id+" (it was pending: no sweep will perform it; `ackd outbox retry "+id+"` puts it back)\n" {
		t.Errorf("discard of a waiting row: exit %d %q %q", r.Code, r.Stdout, r.Stderr)
	}
	if r := ackd("outbox", "retry", id); r.Code != 0 || r.Stdout != "requeued row "+id+" (its discard undone)\n" {
		t.Errorf("retry of the discarded row: exit %d %q %q", r.Code, r.Stdout, r.Stderr)
	}

	// A row a sweep holds: refused, unchanged.
	if _, err := sdb.Exec(`UPDATE outbox SET claim_token = 'someone', claim_expires_at = ` + fmt.Sprint(time.Now().Add(time.Hour).UnixMilli()) + ` WHERE id = ` + other); err != nil {
		t.Fatal(err)
	}
	if r := ackd("outbox", "discard", other); r.Code != 1 || !regexp.MustCompile(`^ackd: outbox discard: row `+other+` is being performed by a sweep \(attempt 1, lease until [0-9-]+ [0-9:]+\); wait for its outcome\n$`).MatchString(r.Stderr) {
		t.Errorf("discard of a leased row: exit %d %q %q", r.Code, r.Stdout, r.Stderr)
	}
	if n := procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE id = `+other+` AND status = 'pending' AND claim_token = 'someone'`); n != 1 {
		t.Error("the refused discard changed the leased row")
	}

	d.stop()
	if r := ackd("outbox", "show", id); !regexp.MustCompile("(?m)^waiting for +a sweep: no ackd serve is running on this database; `ackd sweep --once` performs due rows by hand \\(with SLACK_BOT_TOKEN \\(or \\[oauth\\] installations\\)\\)$").MatchString(r.Stdout) {
		t.Errorf("outbox show with no daemon running:\n%s%s", r.Stdout, r.Stderr)
	}
}
