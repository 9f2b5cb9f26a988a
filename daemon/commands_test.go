package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/store"
)

// Slash commands (DESIGN §4): verified, recorded under the operation id
// "cmd:"+trigger_id, then answered 200 with the route's ephemeral ack_text.
// Slack never retries a command, so even a failure is a 200 the user can read.

// cmdDeadline is Slack's 3 s deadline for an answer: the promise every ack
// keeps, and a margin of seconds over the ack budget for a noisy machine.
const cmdDeadline = 3 * time.Second

// cmdForm is a slash command's form body as Slack sends it.
func cmdForm(command, text, trigger, responseURL string) []byte {
	v := url.Values{}
	v.Set("token", "gIkuvaNzQIHg97ATvDxqgjtO")
	v.Set("team_id", "T0001")
	v.Set("team_domain", "example")
	v.Set("channel_id", "C2147483705")
	v.Set("channel_name", "test")
	v.Set("user_id", "U2147483697")
	v.Set("user_name", "Steve")
	v.Set("command", command)
	v.Set("text", text)
	v.Set("api_app_id", "A123456")
	v.Set("is_enterprise_install", "false")
	v.Set("response_url", responseURL)
	if trigger != "" {
		v.Set("trigger_id", trigger)
	}
	return []byte(v.Encode())
}

// cmdSignedPost sends a form body to path signed with secret at the unix time
// ts, for requests the harness's post (always the test secret, always now)
// cannot make.
func cmdSignedPost(tb testing.TB, s *testServer, path string, body []byte, secret string, ts int64) response {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+path, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("X-Slack-Signature", sign(secret, ts, body))
	return s.do(req)
}

// cmdEphemeral decodes an immediate command answer, failing unless it is
// Slack's ephemeral message shape.
func cmdEphemeral(tb testing.TB, r response) string {
	tb.Helper()
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		tb.Fatalf("Content-Type = %q, want application/json (body %q)", ct, r.Body)
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(r.Body), &m); err != nil {
		tb.Fatalf("answer %q is not a JSON object of strings: %v", r.Body, err)
	}
	if m["response_type"] != "ephemeral" || len(m) != 2 {
		tb.Fatalf("answer = %q, want exactly {response_type: ephemeral, text}", r.Body)
	}
	return m["text"]
}

// cmdNothingWritten fails unless the database holds no receipt and no row.
func cmdNothingWritten(tb testing.TB, s *testServer) {
	tb.Helper()
	if rc, ob := s.rows(); rc != 0 || ob != 0 {
		tb.Fatalf("receipts=%d outbox=%d, want nothing written", rc, ob)
	}
}

// cmdRow reads one outbox row by key through the server's store.
func cmdRow(tb testing.TB, s *testServer, key string) store.Row {
	tb.Helper()
	r, err := s.Store().GetByKey(context.Background(), key)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// cmdWaitDone waits until the row with key is done.
func cmdWaitDone(tb testing.TB, s *testServer, key string) store.Row {
	tb.Helper()
	var r store.Row
	waitFor(tb, "row "+key+" done", 10*time.Second, func() bool {
		var err error
		r, err = s.Store().GetByKey(context.Background(), key)
		return err == nil && r.Status == store.StatusDone
	})
	return r
}

// cmdWaitPosts waits until hook has received at least n requests.
func cmdWaitPosts(tb testing.TB, hook *fakeslack.Hook, n int) []fakeslack.Post {
	tb.Helper()
	waitFor(tb, strconv.Itoa(n)+" post(s) to the hook", 10*time.Second, func() bool { return len(hook.Posts()) >= n })
	return hook.Posts()
}

// cmdLockDB holds SQLite's write lock on the database at path from a separate
// sqlite3 process (lockHold) until release is called or the test ends.
func cmdLockDB(tb testing.TB, path string) (release func()) {
	tb.Helper()
	h := lockHold(tb, path)
	return sync.OnceFunc(func() { h.Release(tb) })
}

// cmdWaitCommitterGaveUp waits until the store's committer has failed on the
// held lock (its busy timeout ran out). From then on an intent whose caller
// already gave up can no longer commit, so releasing the lock cannot let a
// "not recorded" request be recorded after all.
func cmdWaitCommitterGaveUp(tb testing.TB, s *testServer) {
	tb.Helper()
	waitFor(tb, "the store to give up on the locked database", 30*time.Second, func() bool {
		return s.Store().BusyErrors() > 0
	})
}

const cmdConfig = `
[sweep]
interval = "100ms"

[commands]
unhandled_text = "Nobody here handles that command."

[[route]]
name     = "deploy"
command  = "/deploy"
ack_text = "On it."
effect   = "respond"
text     = "Deployed {{.Text}} for <@{{.User}}>"
timeout  = "5s"
`

func TestSlashCommand(t *testing.T) {
	t.Parallel()

	t.Run("signed command is answered within the deadline with the ephemeral ack_text, then responds with the template", func(t *testing.T) {
		hook := fakeslack.NewHook(t)
		s := startServer(t, configFor(t, cmdConfig), daemon.Options{})

		start := time.Now()
		r := s.postForm("/slack/commands", cmdForm("/deploy", "api v2", "111.222.aaa", hook.URL()))
		took := time.Since(start)
		if r.Status != http.StatusOK {
			t.Fatalf("status %d %q, want 200", r.Status, r.Body)
		}
		if took > cmdDeadline {
			t.Errorf("answered after %s, past Slack's %s deadline", took, cmdDeadline)
		}
		if text := cmdEphemeral(t, r); text != "On it." {
			t.Errorf("ack text = %q, want the route's ack_text %q", text, "On it.")
		}
		if n := s.count(`SELECT count(*) FROM slack_event_receipts WHERE event_id = 'cmd:111.222.aaa'`); n != 1 {
			t.Errorf("receipts for cmd:111.222.aaa = %d, want 1", n)
		}

		posts := cmdWaitPosts(t, hook, 1)
		var body map[string]any
		posts[0].JSON(t, &body)
		if want := "Deployed api v2 for <@U2147483697>"; body["text"] != want {
			t.Errorf("response_url got text %q, want %q", body["text"], want)
		}
		row := cmdWaitDone(t, s, "cmd:111.222.aaa:deploy")
		if row.Effect != "respond" {
			t.Errorf("effect = %q, want respond", row.Effect)
		}
	})

	t.Run("identical commands with different trigger ids are two runs", func(t *testing.T) {
		hook := fakeslack.NewHook(t)
		s := startServer(t, configFor(t, cmdConfig), daemon.Options{})

		for _, trigger := range []string{"1.1.a", "1.1.b"} {
			if r := s.postForm("/slack/commands", cmdForm("/deploy", "web", trigger, hook.URL())); r.Status != http.StatusOK {
				t.Fatalf("%s: status %d %q", trigger, r.Status, r.Body)
			}
		}
		if rc, ob := s.rows(); rc != 2 || ob != 2 {
			t.Fatalf("receipts=%d outbox=%d, want 2 and 2", rc, ob)
		}
		cmdWaitDone(t, s, "cmd:1.1.a:deploy")
		cmdWaitDone(t, s, "cmd:1.1.b:deploy")
		posts := hook.Posts()
		if len(posts) != 2 {
			t.Fatalf("response_url posts = %d, want 2 (one per run)", len(posts))
		}
		for _, p := range posts {
			var body map[string]any
			p.JSON(t, &body)
			if body["text"] != "Deployed web for <@U2147483697>" {
				t.Errorf("response_url got %q", p.Body)
			}
		}
	})

	t.Run("the same request delivered twice is one run", func(t *testing.T) {
		hook := fakeslack.NewHook(t)
		s := startServer(t, configFor(t, cmdConfig), daemon.Options{})

		body := cmdForm("/deploy", "web", "2.2.same", hook.URL())
		for i := range 2 {
			r := s.postForm("/slack/commands", body)
			if r.Status != http.StatusOK {
				t.Fatalf("delivery %d: status %d %q", i+1, r.Status, r.Body)
			}
			if text := cmdEphemeral(t, r); text != "On it." {
				t.Errorf("delivery %d: ack text %q, want %q", i+1, text, "On it.")
			}
		}
		if rc, ob := s.rows(); rc != 1 || ob != 1 {
			t.Fatalf("receipts=%d outbox=%d, want 1 and 1", rc, ob)
		}
		cmdWaitDone(t, s, "cmd:2.2.same:deploy")
		if n := len(hook.Posts()); n != 1 {
			t.Errorf("response_url posts = %d, want 1", n)
		}
		if s.Logs.Find("endpoint", "commands", "outcome", "duplicate", "event_id", "cmd:2.2.same") == nil {
			t.Errorf("second delivery not logged as a duplicate:\n%s", s.Logs)
		}
	})

	t.Run("unrouted command gets the unhandled text and writes nothing", func(t *testing.T) {
		s := startServer(t, configFor(t, cmdConfig), daemon.Options{})
		r := s.postForm("/slack/commands", cmdForm("/weather", "94070", "3.3.c", "http://127.0.0.1:9/unused"))
		if r.Status != http.StatusOK {
			t.Fatalf("status %d %q, want 200", r.Status, r.Body)
		}
		if text := cmdEphemeral(t, r); text != "Nobody here handles that command." {
			t.Errorf("text = %q, want the configured unhandled_text", text)
		}
		cmdNothingWritten(t, s)
	})

	t.Run("ssl_check is answered 200 and writes nothing", func(t *testing.T) {
		s := startServer(t, configFor(t, cmdConfig), daemon.Options{})
		r := s.postForm("/slack/commands", []byte("ssl_check=1&token=gIkuvaNzQIHg97ATvDxqgjtO"))
		if r.Status != http.StatusOK {
			t.Fatalf("status %d %q, want 200", r.Status, r.Body)
		}
		if r.Body != "" {
			t.Errorf("body = %q, want empty", r.Body)
		}
		cmdNothingWritten(t, s)
	})

	t.Run("rejected requests write nothing", func(t *testing.T) {
		s := startServer(t, configFor(t, cmdConfig), daemon.Options{})
		good := cmdForm("/deploy", "web", "4.4.d", "http://127.0.0.1:9/unused")
		now := time.Now().Unix()
		for _, tc := range []struct {
			name   string
			body   []byte
			secret string
			ts     int64
			want   int
		}{
			{"bad signature is 401", good, "not-the-signing-secret", now, http.StatusUnauthorized},
			{"timestamp 6 minutes old is 401", good, testSecret, now - 6*60, http.StatusUnauthorized},
			{"form without command is 400", []byte("team_id=T0001&text=web&trigger_id=4.4.e"), testSecret, now, http.StatusBadRequest},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := cmdSignedPost(t, s, "/slack/commands", tc.body, tc.secret, tc.ts)
				if r.Status != tc.want {
					t.Errorf("status %d %q, want %d", r.Status, r.Body, tc.want)
				}
				cmdNothingWritten(t, s)
			})
		}
	})

	t.Run("intent not recorded within the budget is a 200 with the failed text, an error log, and nothing written", func(t *testing.T) {
		hook := fakeslack.NewHook(t)
		cfg := configFor(t, cmdConfig+"\n[ack]\nbudget = \"300ms\"\n")
		cfg.Sweep.Interval = config.Duration{Duration: time.Hour} // only the intent writes while locked
		s := startServer(t, cfg, daemon.Options{})
		release := cmdLockDB(t, s.DB)

		start := time.Now()
		r := s.postForm("/slack/commands", cmdForm("/deploy", "web", "5.5.locked", hook.URL()))
		took := time.Since(start)
		if r.Status != http.StatusOK {
			t.Fatalf("status %d %q, want 200 (Slack never retries a command)", r.Status, r.Body)
		}
		if took > cmdDeadline {
			t.Errorf("answered after %s; the 300ms budget should have cut the wait for the lock", took)
		}
		text := cmdEphemeral(t, r)
		if text != cfg.Commands.FailedText || !strings.Contains(text, "could not be recorded") || !strings.Contains(text, "try again") {
			t.Errorf("text = %q, want the failed text %q", text, cfg.Commands.FailedText)
		}
		if s.Logs.Find("level", "ERROR", "endpoint", "commands", "outcome", "failed", "event_id", "cmd:5.5.locked") == nil {
			t.Errorf("no error log naming cmd:5.5.locked:\n%s", s.Logs)
		}

		cmdWaitCommitterGaveUp(t, s)
		release()
		cmdNothingWritten(t, s)
		if n := len(hook.Posts()); n != 0 {
			t.Errorf("response_url got %d posts for a command that was not recorded", n)
		}
	})
}

// cmdExample is one examples/ file and what sending it must do.
type cmdExample struct {
	file    string
	path    string   // the endpoint `ackd send` posts it to
	body    string   // expected answer body ("" = empty)
	receipt string   // receipt the request records ("" = none)
	rows    []string // outbox keys it enqueues
}

// TestExamples sends every payload in examples/ to a server running
// examples/ackd.toml, the way `ackd send` does, so that the examples and the
// README that lists them never rot.
// examplePayloads lists the payload files in dir: the *.json and *.form
// files the repository ships. Anything else there (a database, an editor's
// swap file, examples/bolt) is not the test's to judge.
func examplePayloads(tb testing.TB, dir string) []string {
	tb.Helper()
	var out []string
	for _, ext := range []string{"*.json", "*.form"} {
		files, err := filepath.Glob(filepath.Join(dir, ext))
		if err != nil {
			tb.Fatal(err)
		}
		for _, f := range files {
			if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
				out = append(out, filepath.Base(f))
			}
		}
	}
	return out
}

// Issue 25.3: doing the examples leaves files in examples/ (a database and
// its -wal and -shm, an editor's backup): the check for unlisted payloads
// ignores them.
func TestExamplePayloadsIgnoreOtherFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{"a.json", "b.form", "ackd-examples.db", "ackd-examples.db-wal", "ackd.toml", "README.md", "a.json~"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "bolt"), 0o700); err != nil {
		t.Fatal(err)
	}
	if got := examplePayloads(t, dir); !slices.Equal(got, []string{"a.json", "b.form"}) {
		t.Errorf("payloads = %v, want [a.json b.form]", got)
	}
}

func TestExamples(t *testing.T) {
	t.Parallel()
	toml, err := os.ReadFile("../examples/ackd.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := configFor(t, string(toml))
	cfg.Sweep.Interval = config.Duration{Duration: time.Hour} // ingress only: the dry-run effects are not the point
	cfg.Sweep.Immediate = false
	s := startServer(t, cfg, daemon.Options{})

	cases := []cmdExample{
		{"url_verification.json", "/slack/events",
			`{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}`, "", nil},
		{"app_mention.json", "/slack/events", "", "Ev0LAN670R", []string{"Ev0LAN670R:mention-log"}},
		{"message.json", "/slack/events", "", "Ev0LAN71QA", []string{"Ev0LAN71QA:message-log"}},
		{"message_bot.json", "/slack/events", "", "", nil},
		{"message_edited.json", "/slack/events", "", "", nil},
		{"reaction_added.json", "/slack/events", "", "Ev0LAN7RCT", []string{"Ev0LAN7RCT:reaction-log"}},
		{"slash_command.form", "/slack/commands", `{"response_type":"ephemeral","text":"On it."}`,
			"cmd:13345224609.738474920.8088930838d88f008e0", []string{"cmd:13345224609.738474920.8088930838d88f008e0:deploy"}},
		{"block_actions.form", "/slack/interactivity", "",
			"ix:12466734323.1395872398.e2b4a2d2e8a3a2b0b1c8f1f0a9d7c6b5", []string{"ix:12466734323.1395872398.e2b4a2d2e8a3a2b0b1c8f1f0a9d7c6b5:approve"}},
	}

	for _, name := range examplePayloads(t, "../examples") {
		if !slices.ContainsFunc(cases, func(c cmdExample) bool { return c.file == name }) {
			t.Errorf("examples/%s has no case in TestExamples", name)
		}
	}
	readme, err := os.ReadFile("../examples/README.md")
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			if !strings.Contains(string(readme), c.file) {
				t.Errorf("examples/README.md does not list %s", c.file)
			}
			raw, err := os.ReadFile(filepath.Join("../examples", c.file))
			if err != nil {
				t.Fatal(err)
			}
			// What `ackd send` does: trim the trailing newline, JSON to
			// /slack/events, a form to /slack/commands, or to
			// /slack/interactivity when it carries payload=.
			body := []byte(strings.TrimRight(string(raw), "\r\n"))
			path, ctype := "/slack/events", "application/json"
			if strings.HasSuffix(c.file, ".form") {
				path, ctype = "/slack/commands", "application/x-www-form-urlencoded"
				if bytes.HasPrefix(body, []byte("payload=")) || bytes.Contains(body, []byte("&payload=")) {
					path = "/slack/interactivity"
				}
			}
			if path != c.path {
				t.Fatalf("ackd send would post %s to %s, want %s", c.file, path, c.path)
			}
			receipts, outbox := s.rows()

			r := s.post(path, ctype, body, nil)
			if r.Status != http.StatusOK {
				t.Fatalf("status %d %q, want 200", r.Status, r.Body)
			}
			if r.Body != c.body {
				t.Errorf("body %q, want %q", r.Body, c.body)
			}
			wantReceipts := receipts
			if c.receipt != "" {
				wantReceipts++
				if n := s.count(`SELECT count(*) FROM slack_event_receipts WHERE event_id = ?`, c.receipt); n != 1 {
					t.Errorf("no receipt %q", c.receipt)
				}
			}
			for _, key := range c.rows {
				cmdRow(t, s, key)
			}
			if rc, ob := s.rows(); rc != wantReceipts || ob != outbox+len(c.rows) {
				t.Errorf("added %d receipts and %d rows, want %d and %d",
					rc-receipts, ob-outbox, wantReceipts-receipts, len(c.rows))
			}
		})
	}
}
