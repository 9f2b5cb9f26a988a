package e2e

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/oldbuild"
	"github.com/ackd/ackd/internal/testreq"
)

// releases are the released versions whose shipped configurations every
// later ackd must start (DESIGN §11: a config the previous release accepted
// starts on the new one). At each release, append its line (the version
// and commit of CHANGELOG.md's "## [x.y.z]" section): the test fails until
// the newest release CHANGELOG.md names is here.
var releases = []struct{ version, commit string }{
	{"0.1.0", "6bbb667297d838d31fec3f8782a6942459e1b0eb"},
}

// shippedExceptions are shipped configurations that could not start on
// their own release either, each with the reason; the test proves that
// (the release's binary refuses it too) before it skips one. Keyed by
// "commit:name" as shippedConfigs names them. None so far.
var shippedExceptions = map[string]string{}

// shippedConfig is one configuration a release shipped: a file, or one
// ```toml block of its README (a fragment is a config of its own).
type shippedConfig struct {
	name, toml string
}

// Secrets and tokens every config is given: what the 0.1.0 README asks an
// operator to provide (signing secret, bot token, forward secret, and the
// app-level token for Socket Mode).
const (
	shippedSigning = "shipped-config-signing-secret"
	shippedBot     = "xoxb-shipped-config"
	shippedApp     = "xapp-shipped-config"
)

// Issue 29.1: every configuration a release shipped — each toml file under
// its examples/, its systemd/ackd.toml, and every ```toml block of its
// README.md and docs/, read from git at the release's commit — starts on today's
// binary and answers /healthz, in a separate process, with the environment
// that release's README asked for, db in a temporary directory (--db) and a
// loopback port (--listen). Each starts on the release's own binary first
// (so the test knows the release accepted it), and today's binary then
// starts on the database the release wrote. Beside them, configs 0.1.0
// started that later checks found suspicious (catch-up's key, event types
// missing from ackd's list, a channel name, a reaction Slack refuses) also
// start, with a warning in the log and in `ackd config check`.
func TestShippedConfigsStart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the previous releases")
	}
	version, commit := previousRelease(t)
	listed := false
	for _, r := range releases {
		listed = listed || r.commit == commit
	}
	if !listed {
		t.Fatalf("CHANGELOG.md's newest release %s (commit %s) is not in releases (e2e/shipped_configs_test.go): append it", version, commit)
	}
	api := fakeslack.New(t, shippedBot)
	api.SocketMode(t, shippedApp)

	for _, rel := range releases {
		old := oldbuild.Build(t, rel.commit)
		for _, c := range shippedConfigs(t, rel.commit) {
			t.Run(rel.version+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				cfg, db := writeShipped(t, dir, c.toml), filepath.Join(dir, "ackd.db")
				if log, ok := serveOnce(t, old, cfg, db, api); !ok {
					reason, known := shippedExceptions[rel.commit+":"+c.name]
					if !known {
						t.Fatalf("%s's own binary does not start it with this test's environment (the test's fault, or add it to shippedExceptions with the reason):\n%s\n%s", rel.version, c.toml, log)
					}
					t.Skipf("does not start on %s either (%s)", rel.version, reason)
				}
				if log, ok := serveOnce(t, ackdBin, cfg, db, api); !ok {
					t.Fatalf("%s shipped this config and started it; today's ackd does not:\n%s\n%s", rel.version, c.toml, log)
				}
			})
		}
	}

	// Configs the previous release started that checks added since find
	// suspicious: a warning, never a refusal.
	old := oldbuild.Build(t, commit)
	for _, tc := range []struct {
		name, toml string
		warn       []string // in serve's log and in config check; nil: no warning
		notInLog   []string
	}{
		{"a message route and a mention route on a channel, keyed by event_id, with a post effect", `
[[route]]
name    = "greet"
event   = "message"
channel = "C0123ABCD"
effect  = "post"
text    = "hello {{.User}}"

[[route]]
name    = "mention"
event   = "app_mention"
channel = "C0123ABCD"
effect  = "post"
text    = "you called?"
`, nil, []string{"catch-up"}},
		{"a route for app_installed, which slack-go knows", "[[route]]\nname = \"installed\"\nevent = \"app_installed\"\neffect = \"log\"\n", nil, nil},
		{"a route for an event type newer than ackd's list", "[[route]]\nname = \"future\"\nevent = \"agent_session_resumed\"\neffect = \"log\"\n",
			[]string{`route \"future\"`, `event \"agent_session_resumed\" is not a Slack event type ackd knows`}, nil},
		{"a misspelt event type", "[[route]]\nname = \"m\"\nevent = \"app_mentoin\"\neffect = \"log\"\n",
			[]string{`did you mean \"app_mention\"?`}, nil},
		{"a channel name where an ID goes", "[[route]]\nname = \"m\"\nevent = \"message\"\nchannel = \"#general\"\neffect = \"log\"\n",
			[]string{`channel \"#general\" is a channel name, not its ID`}, nil},
		{"a reaction Slack refuses", "[[route]]\nname = \"r\"\nevent = \"message\"\neffect = \"react\"\nreaction = \":eyes\"\n",
			[]string{`reaction \":eyes\" is not an emoji name`}, nil},
	} {
		t.Run("accepted by "+version+"/"+tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg, db := writeShipped(t, dir, tc.toml), filepath.Join(dir, "ackd.db")
			if log, ok := serveOnce(t, old, cfg, db, api); !ok {
				t.Fatalf("%s does not start it either; not a case for this test:\n%s", version, log)
			}
			log, ok := serveOnce(t, ackdBin, cfg, db, api)
			if !ok {
				t.Fatalf("%s started this config; today's ackd does not:\n%s\n%s", version, tc.toml, log)
			}
			check := exec.Command(ackdBin, "config", "check", "--config", cfg, "--db", db)
			check.Env = shippedEnv(dir, api)
			out, err := check.CombinedOutput()
			if err != nil {
				t.Errorf("config check: %v\n%s", err, out)
			}
			for _, w := range tc.warn {
				if !strings.Contains(log, `"level":"WARN","msg":"config: `) || !strings.Contains(log, w) {
					t.Errorf("serve's log has no warning saying %s:\n%s", w, log)
				}
				if plain := strings.ReplaceAll(w, `\"`, `"`); !strings.Contains(string(out), "warn  config") || !strings.Contains(string(out), plain) {
					t.Errorf("config check has no warning saying %s:\n%s", plain, out)
				}
			}
			if tc.warn == nil && strings.Contains(log, `"msg":"config: `) {
				t.Errorf("serve warned about a config it should take as it is:\n%s", log)
			}
			// The migration lines quote the schema's comments (one names
			// catch-up's marks): what the daemon says is the rest.
			said := strings.Join(slices.DeleteFunc(strings.Split(log, "\n"), func(l string) bool {
				return strings.Contains(l, `"msg":"schema migration applied"`)
			}), "\n")
			for _, w := range tc.notInLog {
				if strings.Contains(strings.ToLower(said), strings.ToLower(w)) {
					t.Errorf("serve's log mentions %q:\n%s", w, log)
				}
			}
		})
	}
}

// shippedConfigs reads, from git at commit, every toml file under
// examples/ and systemd/, and every ```toml block of README.md and of the
// pages under docs/.
func shippedConfigs(t *testing.T, commit string) []shippedConfig {
	t.Helper()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = ".."
		out, err := cmd.Output()
		testreq.Need(t, err == nil, "git history with commit "+commit+" is not available (a full git clone is needed): git "+strings.Join(args, " "))
		return string(out)
	}
	var out []shippedConfig
	for _, path := range strings.Fields(git("ls-tree", "-r", "--name-only", commit, "--", "examples", "systemd")) {
		if strings.HasSuffix(path, ".toml") {
			out = append(out, shippedConfig{name: path, toml: git("show", commit+":"+path)})
		}
	}
	// The README, and from the release after 0.1.0 on the pages of docs/.
	pages := []string{"README.md"}
	for _, path := range strings.Fields(git("ls-tree", "-r", "--name-only", commit, "--", "docs")) {
		if strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
	}
	block := regexp.MustCompile("(?ms)^```toml[ \t]*\n(.*?)^```")
	for _, page := range pages {
		doc := git("show", commit+":"+page)
		for _, m := range block.FindAllStringSubmatchIndex(doc, -1) {
			line := strings.Count(doc[:m[0]], "\n") + 1
			out = append(out, shippedConfig{name: page + ":" + strconv.Itoa(line), toml: doc[m[2]:m[3]]})
		}
	}
	if len(out) < 3 {
		t.Fatalf("found only %d configs at %s", len(out), commit)
	}
	return out
}

func writeShipped(t *testing.T, dir, toml string) string {
	t.Helper()
	path := filepath.Join(dir, "ackd.toml")
	if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// shippedEnv is the environment the 0.1.0 README asks for, pointed at the
// fake Slack on loopback.
func shippedEnv(dir string, api *fakeslack.Server) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"SLACK_SIGNING_SECRET=" + shippedSigning, "SLACK_BOT_TOKEN=" + shippedBot,
		"ACKD_FORWARD_SECRET=shipped-config-forward-secret", "SLACK_APP_TOKEN=" + shippedApp,
		"SLACK_API_URL=" + api.URL()}
}

// serveOnce starts `bin serve` on cfg with db and a free loopback port,
// waits for /healthz to answer 200, and stops it with SIGTERM. ok is false
// when it exits or stays unhealthy for 60 s; log is its whole output, read
// once it has stopped (warnings are logged as it starts serving).
func serveOnce(t *testing.T, bin, cfg, db string, api *fakeslack.Server) (log string, ok bool) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var out lockedBuffer
	cmd := exec.Command(bin, "serve", "--config", cfg, "--db", db, "--listen", addr)
	cmd.Env = shippedEnv(filepath.Dir(cfg), api)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := client.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				stop()
				return out.String(), true
			}
		}
		select {
		case <-done:
			return filepath.Base(bin) + " exited: " + out.String(), false
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return filepath.Base(bin) + " not healthy within 60s: " + out.String(), false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
