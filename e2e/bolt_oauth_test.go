package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/testreq"
)

// TestBoltOAuthPassthrough: a real @slack/bolt app with its own OAuth
// installer behind ackd (no [oauth]; redeliver routes and
// [redeliver] passthrough): the browser's GETs of the app's install and
// redirect paths reach the app through ackd with their query and cookies,
// the app's redirects come back untouched, and the install completes
// against the fake Slack.
func TestBoltOAuthPassthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node and ackd processes")
	}
	modules := boltDir()
	_, nodeErr := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(modules, "node_modules", "@slack", "bolt", "package.json"))
	testreq.Need(t, nodeErr == nil && modErr == nil,
		"node ≥ 20 and the Bolt app's modules (cd examples/bolt && npm ci --prefer-offline)")

	dir := t.TempDir()
	fake := fakeslack.New(t, "xoxb-unused")
	fake.EnableOAuth("bolt.client", "bolt-client-secret")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 31))
	_, appPort, _ := strings.Cut(freeAddr(t, rng), ":")
	record := filepath.Join(dir, "installs.jsonl")
	if err := os.WriteFile(record, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs("testdata/boltoauth.js")
	logPath := filepath.Join(dir, "bolt.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", script)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(modules, "node_modules"), "PORT="+appPort,
		"SLACK_SIGNING_SECRET="+boltSecret, "SLACK_CLIENT_ID=bolt.client", "SLACK_CLIENT_SECRET=bolt-client-secret",
		"SLACK_API_URL="+fake.URL(), "RECORD="+record)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- true
				io.Copy(logf, stdout)
				return
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("bolt app exited\n%s", tail(logPath, 30))
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("bolt app not ready\n%s", tail(logPath, 30))
	}

	addr := freeAddr(t, rng)
	cfgPath := filepath.Join(dir, "ackd.toml")
	cfg := fmt.Sprintf(`listen = %q
db     = %q

[redeliver]
passthrough = ["/slack/install", "/slack/oauth_redirect"]

[[route]]
name   = "events"
event  = "*"
effect = "redeliver"
url    = "http://127.0.0.1:%s/slack/events"
`, addr, filepath.Join(dir, "ackd.db"), appPort)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, ackdBin, dir, cfgPath, addr, map[string]string{"SLACK_SIGNING_SECRET": boltSecret})
	if err := r.start(); err != nil {
		t.Fatal(err)
	}

	// The install page, through ackd: Bolt's redirect to Slack with its
	// state, and its state cookie.
	resp := getWith(t, "http://"+addr+"/slack/install", nil)
	if resp.StatusCode != 302 {
		t.Fatalf("install through ackd: %d, want Bolt's 302\n%s", resp.StatusCode, tail(logPath, 20))
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || !strings.HasSuffix(loc.Path, "/oauth/v2/authorize") || loc.Query().Get("client_id") != "bolt.client" {
		t.Fatalf("install redirect %q", resp.Header.Get("Location"))
	}
	state := loc.Query().Get("state")
	cookies := resp.Cookies()
	if state == "" || len(cookies) == 0 {
		t.Fatalf("no state (%q) or no cookie (%v) from Bolt through ackd", state, resp.Header)
	}

	// Slack sends the browser back with a code: through ackd to Bolt,
	// which exchanges it at the fake and stores the installation.
	fake.AddCode("code-bolt", "", fakeslack.Grant{TeamID: "T0BOLT", TeamName: "Bolt team", BotUserID: "U0BOLTBOT",
		BotID: "B0BOLT", Scope: "chat:write", InstallerUserID: "U0ADMIN"})
	done := getWith(t, "http://"+addr+"/slack/oauth_redirect?code=code-bolt&state="+url.QueryEscape(state), cookies)
	if done.StatusCode != 200 {
		t.Fatalf("redirect through ackd: %d\n%s", done.StatusCode, tail(logPath, 20))
	}
	calls := fake.CallsTo("oauth.v2.access")
	if len(calls) != 1 || calls[0].Params.Get("code") != "code-bolt" || calls[0].Params.Get("client_id") != "bolt.client" {
		t.Fatalf("oauth.v2.access calls %+v", calls)
	}
	b, _ := os.ReadFile(record)
	var got struct {
		Key, BotUserID, BotID string
		HasToken              bool
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(b))), &got); err != nil || got.Key != "T0BOLT" || !got.HasToken || got.BotID != "B0BOLT" {
		t.Fatalf("Bolt's stored installation %q (%v)", b, err)
	}
	// Without passthrough, the same GET is not the app's: ackd has no such page.
	if resp := getWith(t, "http://"+addr+"/slack/other", nil); resp.StatusCode != 404 {
		t.Errorf("a path not listed in passthrough: %d, want 404", resp.StatusCode)
	}
}
