package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ackd/ackd/internal/testreq"
)

// Issue 30.1: the documented install writes an empty credential file for
// every feature the config does not use. An empty file is "not set": with
// the feature off, `config check` passes (listing the file as not needed)
// and `serve` starts; with the feature on, both refuse, naming the feature,
// the file, what to write and how to turn the feature off — never "unset"
// a variable, which a unit's Environment= does not let an operator do. The
// real binary, each case with the unit's five …_FILE variables, as systemd
// sets them ($CREDENTIALS_DIRECTORY), the empty ones empty.
func TestEmptyCredentialFiles(t *testing.T) {
	t.Parallel()
	const (
		react   = "[[route]]\nname = \"eyes\"\nevent = \"message\"\nchannel = \"C0123ABCD\"\neffect = \"react\"\nreaction = \"eyes\"\n"
		forward = "[[route]]\nname = \"fwd\"\nevent = \"app_mention\"\neffect = \"forward\"\nurl = \"http://127.0.0.1:9/\"\n"
		logOnly = "[[route]]\nname = \"log\"\nevent = \"app_mention\"\neffect = \"log\"\n"
		oauth   = "[oauth]\nclient_id = \"1.2\"\nscopes = [\"chat:write\"]\nredirect_url = \"https://ackd.example/slack/oauth_redirect\"\n"
		key     = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	)
	// The unit's credentials and the variables that name them.
	vars := map[string]string{"slack-signing-secret": "SLACK_SIGNING_SECRET", "slack-bot-token": "SLACK_BOT_TOKEN",
		"forward-secret": "ACKD_FORWARD_SECRET", "slack-client-secret": "SLACK_CLIENT_SECRET", "token-key": "ACKD_TOKEN_KEY"}
	full := map[string]string{"slack-signing-secret": procSecret, "slack-bot-token": "xoxb-cred",
		"forward-secret": "fwd-secret", "slack-client-secret": "client-secret", "token-key": key}
	for _, tc := range []struct {
		name   string
		toml   string
		empty  []string // credentials written empty; the others hold a secret
		starts bool
		want   []string // in config check's output and in serve's refusal
	}{
		{"no forward route: an empty forward secret is not set", react, []string{"forward-secret", "slack-client-secret", "token-key"}, true,
			[]string{"not needed by this config: ACKD_FORWARD_SECRET_FILE (empty), ACKD_TOKEN_KEY_FILE (empty), SLACK_CLIENT_SECRET_FILE (empty)"}},
		// As with the secret not set, and as 0.1.0 read an empty file: the
		// forwards go unsigned, which the warning names.
		{"a forward route: an empty forward secret warns that forwards go unsigned, naming the route and the file", react + forward, []string{"forward-secret"}, true,
			[]string{`warn  secrets`, `ACKD_FORWARD_SECRET_FILE names /run/credentials/ackd.service/forward-secret, which is empty: route "fwd" (forward) sends its requests unsigned (no X-Ackd-Signature), as with the secret not set and as ackd 0.1.0 did; ` +
				`write the secret your handler verifies into its LoadCredential= source (/etc/ackd/credentials/forward-secret in the packaged unit) and restart, or leave it empty if your handler checks no signature`}},
		{"[oauth]: an empty bot token is not set", oauth + react, []string{"slack-bot-token", "forward-secret"}, true,
			[]string{"not needed by this config: ACKD_FORWARD_SECRET_FILE (empty), SLACK_BOT_TOKEN_FILE (empty)"}},
		{"[oauth]: an empty client secret and token key name [oauth] and its removal", oauth + logOnly, []string{"slack-client-secret", "token-key"}, false,
			[]string{`SLACK_CLIENT_SECRET_FILE names /run/credentials/ackd.service/slack-client-secret, which is empty, and [oauth] exchanges install codes and refreshes tokens with it: ` +
				`write the app's Client Secret (Basic Information) into its LoadCredential= source (/etc/ackd/credentials/slack-client-secret in the packaged unit) and restart, or remove the [oauth] section from CONFIG`,
				`ACKD_TOKEN_KEY_FILE names /run/credentials/ackd.service/token-key, which is empty, and [oauth] seals every installation's tokens with it`}},
		// As with the token not set: the rows wait, which the warning names.
		{"a react route: an empty bot token warns that its rows wait, naming the route and the file", react, []string{"slack-bot-token"}, true,
			[]string{`warn  secrets`, `SLACK_BOT_TOKEN_FILE names /run/credentials/ackd.service/slack-bot-token, which is empty: route "eyes" (react) calls Slack's Web API with it: those rows stay pending until a process that has the token performs them; ` +
				`write the bot token (xoxb-…, OAuth & Permissions) into its LoadCredential= source (/etc/ackd/credentials/slack-bot-token in the packaged unit) and restart, or remove those routes (and [backfill] channels) from CONFIG`}},
		{"no Web API route: an empty bot token is not set", logOnly, []string{"slack-bot-token", "forward-secret", "slack-client-secret", "token-key"}, true,
			[]string{"not needed by this config: "}},
		{"HTTP: an empty signing secret names Slack's requests and Socket Mode", logOnly, []string{"slack-signing-secret"}, false,
			[]string{`SLACK_SIGNING_SECRET_FILE names /run/credentials/ackd.service/slack-signing-secret, which is empty, and Slack's requests over HTTP are verified with it: ` +
				`write the app's Signing Secret (Basic Information) into its LoadCredential= source (/etc/ackd/credentials/slack-signing-secret in the packaged unit) and restart, or receive over Socket Mode instead ([socket_mode] enabled = true, with SLACK_APP_TOKEN) in CONFIG`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			// systemd's $CREDENTIALS_DIRECTORY, here under the test's
			// directory: the paths in the messages are compared with the
			// directory replaced by the unit's.
			creds := filepath.Join(dir, "run", "credentials", "ackd.service")
			if err := os.MkdirAll(creds, 0o700); err != nil {
				t.Fatal(err)
			}
			env := []string{"SLACK_SIGNING_SECRET=", "CREDENTIALS_DIRECTORY=" + creds}
			for file, v := range vars {
				content := full[file]
				for _, e := range tc.empty {
					if e == file {
						content = ""
					}
				}
				if err := os.WriteFile(filepath.Join(creds, file), []byte(content), 0o400); err != nil {
					t.Fatal(err)
				}
				env = append(env, v+"_FILE="+filepath.Join(creds, file))
			}
			cfg := procWriteConfig(t, dir, "ackd.toml", tc.toml)
			db := filepath.Join(dir, "ackd.db")
			norm := strings.NewReplacer(creds, "/run/credentials/ackd.service", cfg, "CONFIG")

			check := procRun(t, procEnv(env...), "config", "check", "--config", cfg, "--db", db)
			out := norm.Replace(check.Stdout + check.Stderr)
			if wantCode := map[bool]int{true: 0, false: 1}[tc.starts]; check.Code != wantCode {
				t.Errorf("config check: exit %d, want %d\n%s", check.Code, wantCode, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("config check does not say\n  %s\n%s", w, out)
				}
			}
			if strings.Contains(strings.ToLower(out), "unset") {
				t.Errorf("config check tells a systemd user to unset a variable:\n%s", out)
			}

			if tc.starts {
				d := procServe(t, procServeOpts{Config: cfg, DB: db, Env: procEnv(env...)})
				d.stop()
				// What config check warned, serve's log says too.
				log := norm.Replace(d.Stderr.String())
				for _, w := range tc.want {
					if w, ok := strings.CutPrefix(w, "warn  secrets"); ok || w == "" {
						continue
					}
					if strings.HasPrefix(w, "not needed") {
						continue
					}
					if !strings.Contains(strings.ReplaceAll(log, `\"`, `"`), w) {
						t.Errorf("serve's log does not say\n  %s\n%s", w, log)
					}
				}
				return
			}
			r := procRun(t, procEnv(env...), "serve", "--config", cfg, "--db", db, "--listen", procFreeAddr(t))
			out = norm.Replace(r.Stderr)
			if r.Code == 0 {
				t.Fatalf("serve started:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("serve's refusal does not say\n  %s\n%s", w, out)
				}
			}
			if strings.Contains(strings.ToLower(out), "unset") {
				t.Errorf("serve tells a systemd user to unset a variable:\n%s", out)
			}
			if _, err := os.Stat(db); !os.IsNotExist(err) {
				t.Errorf("a refused serve left a database behind: %v", err)
			}
		})
	}
}

// Issue 30.1: before the packaged unit's first start its state directory
// /var/lib/ackd does not exist (systemd creates StateDirectory= at start):
// config check of a database there warns, naming who creates it, and
// passes; a database in another missing directory still fails.
func TestConfigCheckMissingStateDirectory(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/var/lib/ackd"); err == nil {
		t.Skip("/var/lib/ackd exists on this machine: its absence cannot be shown")
	}
	cfg := procWriteConfig(t, t.TempDir(), "ackd.toml", "[[route]]\nname = \"log\"\nevent = \"app_mention\"\neffect = \"log\"\n")
	r := procRun(t, procEnv(), "config", "check", "--config", cfg, "--db", "/var/lib/ackd/ackd.db")
	if r.Code != 0 || !strings.Contains(r.Stdout, "warn  database") ||
		!strings.Contains(r.Stdout, "/var/lib/ackd does not exist yet: ackd.service creates it at start (StateDirectory=ackd), serve run by hand does not (install -d -m 0700 /var/lib/ackd)") {
		t.Errorf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	other := filepath.Join(t.TempDir(), "missing", "ackd.db")
	r = procRun(t, procEnv(), "config", "check", "--config", cfg, "--db", other)
	if r.Code != 1 || !strings.Contains(r.Stdout, "FAIL  database") {
		t.Errorf("a database in another missing directory: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// Issue 30.1: an install of the previous release that followed its unit's
// own words — "with no forward route, … install an empty file" for the
// forward secret — starts on today's binary: the previous release's unit
// environment (its Environment= lines, %d mapped to the credentials),
// its shipped config without the forward route, the forward-secret file
// empty. (Before this change every empty credential file stopped serve.)
func TestPreviousReleaseUnitWithEmptyForwardSecret(t *testing.T) {
	t.Parallel()
	m := regexp.MustCompile("(?m)^## \\[(\\d+\\.\\d+\\.\\d+)\\][^\\n]*\\n+Commit `([0-9a-f]{40})`").FindStringSubmatch(readText(t, "CHANGELOG.md"))
	if m == nil {
		t.Fatal("CHANGELOG.md names no release with its commit")
	}
	show := func(path string) string {
		out, err := exec.Command("git", "show", m[2]+":"+path).Output()
		testreq.Need(t, err == nil, "git history with commit "+m[2]+" is not available (a full git clone is needed)")
		return string(out)
	}
	unit, toml := show("systemd/ackd.service"), show("systemd/ackd.toml")
	if !strings.Contains(unit, "install an empty file") {
		t.Fatalf("release %s's unit no longer says to install an empty file", m[1])
	}
	// Its config, with the forward route taken out as the unit says.
	parts := strings.Split(toml, "[[route]]")
	kept := parts[:1]
	for _, p := range parts[1:] {
		if !regexp.MustCompile(`(?m)^effect\s*=\s*"forward"`).MatchString(p) {
			kept = append(kept, p)
		}
	}
	if len(kept) == len(parts) {
		t.Fatalf("release %s's config has no forward route to take out", m[1])
	}
	dir := t.TempDir()
	cfg := procWriteConfig(t, dir, "ackd.toml", strings.Join(kept, "[[route]]"))
	creds := filepath.Join(dir, "credentials")
	if err := os.MkdirAll(creds, 0o700); err != nil {
		t.Fatal(err)
	}
	content := map[string]string{"slack-signing-secret": procSecret, "slack-bot-token": "xoxb-previous", "forward-secret": ""}
	env := []string{"SLACK_SIGNING_SECRET=", "CREDENTIALS_DIRECTORY=" + creds}
	for _, l := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(l, "LoadCredential="); ok {
			name, _, _ := strings.Cut(v, ":")
			c, known := content[name]
			if !known {
				t.Fatalf("release %s's unit loads %s, which this test does not know", m[1], name)
			}
			if err := os.WriteFile(filepath.Join(creds, name), []byte(c), 0o400); err != nil {
				t.Fatal(err)
			}
		}
		if v, ok := strings.CutPrefix(l, "Environment="); ok && strings.Contains(v, "%d/") {
			env = append(env, strings.ReplaceAll(v, "%d", creds))
		}
	}
	// Its database (ACKD_DB in the unit) in the test's directory: --db.
	db := filepath.Join(dir, "ackd.db")
	if r := procRun(t, procEnv(env...), "config", "check", "--config", cfg, "--db", db); r.Code != 0 {
		t.Errorf("config check: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	d := procServe(t, procServeOpts{Config: cfg, DB: db, Env: procEnv(env...)})
	d.stop()
}
