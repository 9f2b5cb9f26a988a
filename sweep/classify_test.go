package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slack-go/slack"
)

func TestClassify(t *testing.T) {
	var syntaxErr error = json.Unmarshal([]byte("<html>"), new(any))
	tests := []struct {
		name  string
		err   error
		class Class
		code  string
		after time.Duration
	}{
		{"429 with Retry-After", &slack.RateLimitedError{RetryAfter: 2 * time.Second}, RateLimited, "ratelimited", 2 * time.Second},
		{"429 with Retry-After 0 waits the default", &slack.RateLimitedError{}, RateLimited, "ratelimited", DefaultRetryAfter},
		{"429 without Retry-After", slack.StatusCodeError{Code: 429, Status: "429 Too Many Requests"}, RateLimited, "http_429", DefaultRetryAfter},
		{"503", slack.StatusCodeError{Code: 503}, Retryable, "http_503", 0},
		{"500", slack.StatusCodeError{Code: 500}, Retryable, "http_500", 0},
		{"408", slack.StatusCodeError{Code: 408}, Retryable, "http_408", 0},
		{"404", slack.StatusCodeError{Code: 404}, Permanent, "http_404", 0},
		{"wrapped status", fmt.Errorf("post: %w", slack.StatusCodeError{Code: 502}), Retryable, "http_502", 0},
		{"ratelimited code", slack.SlackErrorResponse{Err: "ratelimited"}, RateLimited, "ratelimited", DefaultRetryAfter},
		{"rate_limited code", slack.SlackErrorResponse{Err: "rate_limited"}, RateLimited, "rate_limited", DefaultRetryAfter},
		{"internal_error", slack.SlackErrorResponse{Err: "internal_error"}, Retryable, "internal_error", 0},
		{"fatal_error", slack.SlackErrorResponse{Err: "fatal_error"}, Retryable, "fatal_error", 0},
		{"service_unavailable", slack.SlackErrorResponse{Err: "service_unavailable"}, Retryable, "service_unavailable", 0},
		{"request_timeout", slack.SlackErrorResponse{Err: "request_timeout"}, Retryable, "request_timeout", 0},
		{"unknown code", slack.SlackErrorResponse{Err: "brand_new_error"}, Retryable, "brand_new_error", 0},
		{"wrapped code", fmt.Errorf("x: %w", slack.SlackErrorResponse{Err: "not_in_channel"}), Permanent, "not_in_channel", 0},
		{"deadline", context.DeadlineExceeded, Retryable, "timeout", 0},
		{"client deadline", &url.Error{Op: "Post", URL: "http://127.0.0.1/", Err: context.DeadlineExceeded}, Retryable, "timeout", 0},
		{"canceled", &url.Error{Op: "Post", URL: "http://127.0.0.1/", Err: context.Canceled}, Retryable, "canceled", 0},
		{"connection refused", &url.Error{Op: "Post", URL: "http://127.0.0.1/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, Retryable, "network", 0},
		{"unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), Retryable, "network", 0},
		{"garbled reply", syntaxErr, Retryable, "bad_response", 0},
		{"anything else", errors.New("boom"), Retryable, "error", 0},
		{"a Failure stays itself", permanent("no_url", "x"), Permanent, "no_url", 0},
	}
	permanentCodes := []string{
		"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired", "no_permission",
		"missing_scope", "channel_not_found", "not_in_channel", "is_archived", "msg_too_long", "no_text",
		"invalid_blocks", "message_not_found", "cant_update_message", "edit_window_closed", "invalid_name",
		"too_many_emoji", "too_many_reactions", "thread_locked", "restricted_action", "invalid_arguments",
	}
	for _, code := range permanentCodes {
		tests = append(tests, struct {
			name  string
			err   error
			class Class
			code  string
			after time.Duration
		}{code, slack.SlackErrorResponse{Err: code}, Permanent, code, 0})
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Classify(tt.err)
			if f.Class != tt.class || f.Code != tt.code || f.RetryAfter != tt.after {
				t.Errorf("Classify = %s/%q/%v, want %s/%q/%v", f.Class, f.Code, f.RetryAfter, tt.class, tt.code, tt.after)
			}
			if f.Err == nil || !strings.Contains(f.Error(), tt.err.Error()) {
				t.Errorf("failure %q does not carry the error %q", f, tt.err)
			}
		})
	}

	t.Run("nil is nil", func(t *testing.T) {
		if f := Classify(nil); f != nil {
			t.Errorf("Classify(nil) = %v", f)
		}
	})

	t.Run("missing_scope names the scope", func(t *testing.T) {
		f := Classify(slack.SlackErrorResponse{Err: "missing_scope", Needed: "reactions:write", Provided: "chat:write"})
		if f.Class != Permanent || !strings.Contains(f.Error(), "reactions:write") {
			t.Errorf("Classify = %s %q", f.Class, f)
		}
	})
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":    DefaultRetryAfter,
		"2":   2 * time.Second,
		" 45": 45 * time.Second,
		"0":   DefaultRetryAfter,
		"-3":  DefaultRetryAfter,
		"x":   DefaultRetryAfter,
		now.Add(2 * time.Minute).Format(http.TimeFormat): 2 * time.Minute,
		now.Add(-time.Minute).Format(http.TimeFormat):    DefaultRetryAfter,
	} {
		h := http.Header{}
		if v != "" {
			h.Set("Retry-After", v)
		}
		if got := retryAfter(h, now); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestClassifyNotSent(t *testing.T) {
	// A refused connection never left: a retry cannot repeat anything.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = http.Get("http://" + addr + "/")
	if f := Classify(err); f.Class != Retryable || !f.NotSent {
		t.Fatalf("refused connection: %+v", f)
	}
	// A reset after the request was written may have reached the other side.
	if f := Classify(fmt.Errorf("post: %w", io.ErrUnexpectedEOF)); f.Class != Retryable || f.NotSent {
		t.Fatalf("unexpected EOF: %+v", f)
	}
	if f := Classify(context.DeadlineExceeded); f.NotSent {
		t.Fatalf("timeout: %+v", f)
	}
}
