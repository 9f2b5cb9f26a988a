package daemon_test

import (
	"bytes"
	"compress/gzip"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/ingress"
)

// The bad-input table: every class of malformed request to the three Slack
// routes, with the status ackd answers and what it writes. Only requests
// that are authenticated and well-formed may write; everything else gets its
// 4xx (never a 500) and leaves the database as it was.

const badConfig = `
[[route]]
name   = "mention"
event  = "app_mention"
effect = "forward" # performed from Slack's stored request: nothing listens there, so rows stay pending
url    = "http://127.0.0.1:9/slack"

[[route]]
name    = "deploy"
command = "/deploy"
effect  = "log"

[[route]]
name      = "approve"
action_id = "approve"
effect    = "log"
`

// badSign is Slack's v0 signature for a timestamp header taken as is.
func badSign(ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(testSecret))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

// badHeaders builds a request's headers from its body.
type badHeaders func(body []byte) http.Header

// badSigned signs the body now with the test secret.
func badSigned(ctype string) badHeaders {
	return func(body []byte) http.Header {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		return http.Header{"Content-Type": {ctype}, "X-Slack-Request-Timestamp": {ts}, "X-Slack-Signature": {badSign(ts, body)}}
	}
}

// badSignedAt signs the body correctly but with ts as the timestamp header,
// so only the timestamp can be what is wrong.
func badSignedAt(ts string) badHeaders {
	return func(body []byte) http.Header {
		return http.Header{"Content-Type": {"application/json"}, "X-Slack-Request-Timestamp": {ts}, "X-Slack-Signature": {badSign(ts, body)}}
	}
}

// badWith signs the body now, then lets edit change the headers.
func badWith(edit func(h http.Header, body []byte)) badHeaders {
	return func(body []byte) http.Header {
		h := badSigned("application/json")(body)
		edit(h, body)
		return h
	}
}

func badEvent(eventID string, inner any) []byte {
	b, _ := json.Marshal(map[string]any{"type": "event_callback", "team_id": "T1", "event_id": eventID, "event": inner})
	return b
}

// badPadded is a valid app_mention event padded with spaces to size bytes.
func badPadded(tb testing.TB, eventID string, size int) []byte {
	tb.Helper()
	b := badEvent(eventID, mention("C1", "1700000000.000100", "big"))
	if len(b) > size {
		tb.Fatalf("event is %d bytes, more than %d", len(b), size)
	}
	return append(b, bytes.Repeat([]byte(" "), size-len(b))...)
}

func badGzip(tb testing.TB, b []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func badInteraction(payload string) []byte {
	return []byte(url.Values{"payload": {payload}}.Encode())
}

func TestMalformedRequestsAreRejectedAndWriteNothing(t *testing.T) {
	srv := startServer(t, configFor(t, badConfig), daemon.Options{})
	validEvent := eventBody("EvBadValid", mention("C1", "1700000000.000001", "hi"))
	validForm := []byte("command=%2Fdeploy&text=x&trigger_id=tr.bad.1&response_url=https%3A%2F%2Fhooks.slack.com%2Fx")
	validIx := badInteraction(`{"type":"block_actions","trigger_id":"tr.bad.ix","actions":[{"action_id":"approve","value":"v"}]}`)
	jsonSigned, formSigned := badSigned("application/json"), badSigned("application/x-www-form-urlencoded")

	type badCase struct {
		name    string
		method  string // default POST
		path    string
		body    []byte
		headers badHeaders
		status  int
		writes  []string // receipts this request legitimately writes (one outbox row each)
	}
	// Controls: the bodies the auth cases use are accepted when signed, so
	// a 401 below is the headers' doing.
	cases := []badCase{
		{name: "control: signed event is accepted", path: "/slack/events", body: validEvent,
			headers: jsonSigned, status: http.StatusOK, writes: []string{"EvBadValid"}},
		{name: "control: signed command is accepted", path: "/slack/commands", body: validForm,
			headers: formSigned, status: http.StatusOK, writes: []string{"cmd:tr.bad.1"}},
		{name: "control: signed interaction is accepted", path: "/slack/interactivity", body: validIx,
			headers: formSigned, status: http.StatusOK, writes: []string{"ix:tr.bad.ix"}},
		{name: "duplicated signature header, valid one first, is accepted: the first value is the one checked",
			path: "/slack/events", body: eventBody("EvBadDupSig", mention("C1", "1700000000.000005", "x")),
			headers: badWith(func(h http.Header, _ []byte) {
				h["X-Slack-Signature"] = append(h["X-Slack-Signature"], "v0="+strings.Repeat("0", 64))
			}),
			status: http.StatusOK, writes: []string{"EvBadDupSig"}},
	}

	// Wrong methods, even with a valid signature: 405, nothing read.
	for _, path := range []string{"/slack/events", "/slack/commands", "/slack/interactivity"} {
		for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
			cases = append(cases, badCase{name: m + " " + path + " is 405", method: m, path: path,
				body: validEvent, headers: jsonSigned, status: http.StatusMethodNotAllowed})
		}
	}

	// Authentication: every route answers 401 before reading the body.
	for _, route := range []struct {
		path string
		body []byte
	}{{"/slack/events", validEvent}, {"/slack/commands", validForm}, {"/slack/interactivity", validIx}} {
		auth := []struct {
			name string
			edit func(h http.Header, body []byte)
		}{
			{"no signature header", func(h http.Header, _ []byte) { h.Del("X-Slack-Signature") }},
			{"no timestamp header", func(h http.Header, _ []byte) { h.Del("X-Slack-Request-Timestamp") }},
			{"no headers at all", func(h http.Header, _ []byte) {
				h.Del("X-Slack-Signature")
				h.Del("X-Slack-Request-Timestamp")
			}},
			{"garbage signature", func(h http.Header, _ []byte) { h.Set("X-Slack-Signature", "garbage") }},
			{"v0= with non-hex digits", func(h http.Header, _ []byte) { h.Set("X-Slack-Signature", "v0="+strings.Repeat("zz", 32)) }},
			{"v0= too short", func(h http.Header, _ []byte) { h.Set("X-Slack-Signature", "v0=abcd") }},
			{"v1 scheme", func(h http.Header, body []byte) {
				h.Set("X-Slack-Signature", "v1="+strings.TrimPrefix(h.Get("X-Slack-Signature"), "v0="))
			}},
			{"signature of another body", func(h http.Header, body []byte) {
				h.Set("X-Slack-Signature", badSign(h.Get("X-Slack-Request-Timestamp"), append(bytes.Clone(body), ' ')))
			}},
			{"signed with another secret", func(h http.Header, body []byte) {
				h.Set("X-Slack-Signature", sign("not-the-secret", time.Now().Unix(), body))
			}},
			{"duplicated signature header, garbage first", func(h http.Header, _ []byte) {
				h["X-Slack-Signature"] = []string{"v0=" + strings.Repeat("0", 64), h.Get("X-Slack-Signature")}
			}},
			{"duplicated signature header, both garbage", func(h http.Header, _ []byte) {
				h["X-Slack-Signature"] = []string{"v0=" + strings.Repeat("0", 64), "v0=" + strings.Repeat("1", 64)}
			}},
			{"duplicated timestamp header, a stale one first", func(h http.Header, _ []byte) {
				h["X-Slack-Request-Timestamp"] = []string{"1500000000", h.Get("X-Slack-Request-Timestamp")}
			}},
		}
		for _, a := range auth {
			cases = append(cases, badCase{name: route.path + " " + a.name + " is 401", path: route.path,
				body: route.body, headers: badWith(a.edit), status: http.StatusUnauthorized})
		}
	}

	// Timestamps that are not a time within 5 minutes, each correctly signed.
	for _, ts := range []struct{ name, value string }{
		{"non-numeric", "yesterday"}, {"empty-looking", " "}, {"fractional", "1700000000.5"},
		{"negative", "-1"}, {"zero", "0"}, {"huge", "9999999999999999999"}, {"max int64", "9223372036854775807"},
		{"min int64", "-9223372036854775808"}, {"six minutes old", strconv.FormatInt(time.Now().Add(-6*time.Minute).Unix(), 10)},
		{"six minutes ahead", strconv.FormatInt(time.Now().Add(6*time.Minute).Unix(), 10)},
	} {
		cases = append(cases, badCase{name: "timestamp " + ts.name + " is 401", path: "/slack/events",
			body: validEvent, headers: badSignedAt(ts.value), status: http.StatusUnauthorized})
	}

	// The content type decides nothing: a valid signature over a valid body
	// is judged by the body.
	cases = append(cases,
		badCase{name: "event sent as text/plain is judged by its body", path: "/slack/events",
			body: eventBody("EvBadCType", mention("C1", "1700000000.000002", "x")), headers: badSigned("text/plain"),
			status: http.StatusOK, writes: []string{"EvBadCType"}},
		badCase{name: "form sent as application/json to /slack/events is 400", path: "/slack/events",
			body: validForm, headers: jsonSigned, status: http.StatusBadRequest},
		badCase{name: "command sent as application/json is judged by its body", path: "/slack/commands",
			body: []byte("command=%2Fdeploy&trigger_id=tr.bad.ctype"), headers: jsonSigned,
			status: http.StatusOK, writes: []string{"cmd:tr.bad.ctype"}},
		badCase{name: "JSON event sent to /slack/commands is 400", path: "/slack/commands",
			body: validEvent, headers: formSigned, status: http.StatusBadRequest},
		badCase{name: "gzip Content-Encoding over a plain body is judged by the bytes", path: "/slack/events",
			body:    eventBody("EvBadGzipHeader", mention("C1", "1700000000.000003", "x")),
			headers: badWith(func(h http.Header, _ []byte) { h.Set("Content-Encoding", "gzip") }),
			status:  http.StatusOK, writes: []string{"EvBadGzipHeader"}},
		badCase{name: "a really gzipped body is not inflated: 400", path: "/slack/events",
			body:    badGzip(t, eventBody("EvBadGzipped", mention("C1", "1700000000.000004", "x"))),
			headers: badWith(func(h http.Header, _ []byte) { h.Set("Content-Encoding", "gzip") }), status: http.StatusBadRequest},
	)

	// Bodies that are not an Events API envelope.
	for _, b := range []struct{ name, body string }{
		{"empty body", ``},
		{"JSON array", `[{"type":"event_callback"}]`},
		{"JSON string", `"event_callback"`},
		{"JSON null", `null`},
		{"JSON number", `42`},
		{"JSON true", `true`},
		{"truncated JSON", `{"type":"event_callback","event_id":"EvBadTrunc","event":{"type":"app_mention"`},
		{"object without type", `{"event_id":"EvBadNoType","event":{"type":"app_mention"}}`},
		{"type that is not a string", `{"type":1,"event_id":"EvBadTypeNum","event":{"type":"app_mention"}}`},
		{"event_callback without event", `{"type":"event_callback","event_id":"EvBadNoEvent"}`},
		{"event_callback with event null", `{"type":"event_callback","event_id":"EvBadNullEvent","event":null}`},
		{"event_callback without event_id", `{"type":"event_callback","event":{"type":"app_mention","channel":"C1","ts":"1.1"}}`},
		{"event_id that is a number", `{"type":"event_callback","event_id":7,"event":{"type":"app_mention"}}`},
		{"event without type", `{"type":"event_callback","event_id":"EvBadInnerNoType","event":{"channel":"C1","ts":"1.1"}}`},
		{"event as a string", `{"type":"event_callback","event_id":"EvBadEventString","event":"app_mention"}`},
		{"event as an array", `{"type":"event_callback","event_id":"EvBadEventArray","event":[{"type":"app_mention"}]}`},
		{"trailing garbage after the object", `{"type":"event_callback","event_id":"EvBadTrailing","event":{"type":"app_mention"}} x`},
	} {
		cases = append(cases, badCase{name: b.name + " is 400", path: "/slack/events", body: []byte(b.body),
			headers: jsonSigned, status: http.StatusBadRequest})
	}
	cases = append(cases,
		badCase{name: "unknown envelope type is 200 and writes nothing", path: "/slack/events",
			body:    []byte(`{"type":"event_callback_v2","event_id":"EvBadUnknownEnv","event":{"type":"app_mention"}}`),
			headers: jsonSigned, status: http.StatusOK},
		badCase{name: "huge integer event_time is still an event", path: "/slack/events",
			body:    []byte(`{"type":"event_callback","event_id":"EvBadHugeTime","event_time":99999999999999999999999999999,"event":{"type":"app_mention","channel":"C1","ts":"1.5","text":"x"}}`),
			headers: jsonSigned, status: http.StatusOK, writes: []string{"EvBadHugeTime"}},
		badCase{name: "event_time beyond float64 is still an event", path: "/slack/events",
			body:    []byte(`{"type":"event_callback","event_id":"EvBadInfTime","event_time":1e400,"event":{"type":"app_mention","channel":"C1","ts":"1.6","text":"x"}}`),
			headers: jsonSigned, status: http.StatusOK, writes: []string{"EvBadInfTime"}},
		badCase{name: "negative fractional event_time is still an event", path: "/slack/events",
			body:    []byte(`{"type":"event_callback","event_id":"EvBadNegTime","event_time":-1.5e-300,"event":{"type":"app_mention","channel":"C1","ts":"1.7","text":"x"}}`),
			headers: jsonSigned, status: http.StatusOK, writes: []string{"EvBadNegTime"}},
		badCase{name: "invalid UTF-8 in the event text is recorded", path: "/slack/events",
			body:    []byte("{\"type\":\"event_callback\",\"event_id\":\"EvBadUTF8\",\"event\":{\"type\":\"app_mention\",\"channel\":\"C1\",\"ts\":\"1.8\",\"text\":\"caf\xc3\x28 \xff\xfe\"}}"),
			headers: jsonSigned, status: http.StatusOK, writes: []string{"EvBadUTF8"}},
		badCase{name: "NUL and escapes in the event text are recorded", path: "/slack/events",
			body:    []byte(`{"type":"event_callback","event_id":"EvBadNUL","event":{"type":"app_mention","channel":"C1","ts":"1.9","text":"a\u0000b\ud800"}}`),
			headers: jsonSigned, status: http.StatusOK, writes: []string{"EvBadNUL"}},
	)

	// Size: the cap is on the body, exactly 1 MiB.
	cases = append(cases,
		badCase{name: "body of exactly 1 MiB is read and judged", path: "/slack/events",
			body: badPadded(t, "EvBadExactMiB", ingress.MaxBody), headers: jsonSigned,
			status: http.StatusOK, writes: []string{"EvBadExactMiB"}},
		badCase{name: "body of 1 MiB + 1 is 413", path: "/slack/events",
			body: badPadded(t, "EvBadOverMiB", ingress.MaxBody+1), headers: jsonSigned, status: http.StatusRequestEntityTooLarge},
		badCase{name: "unsigned body over 1 MiB is 401 before it is read", path: "/slack/commands",
			body: bytes.Repeat([]byte("a"), 2*ingress.MaxBody), headers: func([]byte) http.Header { return http.Header{} },
			status: http.StatusUnauthorized},
	)

	// Forms.
	for _, path := range []string{"/slack/commands", "/slack/interactivity"} {
		for _, b := range []struct{ name, body string }{
			{"empty form", ``},
			{"bad percent-encoding", `command=%2Fdeploy&text=%zz&trigger_id=tr.bad.pct&payload=%7B%22type%22%3A%22block_actions%22%7D`},
			{"truncated percent-encoding", `command=%2Fdeploy&trigger_id=tr.bad.trunc&payload=%7B%22type%22%3A%22block_actions%22%7D&x=%4`},
			{"semicolon separator", `command=%2Fdeploy;trigger_id=tr.bad.semi&payload=%7B%22type%22%3A%22block_actions%22%7D;x=1`},
		} {
			cases = append(cases, badCase{name: path + " " + b.name + " is 400", path: path, body: []byte(b.body),
				headers: formSigned, status: http.StatusBadRequest})
		}
	}
	for _, p := range []struct{ name, payload string }{
		{"payload that is not JSON", `not json`},
		{"payload that is a JSON array", `[{"type":"block_actions"}]`},
		{"payload that is a JSON string", `"block_actions"`},
		{"payload null", `null`},
		{"payload without type", `{"trigger_id":"tr.bad.notype","actions":[{"action_id":"approve"}]}`},
		{"payload with truncated JSON", `{"type":"block_actions","trigger_id":"tr.bad.trunc"`},
		{"payload whose actions are not a list", `{"type":"block_actions","trigger_id":"tr.bad.actions","actions":"approve"}`},
	} {
		cases = append(cases, badCase{name: "/slack/interactivity " + p.name + " is 400", path: "/slack/interactivity",
			body: badInteraction(p.payload), headers: formSigned, status: http.StatusBadRequest})
	}
	cases = append(cases,
		badCase{name: "/slack/commands form without command is 400", path: "/slack/commands",
			body: []byte("text=deploy&trigger_id=tr.bad.nocmd"), headers: formSigned, status: http.StatusBadRequest},
		badCase{name: "/slack/interactivity form without payload is 400", path: "/slack/interactivity",
			body: []byte("type=block_actions&trigger_id=tr.bad.nopayload"), headers: formSigned, status: http.StatusBadRequest},
	)

	var wantReceipts []string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			beforeReceipts, beforeRows := srv.rows()
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			req, err := http.NewRequest(method, srv.URL+tc.path, bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.headers(tc.body) {
				req.Header[k] = v
			}
			resp := srv.do(req)
			if resp.Status != tc.status {
				t.Fatalf("status %d, want %d (body %q)", resp.Status, tc.status, resp.Body)
			}
			receipts, rows := srv.rows()
			if got := receipts - beforeReceipts; got != len(tc.writes) {
				t.Errorf("%d receipt(s) written, want %d", got, len(tc.writes))
			}
			if got := rows - beforeRows; got != len(tc.writes) {
				t.Errorf("%d outbox row(s) written, want %d", got, len(tc.writes))
			}
			for _, id := range tc.writes {
				if n := srv.count(`SELECT count(*) FROM slack_event_receipts WHERE event_id = ?`, id); n != 1 {
					t.Errorf("receipt %s: %d rows", id, n)
				}
			}
		})
		wantReceipts = append(wantReceipts, tc.writes...)
	}

	t.Run("invalid UTF-8 is stored as received, not rejected", func(t *testing.T) {
		var raw string
		err := srv.db().QueryRow(`SELECT json_extract(CAST(body AS TEXT), '$.event.text') FROM slack_requests WHERE event_id = 'EvBadUTF8'`).Scan(&raw)
		if err != nil {
			t.Fatal(err)
		}
		// The raw envelope keeps the bytes Slack sent (a forward passes them
		// on as they came); only the decoded facts see U+FFFD.
		if want := "caf\xc3\x28 \xff\xfe"; raw != want {
			t.Errorf("stored text %q, want the bytes as sent %q", raw, want)
		}
		var facts string
		err = srv.db().QueryRow(`SELECT json_extract(payload, '$.facts.text') FROM outbox WHERE idempotency_key = 'EvBadUTF8:mention'`).Scan(&facts)
		if err != nil {
			t.Fatal(err)
		}
		if want := "caf\ufffd( \ufffd\ufffd"; facts != want {
			t.Errorf("facts text %q, want %q", facts, want)
		}
	})

	t.Run("only the well-formed authenticated requests wrote anything", func(t *testing.T) {
		rows, err := srv.db().Query(`SELECT event_id FROM slack_event_receipts ORDER BY event_id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			got = append(got, id)
		}
		sort.Strings(wantReceipts)
		if fmt.Sprint(got) != fmt.Sprint(wantReceipts) {
			t.Errorf("receipts %v, want exactly %v", got, wantReceipts)
		}
		if n := srv.count(`SELECT count(*) FROM outbox`); n != len(wantReceipts) {
			t.Errorf("%d outbox rows, want %d (one per written receipt)", n, len(wantReceipts))
		}
		if n := srv.count(`SELECT count(*) FROM outbox WHERE idempotency_key NOT IN (
			SELECT event_id || ':mention' FROM slack_event_receipts UNION ALL
			SELECT event_id || ':deploy' FROM slack_event_receipts UNION ALL
			SELECT event_id || ':approve' FROM slack_event_receipts)`); n != 0 {
			t.Errorf("%d outbox row(s) belong to no written receipt", n)
		}
	})

	t.Run("no request was answered 500", func(t *testing.T) {
		if rec := srv.Logs.Find("status", 500); rec != nil {
			t.Errorf("a malformed request got a 500: %v", rec)
		}
	})
}
