package slackclock_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/slackclock"
)

func TestClock(t *testing.T) {
	t.Run("knows nothing before an answer: local time as it is", func(t *testing.T) {
		c := slackclock.New(nil)
		now := time.Now()
		if _, _, known := c.Offset(); known || !c.Lower(now).Equal(now) || !c.Upper(now).Equal(now) {
			t.Fatal("an empty clock moved a time")
		}
	})

	t.Run("the bounds hold Slack's true clock, ±10 minutes each way", func(t *testing.T) {
		for _, off := range []time.Duration{-10 * time.Minute, -3 * time.Minute, 0, 3 * time.Minute, 10 * time.Minute} {
			sent := time.Date(2026, 5, 1, 12, 0, 0, 300e6, time.UTC)
			received := sent.Add(400 * time.Millisecond)
			slackAt := sent.Add(250 * time.Millisecond).Add(off) // when Slack wrote the answer, on its clock
			c := slackclock.New(func() time.Time { return received })
			c.Observe(slackAt.Format(http.TimeFormat), sent, received)
			lo, hi := c.Now()
			slackNow := received.Add(off) // Slack's clock when the answer came
			if lo.After(slackNow) || hi.Before(slackNow) {
				t.Fatalf("offset %s: [%s, %s] does not hold %s", off, lo, hi, slackNow)
			}
			if hi.Sub(lo) > 1500*time.Millisecond {
				t.Fatalf("offset %s: bounds %s wide, want at most a second and the round trip", off, hi.Sub(lo))
			}
		}
	})

	t.Run("the transport reads the Date of the Web API's answers only", func(t *testing.T) {
		slack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Date", time.Now().Add(-10*time.Minute).UTC().Format(http.TimeFormat))
		}))
		defer slack.Close()
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Date", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
		}))
		defer other.Close()
		c := slackclock.New(nil)
		hc := &http.Client{Transport: c.Transport(nil, slack.URL+"/")}
		for _, u := range []string{other.URL + "/hook", slack.URL + "/auth.test"} {
			resp, err := hc.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		lo, hi, known := c.Offset()
		if !known || lo < -11*time.Minute || hi > -9*time.Minute {
			t.Fatalf("offset [%s, %s] known %t, want about -10m from the Web API only", lo, hi, known)
		}
	})
}
