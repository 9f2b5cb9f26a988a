package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	fwd := procWriteConfig(t, dir, "fwd.toml", "[[route]]\nname = \"fwd\"\nevent = \"app_mention\"\neffect = \"forward\"\nurl = \"http://127.0.0.1:9/\"\n")
	for _, tc := range []struct {
		name string
		env  []string
		toml string
		want string
	}{
		{"an empty SLACK_SIGNING_SECRET_FILE", []string{"SLACK_SIGNING_SECRET=", "SLACK_SIGNING_SECRET_FILE=" + empty}, "",
			"SLACK_SIGNING_SECRET_FILE names " + empty + ", which is empty"},
		{"an empty forward secret file with a forward route", []string{"ACKD_FORWARD_SECRET_FILE=" + empty}, fwd,
			"ACKD_FORWARD_SECRET_FILE names " + empty + ", which is empty"},
		{"a misspelt event type", nil, procWriteConfig(t, dir, "ev.toml", "[[route]]\nname = \"m\"\nevent = \"app_mentoin\"\neffect = \"log\"\n"),
			`did you mean "app_mention"?`},
		{"a channel name", nil, procWriteConfig(t, dir, "ch.toml", "[[route]]\nname = \"m\"\nevent = \"message\"\nchannel = \"#general\"\neffect = \"log\"\n"),
			`channel "#general" is a channel name, not its ID`},
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
