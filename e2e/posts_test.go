package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
)

var flagPostsDuration = flag.Duration("e2e.posts", envDuration("ACKD_E2E_POSTS_DURATION", 4*time.Second),
	"how long each run of the post campaign plays Slack at the daemon (env ACKD_E2E_POSTS_DURATION)")

const (
	postsRate    = 12                      // events a second
	postsLease   = 2 * time.Second         // over the post's 800ms timeout
	postsChannel = "C0E2E"                 // the player's channel; the route posts there
	postsSlow    = 1500 * time.Millisecond // an answer held past the post's timeout
)

// Issue 23: the chaos campaign with posts instead of logs. Slack is played
// at the real binary while it is SIGKILLed under load and the fake Web API
// answers chat.postMessage slowly or badly after storing the message
// (held past the timeout, the connection dropped, a 500, internal_error).
// Every recorded row must end done with one message in the channel: with
// confirmation on there are no duplicate messages; the same run with
// [slack] confirm_posts = false reports how many there are without it.
func TestPostChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("post chaos campaign: skipped with -short")
	}
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	fmt.Printf("e2e posts: seed=%d duration=%s per run (replay with -e2e.seed=%d)\n", seed, *flagPostsDuration, seed)
	on := runPostChaos(t, "on", true, seed)
	off := runPostChaos(t, "off", false, seed)
	summary := fmt.Sprintf("post chaos: confirm_posts=on %s; confirm_posts=off %s", on, off)
	t.Log(summary)
	fmt.Println("e2e: " + summary)
	if on.duplicates != 0 {
		t.Errorf("confirmation on: %d duplicate messages (rows %v), want 0", on.duplicates, on.dupKeys)
	}
	if off.ambiguous > 0 && off.duplicates == 0 {
		t.Errorf("confirmation off: %d ambiguous post outcomes and no duplicate: the campaign cannot see what it measures", off.ambiguous)
	}
}

// postChaosResult is one run's count.
type postChaosResult struct {
	rows, messages, duplicates, missing, parked, crashes, ambiguous int
	found, notFound                                                 int // lookups, from the rows' notes
	dupKeys                                                         []string
}

func (r postChaosResult) String() string {
	return fmt.Sprintf("rows=%d messages=%d duplicate_messages=%d missing=%d parked=%d crashes=%d ambiguous_answers=%d found=%d not_found=%d",
		r.rows, r.messages, r.duplicates, r.missing, r.parked, r.crashes, r.ambiguous, r.found, r.notFound)
}

// postScript is a seeded run of chat.postMessage answers: mostly ok, some
// slow, and about a third that store the message and then answer badly or
// not at all, or fail before storing.
func postScript(rng *rand.Rand, n int) (out []fakeslack.Response, ambiguous func(i int) bool) {
	out = make([]fakeslack.Response, n)
	bad := make([]bool, n)
	for i := range out {
		switch x := rng.Float64(); {
		case x < 0.08:
			out[i], bad[i] = fakeslack.Response{Store: true, Delay: postsSlow}, true
		case x < 0.15:
			out[i], bad[i] = fakeslack.Response{Store: true, Drop: true}, true
		case x < 0.22:
			out[i], bad[i] = fakeslack.Response{Store: true, Status: 500, Body: "Internal Server Error"}, true
		case x < 0.28:
			out[i], bad[i] = fakeslack.Response{Store: true, Error: "internal_error"}, true
		case x < 0.32:
			out[i] = fakeslack.Status(500) // nothing stored
		case x < 0.35:
			out[i] = fakeslack.RateLimited("1")
		case x < 0.50:
			out[i] = fakeslack.Slow(200 * time.Millisecond)
		default:
			out[i] = fakeslack.OK()
		}
	}
	return out, func(i int) bool { return i < n && bad[i] }
}

func runPostChaos(t *testing.T, name string, confirm bool, seed uint64) postChaosResult {
	t.Helper()
	var res postChaosResult
	t.Run("confirm_posts="+name, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(seed, 0x9057))
		dir := t.TempDir()
		db := filepath.Join(dir, "ackd.db")
		slack := fakeslack.New(t, botToken)
		loadFor := *flagPostsDuration
		script, ambiguous := postScript(rng, 3*postsRate*int(loadFor/time.Second)+400)
		slack.Script("chat.postMessage", script...)
		addr := freeAddr(t, rng)
		config := filepath.Join(dir, "ackd.toml")
		cfg := fmt.Sprintf(`listen = %q
db     = %q

[sweep]
interval     = "100ms"
batch        = 20
workers      = 4
lease        = %q
max_attempts = 50
backoff      = "100ms"
max_backoff  = "500ms"

[slack]
api_url       = %q
confirm_posts = %v

[backfill]
rate = 1200

[[route]]
name    = "post"
event   = "app_mention"
effect  = "post"
text    = "on it"
timeout = "800ms"
`, addr, db, postsLease.String(), slack.URL(), confirm)
		if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		r := newRig(t, ackdBin, dir, config, addr, map[string]string{
			"SLACK_SIGNING_SECRET": signingSecret, "SLACK_BOT_TOKEN": botToken,
		})
		if err := r.start(); err != nil {
			t.Fatal(err)
		}
		player := newSlackPlayer("http://"+addr+"/slack/events", signingSecret, seed)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		loadDone := make(chan struct{})
		go func() {
			defer close(loadDone)
			player.run(ctx, postsRate)
		}()
		// SIGKILLs under load, each while a post is likely in flight (a
		// fifth of the answers are held or slow), then a restart.
		start := time.Now()
		kills := max(2, int(loadFor/(1500*time.Millisecond)))
		for k := range kills {
			time.Sleep(time.Until(start.Add(loadFor * time.Duration(k+1) / time.Duration(kills+1))))
			if err := r.kill("kill"); err != nil {
				t.Fatal(err)
			}
			res.crashes++
			time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
			if err := r.start(); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Until(start.Add(loadFor)))
		stop()
		<-loadDone
		if !player.wait(30 * time.Second) {
			t.Fatal("Slack's delivery chains did not finish")
		}
		dbh, err := sql.Open("sqlite", db+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		defer dbh.Close()
		if err := waitDrained(dbh, 90*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := r.stop(30 * time.Second); err != nil {
			t.Fatal(err)
		}

		calls := len(slack.CallsTo("chat.postMessage"))
		for i := range calls {
			if ambiguous(i) {
				res.ambiguous++
			}
		}
		rows, err := dbh.Query(`SELECT idempotency_key, status, coalesce(result, ''), coalesce(note, '') FROM outbox WHERE effect = 'post'`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var key, status, result, note string
			if err := rows.Scan(&key, &status, &result, &note); err != nil {
				t.Fatal(err)
			}
			res.rows++
			msgs := slack.MessagesWithKey(postsChannel, key)
			res.messages += len(msgs)
			switch {
			case status == "parked":
				res.parked++
			case len(msgs) == 0:
				res.missing++
				t.Errorf("row %s is %s but no message carries its key", key, status)
			case len(msgs) > 1:
				res.duplicates += len(msgs) - 1
				res.dupKeys = append(res.dupKeys, key)
			}
			switch {
			case strings.HasPrefix(note, "confirmed: found"):
				res.found++
			case strings.HasPrefix(note, "confirmed: no earlier"):
				res.notFound++
			}
			var out map[string]string
			if status == "done" && len(msgs) > 0 {
				if err := json.Unmarshal([]byte(result), &out); err != nil || out["ts"] == "" {
					t.Errorf("row %s done with result %q", key, result)
				} else if confirm && out["ts"] != msgs[0].TS && len(msgs) == 1 {
					t.Errorf("row %s done with ts %s, but its message is %s", key, out["ts"], msgs[0].TS)
				}
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		acked := 0
		for _, ev := range player.all() {
			if ev.Acked() {
				acked++
			}
		}
		if res.rows < acked {
			t.Errorf("%d events acked but only %d post rows recorded", acked, res.rows)
		}
		if res.parked > 0 {
			t.Errorf("%d post rows parked", res.parked)
		}
		t.Logf("confirm_posts=%s: %s (acked events %d, chat.postMessage calls %d)", name, res, acked, calls)
	})
	return res
}
