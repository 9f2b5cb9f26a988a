package e2e

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
)

// Catch-up (issue 22) with the real binary: ackd is down while messages
// arrive, and a restart recovers them from the fake Slack's history.

const catchupSecret = "e2e-catchup-signing-secret"

type catchupEnv struct {
	t      *testing.T
	r      *rig
	slack  *fakeslack.Server
	db     string
	addr   string
	config string
	env    []string
}

func newCatchupEnv(t *testing.T, rate int) *catchupEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	dir := t.TempDir()
	slack := fakeslack.New(t, botToken)
	addr := freeAddr(t, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 22)))
	db := filepath.Join(dir, "ackd.db")
	config := filepath.Join(dir, "ackd.toml")
	cfg := fmt.Sprintf(`listen = %q
db     = %q

[sweep]
interval = "200ms"
backoff  = "100ms"
lease    = "3s"   # a row a killed daemon held comes back soon

[backfill]
channels = ["C0CU1", "C0CU2"]
rate     = %d
limit    = 10

[[route]]
name     = "eyes"
event    = "message"
key      = "message"
effect   = "react"
reaction = "eyes"
timeout  = "2500ms" # under the lease; long enough that a loaded -race machine
                    # rarely times out a reaction Slack made (at least once:
                    # a timed-out one is added again, which the checks count)

[[route]]
name   = "hello"
event  = "app_mention"
key    = "message"
effect = "post"
text   = "hello {{.User}}"
thread = true
timeout = "2500ms"
`, addr, db, rate)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, f := range must(filepath.Glob(filepath.Join(dir, "*.log"))) {
			b, _ := os.ReadFile(f)
			for _, bad := range []string{"WARNING: DATA RACE", "panic:", "fatal error:"} {
				if i := bytes.Index(b, []byte(bad)); i >= 0 {
					t.Errorf("%s: %s\n%s", filepath.Base(f), bad, b[i:min(len(b), i+3000)])
				}
			}
		}
	})
	secrets := map[string]string{"SLACK_SIGNING_SECRET": catchupSecret, "SLACK_BOT_TOKEN": botToken, "SLACK_API_URL": slack.URL()}
	r := newRig(t, ackdBin, dir, config, addr, secrets)
	return &catchupEnv{t: t, r: r, slack: slack, db: db, addr: addr, config: config, env: r.env}
}

func must[T any](v T, _ error) T { return v }

func (e *catchupEnv) start() {
	e.t.Helper()
	if err := e.r.start(); err != nil {
		e.t.Fatal(err)
	}
}

func (e *catchupEnv) count(q string, args ...any) int {
	e.t.Helper()
	h, err := sql.Open("sqlite", e.db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		e.t.Fatal(err)
	}
	defer h.Close()
	var n int
	if err := h.QueryRow(q, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// live delivers one signed event as Slack would, and checks the 200.
func (e *catchupEnv) live(eventID string, inner map[string]any) {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"type": "event_callback", "team_id": "T0FAKE", "api_app_id": "A1",
		"event_id": eventID, "event_time": time.Now().Unix(), "event": inner})
	req, _ := http.NewRequest(http.MethodPost, "http://"+e.addr+"/slack/events", bytes.NewReader(body))
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", slackSign(catchupSecret, ts, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("live %s: %d", eventID, resp.StatusCode)
	}
}

// outage is what arrived in the channels while ackd was down.
type outage struct {
	msgs     map[string][]fakeslack.Message // channel → what was posted, with ts
	eligible map[string]bool                // "channel:ts" that the eyes route must react to
	mentions map[string]bool                // "channel:ts" that the hello route must answer
	never    map[string]bool                // "channel:ts" that nothing may act on
}

// arrive posts 31 messages into each of two channels: 25 from users (one
// mentions the bot), a thread of three replies, a bot's message, a
// channel_join and the bot's own. Each channel's 28 top-level messages take
// three pages of 10.
func (e *catchupEnv) arrive() outage {
	o := outage{msgs: map[string][]fakeslack.Message{}, eligible: map[string]bool{}, mentions: map[string]bool{}, never: map[string]bool{}}
	for _, ch := range []string{"C0CU1", "C0CU2"} {
		add := func(m fakeslack.Message) string {
			m.TS = e.slack.AddMessage(ch, m)
			o.msgs[ch] = append(o.msgs[ch], m)
			return ch + ":" + m.TS
		}
		for i := range 25 {
			text := fmt.Sprintf("message %d", i)
			if i == 7 {
				text = "hey <@U0FAKEBOT> can you look"
			}
			k := add(fakeslack.Message{User: "U0HUMAN", Text: text})
			o.eligible[k] = true
			if i == 7 {
				o.mentions[k] = true
			}
			if i == 12 {
				parent := strings.TrimPrefix(k, ch+":")
				for j := range 3 {
					o.eligible[add(fakeslack.Message{User: "U0OTHER", ThreadTS: parent, Text: fmt.Sprintf("reply %d", j)})] = true
				}
			}
		}
		o.never[add(fakeslack.Message{BotID: "B0OTHERBOT", Subtype: "bot_message", Text: "deploy finished <@U0FAKEBOT>"})] = true
		o.never[add(fakeslack.Message{User: "U0NEW", Subtype: "channel_join", Text: "<@U0NEW> has joined the channel"})] = true
		// The bot's own message, without a bot_id: ackd knows it by
		// auth.test's user_id.
		o.never[add(fakeslack.Message{User: "U0FAKEBOT", Text: "a note from <@U0FAKEBOT> itself"})] = true
	}
	return o
}

// effects counts reactions.add and chat.postMessage calls per message.
func (e *catchupEnv) effects() (reacts, posts map[string]int) {
	reacts, posts = map[string]int{}, map[string]int{}
	for _, c := range e.slack.Calls() {
		switch c.Method {
		case "reactions.add":
			reacts[c.Params.Get("channel")+":"+c.Params.Get("timestamp")]++
		case "chat.postMessage":
			posts[c.Params.Get("channel")+":"+c.Params.Get("thread_ts")]++
		}
	}
	return reacts, posts
}

// waitEffects waits until every eligible message has its reaction and
// every mention its answer.
func (e *catchupEnv) waitEffects(o outage) {
	e.t.Helper()
	ok := pollUntil(60*time.Second, func() bool {
		reacts, posts := e.effects()
		for k := range o.eligible {
			if reacts[k] == 0 {
				return false
			}
		}
		for k := range o.mentions {
			if posts[k] == 0 {
				return false
			}
		}
		return true
	})
	if !ok {
		reacts, posts := e.effects()
		e.t.Fatalf("not every recovered message was acted on: %d of %d reactions, %d of %d answers\n%s",
			len(reacts), len(o.eligible), len(posts), len(o.mentions), tail(e.r.procs[len(e.r.procs)-1].log, 30))
	}
}

// markBefore gives both channels a mark, as live traffic before the outage
// would: a live message in each, then a wait for the marks.
func (e *catchupEnv) markBefore() (before map[string]bool) {
	e.t.Helper()
	before = map[string]bool{}
	for i, ch := range []string{"C0CU1", "C0CU2"} {
		ts := e.slack.AddMessage(ch, fakeslack.Message{User: "U0HUMAN", Text: "before the outage"})
		before[ch+":"+ts] = true
		e.live(fmt.Sprintf("EvBefore%d", i), map[string]any{"type": "message", "user": "U0HUMAN", "text": "before the outage",
			"ts": ts, "channel": ch, "event_ts": ts})
	}
	if !pollUntil(20*time.Second, func() bool { return e.count(`SELECT count(*) FROM catchup_marks`) == 2 }) {
		e.t.Fatal("the live messages gave the channels no mark")
	}
	return before
}

func checkOnce(t *testing.T, o outage, before map[string]bool, reacts, posts map[string]int, allowRepeats int) {
	t.Helper()
	repeats := 0
	for k := range o.eligible {
		switch n := reacts[k]; {
		case n == 0:
			t.Errorf("%s: never acted on", k)
		case n > 1:
			repeats += n - 1
		}
	}
	for k := range o.mentions {
		if posts[k] == 0 {
			t.Errorf("mention %s: never answered", k)
		} else {
			repeats += posts[k] - 1
		}
	}
	for k := range o.never {
		if reacts[k] > 0 || posts[k] > 0 {
			t.Errorf("%s: acted on, though the live path ignores it (bot message, channel_join)", k)
		}
	}
	// ackd's own answers to the mentions are in the channel too, and must
	// never be acted on.
	for k := range reacts {
		if !o.eligible[k] && !o.never[k] && !before[k] {
			t.Errorf("%s: reacted to a message that was not posted during the outage (ackd's own answer?)", k)
		}
	}
	if repeats > allowRepeats {
		t.Errorf("%d effects repeated (allowed %d)", repeats, allowRepeats)
	}
}

func TestCatchUpAfterOutage(t *testing.T) {
	t.Parallel()
	e := newCatchupEnv(t, 600)
	e.start()
	before := e.markBefore()
	if err := e.r.kill("down"); err != nil {
		t.Fatal(err)
	}
	o := e.arrive()
	e.start() // on_start catches up from the marks
	e.waitEffects(o)
	reacts, posts := e.effects()
	checkOnce(t, o, before, reacts, posts, 0)
	rows := e.count(`SELECT count(*) FROM outbox`)
	// 2 before, 2 × (25 + 3) reactions, 2 answers.
	if want := 2 + 2*28 + 2; rows != want {
		t.Errorf("%d outbox rows, want %d", rows, want)
	}

	t.Run("late live deliveries of the same messages (new event_ids) add nothing", func(t *testing.T) {
		for ch, ms := range o.msgs {
			for i, m := range ms {
				if m.User == "U0FAKEBOT" {
					continue // the live path knows the bot only by [slack] bot_user_id, unset here
				}
				inner := map[string]any{"type": "message", "user": m.User, "text": m.Text, "ts": m.TS, "channel": ch, "event_ts": m.TS}
				if m.ThreadTS != "" {
					inner["thread_ts"] = m.ThreadTS
				}
				if m.BotID != "" {
					inner["bot_id"] = m.BotID
				}
				if m.Subtype != "" {
					inner["subtype"] = m.Subtype
				}
				e.live(fmt.Sprintf("EvDelayed%s%03d", ch, i), inner)
				if o.mentions[ch+":"+m.TS] {
					inner["type"] = "app_mention"
					e.live(fmt.Sprintf("EvDelayedM%s%03d", ch, i), inner)
				}
			}
		}
		// A sentinel after them: once it is acted on, any row they had
		// added would have been swept too.
		ts := e.slack.AddMessage("C0CU1", fakeslack.Message{User: "U0HUMAN", Text: "after"})
		e.live("EvSentinel", map[string]any{"type": "message", "user": "U0HUMAN", "text": "after", "ts": ts, "channel": "C0CU1", "event_ts": ts})
		if !pollUntil(30*time.Second, func() bool { r, _ := e.effects(); return r["C0CU1:"+ts] > 0 }) {
			t.Fatal("the sentinel was not acted on")
		}
		if got := e.count(`SELECT count(*) FROM outbox`); got != rows+1 {
			t.Errorf("%d outbox rows after the late deliveries, want %d (only the sentinel's)", got, rows+1)
		}
		r2, p2 := e.effects()
		delete(r2, "C0CU1:"+ts)
		for k, n := range reacts {
			if r2[k] != n {
				t.Errorf("%s reacted %d times after the late delivery, %d before", k, r2[k], n)
			}
		}
		if len(p2) != len(posts) {
			t.Errorf("answers %d → %d after late deliveries", len(posts), len(p2))
		}
	})
	if err := e.r.stop(20 * time.Second); err != nil {
		t.Error(err)
	}
}

func TestCatchUpKilledMidwayFinishesOnRestart(t *testing.T) {
	t.Parallel()
	// 120 calls a minute: one history page every 500 ms, so the kill lands
	// while catch-up is reading and recording.
	e := newCatchupEnv(t, 120)
	e.start()
	before := e.markBefore()
	if err := e.r.kill("down"); err != nil {
		t.Fatal(err)
	}
	o := e.arrive()
	e.start()
	// Killed once C0CU1 is read and recorded and C0CU2 is under way.
	if !pollUntil(60*time.Second, func() bool { return len(e.slack.CallsTo("conversations.history")) >= 5 }) {
		t.Fatal("catch-up did not get going")
	}
	if err := e.r.kill("kill-catchup"); err != nil {
		t.Fatal(err)
	}
	recordedBefore := e.count(`SELECT count(*) FROM outbox`)
	e.start()
	e.waitEffects(o)
	reacts, posts := e.effects()
	// A row being performed when the process died is performed again
	// (at-least-once): at most the sweep's workers' worth.
	checkOnce(t, o, before, reacts, posts, 4)
	if want := 2 + 2*28 + 2; e.count(`SELECT count(*) FROM outbox`) != want {
		t.Errorf("%d outbox rows, want %d: each message's rows once", e.count(`SELECT count(*) FROM outbox`), want)
	}
	// The resume point goes once the channel is read to the end, just after
	// its last rows were committed (and perhaps performed).
	if !pollUntil(20*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM catchup_marks WHERE resume_from IS NOT NULL`) == 0
	}) {
		t.Error("a resume point is left after the restart finished catch-up")
	}
	t.Logf("rows recorded before the kill: %d; repeated effects: %d", recordedBefore, repeatsOf(reacts, posts))
	if err := e.r.stop(20 * time.Second); err != nil {
		t.Error(err)
	}
}

func repeatsOf(ms ...map[string]int) int {
	n := 0
	for _, m := range ms {
		for _, v := range m {
			n += max(0, v-1)
		}
	}
	return n
}

var recordedLine = regexp.MustCompile(`backfill: (?:would record|recorded) (\d+) messages`)

// backfill runs `ackd backfill` with the daemon's environment.
func (e *catchupEnv) backfill(args ...string) (recorded int, out string, err error) {
	e.t.Helper()
	cmd := exec.Command(ackdBin, append([]string{"backfill", "--config", e.config}, args...)...)
	cmd.Env = e.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	out = stdout.String() + stderr.String()
	m := recordedLine.FindStringSubmatch(stdout.String())
	if m == nil {
		e.t.Fatalf("no summary line in %q", out)
	}
	recorded, _ = strconv.Atoi(m[1])
	return recorded, out, err
}

func TestBackfillCommandBesideADaemon(t *testing.T) {
	t.Parallel()
	e := newCatchupEnv(t, 6000)
	o := e.arrive() // before the daemon's first start: no mark, nothing caught up on start
	e.start()
	if !pollUntil(20*time.Second, func() bool { return e.count(`SELECT count(*) FROM catchup_marks`) == 2 }) {
		t.Fatal("serve gave the channels no mark")
	}
	if n := e.count(`SELECT count(*) FROM outbox`); n != 0 {
		t.Fatalf("serve without a mark caught up %d rows; it must start from now", n)
	}
	n, out, err := e.backfill("--since", "1h", "--dry-run")
	if err != nil || n != 2*28 {
		t.Fatalf("dry run: would record %d (want %d), err %v\n%s", n, 2*28, err, out)
	}
	if rows := e.count(`SELECT count(*) FROM outbox`); rows != 0 {
		t.Fatalf("the dry run wrote %d rows", rows)
	}
	n, out, err = e.backfill("--since", "1h")
	if err != nil || n != 2*28 {
		t.Fatalf("first backfill: recorded %d (want %d), err %v\n%s", n, 2*28, err, out)
	}
	n, out, err = e.backfill("--since", "1h")
	if err != nil || n != 0 {
		t.Fatalf("second backfill recorded %d, want 0; err %v\n%s", n, err, out)
	}
	e.waitEffects(o)
	reacts, posts := e.effects()
	checkOnce(t, o, nil, reacts, posts, 0)

	t.Run("status shows the marks, their lag and what catch-up recovered", func(t *testing.T) {
		cmd := exec.Command(ackdBin, "status", "--json", "--config", e.config)
		cmd.Env = e.env
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Recovered int `json:"recovered"`
			Marks     []struct {
				Channel string `json:"channel"`
				TS      string `json:"ts"`
				Lag     *int   `json:"lag_seconds"`
			} `json:"marks"`
		}
		if err := json.Unmarshal(out, &st); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		// 56 message intents and 2 mention intents, both of their own kind.
		if st.Recovered != 2*28+2 || len(st.Marks) != 2 || st.Marks[0].Channel != "C0CU1" || st.Marks[0].Lag == nil || st.Marks[0].TS == "" {
			t.Fatalf("status --json: %s", out)
		}
		cmd = exec.Command(ackdBin, "status", "--config", e.config)
		cmd.Env = e.env
		text, err := cmd.Output()
		if err != nil || !strings.Contains(string(text), "marks") || !strings.Contains(string(text), "C0CU2 ") || !strings.Contains(string(text), "lag ") {
			t.Fatalf("status: %v\n%s", err, text)
		}
	})

	t.Run("missing_scope: the line names the scope and the exit status says it did not finish", func(t *testing.T) {
		e.slack.Script("conversations.history", fakeslack.MissingScope("groups:history"))
		_, out, err := e.backfill("--since", "10m", "--channel", "C0CU1")
		if err == nil {
			t.Fatalf("exit status 0 though a channel was refused\n%s", out)
		}
		if !strings.Contains(out, "missing_scope") || !strings.Contains(out, "groups:history") {
			t.Fatalf("output does not name the scope:\n%s", out)
		}
	})
	if err := e.r.stop(20 * time.Second); err != nil {
		t.Error(err)
	}
}
