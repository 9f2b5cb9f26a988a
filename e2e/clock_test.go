package e2e

import (
	"bytes"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/store"
)

// Issue 29.5 and 29.6 with the real binary: catch-up after downtime when
// Slack's clock is ±10 minutes off ackd's, and catch-up over a period whose
// rows were pruned.

// newClockEnv is newCatchupEnv's daemon with Slack's clock off by offset
// (negative: ackd's clock is ahead) and retention as given.
func newClockEnv(t *testing.T, offset time.Duration, retention string) *catchupEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	dir := t.TempDir()
	slack := fakeslack.New(t, botToken)
	slack.SetClockOffset(offset)
	addr := freeAddr(t, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 29)))
	db := filepath.Join(dir, "ackd.db")
	config := filepath.Join(dir, "ackd.toml")
	cfg := fmt.Sprintf(`listen = %q
db     = %q

[sweep]
interval = "200ms"
backoff  = "100ms"
lease    = "3s"

[retention]
%s

[backfill]
channels = ["C0CU1", "C0CU2"]
rate     = 6000
limit    = 10

[[route]]
name     = "eyes"
event    = "message"
key      = "message"
effect   = "react"
reaction = "eyes"
timeout  = "1s"

[[route]]
name   = "hello"
event  = "app_mention"
key    = "message"
effect = "post"
text   = "hello {{.User}}"
thread = true
timeout = "1s"
`, addr, db, retention)
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

// caughtUp waits for the running daemon's catch-up on start to end.
func (e *catchupEnv) caughtUp() string {
	e.t.Helper()
	p, err := e.r.current()
	if err != nil {
		e.t.Fatal(err)
	}
	var log string
	if !pollUntil(60*time.Second, func() bool {
		b, _ := os.ReadFile(p.log)
		log = string(b)
		return strings.Contains(log, `"msg":"catch-up finished"`) || strings.Contains(log, "catch-up finished with channels not read")
	}) {
		e.t.Fatalf("catch-up on start did not finish\n%s", tail(p.log, 30))
	}
	return log
}

func TestCatchUpAfterDowntimeOnSkewedClocks(t *testing.T) {
	for _, off := range []time.Duration{-10 * time.Minute, 10 * time.Minute} {
		t.Run(fmt.Sprintf("Slack's clock %+v", off), func(t *testing.T) {
			t.Parallel()
			e := newClockEnv(t, off, `done = "168h"`)
			// The first start: no mark yet, so the marks start at Slack's now.
			e.start()
			e.caughtUp()
			if n := e.count(`SELECT count(*) FROM catchup_marks`); n != 2 {
				t.Fatalf("%d marks after the first start, want 2", n)
			}
			seen := map[string]bool{}
			for outage := range 2 {
				if err := e.r.kill("down"); err != nil {
					t.Fatal(err)
				}
				o := e.arrive() // 31 messages in each channel while ackd is down
				e.start()       // catch-up on start, from the marks
				e.waitEffects(o)
				reacts, posts := e.effects()
				checkOnce(t, o, seen, reacts, posts, 0)
				for k := range o.eligible {
					seen[k] = true
				}
				t.Logf("outage %d: %d messages recovered and acted on once", outage+1, len(o.eligible))
			}
			if err := e.r.stop(20 * time.Second); err != nil {
				t.Error(err)
			}
		})
	}
}

// runAckd runs one ackd command with the daemon's environment.
func (e *catchupEnv) runAckd(args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	cmd := exec.Command(ackdBin, args...)
	cmd.Env = e.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		e.t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

func TestCatchUpOverAPrunedPeriod(t *testing.T) {
	t.Parallel()
	// Slack's clock 10 minutes ahead of ackd's: a bound taken on ackd's
	// clock would reach 10 minutes further into the pruned period.
	const off = 10 * time.Minute
	e := newClockEnv(t, off, `done = "2h"`)
	long := filepath.Join(filepath.Dir(e.config), "long.toml")
	b, _ := os.ReadFile(e.config)
	if err := os.WriteFile(long, bytes.Replace(b, []byte(`done = "2h"`), []byte(`done = "168h"`), 1), 0o600); err != nil {
		t.Fatal(err)
	}

	// History: three messages past retention.done (on Slack's clock), two
	// within it.
	now := e.slack.Now()
	msgs := map[string]time.Duration{}
	for i, ago := range []time.Duration{3 * time.Hour, 3*time.Hour - time.Second, 2*time.Hour + 5*time.Minute, time.Hour, time.Hour - time.Second} {
		ts := store.TimeTS(now.Add(-ago))
		e.slack.AddMessage("C0CU1", fakeslack.Message{TS: ts, User: "U0HUMAN", Text: fmt.Sprint("message ", i)})
		msgs["C0CU1:"+ts] = ago
	}
	e.start()
	e.caughtUp()
	// They were recorded and performed back then (a config that kept done
	// rows for a week)…
	if code, out, errs := e.runAckd("backfill", "--config", long, "--channel", "C0CU1", "--since", "4h"); code != 0 || !strings.Contains(out, "recorded 5 messages") {
		t.Fatalf("seeding backfill: exit %d\n%s%s", code, out, errs)
	}
	if !pollUntil(30*time.Second, func() bool { r, _ := e.effects(); return len(r) == 5 }) {
		t.Fatal("the seeded messages were not acted on")
	}
	// …each done a minute after its message, on ackd's clock; then pruned
	// by retention.done = 2h.
	h, err := sql.Open("sqlite", e.db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for k, ago := range msgs {
		done := time.Now().Add(-ago).Add(time.Minute).UnixMilli()
		if _, err := h.Exec(`UPDATE outbox SET completed_at = ? WHERE idempotency_key = ? AND status = 'done'`, done, k+":eyes"); err != nil {
			t.Fatal(err)
		}
	}
	if code, out, errs := e.runAckd("prune", "--config", e.config); code != 0 || !strings.Contains(out, "done=3") {
		t.Fatalf("prune: exit %d\n%s%s", code, out, errs)
	}
	once := func(when string) {
		t.Helper()
		reacts, _ := e.effects()
		for k := range msgs {
			if reacts[k] != 1 {
				t.Errorf("%s: %s reacted to %d times, want once", when, k, reacts[k])
			}
		}
	}

	t.Run("config check says max_age reaches past retention.done, and passes", func(t *testing.T) {
		code, out, errs := e.runAckd("config", "check", "--config", e.config)
		if code != 0 || !strings.Contains(out, "warn  config") ||
			!strings.Contains(out, "backfill.max_age 24h0m0s reaches past retention.done 2h0m0s") ||
			!strings.Contains(out, "catch-up reads back at most 1h50m0s") {
			t.Fatalf("exit %d\n%s%s", code, out, errs)
		}
	})

	t.Run("backfill --since past retention.done is refused: exit 1, the reach named, nothing recorded", func(t *testing.T) {
		rows := e.count(`SELECT count(*) FROM outbox`)
		for _, since := range []string{"3h", store.TimeTS(now.Add(-2*time.Hour - 5*time.Minute))} {
			code, out, errs := e.runAckd("backfill", "--config", e.config, "--since", since)
			want := "ackd: --since " + since + " reaches past what ackd still knows: done rows are pruned 2h0m0s after they complete ([retention] done), " +
				"so the rows of a message older than 1h50m0s may be gone, and recording it again would perform its effects again; catch-up reads back at most 1h50m0s"
			if code != 1 || !strings.Contains(errs, want) || !strings.Contains(errs, "give a later --since, or lengthen [retention] done") || strings.Contains(out, "recorded") {
				t.Fatalf("--since %s: exit %d\nstdout: %s\nstderr: %s\nwant: %s", since, code, out, errs, want)
			}
		}
		if got := e.count(`SELECT count(*) FROM outbox`); got != rows {
			t.Fatalf("rows %d → %d", rows, got)
		}
		code, out, errs := e.runAckd("backfill", "--config", e.config, "--since", "90m")
		if code != 0 || !strings.Contains(out, "recorded 0 messages (2 already recorded") {
			t.Fatalf("--since 90m: exit %d\n%s%s", code, out, errs)
		}
	})

	t.Run("a restart whose marks are older than retention.done clamps them: nothing repeated", func(t *testing.T) {
		if err := e.r.kill("down"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Exec(`UPDATE catchup_marks SET ts = ?, resume_from = NULL`, store.TimeTS(now.Add(-5*time.Hour))); err != nil {
			t.Fatal(err)
		}
		e.start()
		log := e.caughtUp()
		for _, w := range []string{"config: backfill.max_age 24h0m0s reaches past retention.done 2h0m0s", "catch-up reads back at most [retention] done less 10m",
			"the channel's mark is older than catch-up reaches"} {
			if !strings.Contains(log, w) {
				t.Errorf("the log lacks %q", w)
			}
		}
		// A sentinel after it: once it is acted on, anything catch-up had
		// recorded would have been performed too.
		ts := e.slack.AddMessage("C0CU1", fakeslack.Message{User: "U0HUMAN", Text: "after"})
		e.live("EvSentinel", map[string]any{"type": "message", "user": "U0HUMAN", "text": "after", "ts": ts, "channel": "C0CU1", "event_ts": ts})
		if !pollUntil(30*time.Second, func() bool { r, _ := e.effects(); return r["C0CU1:"+ts] > 0 }) {
			t.Fatal("the sentinel was not acted on")
		}
		once("after the restart")
	})
	once("at the end")
	if err := e.r.stop(20 * time.Second); err != nil {
		t.Error(err)
	}
}
