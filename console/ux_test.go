package console_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/console"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/sqlite"
)

// TestConsoleReadsRight is what a new user met on the pages (issue 38 §6):
// a paused route's pending row, a parked 404 after an attempt that got no
// answer, ages, one search box, pending rows by route.
func TestConsoleReadsRight(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "ackd.db"), store.Options{Schema: schema(t), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, err := console.New(console.Options{Store: st, Password: password, Logger: slog.New(slog.DiscardHandler),
		Routes: []console.Route{{Name: "greet", Match: "event app_mention", Effect: "log"}, {Name: "audit", Match: "event message", Effect: "forward"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	s := &site{t: t, st: st, url: srv.URL, logs: &logBuf{}, c: c}

	// audit's row: an attempt with no answer (outcome unknown), then a 404.
	record(t, st, "EvU", "x", "audit")
	u := rowByKey(t, st, "EvU:audit")
	claimed, err := st.Claim(ctx, "A", 10, time.Minute, nil)
	if err != nil || len(claimed) != 1 {
		t.Fatal(claimed, err)
	}
	if _, err := st.Fail(ctx, u.ID, "A", store.Failure{Kind: store.FailUnknown, Msg: "read tcp: i/o timeout"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	if claimed, err = st.Claim(ctx, "B", 10, time.Minute, nil); err != nil || len(claimed) != 1 {
		t.Fatal(claimed, err)
	}
	if _, err := st.Fail(ctx, u.ID, "B", store.Failure{Kind: store.FailPermanent, Msg: "http_404: HTTP 404 not found", Attempt: store.AttemptNote{Status: "404"}}); err != nil {
		t.Fatal(err)
	}
	// greet's row: pending, its route paused.
	record(t, st, "EvW", "x", "greet")
	w := rowByKey(t, st, "EvW:greet")
	if _, err := st.PauseRoute(ctx, "greet", "op@host"); err != nil {
		t.Fatal(err)
	}
	record(t, st, "EvN", "x", "audit") // pending, not paused: the oldest the queue counts
	clk.Advance(54*time.Second + 400*time.Millisecond)

	t.Run("a pending row of a paused route says it waits for the resume", func(t *testing.T) {
		_, body := s.get(fmt.Sprintf("/rows/%d", w.ID))
		if !strings.Contains(body, `data-waits="pause"`) || !strings.Contains(body, "its route greet to be resumed") || !strings.Contains(body, "op@host") {
			t.Fatalf("the row page of a paused route's pending row:\n%s", body)
		}
		_, body = s.get(fmt.Sprintf("/rows/%d", rowByKey(t, st, "EvN:audit").ID))
		if strings.Contains(body, `data-waits="pause"`) {
			t.Fatal("a row of a route that is not paused says it waits for a resume")
		}
	})

	t.Run("a parked 404 does not read outcome unknown", func(t *testing.T) {
		r := rowByKey(t, st, "EvU:audit")
		if r.Status != store.StatusParked || !r.OutcomeUnknown {
			t.Fatalf("the row: %+v, want parked and marked outcome-unknown", r)
		}
		_, body := s.get(fmt.Sprintf("/rows/%d", r.ID))
		if strings.Contains(strings.ToLower(body), "outcome unknown") {
			t.Fatalf("a parked 404 reads outcome unknown:\n%s", body)
		}
		if !strings.Contains(body, "parked after a definite answer (404) to attempt 2") {
			t.Fatalf("the page does not say the 404 decided it:\n%s", body)
		}
	})

	t.Run("ages are rounded; the overview counts pending rows by route; one search box a page", func(t *testing.T) {
		_, body := s.get("/")
		if !strings.Contains(body, "54 s old") {
			t.Fatalf("the oldest pending row's age is not rounded to 54 s:\n%s", body)
		}
		for _, want := range []string{`data-route-counts="greet"`, `data-pending="1"`, "paused: waiting for the resume"} {
			if !strings.Contains(body, want) {
				t.Errorf("overview lacks %q", want)
			}
		}
		for _, page := range []string{"/", "/search", "/search?q=EvU", "/routes", fmt.Sprintf("/rows/%d", w.ID), "/bulk"} {
			_, body := s.get(page)
			if n := len(regexp.MustCompile(`<form action="/search"`).FindAllString(body, -1)); n != 1 {
				t.Errorf("%s has %d search boxes, want 1", page, n)
			}
		}
	})
}

func TestAge(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{300 * time.Millisecond, "under 1 s"},
		{54*time.Second + 123456789, "54 s"},
		{59*time.Second + 600*time.Millisecond, "60 s"},
		{12*time.Minute + 20*time.Second, "12 min"},
		{3*time.Hour + 5*time.Minute + 10*time.Second, "3 h 5 min"},
		{2 * time.Hour, "2 h"},
		{50 * time.Hour, "2 d 2 h"},
	} {
		if got := console.Age(tc.d); got != tc.want {
			t.Errorf("age(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
