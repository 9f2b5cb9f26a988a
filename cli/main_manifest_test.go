package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Issue 30.2: `ackd manifest` prints the app manifest on stdout; a bad
// --url is refused with a clear error, exit 1, and nothing on stdout.
func TestManifestCommand(t *testing.T) {
	dir := t.TempDir()
	httpCfg := procWriteConfig(t, dir, "http.toml", `
[[route]]
name        = "deploy"
command     = "/deploy"
description = "Deploy a service"
effect      = "log"
`)
	socketCfg := procWriteConfig(t, dir, "socket.toml", `
[socket_mode]
enabled = true
[[route]]
name   = "mention"
event  = "app_mention"
effect = "log"
`)
	env := procEnv("SLACK_SIGNING_SECRET=")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"missing", []string{"manifest", "--config", httpCfg},
			"ackd: --url is required: the public https:// address Slack reaches ackd at, e.g. --url https://ackd.example.com (with [socket_mode] enabled none is needed)\n"},
		{"empty", []string{"manifest", "--config", httpCfg, "--url", ""},
			"ackd: --url is empty: give the public https:// address Slack reaches ackd at, e.g. --url https://ackd.example.com\n"},
		{"empty with socket mode", []string{"manifest", "--config", socketCfg, "--url="},
			"ackd: --url is empty: give the public https:// address Slack reaches ackd at, e.g. --url https://ackd.example.com\n"},
		{"http", []string{"manifest", "--config", httpCfg, "--url", "http://ackd.example.com"},
			"ackd: --url \"http://ackd.example.com\" must start with https://: Slack sends requests only to HTTPS URLs with a valid certificate\n"},
		{"bad channel type", []string{"manifest", "--config", httpCfg, "--url", "https://a.example.com", "--channel-types", "public,dm"},
			"ackd: --channel-types: \"dm\" is not one of public, private, im, mpim\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := procRun(t, env, c.args...)
			if r.Code != 1 || r.Stdout != "" || r.Stderr != c.want {
				t.Errorf("exit %d\nstdout %q\nstderr %q\nwant exit 1, no stdout, stderr %q", r.Code, r.Stdout, r.Stderr, c.want)
			}
		})
	}

	t.Run("yaml and json", func(t *testing.T) {
		y := procMustRun(t, env, "manifest", "--config", httpCfg, "--url", "https://ackd.example.com/")
		var doc struct {
			Features struct {
				SlashCommands []struct{ Command, URL, Description string } `yaml:"slash_commands" json:"slash_commands"`
			}
			OAuthConfig struct {
				Scopes struct{ Bot []string }
			} `yaml:"oauth_config" json:"oauth_config"`
		}
		if err := yaml.Unmarshal([]byte(y.Stdout), &doc); err != nil {
			t.Fatalf("stdout is not YAML: %v\n%s", err, y.Stdout)
		}
		sc := doc.Features.SlashCommands
		if len(sc) != 1 || sc[0].URL != "https://ackd.example.com/slack/commands" || sc[0].Description != "Deploy a service" ||
			strings.Join(doc.OAuthConfig.Scopes.Bot, ",") != "commands" {
			t.Errorf("manifest: %+v\n%s", doc, y.Stdout)
		}
		j := procMustRun(t, env, "manifest", "--config", httpCfg, "--url", "https://ackd.example.com", "--json")
		var fromJSON map[string]any
		if err := json.Unmarshal([]byte(j.Stdout), &fromJSON); err != nil {
			t.Fatalf("--json stdout is not JSON: %v\n%s", err, j.Stdout)
		}
		var fromYAML map[string]any
		_ = yaml.Unmarshal([]byte(y.Stdout), &fromYAML)
		a, _ := json.Marshal(fromYAML)
		b, _ := json.Marshal(fromJSON)
		if string(a) != string(b) {
			t.Errorf("YAML and JSON differ:\n%s\n%s", a, b)
		}
	})

	t.Run("socket mode needs no url", func(t *testing.T) {
		r := procMustRun(t, env, "manifest", "--config", socketCfg)
		if !strings.Contains(r.Stdout, "socket_mode_enabled: true") || strings.Contains(r.Stdout, "request_url") {
			t.Errorf("socket mode manifest:\n%s", r.Stdout)
		}
	})

	t.Run("notes go to stderr and into the YAML", func(t *testing.T) {
		r := procMustRun(t, env, "manifest", "--url", "https://a.example.com", "--config", filepath.Join("examples", "bolt", "ackd.toml"))
		if !strings.Contains(r.Stderr, "ackd manifest: note: route \"bolt-events\" takes every event") ||
			!strings.Contains(r.Stdout, "# NOTE: route \"bolt-events\" takes every event") {
			t.Errorf("stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
		}
	})
}

// A manifest built from a config config check would warn about says so,
// with the same words (the did-you-mean, the placeholder's key).
func TestManifestSaysWhatConfigCheckWouldWarn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := procWriteConfig(t, dir, "ackd.toml", `
[[route]]
name   = "mention"
event  = "app_mentoin"
effect = "log"

[[route]]
name   = "hook"
event  = "message"
effect = "forward"
url    = "https://REPLACEME.example.com/slack"
`)
	r := procRun(t, procEnv(), "manifest", "--config", cfg, "--url", "https://ackd.example.com")
	if r.Code != 0 {
		t.Fatalf("manifest: exit %d\n%s", r.Code, r.Stderr)
	}
	check := procRun(t, procEnv("SLACK_SIGNING_SECRET=x"), "config", "check", "--config", cfg, "--db", filepath.Join(dir, "ackd.db"))
	for _, w := range []string{`did you mean "app_mention"?`, "REPLACEME"} {
		if !strings.Contains(r.Stderr, "ackd manifest: warning:") || !strings.Contains(r.Stderr, w) {
			t.Errorf("manifest's stderr lacks a warning with %q:\n%s", w, r.Stderr)
		}
		if !strings.Contains(check.Stdout, w) {
			t.Errorf("config check does not say %q either (the two must agree):\n%s", w, check.Stdout)
		}
	}
}
