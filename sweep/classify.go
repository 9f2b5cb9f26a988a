package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// DefaultRetryAfter is how long a rate-limited row waits when the 429 (or the
// ratelimited error) names no usable Retry-After.
const DefaultRetryAfter = 30 * time.Second

// permanentCodes are Slack error codes that no retry can fix: auth, scopes,
// the target channel or message, or the request itself. expired_url and
// used_url come from response_url.
var permanentCodes = map[string]bool{
	"invalid_auth": true, "not_authed": true, "account_inactive": true,
	"token_revoked": true, "token_expired": true, "no_permission": true,
	"missing_scope": true, "channel_not_found": true, "not_in_channel": true,
	"is_archived": true, "msg_too_long": true, "no_text": true,
	"invalid_blocks": true, "message_not_found": true, "cant_update_message": true,
	"edit_window_closed": true, "invalid_name": true, "too_many_emoji": true,
	"too_many_reactions": true, "thread_locked": true, "restricted_action": true,
	"invalid_arguments": true, "expired_url": true, "used_url": true,
	// The streaming methods' (2026): another app's message, and a stream
	// outside a DM without its recipient. stopped_by_user is not a
	// failure but a stop (stop.go).
	"message_not_owned_by_app": true, "missing_recipient_user_id": true, "missing_recipient_team_id": true,
}

// Classify decides what the sweep does with an effect error: the one place
// that maps slack-go's errors, HTTP statuses and network failures to a Class
// and a short Code. Slack error codes it does not know are retryable, since
// Slack adds codes and most new ones are transient. A nil error is nil.
func Classify(err error) *Failure {
	if err == nil {
		return nil
	}
	var (
		f   *Failure
		rl  *slack.RateLimitedError
		sce slack.StatusCodeError
		ser slack.SlackErrorResponse
		ne  net.Error
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &f):
		return f
	case errors.As(err, &rl):
		after := rl.RetryAfter
		if after <= 0 {
			after = DefaultRetryAfter
		}
		return &Failure{Class: RateLimited, RetryAfter: after, Code: "ratelimited", Err: err}
	case errors.As(err, &sce):
		return statusFailure(sce.Code, DefaultRetryAfter, err)
	case errors.As(err, &ser):
		return codeFailure(ser, err)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return &Failure{Class: Retryable, Code: "timeout", Err: err, NotSent: neverSent(err)}
	case errors.Is(err, context.Canceled):
		return &Failure{Class: Retryable, Code: "canceled", Err: err, NotSent: neverSent(err)}
	case errors.As(err, &ne), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &Failure{Class: Retryable, Code: "network", Err: err, NotSent: neverSent(err)}
	case errors.As(err, &syn), errors.As(err, &typ):
		return &Failure{Class: Retryable, Code: "bad_response", Err: err}
	default:
		return &Failure{Class: Retryable, Code: "error", Err: err}
	}
}

// neverSent reports whether err says the request never left: the
// connection was not made (refused, unreachable, a dial timeout) or the
// host's name did not resolve. Anything after the connection — a reset, a
// timeout waiting for the answer, a truncated body — may have reached the
// other side.
func neverSent(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &dns) || (errors.As(err, &op) && op.Op == "dial")
}

// codeFailure classifies a Slack {"ok":false,"error":code} reply.
func codeFailure(ser slack.SlackErrorResponse, err error) *Failure {
	code := ser.Err
	switch {
	case code == "ratelimited" || code == "rate_limited":
		return &Failure{Class: RateLimited, RetryAfter: DefaultRetryAfter, Code: code, Err: err}
	case code == "missing_scope" && ser.Needed != "":
		return &Failure{Class: Permanent, Code: code,
			Err: fmt.Errorf("token lacks scope %q (has %q): %w", ser.Needed, ser.Provided, err)}
	case permanentCodes[code]:
		return &Failure{Class: Permanent, Code: code, Err: err}
	default: // internal_error, fatal_error, service_unavailable, request_timeout, and codes we do not know
		return &Failure{Class: Retryable, Code: code, Err: err}
	}
}

// statusFailure classifies a non-2xx HTTP status: 429 is rate limited
// (waiting retryAfter), 408 and 5xx are retryable, anything else permanent.
func statusFailure(status int, retryAfter time.Duration, err error) *Failure {
	code := "http_" + strconv.Itoa(status)
	switch {
	case status == http.StatusTooManyRequests:
		return &Failure{Class: RateLimited, RetryAfter: retryAfter, Code: code, Err: err}
	case status == http.StatusRequestTimeout || status >= 500:
		return &Failure{Class: Retryable, Code: code, Err: err}
	default:
		return &Failure{Class: Permanent, Code: code, Err: err}
	}
}

// maxRetryAfter bounds a Retry-After in seconds, so a huge value can neither
// overflow a Duration nor hold a row for years (the store caps it further).
const maxRetryAfter = 24 * 60 * 60

// retryAfter reads a Retry-After header: delay-seconds or an HTTP date
// (relative to now). Absent, unparseable or non-positive gives DefaultRetryAfter.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return DefaultRetryAfter
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n <= 0 {
			return DefaultRetryAfter
		}
		return time.Duration(min(n, maxRetryAfter)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now).Round(time.Second)
	}
	return DefaultRetryAfter
}

// permanent is a failure the sweep parks at once.
func permanent(code, format string, args ...any) *Failure {
	return &Failure{Class: Permanent, Code: code, Err: fmt.Errorf(format, args...)}
}
