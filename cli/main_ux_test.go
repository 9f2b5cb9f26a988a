package cli

// Issue 16: what a new user trips over, tested through the real binary.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/sweep"
)

// Issue 16.1: a hand-run sweep that lacks a credential leaves the rows that
// need it alone (no attempt spent, no last error), says so on stderr, and
// exits non-zero when it could do nothing; with the credential the same
// command performs them.
func TestSweepOnceWithoutCredentialsLeavesRowsAlone(t *testing.T) {
	t.Parallel()

	t.Run("Web API rows are not claimed without SLACK_BOT_TOKEN", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		db := filepath.Join(dir, "ackd.db")
		api := fakeslack.New(t, "xoxb-test")
		cfg := procWriteConfig(t, dir, "ackd.toml", `
[sweep]
immediate = false
interval  = "1h"

[[route]]
name     = "eyes"
event    = "app_mention"
effect   = "react"
reaction = "eyes"
`)
		d := procServe(t, procServeOpts{Config: cfg, DB: db})
		d.mustPostEvent(procMention("EvNoTok1", "hi"))
		d.stop()

		r := procRun(t, procEnv(), "sweep", "--once", "--config", cfg, "--db", db)
		if r.Code == 0 {
			t.Fatalf("sweep --once without a token exited 0 while a row waits; stdout %q stderr:\n%s", r.Stdout, r.Stderr)
		}
		if r.Stdout != "claimed=0 done=0 retried=0 parked=0 fenced=0\n" {
			t.Errorf("stdout %q, want nothing claimed", r.Stdout)
		}
		for _, want := range []string{"not claiming rows this process cannot perform: react (SLACK_BOT_TOKEN is not set)", "SLACK_BOT_TOKEN is not set", "performed nothing while 1 rows are due"} {
			if !strings.Contains(r.Stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.Stderr)
			}
		}
		// Issue 25.6: both lines name the same effects, the ones the routes use.
		if !strings.Contains(r.Stderr, "they may need (react (SLACK_BOT_TOKEN is not set))") || strings.Contains(r.Stderr, "post (") || strings.Contains(r.Stderr, "update (") {
			t.Errorf("the two stderr lines name different effects:\n%s", r.Stderr)
		}
		sdb := procOpenDB(t, db)
		if n := procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE status = 'pending' AND attempts = 0 AND last_error IS NULL AND claim_token IS NULL`); n != 1 {
			t.Fatalf("untouched pending rows: %d, want 1", n)
		}

		ok := procMustRun(t, procEnv("SLACK_BOT_TOKEN=xoxb-test", "SLACK_API_URL="+api.URL()), "sweep", "--once", "--config", cfg, "--db", db)
		if ok.Stdout != "claimed=1 done=1 retried=0 parked=0 fenced=0\n" || strings.Contains(ok.Stderr, "not claiming") {
			t.Errorf("sweep --once with the token: stdout %q stderr:\n%s", ok.Stdout, ok.Stderr)
		}
		if n := len(api.CallsTo("reactions.add")); n != 1 {
			t.Errorf("reactions.add calls: %d, want 1", n)
		}
	})

	t.Run("an empty queue is not an error, and the dry run needs no token", func(t *testing.T) {
		t.Parallel()
		db := filepath.Join(t.TempDir(), "ackd.db")
		procMustRun(t, procEnv(), "migrate", "--db", db)
		r := procMustRun(t, procEnv(), "sweep", "--once", "--db", db)
		if strings.Contains(r.Stderr, "not claiming") {
			t.Errorf("with no route needing the token, the sweep still talks about it:\n%s", r.Stderr)
		}
	})

	t.Run("a signed forward is given back untouched without ACKD_FORWARD_SECRET", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		db := filepath.Join(dir, "ackd.db")
		hook := procNewHook(t, http.StatusOK, false)
		cfg := procWriteConfig(t, dir, "ackd.toml", fmt.Sprintf(`
[sweep]
immediate = false
interval  = "1h"

[[route]]
name   = "fwd"
event  = "app_mention"
effect = "forward"
url    = %q
`, hook.URL))
		const secret = "forward-secret-0123"
		d := procServe(t, procServeOpts{Config: cfg, DB: db, Env: procEnv("ACKD_FORWARD_SECRET=" + secret)})
		d.mustPostEvent(procMention("EvSigned1", "hi"))
		d.stop()

		r := procRun(t, procEnv(), "sweep", "--once", "--config", cfg, "--db", db)
		if r.Code == 0 || r.Stdout != "claimed=1 done=0 retried=0 parked=0 fenced=0 skipped=1\n" {
			t.Fatalf("sweep --once without the forward secret: exit %d stdout %q stderr:\n%s", r.Code, r.Stdout, r.Stderr)
		}
		if !strings.Contains(r.Stderr, "forward (ACKD_FORWARD_SECRET is not set)") {
			t.Errorf("stderr does not name the forward secret:\n%s", r.Stderr)
		}
		if n := len(hook.requests()); n != 0 {
			t.Fatalf("the handler received %d unsigned requests", n)
		}
		sdb := procOpenDB(t, db)
		if n := procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE status = 'pending' AND attempts = 0 AND claim_token IS NULL`); n != 1 {
			t.Fatalf("pending rows with no attempt spent: %d, want 1", n)
		}
		// Given back due a few seconds later, and handed back again for as
		// long as the row is younger than sweep.HandBackLimit. The test
		// moves the due time and the recording time instead of waiting: a
		// row older than the limit parks, naming what is missing, rather
		// than going round forever.
		if _, err := sdb.Exec(`UPDATE outbox SET next_attempt_at = 0, created_at = created_at - ?`,
			(sweep.HandBackLimit + time.Minute).Milliseconds()); err != nil {
			t.Fatal(err)
		}
		r = procRun(t, procEnv(), "sweep", "--once", "--config", cfg, "--db", db)
		if r.Stdout != "claimed=1 done=0 retried=0 parked=1 fenced=0\n" {
			t.Fatalf("sweep --once on a row handed back past the limit: exit %d stdout %q stderr:\n%s", r.Code, r.Stdout, r.Stderr)
		}
		var lastErr string
		if err := sdb.QueryRow(`SELECT last_error FROM outbox WHERE status = 'parked'`).Scan(&lastErr); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(lastErr, "no_forward_secret") || !strings.Contains(lastErr, "ACKD_FORWARD_SECRET is not set") ||
			!strings.Contains(lastErr, "within 1h0m0s of its recording") {
			t.Errorf("parked row's last_error = %q", lastErr)
		}
		if !strings.Contains(r.Stderr, "effect parked") {
			t.Errorf("stderr does not say the row parked:\n%s", r.Stderr)
		}
		if n := len(hook.requests()); n != 0 {
			t.Fatalf("the handler received %d unsigned requests", n)
		}
		// The operator sets the secret and retries the parked row.
		procMustRun(t, procEnv(), "outbox", "retry", "--all-parked", "--db", db)
		procMustRun(t, procEnv("ACKD_FORWARD_SECRET="+secret), "sweep", "--once", "--config", cfg, "--db", db)
		if reqs := hook.requests(); len(reqs) != 1 {
			t.Fatalf("the handler received %d requests with the secret, want 1", len(reqs))
		}
	})

	t.Run("an unsigned forward goes out without the secret, as before", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		db := filepath.Join(dir, "ackd.db")
		hook := procNewHook(t, http.StatusOK, false)
		cfg := procWriteConfig(t, dir, "ackd.toml", fmt.Sprintf(`
[sweep]
immediate = false
interval  = "1h"

[[route]]
name   = "fwd"
event  = "app_mention"
effect = "forward"
url    = %q
`, hook.URL))
		d := procServe(t, procServeOpts{Config: cfg, DB: db})
		d.mustPostEvent(procMention("EvUnsigned1", "hi"))
		d.stop()
		r := procMustRun(t, procEnv(), "sweep", "--once", "--config", cfg, "--db", db)
		if r.Stdout != "claimed=1 done=1 retried=0 parked=0 fenced=0\n" {
			t.Errorf("stdout %q", r.Stdout)
		}
	})
}

// writeFile writes a file into dir and returns its path.
func writeFile(tb testing.TB, dir, name, text string) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// Issue 16.2: a template field typo stops startup with one line naming the
// route, the key and the field; nothing is created.
func TestTemplateTypoStopsStartup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, route string
		want        []string
	}{
		{"a struct field typo in text", `
[[route]]
name   = "deploy"
command = "/deploy"
effect = "respond"
text   = "Deployed {{.Txt}}"
`, []string{`route "deploy": text: {{.Txt}}: no field Txt (the fields are .Text, .User`}},
		{"a typo in ack_text", `
[[route]]
name     = "deploy"
command  = "/deploy"
ack_text = "Deploying {{.Txet}}"
effect   = "log"
`, []string{`route "deploy": ack_text: {{.Txet}}: no field Txet`}},
		{".Event on a command route", `
[[route]]
name    = "deploy"
command = "/deploy"
effect  = "respond"
text    = "{{.Event.text}}"
`, []string{`route "deploy": text: .Event is set only for Events API routes`}},
		{"a parse error", `
[[route]]
name   = "say"
event  = "app_mention"
effect = "post"
text   = "{{.Text"
`, []string{`route "say": text: line 1: unclosed action`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			db := filepath.Join(dir, "ackd.db")
			cfg := procWriteConfig(t, dir, "ackd.toml", tc.route)
			r := procRun(t, procEnv(), "serve", "--listen", procFreeAddr(t), "--db", db, "--config", cfg)
			if r.Code == 0 {
				t.Fatalf("serve started; stderr:\n%s", r.Stderr)
			}
			line := procOneLine(t, r.Stderr)
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("stderr %q lacks %q", line, w)
				}
			}
			if strings.Count(line, "template:") > 0 {
				t.Errorf("stderr repeats text/template's prefixes: %q", line)
			}
			if _, err := os.Stat(db); err == nil {
				t.Errorf("a refused startup created the database")
			}
		})
	}

	t.Run("keys of .Event are not known before the event and do not stop startup", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		cfg := procWriteConfig(t, dir, "ackd.toml", `
[[route]]
name   = "say"
event  = "reaction_added"
effect = "post"
text   = "{{.Event.item.channel}} {{.Event.reaction}}"
`)
		d := procServe(t, procServeOpts{Config: cfg, DB: filepath.Join(dir, "ackd.db")})
		d.stop()
	})
}

// Issue 16.2: a template that fails at perform time parks its row with one
// clean line naming the route, the key and the field.
func TestTemplateRuntimeErrorIsOneLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	api := fakeslack.New(t, "xoxb-test")
	cfg := procWriteConfig(t, dir, "ackd.toml", fmt.Sprintf(`
[slack]
api_url = %q

[[route]]
name   = "say"
event  = "app_mention"
effect = "post"
text   = "{{.Event.blocks.x}}"
`, api.URL()))
	d := procServe(t, procServeOpts{Config: cfg, DB: db, Env: procEnv("SLACK_BOT_TOKEN=xoxb-test")})
	d.mustPostEvent(procMention("EvTmpl1", "hi"))
	sdb := procOpenDB(t, db)
	procWaitFor(t, "the row to park", 20*time.Second, func() bool {
		return procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE status = 'parked'`) == 1
	})
	d.stop()
	var lastErr string
	if err := sdb.QueryRow(`SELECT last_error FROM outbox`).Scan(&lastErr); err != nil {
		t.Fatal(err)
	}
	want := `template: route "say": text: {{.Event.blocks.x}}: nil pointer evaluating interface {}.x`
	if lastErr != want {
		t.Errorf("last_error %q, want %q", lastErr, want)
	}
}

// Issue 16.3: ack_text is a template over the command's facts; one that
// fails on a request answers the literal text and logs why.
func TestAckTextIsATemplate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := procWriteConfig(t, dir, "ackd.toml", `
[[route]]
name     = "deploy"
command  = "/deploy"
ack_text = "Deploying {{.Text}} for <@{{.User}}>"
effect   = "log"

[[route]]
name     = "odd"
command  = "/odd"
ack_text = "{{if ne .Text \"sample text\"}}{{index .Text 99}}{{end}}fallback"
effect   = "log"
`)
	d := procServe(t, procServeOpts{Config: cfg, DB: filepath.Join(dir, "ackd.db")})
	send := func(form string) string {
		t.Helper()
		f := writeFile(t, t.TempDir(), "cmd.form", form)
		return procMustRun(t, procEnv(), "send", "--form", "--listen", d.Addr, f).Stdout
	}
	if out := send("command=%2Fdeploy&text=api+v2&user_id=U061F7AUR&trigger_id=1.2.3"); !strings.Contains(out, `"text":"Deploying api v2 for \u003c@U061F7AUR\u003e"`) {
		t.Errorf("ack_text not rendered: %q", out)
	}
	out := send("command=%2Fodd&text=short&trigger_id=1.2.4")
	if !strings.Contains(out, `"text":"{{if ne .Text`) {
		t.Errorf("a failing ack_text did not answer the literal text: %q", out)
	}
	d.stop()
	if !strings.Contains(d.Stderr.String(), "ack_text did not render") {
		t.Errorf("the failure was not logged:\n%s", d.Stderr.String())
	}
}

// Issue 16.6: the outbox commands tell the truth: an unknown status is
// refused naming the valid ones, retry of a row that is not parked says what
// it is, ATTEMPTS counts the attempt that succeeded, and a done row's old
// error is labelled as such.
func TestOutboxCommandsTellTheTruth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	hook := procNewHook(t, http.StatusServiceUnavailable, false)
	cfg := procWriteConfig(t, dir, "ackd.toml", fmt.Sprintf(`
[sweep]
immediate = false
interval  = "1h"

[[route]]
name   = "log"
event  = "app_mention"
effect = "log"

[[route]]
name   = "fwd"
event  = "app_mention"
effect = "forward"
url    = %q
`, hook.URL))
	d := procServe(t, procServeOpts{Config: cfg, DB: db})
	d.mustPostEvent(procMention("EvTruth1", "one"))
	d.stop()
	ackd := func(args ...string) procResult {
		t.Helper()
		return procRun(t, procEnv(), append(args, "--db", db, "--config", cfg)...)
	}
	sdb := procOpenDB(t, db)
	if out := ackd("sweep", "--once").Stdout; out != "claimed=2 done=1 retried=1 parked=0 fenced=0\n" {
		t.Fatalf("first sweep: %q", out)
	}
	hook.status.Store(http.StatusOK)
	if _, err := sdb.Exec(`UPDATE outbox SET next_attempt_at = 0 WHERE status = 'pending'`); err != nil {
		t.Fatal(err)
	}
	if out := ackd("sweep", "--once").Stdout; out != "claimed=1 done=1 retried=0 parked=0 fenced=0\n" {
		t.Fatalf("second sweep: %q", out)
	}

	list := ackd("outbox", "list")
	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(list.Stdout), "\n")[1:] {
		f := strings.Fields(line)
		rows[f[6]] = f
	}
	if f := rows["EvTruth1:log"]; len(f) != 7 || f[1] != "done" || f[3] != "1" {
		t.Errorf("log row done on its first attempt: %q, want status done, ATTEMPTS 1, no last error", f)
	}
	if f := rows["EvTruth1:fwd"]; len(f) < 8 || f[1] != "done" || f[3] != "2" || !strings.Contains(strings.Join(f[7:], " "), "(before it succeeded) http_503") {
		t.Errorf("forward row done on its second attempt: %q, want ATTEMPTS 2 and a labelled last error", f)
	}

	bogus := ackd("outbox", "list", "--status", "bogus")
	if bogus.Code == 0 || !strings.Contains(bogus.Stderr, `--status "bogus" is not a status; use one of pending, done, parked`) {
		t.Errorf("outbox list --status bogus: exit %d, stderr %q", bogus.Code, bogus.Stderr)
	}

	id := rows["EvTruth1:log"][0]
	done := ackd("outbox", "retry", id)
	if done.Code == 0 || !strings.Contains(done.Stderr, "row "+id+" is done") || strings.Contains(done.Stderr, "not found") {
		t.Errorf("outbox retry of a done row: exit %d, stderr %q", done.Code, done.Stderr)
	}
	if _, err := sdb.Exec(`UPDATE outbox SET status = 'pending', completed_at = NULL WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	pending := ackd("outbox", "retry", id)
	if pending.Code == 0 || !strings.Contains(pending.Stderr, "row "+id+" is pending, not parked") {
		t.Errorf("outbox retry of a pending row: exit %d, stderr %q", pending.Code, pending.Stderr)
	}
	missing := ackd("outbox", "retry", "999999")
	if missing.Code == 0 || !strings.Contains(missing.Stderr, "there is no row 999999") {
		t.Errorf("outbox retry of a missing row: exit %d, stderr %q", missing.Code, missing.Stderr)
	}
}

// procRunIn runs ackd with args in directory dir.
func procRunIn(tb testing.TB, dir string, env []string, args ...string) procResult {
	tb.Helper()
	cmd := exec.Command(procBin, args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		tb.Fatalf("ackd %s: %v", strings.Join(args, " "), err)
	}
	return procResult{Code: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String()}
}

// Issue 16.7: a relative db in a config file is beside the config file,
// whatever directory the command runs in; --db stays relative to the
// working directory, and a PostgreSQL URL is not a path.
func TestRelativeDBIsBesideTheConfigFile(t *testing.T) {
	t.Parallel()
	etc, elsewhere := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(etc, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := procWriteConfig(t, etc, "ackd.toml", "db = \"data/ackd.db\"\n")
	want := filepath.Join(etc, "data", "ackd.db")

	m := procRunIn(t, elsewhere, procEnv(), "migrate", "--config", cfg)
	if m.Code != 0 || m.Stdout != want+": schema version "+fmt.Sprint(schemaVersion(t))+"\n" {
		t.Fatalf("migrate --config from another directory: exit %d stdout %q stderr %q", m.Code, m.Stdout, m.Stderr)
	}
	if _, err := os.Stat(want); err != nil {
		t.Fatalf("the database is not beside the config file: %v", err)
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Errorf("files were created in the working directory: %v", entries)
	}
	if st := procRunIn(t, t.TempDir(), procEnv(), "status", "--config", cfg); st.Code != 0 || !strings.Contains(st.Stdout, want) {
		t.Errorf("status --config from a third directory: exit %d stdout %q stderr %q", st.Code, st.Stdout, st.Stderr)
	}
	if st := procRunIn(t, elsewhere, procEnv(), "status", "--config", cfg, "--db", "flag.db"); st.Code == 0 || !strings.Contains(st.Stderr, "flag.db") {
		t.Errorf("--db is relative to the working directory: exit %d stderr %q", st.Code, st.Stderr)
	}
}

// schemaVersion is the number of migrations in the embedded schema.sql.
func schemaVersion(tb testing.TB) int {
	tb.Helper()
	b, err := os.ReadFile("schema.sql")
	if err != nil {
		tb.Fatal(err)
	}
	return strings.Count(string(b), "\n-- migrate: ")
}

// Issue 16.8: a second `ackd serve` on the same database warns naming the
// first; `status` lists the running daemons and forgets one that stopped;
// a serve that cannot bind leaves no database behind.
func TestSecondDaemonOnTheSameDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	first := procServe(t, procServeOpts{DB: db})
	second := procServe(t, procServeOpts{DB: db})
	warn := fmt.Sprintf("pid %d on host", first.cmd.Process.Pid)
	if !strings.Contains(second.Stderr.String(), "another ackd serve is running on this database") ||
		!strings.Contains(second.Stderr.String(), warn) {
		t.Errorf("the second daemon did not warn naming %q:\n%s", warn, second.Stderr.String())
	}
	if strings.Contains(first.Stderr.String(), "another ackd serve") {
		t.Errorf("the first daemon warned about a daemon that started after it")
	}
	st := procMustRun(t, procEnv(), "status", "--db", db).Stdout
	for _, d := range []*procDaemon{first, second} {
		if !strings.Contains(st, fmt.Sprintf("pid %d on host", d.cmd.Process.Pid)) || !strings.Contains(st, "listening on "+d.Addr) {
			t.Errorf("status does not list the daemon pid %d on %s:\n%s", d.cmd.Process.Pid, d.Addr, st)
		}
	}
	var js struct {
		Daemons []struct {
			PID    int    `json:"pid"`
			Listen string `json:"listen"`
		} `json:"daemons"`
	}
	out := procMustRun(t, procEnv(), "status", "--json", "--db", db).Stdout
	if err := json.Unmarshal([]byte(out), &js); err != nil || len(js.Daemons) != 2 || js.Daemons[0].PID != first.cmd.Process.Pid {
		t.Errorf("status --json daemons: %q (%v)", out, err)
	}
	second.stop()
	first.stop()
	if st := procMustRun(t, procEnv(), "status", "--db", db).Stdout; !strings.Contains(st, "none running") {
		t.Errorf("status after both stopped:\n%s", st)
	}

	t.Run("a daemon killed a moment ago is not another daemon", func(t *testing.T) {
		killed := procServe(t, procServeOpts{DB: db})
		killed.kill()
		if st := procMustRun(t, procEnv(), "status", "--db", db).Stdout; !strings.Contains(st, "none running") {
			t.Errorf("status lists a killed daemon:\n%s", st)
		}
		restarted := procServe(t, procServeOpts{DB: db})
		if strings.Contains(restarted.Stderr.String(), "another ackd serve") {
			t.Errorf("the restarted daemon warned about the killed one:\n%s", restarted.Stderr.String())
		}
		restarted.stop()
	})

	t.Run("a serve that cannot bind creates no database", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		fresh := filepath.Join(t.TempDir(), "new.db")
		r := procRun(t, procEnv(), "serve", "--listen", ln.Addr().String(), "--db", fresh)
		if r.Code == 0 || !strings.Contains(r.Stderr, "address already in use") {
			t.Fatalf("serve on a taken port: exit %d stderr %q", r.Code, r.Stderr)
		}
		if _, err := os.Stat(fresh); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a serve that could not bind left %s behind (%v)", fresh, err)
		}
		cfg := procWriteConfig(t, t.TempDir(), "ackd.toml", fmt.Sprintf("[metrics]\nlisten = %q\n", ln.Addr().String()))
		r = procRun(t, procEnv(), "serve", "--listen", procFreeAddr(t), "--db", fresh, "--config", cfg)
		if r.Code == 0 || !strings.Contains(r.Stderr, "metrics.listen") {
			t.Fatalf("serve with a taken metrics port: exit %d stderr %q", r.Code, r.Stderr)
		}
		if _, err := os.Stat(fresh); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a serve that could not bind its metrics listener left %s behind (%v)", fresh, err)
		}
	})
}

// Issue 16.5: ackd says what it decided in X-Ackd-Outcome, and `ackd send`
// prints it: a first delivery and a duplicate no longer look the same, an
// ignored event says why, and a 401 says what to check.
func TestSendSaysWhatAckdDecided(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := procServe(t, procServeOpts{Config: "examples/ackd.toml", DB: filepath.Join(dir, "ackd.db")})
	send := func(env []string, args ...string) procResult {
		t.Helper()
		return procRun(t, env, append([]string{"send", "--listen", d.Addr}, args...)...)
	}
	for _, tc := range []struct {
		file, want string
	}{
		{"examples/app_mention.json", "200 OK (ackd: first delivery, recorded)\n"},
		{"examples/app_mention.json", "200 OK (ackd: duplicate, already recorded: nothing added)\n"},
		{"examples/message_bot.json", "200 OK (ackd: ignored (bot_message), nothing recorded)\n"},
		{"examples/message_edited.json", "200 OK (ackd: ignored (unhandled_subtype), nothing recorded)\n"},
	} {
		if r := send(procEnv(), tc.file); r.Code != 0 || r.Stdout != tc.want {
			t.Errorf("send %s: exit %d stdout %q, want %q", tc.file, r.Code, r.Stdout, tc.want)
		}
	}
	bad := send(procEnv("SLACK_SIGNING_SECRET=not-the-daemons"), "examples/app_mention.json")
	if bad.Code == 0 || bad.Stdout != "401 Unauthorized (ackd: rejected)\n" ||
		!strings.Contains(bad.Stderr, "the signing secret differs from the daemon's, or the clock is off") {
		t.Errorf("send with the wrong secret: exit %d stdout %q stderr %q", bad.Code, bad.Stdout, bad.Stderr)
	}

	// curl sees the same header.
	resp, err := procClient.Get(d.URL + "/slack/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Ackd-Outcome"); got != "rejected" {
		t.Errorf("GET /slack/events: X-Ackd-Outcome %q, want rejected", got)
	}
	d.stop()
	if strings.Contains(d.Stderr.String(), `"err":null`) {
		t.Errorf("the shutdown logged err:null:\n%s", d.Stderr.String())
	}
}

// Issue 16.11: a forward's reply is posted by the immediate sweep, not after
// the ticker (an hour here).
func TestForwardReplyIsSweptAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	api := fakeslack.New(t, "xoxb-test")
	hook := fakeslack.NewHook(t)
	hook.Script(fakeslack.Response{Body: `{"text":"deployed"}`})
	cfg := procWriteConfig(t, dir, "ackd.toml", fmt.Sprintf(`
[slack]
api_url = %q

[sweep]
interval = "1h"

[[route]]
name   = "fwd"
event  = "app_mention"
effect = "forward"
url    = %q
`, api.URL(), hook.URL()))
	d := procServe(t, procServeOpts{Config: cfg, DB: filepath.Join(dir, "ackd.db"), Env: procEnv("SLACK_BOT_TOKEN=xoxb-test")})
	d.mustPostEvent(procMention("EvReply1", "deploy"))
	procWaitFor(t, "the reply to be posted", 20*time.Second, func() bool {
		return len(api.CallsTo("chat.postMessage")) == 1
	})
	if got := api.CallsTo("chat.postMessage")[0].Params.Get("text"); got != "deployed" {
		t.Errorf("posted %q, want the handler's reply", got)
	}
	d.stop()
}

// Issue 16.11: serve --help says the signing secret is required and lists
// the environment; --db and --listen appear only where they are used.
func TestHelpNamesWhatEachCommandUses(t *testing.T) {
	t.Parallel()
	help := func(args ...string) string {
		t.Helper()
		return procMustRun(t, procEnv(), append(args, "--help")...).Stdout
	}
	serve := help("serve")
	for _, want := range []string{"Required over HTTP (serve refuses to start", "SLACK_BOT_TOKEN", "ACKD_FORWARD_SECRET", "SLACK_API_URL", "ACKD_LOG_LEVEL", "_FILE", "--db", "--listen"} {
		if !strings.Contains(serve, want) {
			t.Errorf("serve --help lacks %q:\n%s", want, serve)
		}
	}
	for _, tc := range []struct {
		cmd        []string
		db, listen bool
	}{
		{[]string{"version"}, false, false},
		{[]string{"send"}, false, true}, // --listen finds the daemon to send to
		{[]string{"status"}, true, false},
		{[]string{"outbox", "list"}, true, false},
		{[]string{"sweep"}, true, false},
		{[]string{"migrate"}, true, false},
	} {
		h := help(tc.cmd...)
		if got := strings.Contains(h, "--db "); got != tc.db {
			t.Errorf("%v --help shows --db: %v, want %v", tc.cmd, got, tc.db)
		}
		if got := strings.Contains(h, "--listen "); got != tc.listen {
			t.Errorf("%v --help shows --listen: %v, want %v", tc.cmd, got, tc.listen)
		}
	}
	if r := procRun(t, procEnv(), "version", "--db", "x.db"); r.Code == 0 {
		t.Errorf("version --db was accepted")
	}
	if r := procMustRun(t, procEnv(), "completion", "bash"); !strings.Contains(r.Stdout, "bash completion") {
		t.Errorf("ackd completion bash printed no completion script")
	}
}
