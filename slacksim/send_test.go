package slacksim

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// captured is one request as the recording server saw it.
type captured struct {
	header http.Header
	body   []byte
}

// newRecorder starts a loopback server that hands every request to the
// test over a channel and answers 200 "ok".
func newRecorder(t *testing.T) (*httptest.Server, <-chan captured) {
	t.Helper()
	got := make(chan captured, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- captured{r.Header.Clone(), b}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func TestSend(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }

	t.Run("a JSON delivery carries a signature a receiver accepts", func(t *testing.T) {
		srv, got := newRecorder(t)
		body := []byte(`{"type":"event_callback","event_id":"Ev1"}`)
		status, resp, err := Send(context.Background(), SendOptions{
			URL: srv.URL + "/slack/events", Secret: "s3cret", Body: body, Now: clock, Client: srv.Client(),
		})
		if err != nil || status != http.StatusOK || string(resp) != "ok" {
			t.Fatalf("Send = %d %q %v", status, resp, err)
		}
		c := <-got
		if string(c.body) != string(body) {
			t.Errorf("body = %q", c.body)
		}
		if err := verify(c.header, c.body, "s3cret", now); err != nil {
			t.Errorf("verify: %v", err)
		}
		if ct := c.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q", ct)
		}
		if c.header.Get(HeaderRetryNum) != "" || c.header.Get(HeaderRetryReason) != "" {
			t.Errorf("unexpected retry headers: %v", c.header)
		}
	})

	t.Run("a form delivery marked as retry 2 carries the retry headers", func(t *testing.T) {
		srv, got := newRecorder(t)
		body := []byte("command=%2Fack&text=hi&trigger_id=1.2.3")
		_, _, err := Send(context.Background(), SendOptions{
			URL: srv.URL + "/slack/commands", Secret: "s3cret", Body: body, Form: true, RetryNum: 2, Now: clock,
		})
		if err != nil {
			t.Fatal(err)
		}
		c := <-got
		if err := verify(c.header, c.body, "s3cret", now); err != nil {
			t.Errorf("verify: %v", err)
		}
		if ct := c.header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
			t.Errorf("Content-Type = %q", ct)
		}
		if n, why := c.header.Get(HeaderRetryNum), c.header.Get(HeaderRetryReason); n != "2" || why != "http_timeout" {
			t.Errorf("retry headers = %q %q", n, why)
		}
	})

	t.Run("a 401 is a status, not an error", func(t *testing.T) {
		srv := httptest.NewServer(CeilingHandler("right"))
		defer srv.Close()
		status, _, err := Send(context.Background(), SendOptions{URL: srv.URL, Secret: "wrong", Body: []byte("{}")})
		if err != nil || status != http.StatusUnauthorized {
			t.Fatalf("Send = %d %v, want 401 nil", status, err)
		}
	})

	t.Run("missing URL or secret is an error", func(t *testing.T) {
		if _, _, err := Send(context.Background(), SendOptions{Secret: "s"}); err == nil {
			t.Error("no URL: want error")
		}
		if _, _, err := Send(context.Background(), SendOptions{URL: "http://127.0.0.1:1/"}); err == nil {
			t.Error("no secret: want error")
		}
	})
}
