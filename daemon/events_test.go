package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/ingress"
	"github.com/ackd/ackd/internal/fakeslack"
)

// Tests for POST /slack/events over a real server: authentication, the
// challenge, dedup under concurrent deliveries, what is ignored, what is not
// a Slack request, and the sweep as the contract.

const evBotToken = "xoxb-events-test"

// evContains matches a log field that contains the string, for evWaitLog.
type evContains string

// evMatch reports whether a log record has every key=value in kv.
func evMatch(m map[string]any, kv []any) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		got, ok := m[kv[i].(string)]
		if !ok {
			return false
		}
		if sub, isSub := kv[i+1].(evContains); isSub {
			if !strings.Contains(fmt.Sprint(got), string(sub)) {
				return false
			}
		} else if fmt.Sprint(got) != fmt.Sprint(kv[i+1]) {
			return false
		}
	}
	return true
}

// evCountLogs counts the log records with every key=value in kv.
func evCountLogs(logs *logBuffer, kv ...any) int {
	n := 0
	for _, m := range logs.Lines() {
		if evMatch(m, kv) {
			n++
		}
	}
	return n
}

// evWaitLog waits for a log record with every key=value in kv. The server
// logs a request after writing its answer, so the client may see the answer
// first.
func evWaitLog(tb testing.TB, logs *logBuffer, kv ...any) map[string]any {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, m := range logs.Lines() {
			if evMatch(m, kv) {
				return m
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("no log record with %v; log:\n%s", kv, logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// evSigned returns Slack's request headers for body signed at ts.
func evSigned(secret string, ts int64, body []byte) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
	h.Set("X-Slack-Signature", sign(secret, ts, body))
	return h
}

// evSend sends one request with exactly the headers hdr. It reports errors
// instead of failing, so goroutines may call it.
func evSend(client *http.Client, method, url string, body []byte, hdr http.Header) (response, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return response{}, err
	}
	if hdr != nil {
		req.Header = hdr.Clone()
	}
	resp, err := client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Body: string(b), Header: resp.Header}, err
}

// evMustSend is evSend on the test goroutine.
func evMustSend(tb testing.TB, method, url string, body []byte, hdr http.Header) response {
	tb.Helper()
	r, err := evSend(http.DefaultClient, method, url, body, hdr)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

// evNoRows fails unless the database holds no receipt and no outbox row.
func evNoRows(tb testing.TB, s *testServer) {
	tb.Helper()
	if receipts, outbox := s.rows(); receipts != 0 || outbox != 0 {
		tb.Fatalf("database has %d receipts and %d outbox rows, want none", receipts, outbox)
	}
}

// evDrained waits until every outbox row is done.
func evDrained(tb testing.TB, s *testServer) {
	tb.Helper()
	waitFor(tb, "every outbox row done", 10*time.Second, func() bool {
		return s.count(`SELECT count(*) FROM outbox WHERE status <> 'done'`) == 0
	})
}

// evPostConfig is a config whose app_mention route posts a threaded reply
// through the fake Slack API.
func evPostConfig(tb testing.TB, api *fakeslack.Server, extra string) config.Config {
	tb.Helper()
	return configFor(tb, fmt.Sprintf(`
[slack]
api_url = %q
%s
[[route]]
name   = "reply"
event  = "app_mention"
effect = "post"
text   = "got: {{.Text}}"
thread = true
`, api.URL(), extra))
}

func evBotOptions() daemon.Options {
	return daemon.Options{Secrets: config.Secrets{BotToken: evBotToken}}
}

func TestEventsAuthentication(t *testing.T) {
	body := eventBody("Ev0AUTH", mention("C1", "1700000000.000100", "<@UBOT> hello"))

	t.Run("a correctly signed event is accepted and recorded", func(t *testing.T) {
		s := startServer(t, configFor(t, ""), daemon.Options{})
		if r := evMustSend(t, http.MethodPost, s.URL+"/slack/events", body, evSigned(testSecret, time.Now().Unix(), body)); r.Status != http.StatusOK {
			t.Fatalf("status %d %q, want 200", r.Status, r.Body)
		}
		if receipts, outbox := s.rows(); receipts != 1 || outbox != 1 {
			t.Fatalf("%d receipts and %d outbox rows, want 1 and 1", receipts, outbox)
		}
	})

	for _, tc := range []struct {
		name string
		// req returns the body to send and its headers.
		req  func(now int64) ([]byte, http.Header)
		want error
	}{
		{"body changed after signing", func(now int64) ([]byte, http.Header) {
			h := evSigned(testSecret, now, body)
			return bytes.Replace(body, []byte("hello"), []byte("hellp"), 1), h
		}, ingress.ErrSignatureMismatch},
		{"timestamp header changed after signing", func(now int64) ([]byte, http.Header) {
			h := evSigned(testSecret, now, body)
			h.Set("X-Slack-Request-Timestamp", strconv.FormatInt(now-1, 10))
			return body, h
		}, ingress.ErrSignatureMismatch},
		{"signature changed", func(now int64) ([]byte, http.Header) {
			h := evSigned(testSecret, now, body)
			h.Set("X-Slack-Signature", verifyFlipByte(h.Get("X-Slack-Signature"), 10))
			return body, h
		}, ingress.ErrSignatureMismatch},
		{"signed with another secret", func(now int64) ([]byte, http.Header) {
			return body, evSigned("not-"+testSecret, now, body)
		}, ingress.ErrSignatureMismatch},
		{"6 minutes old", func(now int64) ([]byte, http.Header) {
			return body, evSigned(testSecret, now-6*60, body)
		}, ingress.ErrStaleTimestamp},
		{"6 minutes ahead", func(now int64) ([]byte, http.Header) {
			return body, evSigned(testSecret, now+6*60, body)
		}, ingress.ErrStaleTimestamp},
		{"missing timestamp header", func(now int64) ([]byte, http.Header) {
			h := evSigned(testSecret, now, body)
			h.Del("X-Slack-Request-Timestamp")
			return body, h
		}, ingress.ErrMissingHeaders},
		{"missing signature header", func(now int64) ([]byte, http.Header) {
			h := evSigned(testSecret, now, body)
			h.Del("X-Slack-Signature")
			return body, h
		}, ingress.ErrMissingHeaders},
		{"unsigned", func(now int64) ([]byte, http.Header) {
			return body, http.Header{"Content-Type": {"application/json"}}
		}, ingress.ErrMissingHeaders},
		{"signature without v0=", func(now int64) ([]byte, http.Header) {
			h := evSigned(testSecret, now, body)
			h.Set("X-Slack-Signature", strings.TrimPrefix(h.Get("X-Slack-Signature"), "v0="))
			return body, h
		}, ingress.ErrMalformedSig},
		{"signature not hex", func(now int64) ([]byte, http.Header) {
			h := evSigned(testSecret, now, body)
			h.Set("X-Slack-Signature", "v0="+strings.Repeat("g", 64))
			return body, h
		}, ingress.ErrMalformedSig},
		{"signature of the wrong length", func(now int64) ([]byte, http.Header) {
			h := evSigned(testSecret, now, body)
			h.Set("X-Slack-Signature", h.Get("X-Slack-Signature")[:40])
			return body, h
		}, ingress.ErrMalformedSig},
		{"timestamp not a number", func(now int64) ([]byte, http.Header) {
			h := evSigned(testSecret, now, body)
			h.Set("X-Slack-Request-Timestamp", "now")
			return body, h
		}, ingress.ErrBadTimestamp},
	} {
		t.Run(tc.name+" gets 401 and writes nothing", func(t *testing.T) {
			s := startServer(t, configFor(t, ""), daemon.Options{})
			b, h := tc.req(time.Now().Unix())
			r := evMustSend(t, http.MethodPost, s.URL+"/slack/events", b, h)
			if r.Status != http.StatusUnauthorized {
				t.Fatalf("status %d %q, want 401", r.Status, r.Body)
			}
			evWaitLog(t, s.Logs, "endpoint", "events", "status", 401, "outcome", "rejected", "reason", tc.want.Error())
			evNoRows(t, s)
		})
	}
}

func TestEventsURLVerification(t *testing.T) {
	s := startServer(t, configFor(t, ""), daemon.Options{})
	const challenge = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
	body := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"` + challenge + `","type":"url_verification"}`)
	r := s.postEvent(body)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d %q, want 200", r.Status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if want := `{"challenge":"` + challenge + `"}`; r.Body != want {
		t.Fatalf("body %s, want %s", r.Body, want)
	}
	evWaitLog(t, s.Logs, "outcome", "challenge", "type", "url_verification")
	evNoRows(t, s)

	t.Run("an unsigned challenge gets 401", func(t *testing.T) {
		r := evMustSend(t, http.MethodPost, s.URL+"/slack/events", body, http.Header{"Content-Type": {"application/json"}})
		if r.Status != http.StatusUnauthorized || strings.Contains(r.Body, challenge) {
			t.Fatalf("status %d %q, want 401 without the challenge", r.Status, r.Body)
		}
	})
}

func TestConcurrentDeliveriesOfOneEventActOnce(t *testing.T) {
	api := fakeslack.New(t, evBotToken)
	hook := fakeslack.NewHook(t)
	cfg := configFor(t, fmt.Sprintf(`
[slack]
api_url = %q

[[route]]
name   = "reply"
event  = "app_mention"
effect = "post"
text   = "got: {{.Text}}"
thread = true

[[route]]
name   = "to-app"
event  = "app_mention"
effect = "forward"
url    = %q
`, api.URL(), hook.URL()))
	s := startServer(t, cfg, evBotOptions())

	const n = 32
	const eventID = "Ev0RACE"
	body := eventBody(eventID, mention("C1", "1700000000.000100", "<@UBOT> deploy"))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()

	start := make(chan struct{})
	statuses := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			h := evSigned(testSecret, time.Now().Unix(), body)
			if i%2 == 1 {
				// Slack's near-instant retry racing the original.
				h.Set("X-Slack-Retry-Num", "1")
				h.Set("X-Slack-Retry-Reason", "http_timeout")
			}
			<-start
			var r response
			r, errs[i] = evSend(client, http.MethodPost, s.URL+"/slack/events", body, h)
			statuses[i] = r.Status
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || statuses[i] != http.StatusOK {
			t.Fatalf("delivery %d: status %d, err %v; want 200", i, statuses[i], errs[i])
		}
	}

	if receipts, outbox := s.rows(); receipts != 1 || outbox != 2 {
		t.Fatalf("%d receipts and %d outbox rows, want 1 receipt and one row per route (2)", receipts, outbox)
	}
	for _, key := range []string{eventID + ":reply", eventID + ":to-app"} {
		if got := s.count(`SELECT count(*) FROM outbox WHERE idempotency_key = ?`, key); got != 1 {
			t.Errorf("%d rows keyed %s, want 1", got, key)
		}
	}
	waitFor(t, "all 32 deliveries logged", 5*time.Second, func() bool {
		return evCountLogs(s.Logs, "endpoint", "events", "event_id", eventID) == n
	})
	if first := evCountLogs(s.Logs, "event_id", eventID, "outcome", "first"); first != 1 {
		t.Errorf("%d deliveries told first, want exactly 1", first)
	}
	if dup := evCountLogs(s.Logs, "event_id", eventID, "outcome", "duplicate"); dup != n-1 {
		t.Errorf("%d deliveries told duplicate, want %d", dup, n-1)
	}

	evDrained(t, s)
	// A further sweep finds nothing to do: the effects are finished.
	if res, err := s.Sweeper().RunOnce(context.Background()); err != nil || res.Claimed != 0 {
		t.Fatalf("sweep after drain: %v, %v; want nothing claimed", res, err)
	}
	if calls := api.CallsTo("chat.postMessage"); len(calls) != 1 {
		t.Errorf("%d chat.postMessage calls, want exactly 1", len(calls))
	} else if got := calls[0].Params.Get("thread_ts"); got != "1700000000.000100" {
		t.Errorf("reply thread_ts %q, want the mention's ts", got)
	}
	if posts := hook.Posts(); len(posts) != 1 {
		t.Errorf("%d forwards, want exactly 1", len(posts))
	} else if got := posts[0].Header.Get("Idempotency-Key"); got != eventID+":to-app" {
		t.Errorf("forward Idempotency-Key %q, want %s", got, eventID+":to-app")
	}
}

func TestIgnoredEventsGet200AndWriteNothing(t *testing.T) {
	const toml = `
[slack]
bot_user_id = "UBOT"

[filter]
channels = ["CWATCHED"]

[[route]]
name   = "messages"
event  = "message"
effect = "log"

[[route]]
name   = "mentions"
event  = "app_mention"
effect = "log"
`
	withField := func(inner map[string]any, k string, v any) map[string]any {
		inner[k] = v
		return inner
	}
	for _, tc := range []struct {
		name   string
		body   []byte
		reason any // exact reason, or evContains(…)
	}{
		{"message in a channel outside the filter",
			eventBody("Ev0OTHER", message("COTHER", "1.1", "hi")), "other_channel"},
		{"mention in a channel outside the filter",
			eventBody("Ev0OTHERM", mention("COTHER", "1.1", "hi")), "other_channel"},
		{"message_changed subtype",
			eventBody("Ev0CHANGED", withField(message("CWATCHED", "1.2", "hi"), "subtype", "message_changed")), "unhandled_subtype"},
		{"message from a bot",
			eventBody("Ev0BOT", withField(message("CWATCHED", "1.3", "beep"), "bot_id", "B123")), "bot_message"},
		{"message from ackd's own bot user",
			eventBody("Ev0OWN", withField(message("CWATCHED", "1.4", "mine"), "user", "UBOT")), "own_message"},
		{"event type no route names",
			eventBody("Ev0UNROUTED", map[string]any{"type": "reaction_added", "user": "U1", "reaction": "eyes",
				"item": map[string]any{"type": "message", "channel": "CWATCHED", "ts": "1.5"}, "event_ts": "1.6"}),
			"unrouted"},
		{"app_rate_limited envelope",
			[]byte(`{"token":"tok","type":"app_rate_limited","team_id":"T1","minute_rate_limited":1518467820,"api_app_id":"A1"}`),
			evContains("rate limit")},
		{"unknown envelope type",
			[]byte(`{"token":"tok","type":"envelope_from_the_future","team_id":"T1"}`), "unhandled envelope type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, configFor(t, toml), daemon.Options{})
			r := s.postEvent(tc.body)
			if r.Status != http.StatusOK {
				t.Fatalf("status %d %q, want 200", r.Status, r.Body)
			}
			evWaitLog(t, s.Logs, "endpoint", "events", "status", 200, "outcome", "ignored", "reason", tc.reason)
			evNoRows(t, s)
		})
	}

	t.Run("a plain message in a watched channel is recorded (control)", func(t *testing.T) {
		s := startServer(t, configFor(t, toml), daemon.Options{})
		if r := s.postEvent(eventBody("Ev0OK", message("CWATCHED", "1.7", "hi"))); r.Status != http.StatusOK {
			t.Fatalf("status %d %q, want 200", r.Status, r.Body)
		}
		evWaitLog(t, s.Logs, "event_id", "Ev0OK", "outcome", "first")
		if receipts, outbox := s.rows(); receipts != 1 || outbox != 1 {
			t.Fatalf("%d receipts and %d outbox rows, want 1 and 1", receipts, outbox)
		}
	})
}

// evPadded returns an event_callback body of exactly size bytes (JSON
// whitespace after the object).
func evPadded(tb testing.TB, eventID string, size int) []byte {
	tb.Helper()
	b := eventBody(eventID, mention("C1", "1.1", "hi"))
	if len(b) > size {
		tb.Fatalf("base body is %d bytes, over %d", len(b), size)
	}
	return append(b, bytes.Repeat([]byte(" "), size-len(b))...)
}

func TestRequestsThatAreNotSlackEvents(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   []byte
		status int
		reason any // logged reason; nil when the mux answers (404)
	}{
		{"malformed JSON with a valid signature", http.MethodPost, "/slack/events",
			[]byte(`{"type":"event_callback","event_id":"Ev0BAD",`), http.StatusBadRequest, evContains("not a JSON object")},
		{"JSON that is not an object", http.MethodPost, "/slack/events",
			[]byte(`["event_callback"]`), http.StatusBadRequest, evContains("not a JSON object")},
		{"envelope without a type", http.MethodPost, "/slack/events",
			[]byte(`{"event_id":"Ev0NOTYPE","event":{"type":"message"}}`), http.StatusBadRequest, evContains("no envelope type")},
		{"event_callback without event_id", http.MethodPost, "/slack/events",
			[]byte(`{"type":"event_callback","team_id":"T1","event":{"type":"app_mention","channel":"C1","ts":"1.1"}}`),
			http.StatusBadRequest, evContains("without event_id")},
		{"event_callback without an event", http.MethodPost, "/slack/events",
			[]byte(`{"type":"event_callback","event_id":"Ev0NOEVENT"}`), http.StatusBadRequest, evContains("without event")},
		{"body over 1 MiB", http.MethodPost, "/slack/events",
			nil /* filled below */, http.StatusRequestEntityTooLarge, "body over 1048576 bytes"},
		{"GET", http.MethodGet, "/slack/events", nil, http.StatusMethodNotAllowed, "method GET"},
		{"PUT with a valid signed event", http.MethodPut, "/slack/events",
			eventBody("Ev0PUT", mention("C1", "1.1", "hi")), http.StatusMethodNotAllowed, "method PUT"},
		{"unknown path", http.MethodPost, "/slack/event",
			eventBody("Ev0PATH", mention("C1", "1.1", "hi")), http.StatusNotFound, nil},
	} {
		t.Run(tc.name+fmt.Sprintf(" gets %d", tc.status), func(t *testing.T) {
			s := startServer(t, configFor(t, ""), daemon.Options{})
			body := tc.body
			if tc.status == http.StatusRequestEntityTooLarge {
				body = evPadded(t, "Ev0HUGE", ingress.MaxBody+1)
			}
			r := evMustSend(t, tc.method, s.URL+tc.path, body, evSigned(testSecret, time.Now().Unix(), body))
			if r.Status != tc.status {
				t.Fatalf("status %d %q, want %d", r.Status, r.Body, tc.status)
			}
			if tc.status == http.StatusMethodNotAllowed && r.Header.Get("Allow") != http.MethodPost {
				t.Errorf("Allow %q, want POST", r.Header.Get("Allow"))
			}
			if tc.reason != nil {
				evWaitLog(t, s.Logs, "endpoint", "events", "status", tc.status, "outcome", "rejected", "reason", tc.reason)
			}
			evNoRows(t, s)
		})
	}

	t.Run("a body of exactly 1 MiB is accepted", func(t *testing.T) {
		s := startServer(t, configFor(t, ""), daemon.Options{})
		if r := s.postEvent(evPadded(t, "Ev0BIG", ingress.MaxBody)); r.Status != http.StatusOK {
			t.Fatalf("status %d %q, want 200", r.Status, r.Body)
		}
		if receipts, outbox := s.rows(); receipts != 1 || outbox != 1 {
			t.Fatalf("%d receipts and %d outbox rows, want 1 and 1", receipts, outbox)
		}
	})
}

func TestRetryHeadersAreLoggedAndDecideNothing(t *testing.T) {
	api := fakeslack.New(t, evBotToken)
	s := startServer(t, evPostConfig(t, api, ""), evBotOptions())
	const eventID = "Ev0RETRY"
	body := eventBody(eventID, mention("C1", "1700000000.000300", "<@UBOT> hi"))

	// The first delivery ackd sees carries Retry-Num 1 (Slack's original
	// was lost before it reached us): it is still the first, and acts.
	r := s.post("/slack/events", "application/json", body, http.Header{
		"X-Slack-Retry-Num": {"1"}, "X-Slack-Retry-Reason": {"http_timeout"},
	})
	if r.Status != http.StatusOK {
		t.Fatalf("status %d %q, want 200", r.Status, r.Body)
	}
	evWaitLog(t, s.Logs, "event_id", eventID, "outcome", "first", "retry_num", "1", "retry_reason", "http_timeout")
	waitFor(t, "the reply to be posted", 10*time.Second, func() bool { return len(api.CallsTo("chat.postMessage")) == 1 })

	// A later delivery without retry headers is a duplicate all the same.
	if r := s.postEvent(body); r.Status != http.StatusOK {
		t.Fatalf("second delivery: status %d %q, want 200", r.Status, r.Body)
	}
	dup := evWaitLog(t, s.Logs, "event_id", eventID, "outcome", "duplicate")
	if _, ok := dup["retry_num"]; ok {
		t.Errorf("delivery without X-Slack-Retry-Num logged retry_num: %v", dup)
	}
	evDrained(t, s)
	if receipts, outbox := s.rows(); receipts != 1 || outbox != 1 {
		t.Fatalf("%d receipts and %d outbox rows, want 1 and 1", receipts, outbox)
	}
	if n := len(api.CallsTo("chat.postMessage")); n != 1 {
		t.Fatalf("%d chat.postMessage calls, want 1", n)
	}
}

func TestMessageKeyedRouteActsOncePerMessage(t *testing.T) {
	api := fakeslack.New(t, evBotToken)
	s := startServer(t, configFor(t, fmt.Sprintf(`
[slack]
api_url = %q

[[route]]
name   = "once"
events = ["message", "app_mention"]
key    = "message"
effect = "post"
text   = "seen"
`, api.URL())), evBotOptions())

	const ts = "1700000000.000400"
	// Slack sends both for a message that mentions the app, with
	// different event_ids.
	for _, body := range [][]byte{
		eventBody("Ev0MENTION", mention("C1", ts, "<@UBOT> hi")),
		eventBody("Ev0MESSAGE", message("C1", ts, "<@UBOT> hi")),
	} {
		if r := s.postEvent(body); r.Status != http.StatusOK {
			t.Fatalf("status %d %q, want 200", r.Status, r.Body)
		}
	}
	if receipts, outbox := s.rows(); receipts != 2 || outbox != 1 {
		t.Fatalf("%d receipts and %d outbox rows, want 2 receipts and ONE row", receipts, outbox)
	}
	if n := s.count(`SELECT count(*) FROM outbox WHERE idempotency_key = ?`, "C1:"+ts+":once"); n != 1 {
		t.Fatalf("no row keyed C1:%s:once", ts)
	}
	evDrained(t, s)
	if n := len(api.CallsTo("chat.postMessage")); n != 1 {
		t.Fatalf("%d chat.postMessage calls, want 1", n)
	}

	t.Run("another message in the same channel gets its own row", func(t *testing.T) {
		if r := s.postEvent(eventBody("Ev0NEXT", message("C1", "1700000000.000500", "next"))); r.Status != http.StatusOK {
			t.Fatalf("status %d %q, want 200", r.Status, r.Body)
		}
		if _, outbox := s.rows(); outbox != 2 {
			t.Fatalf("%d outbox rows, want 2", outbox)
		}
	})
}

func TestUnknownInnerEventTypeIsAccepted(t *testing.T) {
	s := startServer(t, configFor(t, `
[[route]]
name   = "all"
event  = "*"
effect = "log"
`), daemon.Options{})
	// slack-go's parser does not know this type; ackd must not care.
	body := eventBody("Ev0WF", map[string]any{
		"type": "workflow_step_execute_v9", "callback_id": "cb", "event_ts": "1700000000.000600",
		"workflow_step": map[string]any{"workflow_step_execute_id": "1", "inputs": map[string]any{}},
	})
	if r := s.postEvent(body); r.Status != http.StatusOK {
		t.Fatalf("status %d %q, want 200", r.Status, r.Body)
	}
	evWaitLog(t, s.Logs, "event_id", "Ev0WF", "outcome", "first", "type", "workflow_step_execute_v9")
	if receipts, outbox := s.rows(); receipts != 1 || outbox != 1 {
		t.Fatalf("%d receipts and %d outbox rows, want 1 and 1", receipts, outbox)
	}
	if n := s.count(`SELECT count(*) FROM outbox WHERE idempotency_key = 'Ev0WF:all' AND effect = 'log'`); n != 1 {
		t.Fatal("no log row keyed Ev0WF:all")
	}
}

// The sweep is the contract; the immediate attempt is an optimisation.
func TestSweepDeliversWithoutTheImmediateAttempt(t *testing.T) {
	body := eventBody("Ev0SWEEP", mention("C1", "1700000000.000700", "<@UBOT> hi"))

	t.Run("immediate attempt delivers without waiting for the ticker", func(t *testing.T) {
		api := fakeslack.New(t, evBotToken)
		s := startServer(t, evPostConfig(t, api, "[sweep]\ninterval = \"1h\"\nimmediate = true"), evBotOptions())
		if r := s.postEvent(body); r.Status != http.StatusOK {
			t.Fatalf("status %d %q, want 200", r.Status, r.Body)
		}
		waitFor(t, "the immediate attempt to post", 10*time.Second, func() bool { return len(api.CallsTo("chat.postMessage")) == 1 })
	})

	t.Run("without it nothing is sent until a sweep runs", func(t *testing.T) {
		api := fakeslack.New(t, evBotToken)
		s := startServer(t, evPostConfig(t, api, "[sweep]\ninterval = \"1h\"\nimmediate = false"), evBotOptions())
		if r := s.postEvent(body); r.Status != http.StatusOK {
			t.Fatalf("status %d %q, want 200", r.Status, r.Body)
		}
		// Observing an absence takes a window; the subtest above shows
		// that the immediate attempt lands well inside it.
		for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if n := len(api.CallsTo("chat.postMessage")); n != 0 {
				t.Fatalf("%d chat.postMessage calls with immediate = false and no ticker yet, want 0", n)
			}
		}
		if n := s.count(`SELECT count(*) FROM outbox WHERE status = 'pending' AND attempts = 0`); n != 1 {
			t.Fatalf("%d untouched pending rows, want 1", n)
		}
		// The function the ticker runs delivers it.
		res, err := s.Sweeper().RunOnce(context.Background())
		if err != nil || res.Claimed != 1 || res.Done != 1 {
			t.Fatalf("sweep: %v, %v; want one row claimed and done", res, err)
		}
		if n := len(api.CallsTo("chat.postMessage")); n != 1 {
			t.Fatalf("%d chat.postMessage calls after the sweep, want 1", n)
		}
	})

	t.Run("the ticker alone delivers", func(t *testing.T) {
		api := fakeslack.New(t, evBotToken)
		s := startServer(t, evPostConfig(t, api, "[sweep]\ninterval = \"200ms\"\nimmediate = false"), evBotOptions())
		if r := s.postEvent(body); r.Status != http.StatusOK {
			t.Fatalf("status %d %q, want 200", r.Status, r.Body)
		}
		evWaitLog(t, s.Logs, "msg", "sweep", "trigger", "ticker", "claimed", 1, "done", 1)
		evDrained(t, s)
		if n := len(api.CallsTo("chat.postMessage")); n != 1 {
			t.Fatalf("%d chat.postMessage calls, want 1", n)
		}
	})
}

// BenchmarkAck measures ack latency (request sent → answer read) for first
// deliveries of distinct events against a real server: a real SQLite file
// with synchronous=FULL, the default dry-run route, the sweep running.
//
//	go test -run '^$' -bench BenchmarkAck -benchtime 3s ./daemon/
func BenchmarkAck(b *testing.B) {
	run := func(b *testing.B, clients int) {
		cfg := configFor(b, "")
		s := startServer(b, cfg, daemon.Options{
			Logger: slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})),
		})
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients + 8}, Timeout: 10 * time.Second}
		defer client.CloseIdleConnections()
		url := s.URL + "/slack/events"

		var seq atomic.Int64
		var mu sync.Mutex
		var lat []time.Duration
		var failures atomic.Int64
		one := func(local *[]time.Duration) {
			id := "EvB" + strconv.FormatInt(seq.Add(1), 10)
			body := eventBody(id, mention("C1", "1700000000.000100", "bench"))
			h := evSigned(testSecret, time.Now().Unix(), body)
			t0 := time.Now()
			r, err := evSend(client, http.MethodPost, url, body, h)
			*local = append(*local, time.Since(t0))
			if err != nil || r.Status != http.StatusOK {
				if failures.Add(1) == 1 {
					b.Errorf("ack: status %d, err %v", r.Status, err)
				}
			}
		}
		b.ResetTimer()
		if clients == 1 {
			for b.Loop() {
				one(&lat)
			}
		} else {
			procs := runtime.GOMAXPROCS(0)
			b.SetParallelism((clients + procs - 1) / procs)
			b.RunParallel(func(pb *testing.PB) {
				var local []time.Duration
				for pb.Next() {
					one(&local)
				}
				mu.Lock()
				lat = append(lat, local...)
				mu.Unlock()
			})
		}
		b.StopTimer()
		// Every 200 was a promise: its receipt is in the file.
		if got, want := s.count(`SELECT count(*) FROM slack_event_receipts`), int(seq.Load())-int(failures.Load()); got < want {
			b.Errorf("%d receipts after %d acks", got, want)
		}
		slices.Sort(lat)
		pct := func(p float64) float64 {
			if len(lat) == 0 {
				return 0
			}
			return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
		}
		b.ReportMetric(pct(0.50), "p50_ms")
		b.ReportMetric(pct(0.99), "p99_ms")
		b.ReportMetric(float64(failures.Load()), "failures")
		if clients > 1 {
			procs := runtime.GOMAXPROCS(0)
			b.ReportMetric(float64((clients+procs-1)/procs*procs), "clients")
		}
	}
	b.Run("sequential", func(b *testing.B) { run(b, 1) })
	b.Run("concurrent-50", func(b *testing.B) { run(b, 50) })
}
