package daemon_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/ingress"
)

// Unauthenticated callers must not write the logs (issue 21, part 3): every
// value of the request that reaches a log line is validated or clipped, and
// answers given before the signature was verified are logged one line per
// interval plus a summary with their count.

// refusedSummaries is the number of unauthenticated answers the log
// accounts for: lines of their own plus the summaries' counts.
func refusedCounted(logs *logBuffer, status int) int {
	n := 0
	for _, l := range logs.Lines() {
		switch l["msg"] {
		case "rejected", "ack":
			if fmt.Sprint(l["status"]) == strconv.Itoa(status) {
				n++
			}
		case "unauthenticated requests answered without a line each":
			for _, part := range strings.Split(fmt.Sprint(l["answers"]), "; ") {
				count, key, _ := strings.Cut(part, "× ")
				if strings.HasPrefix(key, strconv.Itoa(status)+" ") {
					c, _ := strconv.Atoi(count)
					n += c
				}
			}
		}
	}
	return n
}

// refusedWaitLog waits until an unauthenticated answer with status and a
// reason containing reason is in the log, on a line of its own or in a
// summary.
func refusedWaitLog(tb testing.TB, logs *logBuffer, status int, reason string) {
	tb.Helper()
	waitFor(tb, fmt.Sprintf("a %d (%s) in the log", status, reason), 10*time.Second, func() bool {
		for _, l := range logs.Lines() {
			if l["msg"] == "rejected" && fmt.Sprint(l["status"]) == strconv.Itoa(status) && strings.Contains(fmt.Sprint(l["reason"]), reason) {
				return true
			}
			if l["msg"] == "unauthenticated requests answered without a line each" &&
				strings.Contains(fmt.Sprint(l["answers"]), strconv.Itoa(status)+" ") && strings.Contains(fmt.Sprint(l["answers"]), reason) {
				return true
			}
		}
		return false
	})
}

func TestUnauthenticatedRequestsCannotFillTheLog(t *testing.T) {
	t.Parallel()
	s := startServer(t, configFor(t, ""), daemon.Options{RefusedLogEvery: 200 * time.Millisecond})
	// Two 31 KB headers: before, each answer's line carried both (60 KB).
	huge := strings.Repeat("9", 31<<10)
	hugeReason := strings.Repeat("x", 31<<10)
	evWaitLog(t, s.Logs, "msg", "ackd listening")
	before := len(s.Logs.String())

	const n, workers = 1000, 8
	var wg sync.WaitGroup
	statuses := make(chan int, n)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				req, _ := http.NewRequest(http.MethodPost, s.URL+"/slack/events", strings.NewReader(`{}`))
				req.Header.Set("X-Slack-Retry-Num", huge)
				req.Header.Set("X-Slack-Retry-Reason", hugeReason)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					statuses <- -1
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				statuses <- resp.StatusCode
			}
		}()
	}
	wg.Wait()
	close(statuses)
	for st := range statuses {
		if st != http.StatusUnauthorized {
			t.Fatalf("an unsigned request got %d, want 401", st)
		}
	}
	waitFor(t, "every answer accounted for in the log", 10*time.Second, func() bool {
		return refusedCounted(s.Logs, http.StatusUnauthorized) == n
	})
	grew := len(s.Logs.String()) - before
	t.Logf("%d unsigned requests with two 31 KB headers grew the log by %d bytes", n, grew)
	if grew > 256<<10 {
		t.Errorf("the log grew by %d bytes, want at most 256 KiB", grew)
	}
	for _, l := range strings.Split(s.Logs.String()[before:], "\n") {
		if len(l) > 1024 {
			t.Errorf("a log line of %d bytes: %.200s…", len(l), l)
		}
	}
	first := evWaitLog(t, s.Logs, "msg", "rejected", "status", 401)
	if _, ok := first["retry_num"]; ok {
		t.Errorf("an invalid X-Slack-Retry-Num was logged as retry_num: %v", first)
	}
	if got, want := fmt.Sprint(first["retry_num_invalid"]), `"9999999999999999…" (31744 bytes)`; got != want {
		t.Errorf("retry_num_invalid = %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(first["retry_reason_invalid"]), `"xxxxxxxxxxxxxxxx…" (31744 bytes)`; got != want {
		t.Errorf("retry_reason_invalid = %s, want %s", got, want)
	}
	if got := s.scrape().value("ackd_requests_total", "endpoint", "events", "status", "401"); got != n {
		t.Errorf("ackd_requests_total{status=401} = %v, want %d: every answer is counted", got, n)
	}
	evNoRows(t, s)
}

func TestUnauthenticatedLogLines(t *testing.T) {
	t.Parallel()

	t.Run("a 30 KB method name is clipped in its 405 line", func(t *testing.T) {
		s := startServer(t, configFor(t, ""), daemon.Options{})
		addr := strings.TrimPrefix(s.URL, "http://")
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		method := strings.Repeat("M", 30<<10)
		fmt.Fprintf(conn, "%s /slack/events HTTP/1.1\r\nHost: %s\r\nContent-Length: 0\r\n\r\n", method, addr)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("status %d, want 405", resp.StatusCode)
		}
		l := evWaitLog(t, s.Logs, "msg", "rejected", "status", 405)
		if got, want := fmt.Sprint(l["reason"]), "method "+strings.Repeat("M", 16)+"…"; got != want {
			t.Errorf("reason %q, want %q", got, want)
		}
	})

	t.Run("after the first line of an interval the rest are counted in one summary", func(t *testing.T) {
		s := startServer(t, configFor(t, ""), daemon.Options{RefusedLogEvery: time.Hour})
		for range 5 {
			if r := evMustSend(t, http.MethodPost, s.URL+"/slack/events", []byte(`{}`), http.Header{}); r.Status != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", r.Status)
			}
		}
		if r := evMustSend(t, http.MethodGet, s.URL+"/slack/commands", nil, http.Header{}); r.Status != http.StatusMethodNotAllowed {
			t.Fatalf("status %d, want 405", r.Status)
		}
		evWaitLog(t, s.Logs, "msg", "rejected", "status", 401, "reason", ingress.ErrMissingHeaders.Error())
		if n := len(findAll(s.Logs, "msg", "rejected")); n != 1 {
			t.Errorf("%d rejected lines within one interval, want 1", n)
		}
		// The interval's summary is written at Close at the latest.
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		sum := evWaitLog(t, s.Logs, "msg", "unauthenticated requests answered without a line each")
		want := "4× 401 " + ingress.ErrMissingHeaders.Error() + "; 1× 405 method GET"
		if fmt.Sprint(sum["count"]) != "5" || sum["answers"] != want || sum["level"] != "WARN" {
			t.Errorf("summary %v, want count 5 and answers %q at WARN", sum, want)
		}
	})

	t.Run("Slack's retry headers on a signed request are validated", func(t *testing.T) {
		s := startServer(t, configFor(t, ""), daemon.Options{})
		for i, tc := range []struct {
			num, reason string
			want        []any
		}{
			{"1", "http_timeout", []any{"retry_num", 1, "retry_reason", "http_timeout"}},
			{"3", "too_many_redirects", []any{"retry_num", 3, "retry_reason", "too_many_redirects"}},
			{"-1", "HTTP Timeout", []any{"retry_num_invalid", `"-1" (2 bytes)`, "retry_reason_invalid", `"HTTP Timeout" (12 bytes)`}},
			{"12345", "http_timeout!", []any{"retry_num_invalid", `"12345" (5 bytes)`, "retry_reason_invalid", `"http_timeout!" (13 bytes)`}},
		} {
			id := fmt.Sprintf("Ev0RETRYHDR%d", i)
			r := s.post("/slack/events", "application/json", eventBody(id, mention("C1", "1.1", "hi")),
				http.Header{"X-Slack-Retry-Num": {tc.num}, "X-Slack-Retry-Reason": {tc.reason}})
			if r.Status != http.StatusOK {
				t.Fatalf("%s: status %d", id, r.Status)
			}
			l := evWaitLog(t, s.Logs, append([]any{"event_id", id}, tc.want...)...)
			for _, k := range []string{"retry_num", "retry_reason", "retry_num_invalid", "retry_reason_invalid"} {
				if _, ok := l[k]; ok && !contains(tc.want, k) {
					t.Errorf("%s: %s logged too: %v", id, k, l)
				}
			}
		}
	})
}

func contains(kv []any, key string) bool {
	for i := 0; i < len(kv); i += 2 {
		if kv[i] == key {
			return true
		}
	}
	return false
}

// findAll returns every record whose fields include every key=value in kv.
func findAll(l *logBuffer, kv ...any) []map[string]any {
	var out []map[string]any
	for _, m := range l.Lines() {
		if evMatch(m, kv) {
			out = append(out, m)
		}
	}
	return out
}
