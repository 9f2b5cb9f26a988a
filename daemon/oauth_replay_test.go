package daemon_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/daemon"
)

// Issue 29.10: the install redirect is reachable by anyone, and a state
// with its cookie is free for the asking at the install page. Until Slack
// has exchanged a code, nothing is written, and the log grows by a rate
// limited summary at most.

// tableContents says what every table in the database holds: its rows,
// each value of each, in rowid order — an UPDATE changes it as surely as an
// INSERT. ackd_instances is left out: the daemon's own heartbeat rewrites
// it every few seconds whatever the requests do.
func tableContents(t *testing.T, e *oauthEnv) map[string]string {
	t.Helper()
	rows, err := e.db().Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	rows.Close()
	out := map[string]string{}
	for _, n := range names {
		if n == "ackd_instances" {
			continue
		}
		// No ORDER BY rowid: a WITHOUT ROWID table has none; the lines are
		// sorted below instead.
		rows, err := e.db().Query(`SELECT * FROM "` + n + `"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		var lines []string
		count := 0
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			count++
			lines = append(lines, fmt.Sprintf("%v\n", vals))
		}
		rows.Close()
		slices.Sort(lines)
		out[n] = fmt.Sprintf("%d rows: %s", count, strings.Join(lines, ""))
	}
	return out
}

func TestOAuthReplayedStatesWriteNothing(t *testing.T) {
	t.Parallel()
	// One summary line per interval at most: an interval longer than the
	// test, so every line after the first is the summary's.
	e := startOAuth(t, "", daemon.Options{RefusedLogEvery: time.Hour})
	e.install(t, team("T1")) // a real one first: the tables exist and hold a row

	// 1,000 pairs from the install page, each replayed with a made-up code,
	// from 4 clients at once.
	const pairs, clients = 1000, 4
	type pair struct {
		state  string
		cookie *http.Cookie
	}
	got := make([]pair, 0, pairs)
	for range pairs {
		loc, cookie := e.startInstall(t)
		got = append(got, pair{loc.Query().Get("state"), cookie})
	}
	before := tableContents(t, e)
	logLines := len(e.Logs.Lines())
	exchanges := len(e.fake.CallsTo("oauth.v2.access"))

	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for c := range clients {
		wg.Go(func() {
			for i := c; i < pairs; i += clients {
				q := url.Values{"code": {fmt.Sprintf("bogus-%d", i)}, "state": {got[i].state}}
				resp := getNoFollow(t, e.URL+"/slack/oauth_redirect?"+q.Encode(), got[i].cookie)
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if statuses[http.StatusBadRequest] != pairs {
		t.Fatalf("answers %v, want %d× 400", statuses, pairs)
	}
	if n := len(e.fake.CallsTo("oauth.v2.access")) - exchanges; n != pairs {
		t.Fatalf("%d code exchanges for %d replays", n, pairs)
	}
	after := tableContents(t, e)
	for table, held := range after {
		if held != before[table] {
			t.Errorf("table %s changed with the replays:\nbefore: %s\nafter:  %s", table, before[table], held)
		}
	}
	if len(after) < 5 {
		t.Fatalf("counted %d tables: %v", len(after), after)
	}
	// The first refusal of the interval is logged; the rest wait for the
	// interval's summary (closing the server flushes it).
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	var added []string
	for _, l := range e.Logs.Lines()[logLines:] {
		if m := fmt.Sprint(l["msg"]); !strings.HasPrefix(m, "shutting down") && !strings.HasPrefix(m, "stopped") && fmt.Sprint(l["component"]) != "store" {
			added = append(added, m)
		}
	}
	if len(added) > 2 {
		t.Fatalf("the log grew by %d lines for %d replays, want the first and one summary:\n%s", len(added), pairs, strings.Join(added, "\n"))
	}
	summary := e.Logs.Find("msg", "unauthenticated requests answered without a line each")
	if summary == nil || fmt.Sprint(summary["count"]) != fmt.Sprint(pairs-1) || !strings.Contains(fmt.Sprint(summary["answers"]), "400 exchange invalid_code") {
		t.Fatalf("summary %v", summary)
	}
	t.Logf("log lines added: %q", added)
}

func TestOAuthOneStateTwoCodes(t *testing.T) {
	t.Parallel()
	// Two redirects with one state race, each with a code Slack would
	// exchange: one installation is stored, the other redirect is refused
	// and writes nothing.
	e := startOAuth(t, "", daemon.Options{})
	loc, cookie := e.startInstall(t)
	state := loc.Query().Get("state")
	e.fake.AddCode("code-a", "", team("T1"))
	e.fake.AddCode("code-b", "", team("T1"))
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for _, code := range []string{"code-a", "code-b"} {
		wg.Go(func() {
			codes <- e.redirect(t, url.Values{"code": {code}, "state": {state}}, cookie).StatusCode
		})
	}
	wg.Wait()
	close(codes)
	var got []int
	for c := range codes {
		got = append(got, c)
	}
	if !(got[0] == 200 && got[1] == 400 || got[0] == 400 && got[1] == 200) {
		t.Fatalf("answers %v, want one 200 and one 400", got)
	}
	var version int
	if err := e.db().QueryRow(`SELECT version FROM ackd_installations WHERE install_key = 'T1'`).Scan(&version); err != nil || version != 1 {
		t.Fatalf("installation version %d (%v): want one write", version, err)
	}
	if n := e.count(`SELECT count(*) FROM ackd_oauth_states`); n != 1 {
		t.Fatalf("%d state records, want 1", n)
	}
}
