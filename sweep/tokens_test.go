package sweep

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
)

// tokenMap is a TokenSource over a map: key → token, or an error.
type tokenMap map[string]any

func (m tokenMap) BotToken(_ context.Context, key string) (string, error) {
	switch v := m[key].(type) {
	case string:
		return v, nil
	case error:
		return "", v
	default:
		return "", fmt.Errorf("%w: %s", ErrNotInstalled, key)
	}
}

func TestTokenSource(t *testing.T) {
	t.Parallel()
	api := fakeslack.New(t, "xoxb-T1")
	src := tokenMap{"T1": "xoxb-T1", "T2": "xoxb-T2-not-the-fakes",
		"T3": &Failure{Class: Permanent, Code: "token_unusable", Err: errors.New("refused")}, "T4": errors.New("db down")}
	reg := newEffects(t, api, func(c *EffectConfig) { c.BotToken = ""; c.Tokens = src; c.NotInstalledWait = time.Minute })
	post := func(install string, age time.Duration) (Outcome, error) {
		job := newJob("Ev:"+install, "post", Payload{Route: "r", Source: SourceEvent,
			Params: Params{Text: "hi"}, Facts: Facts{Channel: "C1", Install: install}})
		job.Row.CreatedAt = testNow.Add(-age)
		return perform(t, reg, job)
	}

	if _, err := post("T1", 0); err != nil {
		t.Fatalf("T1: %v", err)
	}
	if calls := api.CallsTo("chat.postMessage"); len(calls) != 1 || calls[0].Token != "xoxb-T1" {
		t.Fatalf("calls %+v", calls)
	}
	_, err := post("T2", 0)
	if f := AsFailure(err); f.Code != "invalid_auth" || api.CallsTo("chat.postMessage")[1].Token != "xoxb-T2-not-the-fakes" {
		t.Fatalf("T2 must be called with its own token: %v", err)
	}
	for _, tc := range []struct {
		install string
		age     time.Duration
		class   Class
		code    string
	}{
		{"T9", 10 * time.Second, Waiting, "not_installed"},
		{"T9", 2 * time.Minute, Permanent, "not_installed"},
		{"T3", 0, Permanent, "token_unusable"},
		{"T4", 0, Retryable, "token"},
		{"", 0, Permanent, "no_team"},
	} {
		_, err := post(tc.install, tc.age)
		if f := AsFailure(err); f.Class != tc.class || f.Code != tc.code {
			t.Errorf("%q at age %s: %v (%s), want %s %s", tc.install, tc.age, err, f.Class, tc.class, tc.code)
		}
	}
	if n := len(api.CallsTo("chat.postMessage")); n != 2 {
		t.Errorf("%d calls; rows without a usable token must not call Slack", n)
	}
	cfg := EffectConfig{Tokens: src}
	if skip := cfg.Unavailable(); skip["post"] != "" {
		t.Errorf("with a token source, post is available without SLACK_BOT_TOKEN: %v", skip)
	}
}
