package slacksim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// userAgent is what Slack sends; some receivers log it.
const userAgent = "Slackbot 1.0 (+https://api.slack.com/robots)"

// maxResponse caps how much of a response body Send returns and Bench reads.
const maxResponse = 1 << 20

// defaultSendTimeout bounds one Send when the caller gives no Client.
const defaultSendTimeout = 30 * time.Second

// SendOptions describes one signed delivery.
type SendOptions struct {
	URL    string // full URL, e.g. http://127.0.0.1:8080/slack/events
	Secret string // signing secret
	Body   []byte // sent and signed byte for byte

	// Form sends Content-Type application/x-www-form-urlencoded (slash
	// commands, interactivity) instead of application/json (Events API).
	Form bool

	// RetryNum > 0 marks the request as Slack's retry number RetryNum:
	// X-Slack-Retry-Num: RetryNum and X-Slack-Retry-Reason: http_timeout.
	RetryNum int

	Now    func() time.Time // signing clock; nil means time.Now
	Client *http.Client     // nil means a client with a 30s timeout
}

// Send signs opts.Body and POSTs it to opts.URL. It returns the response
// status and up to 1 MiB of the response body. A non-2xx status is not an
// error; err reports only failures to build, send or read the request.
func Send(ctx context.Context, opts SendOptions) (status int, body []byte, err error) {
	a, err := SendAnswer(ctx, opts)
	return a.Status, a.Body, err
}

// Answer is a receiver's response to one delivery.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte // at most 1 MiB
}

// SendAnswer is Send returning the response headers too (ackd says what it
// decided in X-Ackd-Outcome).
func SendAnswer(ctx context.Context, opts SendOptions) (Answer, error) {
	if opts.URL == "" {
		return Answer{}, errors.New("send: no URL")
	}
	if opts.Secret == "" {
		return Answer{}, errors.New("send: no signing secret")
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{Timeout: defaultSendTimeout}
	}
	ctype := "application/json"
	if opts.Form {
		ctype = "application/x-www-form-urlencoded"
	}
	req, err := newSlackRequest(ctx, opts.URL, opts.Secret, now(), opts.Body, ctype, opts.RetryNum)
	if err != nil {
		return Answer{}, fmt.Errorf("send: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Answer{}, fmt.Errorf("send: %w", err)
	}
	defer resp.Body.Close()
	a := Answer{Status: resp.StatusCode, Header: resp.Header}
	a.Body, err = io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return a, fmt.Errorf("send: read response: %w", err)
	}
	return a, nil
}

// newSlackRequest builds a POST carrying body, signed at ts, with Slack's
// headers; retryNum > 0 adds the retry headers of an http_timeout retry.
func newSlackRequest(ctx context.Context, url, secret string, ts time.Time, body []byte, ctype string, retryNum int) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("User-Agent", userAgent)
	if retryNum > 0 {
		req.Header.Set(HeaderRetryNum, strconv.Itoa(retryNum))
		req.Header.Set(HeaderRetryReason, "http_timeout")
	}
	SignRequest(req, secret, ts, body)
	return req, nil
}
