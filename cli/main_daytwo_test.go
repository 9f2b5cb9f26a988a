package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/ingress"
	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/pgtest"
)

// Issue 25.4: the typos a new user makes stop a real `ackd serve` at once,
// with the file, the key or the line named, instead of starting cleanly.
func TestServeRefusesTypos(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty-secret")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// An empty forward secret file starts with a warning (it is "not set",
	// main_credentials_test.go); a step route cannot work without its key.
	step := procWriteConfig(t, dir, "step.toml", "[[route]]\nname = \"st\"\nevent = \"function_executed\"\neffect = \"step\"\nurl = \"http://127.0.0.1:9/\"\n")
	for _, tc := range []struct {
		name string
		env  []string
		toml string
		want string
	}{
		{"an empty SLACK_SIGNING_SECRET_FILE", []string{"SLACK_SIGNING_SECRET=", "SLACK_SIGNING_SECRET_FILE=" + empty}, "",
			"SLACK_SIGNING_SECRET_FILE names " + empty + ", which is empty"},
		{"an empty token key file with a step route", []string{"ACKD_TOKEN_KEY=", "ACKD_TOKEN_KEY_FILE=" + empty}, step,
			`route "st": effect step seals each workflow step's execution token with ACKD_TOKEN_KEY`},
		{"an unknown key", nil, procWriteConfig(t, dir, "key.toml", "[sweep]\nintervl = \"5s\"\n"),
			`line 2: unknown key "sweep.intervl": did you mean "interval"?`},
		{"a number in quotes", nil, procWriteConfig(t, dir, "batch.toml", "[sweep]\nbatch = \"100\"\n"),
			`line 2: key "sweep.batch" must be a whole number without quotes, e.g. 25, not a string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"serve", "--listen", procFreeAddr(t), "--db", filepath.Join(t.TempDir(), "ackd.db")}
			if tc.toml != "" {
				args = append(args, "--config", tc.toml)
			}
			r := procRun(t, procEnv(tc.env...), args...)
			if r.Code == 0 || !strings.Contains(r.Stderr, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant it to say %q", r.Code, r.Stderr, tc.want)
			}
		})
	}
}

// Issue 25.5: `ackd config check` runs serve's startup checks without
// serving, with serve's flags and environment: exit 0 when serve would
// start, 1 naming what fails, and it creates or migrates nothing.
func TestConfigCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := procWriteConfig(t, dir, "good.toml", "[[route]]\nname = \"eyes\"\nevent = \"message\"\neffect = \"react\"\nreaction = \"eyes\"\n"+
		"[[route]]\nname = \"hi\"\nevent = \"app_mention\"\neffect = \"post\"\ntext = \"hi {{.User}}\"\n")
	badTemplate := procWriteConfig(t, dir, "tmpl.toml", "[[route]]\nname = \"hi\"\nevent = \"app_mention\"\neffect = \"post\"\ntext = \"hi {{.Usr}}\"\n")
	migrated := filepath.Join(dir, "migrated.db")
	procMustRun(t, procEnv(), "migrate", "--db", migrated)
	fresh := filepath.Join(dir, "fresh.db")

	for _, tc := range []struct {
		name     string
		env      []string
		args     []string
		code     int
		want     []string
		notWant  []string
		noCreate string
	}{
		{"a good config on a migrated database", []string{"SLACK_BOT_TOKEN=xoxb-1"}, []string{"--config", good, "--db", migrated}, 0,
			[]string{"ok    routes", "2 in " + good + ": eyes → react, hi → post", "1 executed over sample data",
				"set: SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET", migrated + ": sqlite, schema ", "(current)", "serve would start (0 warnings)"}, nil, ""},
		{"a database not created yet is fine and stays uncreated", []string{"SLACK_BOT_TOKEN=xoxb-1"}, []string{"--config", good, "--db", fresh}, 0,
			[]string{"not created yet"}, nil, fresh},
		{"routes whose effects lack the bot token warn", nil, []string{"--config", good, "--db", migrated}, 0,
			[]string{"warn  credentials", "SLACK_BOT_TOKEN", "(1 warnings)"}, nil, ""},
		{"no signing secret fails", []string{"SLACK_SIGNING_SECRET="}, []string{"--config", good, "--db", migrated}, 1,
			[]string{"FAIL  secrets", "no Slack signing secret"}, nil, ""},
		{"a template naming a missing field fails", nil, []string{"--config", badTemplate, "--db", migrated}, 1,
			[]string{"FAIL  config", `route "hi"`, "text:"}, nil, ""},
		{"ACKD_DB is read as serve reads it", []string{"ACKD_DB=" + filepath.Join(dir, "no", "such", "dir", "x.db")}, []string{"--config", good}, 1,
			[]string{"FAIL  database", "neither does its directory"}, nil, ""},
		{"an unreachable PostgreSQL fails", nil, []string{"--config", good, "--db", "postgres://ackd:s3cret@127.0.0.1:1/x?sslmode=disable&connect_timeout=2"}, 1,
			[]string{"FAIL  database", "connect to postgres://ackd:"}, []string{"s3cret"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := procRun(t, procEnv(tc.env...), append([]string{"config", "check"}, tc.args...)...)
			if r.Code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.Code, tc.code, r.Stdout, r.Stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.Stdout)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(r.Stdout+r.Stderr, w) {
					t.Errorf("output shows %q:\n%s%s", w, r.Stdout, r.Stderr)
				}
			}
			if tc.noCreate != "" {
				if _, err := os.Stat(tc.noCreate); !os.IsNotExist(err) {
					t.Errorf("config check created %s (%v)", tc.noCreate, err)
				}
			}
		})
	}
	t.Run("postgres: reachable, schema current, nothing written", func(t *testing.T) {
		db := pgtest.URL(t)
		r := procRun(t, procEnv("SLACK_BOT_TOKEN=xoxb-1"), "config", "check", "--json", "--config", good, "--db", db)
		if r.Code != 0 || !strings.Contains(r.Stdout, `"ok":true`) || !strings.Contains(r.Stdout, "no schema yet") {
			t.Errorf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		procMustRun(t, procEnv(), "migrate", "--db", db)
		r = procRun(t, procEnv("SLACK_BOT_TOKEN=xoxb-1"), "config", "check", "--config", good, "--db", db)
		if r.Code != 0 || !strings.Contains(r.Stdout, "postgres reachable, schema ") || !strings.Contains(r.Stdout, "(current)") {
			t.Errorf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
	})
}

// Issue 29.7: under [oauth] config check does not claim that post rows
// would wait for SLACK_BOT_TOKEN (serve takes each row's token from its
// installation), and it names every missing secret in one run.
func TestConfigCheckSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const oauth = "[oauth]\nclient_id = \"1.2\"\nscopes = [\"chat:write\"]\nredirect_url = \"https://ackd.example/slack/oauth_redirect\"\n"
	const post = "[[route]]\nname = \"hi\"\nevent = \"app_mention\"\neffect = \"post\"\ntext = \"hi\"\n"
	cfg := procWriteConfig(t, dir, "oauth.toml", oauth+post)
	redeliver := procWriteConfig(t, dir, "redeliver.toml", oauth+post+
		"[[route]]\nname = \"app\"\nevent = \"reaction_added\"\neffect = \"redeliver\"\nurl = \"http://127.0.0.1:9/slack/events\"\n")
	db := filepath.Join(dir, "ackd.db")
	key := "ACKD_TOKEN_KEY=" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{3}, 32))

	t.Run("[oauth] without SLACK_BOT_TOKEN: no credentials warning", func(t *testing.T) {
		r := procRun(t, procEnv("SLACK_CLIENT_SECRET=cs", key), "config", "check", "--config", cfg, "--db", db)
		if r.Code != 0 || strings.Contains(r.Stdout, "credentials") || strings.Contains(r.Stdout, "SLACK_BOT_TOKEN") ||
			!strings.Contains(r.Stdout, "serve would start (0 warnings)") {
			t.Errorf("exit %d, want 0 with no warning about SLACK_BOT_TOKEN:\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
	})
	t.Run("every missing secret in one run", func(t *testing.T) {
		r := procRun(t, procEnv("SLACK_SIGNING_SECRET="), "config", "check", "--config", redeliver, "--db", db)
		if r.Code != 1 {
			t.Errorf("exit %d, want 1", r.Code)
		}
		for _, w := range []string{"no Slack signing secret", `route "app": effect redeliver`, "ACKD_TOKEN_KEY is not set", "SLACK_CLIENT_SECRET is not set"} {
			if !strings.Contains(r.Stdout, w) {
				t.Errorf("stdout lacks %q:\n%s", w, r.Stdout)
			}
		}
		if n := strings.Count(r.Stdout, "FAIL  secrets"); n != 4 {
			t.Errorf("%d FAIL secrets lines, want 4 (one per missing secret):\n%s", n, r.Stdout)
		}
		if strings.Contains(r.Stdout, "SLACK_BOT_TOKEN") {
			t.Errorf("names SLACK_BOT_TOKEN, which [oauth] does not use:\n%s", r.Stdout)
		}
	})
	t.Run("every unreadable secret file in one run, beside serve's checks", func(t *testing.T) {
		empty := filepath.Join(dir, "empty")
		if err := os.WriteFile(empty, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		// Issue 30.1: an empty file is a failure where the config uses
		// the secret (here [oauth] and a forward route).
		fwd := procWriteConfig(t, dir, "fwd.toml", oauth+post+
			"[[route]]\nname = \"fwd\"\nevent = \"reaction_added\"\neffect = \"forward\"\nurl = \"http://127.0.0.1:9/\"\n")
		r := procRun(t, procEnv("SLACK_CLIENT_SECRET_FILE="+empty, "ACKD_FORWARD_SECRET_FILE="+empty), "config", "check", "--config", fwd, "--db", db)
		for _, w := range []string{"SLACK_CLIENT_SECRET_FILE names", "ACKD_FORWARD_SECRET_FILE names", "ACKD_TOKEN_KEY is not set"} {
			if !strings.Contains(r.Stdout, w) {
				t.Errorf("stdout lacks %q:\n%s", w, r.Stdout)
			}
		}
		if r.Code != 1 {
			t.Errorf("exit %d, want 1", r.Code)
		}
	})
}

// Issue 25.6: serve --help names every environment variable serve reads
// (every "SLACK_…"/"ACKD_…" name in the code serve runs), and says which
// are required in which mode.
func TestServeHelpListsTheEnvironment(t *testing.T) {
	t.Parallel()
	help := procMustRun(t, procEnv(), "serve", "--help").Stdout
	var files []string
	for _, pat := range []string{"*.go", "daemon/*.go", "sweep/*.go"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	name := regexp.MustCompile(`"((?:SLACK|ACKD)_[A-Z_]+)"`)
	notServe := map[string]bool{"ACKD_BENCH_POSTGRES": true} // bench compare's, not serve's
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || strings.HasPrefix(filepath.Base(f), "bench") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range name.FindAllStringSubmatch(string(b), -1) {
			if notServe[m[1]] || seen[m[1]] {
				continue
			}
			seen[m[1]] = true
			if !regexp.MustCompile(`(?m)^\s+(?:[A-Z_]+, )*`+m[1]+`\b`).MatchString(help) && !strings.Contains(help, "or "+m[1]) {
				t.Errorf("serve --help does not list %s (read in %s)", m[1], f)
			}
		}
	}
	for _, want := range []string{"SLACK_APP_TOKEN", "ACKD_REDELIVER_SECRET", "ACKD_DB_FILE", "required with [socket_mode] enabled", "Required over HTTP"} {
		if !strings.Contains(help, want) {
			t.Errorf("serve --help lacks %q:\n%s", want, help)
		}
	}
}

// Issue 25.6: what serve says at startup is true of the configuration and
// the engine: a forward-only config without a bot token is not warned about
// post effects no route names, and the PostgreSQL line shows PostgreSQL's
// settings, not SQLite's synchronous.
func TestStartupLinesFitTheConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := procWriteConfig(t, dir, "fwd.toml", "[[route]]\nname = \"fwd\"\nevent = \"app_mention\"\neffect = \"forward\"\nurl = \"http://127.0.0.1:9/\"\n")
	listening := func(t *testing.T, stderr string) map[string]any {
		t.Helper()
		for _, l := range strings.Split(stderr, "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "ackd listening" {
				return m
			}
		}
		t.Fatalf("no \"ackd listening\" line:\n%s", stderr)
		return nil
	}
	for _, tc := range []struct {
		name, db   string
		want, none []string
	}{
		{"sqlite", filepath.Join(dir, "ackd.db"), []string{"synchronous", "commit_delay"}, []string{"synchronous_commit"}},
		{"postgres", pgtest.URL(t), []string{"synchronous_commit", "server_version", "pool_max_conns"}, []string{"synchronous"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := procServe(t, procServeOpts{Config: cfg, DB: tc.db})
			d.stop()
			stderr := d.Stderr.String()
			if strings.Contains(stderr, "routes name effects this daemon cannot perform") {
				t.Errorf("a forward-only config was warned about effects no route names:\n%s", stderr)
			}
			m := listening(t, stderr)
			for _, k := range tc.want {
				if _, ok := m[k]; !ok {
					t.Errorf("startup line lacks %s: %v", k, m)
				}
			}
			for _, k := range tc.none {
				if _, ok := m[k]; ok {
					t.Errorf("startup line has %s: %v", k, m)
				}
			}
		})
	}
}

// Issue 25.7: ackd status shows each daemon's Socket Mode state (live
// connections against the configured number, the last hello, reconnects)
// as of its last heartbeat, in text and JSON; a real daemon against
// fakeslack's Socket Mode server.
func TestStatusShowsSocketMode(t *testing.T) {
	t.Parallel()
	const appToken = "xapp-1-A0ST-status-test"
	api := fakeslack.New(t, "xoxb-status")
	sock := api.SocketMode(t, appToken)
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	cfg := procWriteConfig(t, dir, "ackd.toml", fmt.Sprintf(`
[slack]
api_url = %q

[socket_mode]
enabled     = true
connections = 2

[[route]]
name   = "log"
event  = "app_mention"
effect = "log"
`, api.URL()))
	d := procServe(t, procServeOpts{Config: cfg, DB: db, Env: procEnv("SLACK_APP_TOKEN=" + appToken)})
	if !sock.Wait(15*time.Second, func() bool { return len(sock.Open()) == 2 }) {
		t.Fatalf("open connections %v, want 2", sock.Open())
	}
	type daemonJSON struct {
		PID        int                  `json:"pid"`
		SocketMode *ingress.SocketState `json:"socket_mode"`
	}
	var st struct {
		Daemons []daemonJSON `json:"daemons"`
	}
	procWaitFor(t, "a heartbeat with both connections live", 30*time.Second, func() bool {
		out := procMustRun(t, procEnv(), "status", "--json", "--db", db).Stdout
		return json.Unmarshal([]byte(out), &st) == nil && len(st.Daemons) == 1 &&
			st.Daemons[0].SocketMode != nil && st.Daemons[0].SocketMode.Connections == 2
	})
	sm := st.Daemons[0].SocketMode
	if sm.Configured != 2 || sm.LastHelloAt.IsZero() || sm.Reconnects != 0 || sm.Stopped != "" {
		t.Errorf("socket_mode = %+v", sm)
	}
	text := procMustRun(t, procEnv(), "status", "--db", db).Stdout
	if !regexp.MustCompile(`socket mode: 2/2 connections, last hello \d+s ago, 0 reconnects \(at its last heartbeat\)`).MatchString(text) {
		t.Errorf("status:\n%s", text)
	}
	d.stop()
}

// Issue 25.7: ackd version --json, and ackd --version printing what
// ackd version prints.
func TestVersionOutputs(t *testing.T) {
	t.Parallel()
	text := procMustRun(t, procEnv(), "version").Stdout
	if flag := procMustRun(t, procEnv(), "--version").Stdout; flag != text || !strings.HasPrefix(text, "ackd ") {
		t.Errorf("ackd --version printed %q, ackd version %q", flag, text)
	}
	var v map[string]any
	out := procMustRun(t, procEnv(), "version", "--json").Stdout
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("version --json printed %q: %v", out, err)
	}
	if v["version"] == "" || v["version"] == nil || !strings.HasPrefix(fmt.Sprint(v["go"]), "go1.") || v["os"] == nil || v["arch"] == nil {
		t.Errorf("version --json: %v", v)
	}
	if !strings.Contains(text, fmt.Sprint(v["version"])) {
		t.Errorf("version --json says %v, the text %q", v["version"], text)
	}
	if r := procRun(t, procEnv()); r.Code != 0 || !strings.Contains(r.Stdout, "Usage:") {
		t.Errorf("ackd alone: exit %d %q", r.Code, r.Stdout)
	}
}
