package sweep

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	neturl "net/url"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// respondBody is what Slack's response_url accepts.
type respondBody struct {
	Text            string          `json:"text,omitempty"`
	Blocks          json.RawMessage `json:"blocks,omitempty"`
	ResponseType    string          `json:"response_type,omitempty"`
	ReplaceOriginal bool            `json:"replace_original"`
}

// respond POSTs the rendered text and blocks to the command's or
// interaction's response_url. It does not use slack.PostWebhook, which
// ignores the reply body and so would take {"ok":false} for success.
func (e *effects) respond(ctx context.Context, job Job) (Outcome, error) {
	p := job.Payload
	url := cmp.Or(p.Params.ResponseURL, p.Facts.ResponseURL)
	if url == "" {
		return Outcome{}, permanent("no_response_url", "respond: the request carries no response_url (events and view submissions have none)")
	}
	text, err := render(p, "text", p.Params.Text, "")
	if err != nil {
		return Outcome{}, err
	}
	body := respondBody{Text: text, ResponseType: p.Params.ResponseType, ReplaceOriginal: p.Params.ReplaceOriginal}
	if present(p.Params.Blocks) {
		body.Blocks = p.Params.Blocks
	}
	b, err := json.Marshal(body)
	if err != nil {
		return Outcome{}, permanent("invalid_blocks", "respond: %w", err)
	}

	e.log.DebugContext(ctx, "response_url call", "key", job.Row.Key, "response_type", body.ResponseType)
	resp, err := e.postJSON(ctx, url, b, nil)
	resp.secretURL = true
	if err != nil {
		return Outcome{}, Classify(err)
	}
	switch {
	case resp.status == http.StatusNotFound || resp.status == http.StatusGone:
		return Outcome{}, permanent(cmp.Or(slackCode(resp.body), "expired_url"),
			"response_url expired or used up (Slack allows 5 uses within 30 minutes): HTTP %d %s", resp.status, snippet(resp.body))
	case resp.status < 200 || resp.status > 299:
		f := resp.failure(e.cfg.Now())
		if code := slackCode(resp.body); code != "" && f.Class == Permanent {
			f.Code = code // a 400 "invalid_blocks" says more than http_400
		}
		return Outcome{}, f
	}
	if code := slackCode(resp.body); code != "" {
		f := Classify(slack.SlackErrorResponse{Err: code})
		f.Err = fmt.Errorf("response_url: %w", f.Err)
		return Outcome{}, f
	}
	return result(map[string]int{"status": resp.status}), nil
}

// slackCode is the error a response_url (or webhook) reply reports: the
// "error" of a JSON {"ok":false}, or a bare code like "expired_url" sent as
// text. "ok", {"ok":true}, an empty body and anything else give "".
func slackCode(body []byte) string {
	s := strings.TrimSpace(string(body))
	if s == "" || s == "ok" {
		return ""
	}
	var r struct {
		OK    *bool  `json:"ok"`
		Error string `json:"error"`
	}
	if json.Unmarshal([]byte(s), &r) == nil {
		if r.OK != nil && !*r.OK {
			return cmp.Or(r.Error, "unknown_error")
		}
		return ""
	}
	if len(s) <= 64 && strings.Trim(s, "abcdefghijklmnopqrstuvwxyz_") == "" {
		return s
	}
	return ""
}

// httpResponse is what postJSON keeps of a reply.
type httpResponse struct {
	status int
	header http.Header
	body   []byte
	// secretURL: the URL is a bearer capability (a response_url), so a
	// redirect's Location is shown without its path and query.
	secretURL bool
}

// failure classifies a non-2xx reply, quoting the body in the message. A 3xx
// is permanent (redirects are never followed, see noRedirects) and names the
// Location, so that the operator can fix the URL (often http → https, or a
// missing trailing slash).
func (r httpResponse) failure(now time.Time) *Failure {
	if r.status >= 300 && r.status <= 399 {
		loc := r.header.Get("Location")
		switch {
		case loc == "":
			loc = "(no Location header)"
		case r.secretURL:
			loc = redactURL(loc)
		}
		return permanent("http_"+strconv.Itoa(r.status),
			"HTTP %d redirect to %s: ackd does not follow redirects; point the URL at the final address", r.status, loc)
	}
	return statusFailure(r.status, retryAfter(r.header, now),
		fmt.Errorf("HTTP %d %s", r.status, snippet(r.body)))
}

// postJSON POSTs body as JSON with the extra headers and reads the reply.
// An error means no reply: the network or the ctx deadline.
func (e *effects) postJSON(ctx context.Context, url string, body []byte, header http.Header) (httpResponse, error) {
	resp, err := e.sendJSON(ctx, url, body, header)
	if err != nil {
		return httpResponse{}, err
	}
	defer resp.Body.Close()
	b, err := readBody(resp.Body)
	if err != nil {
		return httpResponse{}, err
	}
	return httpResponse{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// sendJSON POSTs body as JSON with the extra headers and returns the answer
// with its body still to be read (an agent's stream is read as it comes).
func (e *effects) sendJSON(ctx context.Context, url string, body []byte, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		// The parse error quotes the whole URL, path and all.
		return nil, permanent("invalid_url", "%w", redactURLError(err))
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ackd")
	// Not replayable by the transport: with an Idempotency-Key header and a
	// GetBody, http.Transport resends the request by itself when a reused
	// connection breaks after it was written, a second delivery under the
	// same attempt. The sweep alone retries (TestForwardIsNotReplayedByTheTransport).
	req.GetBody = nil
	resp, err := e.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, redactURLError(err)
	}
	return resp, nil
}

// redactURLError hides the path and query of the URL a *url.Error quotes
// (a parse error, a failed request): a response_url is a bearer capability,
// to be kept out of last_error and the logs whichever way its call fails.
func redactURLError(err error) error {
	var ue *neturl.Error
	if errors.As(err, &ue) {
		return &neturl.Error{Op: ue.Op, URL: redactURL(ue.URL), Err: ue.Err}
	}
	return err
}

// redactURL keeps a URL's scheme and host and hides its path and query.
func redactURL(raw string) string {
	u, err := neturl.Parse(raw)
	if err != nil || u.Host == "" {
		return "(url)"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// snippet is the start of a reply body, quoted, for last_error.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return fmt.Sprintf("%q", s)
}
