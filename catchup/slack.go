package catchup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ackd/ackd/internal/slackclock"
)

// The Web API methods catch-up calls. Both are paced by the Budget and
// held by their Retry-After.
const (
	MethodHistory = "conversations.history"
	MethodReplies = "conversations.replies"
)

// api is a small Web API client: catch-up needs the messages exactly as
// Slack sent them (the recovered event is built from them), a 429's
// Retry-After, and missing_scope's "needed", none of which slack-go's
// parsed types keep.
type api struct {
	base  string // with a trailing slash
	token string
	hc    *http.Client
	clock *slackclock.Clock // told every answer's Date header
}

// page is one answer of conversations.history or conversations.replies.
type page struct {
	OK       bool              `json:"ok"`
	Error    string            `json:"error"`
	Needed   string            `json:"needed"`
	Messages []json.RawMessage `json:"messages"`
	HasMore  bool              `json:"has_more"`
	Meta     struct {
		NextCursor string `json:"next_cursor"`
	} `json:"response_metadata"`
}

// rateLimited is a 429 (or ok:false ratelimited): nothing was read, and no
// call to the method may go out before RetryAfter.
type rateLimited struct {
	method     string
	retryAfter time.Duration
}

func (e *rateLimited) Error() string {
	return fmt.Sprintf("%s: rate limited by Slack (Retry-After %s)", e.method, e.retryAfter)
}

// slackError is an ok:false answer.
type slackError struct {
	method, code, needed string
}

func (e *slackError) Error() string {
	if e.needed != "" {
		return fmt.Sprintf("%s: %s (needed %s)", e.method, e.code, e.needed)
	}
	return fmt.Sprintf("%s: %s", e.method, e.code)
}

// defaultRetryAfter is assumed when a 429 carries no usable Retry-After.
const defaultRetryAfter = 30 * time.Second

func (a *api) call(ctx context.Context, method string, params url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+method, strings.NewReader(params.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+a.token)
	sent := a.clock.LocalNow()
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	a.clock.Observe(resp.Header.Get("Date"), sent, a.clock.LocalNow())
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s: reading the answer: %w", method, err)
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return &rateLimited{method: method, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"))}
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", method, resp.StatusCode)
	}
	var env struct {
		OK     bool   `json:"ok"`
		Error  string `json:"error"`
		Needed string `json:"needed"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("%s: answer is not JSON: %w", method, err)
	}
	if !env.OK {
		if env.Error == "ratelimited" {
			return &rateLimited{method: method, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"))}
		}
		return &slackError{method: method, code: env.Error, needed: env.Needed}
	}
	return json.Unmarshal(body, out)
}

func parseRetryAfter(v string) time.Duration {
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	return defaultRetryAfter
}

// authTest returns the token's team and bot user.
func (a *api) authTest(ctx context.Context) (team, user string, err error) {
	var out struct {
		TeamID string `json:"team_id"`
		UserID string `json:"user_id"`
	}
	if err := a.call(ctx, "auth.test", url.Values{}, &out); err != nil {
		return "", "", err
	}
	return out.TeamID, out.UserID, nil
}

// scopeFor names the history scope a channel needs, from its id, when
// Slack's answer does not say.
func scopeFor(channel string) string {
	switch {
	case strings.HasPrefix(channel, "G"):
		return "groups:history"
	case strings.HasPrefix(channel, "D"):
		return "im:history"
	default:
		return "channels:history"
	}
}

// errStop is a channel-level failure catch-up cannot retry past.
func isPermanent(err error) (*slackError, bool) {
	var se *slackError
	return se, errors.As(err, &se)
}
