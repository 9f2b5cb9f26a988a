package sweep

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ackd/ackd/internal/slacksig"
	"github.com/ackd/ackd/store"
)

// Content types Slack sends, byte for byte: Bolt compares the form type with
// ===, so a "; charset=utf-8" suffix would make it answer 400.
const (
	ContentTypeJSON = "application/json"
	ContentTypeForm = "application/x-www-form-urlencoded"
)

// Slack's signature headers, as a re-delivery carries them.
const (
	HeaderSlackTimestamp = "X-Slack-Request-Timestamp"
	HeaderSlackSignature = "X-Slack-Signature"
)

// Interaction payload types whose answer is the body of the HTTP answer to
// Slack (a response_action, an options list). On a redeliver route their
// first attempt runs inline, before ackd answers Slack.
const (
	TypeViewSubmission  = "view_submission"
	TypeBlockSuggestion = "block_suggestion"
)

// Synchronous reports whether an interaction type needs the app's answer in
// ackd's own answer to Slack.
func Synchronous(interactionType string) bool {
	return interactionType == TypeViewSubmission || interactionType == TypeBlockSuggestion
}

// redeliver POSTs Slack's original request (the stored bytes and content
// type) to the team's unmodified app, signed afresh as Slack signs it, with
// the row's Idempotency-Key and attempt number and never Slack's retry
// headers. The answer table is in classifyRedeliver.
//
// A 2xx body from a slash command or a message interaction is what the
// listener passed to ack(): it becomes one respond row to the request's
// response_url, enqueued with the fenced completion. Outcome.Reply carries
// the body and content type back to an inline attempt (view_submission,
// block_suggestion), whose caller answers Slack with it.
func (e *effects) redeliver(ctx context.Context, job Job) (Outcome, error) {
	p := job.Payload
	if p.Params.URL == "" {
		return Outcome{}, permanent("no_url", "redeliver: the route names no url")
	}
	if e.cfg.RedeliverSecret == "" {
		return Outcome{}, permanent("no_signing_secret",
			"redeliver: neither ACKD_REDELIVER_SECRET nor SLACK_SIGNING_SECRET is set in this process; the app could not verify the request")
	}
	req, err := e.openRequest(job)
	if err != nil {
		return Outcome{}, err
	}
	switch {
	case req == nil:
		return Outcome{}, permanent("no_request", "redeliver: Slack's stored request (%q) is missing; it cannot be re-delivered", job.Row.RequestID)
	case req.ContentType != ContentTypeJSON && req.ContentType != ContentTypeForm:
		return Outcome{}, permanent("bad_request", "redeliver: stored request has content type %q, not one Slack sends", req.ContentType)
	case len(req.Body) == 0:
		return Outcome{}, permanent("bad_request", "redeliver: stored request body is empty")
	}

	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Params.URL, bytes.NewReader(req.Body))
	if err != nil {
		return Outcome{}, permanent("invalid_url", "%w", err)
	}
	ts := strconv.FormatInt(e.cfg.Now().Unix(), 10)
	// Header values are set directly: exactly one of each, in Slack's spelling.
	hr.Header = http.Header{
		"Content-Type":       {req.ContentType},
		"User-Agent":         {"ackd"},
		HeaderSlackTimestamp: {ts},
		HeaderSlackSignature: {slacksig.Sign(e.cfg.RedeliverSecret, ts, req.Body)},
		HeaderIdempotencyKey: {job.Row.Key},
		HeaderAttempt:        {strconv.Itoa(job.Attempt)},
	}
	e.log.DebugContext(ctx, "redeliver", "key", job.Row.Key, "attempt", job.Attempt, "route", p.Route)
	// Not replayable by the transport: with an Idempotency-Key header and a
	// GetBody, http.Transport resends the request by itself when a reused
	// connection breaks after it was written, a second delivery under the
	// same attempt. The sweep alone retries (TestForwardIsNotReplayedByTheTransport).
	hr.GetBody = nil
	resp, err := e.cfg.HTTPClient.Do(hr)
	if err != nil {
		return Outcome{}, Classify(err)
	}
	defer resp.Body.Close()
	body, err := readBody(resp.Body)
	if err != nil {
		return Outcome{}, Classify(err)
	}
	if f := classifyRedeliver(resp.StatusCode, resp.Header.Get("Location"), retryAfter(resp.Header, e.cfg.Now()), body); f != nil {
		return Outcome{}, f
	}

	res := map[string]any{"status": resp.StatusCode}
	out := Outcome{Reply: body, ReplyType: resp.Header.Get("Content-Type")}
	if len(bytes.TrimSpace(body)) > 0 {
		switch {
		case p.Source == SourceInteraction && Synchronous(p.Facts.Type):
			res["answer_bytes"] = len(body) // the inline caller answers Slack with it
		case p.Facts.ResponseURL != "":
			fu, ok, err := ackFollowUp(job, body, resp.Header.Get("Content-Type"))
			switch {
			case err != nil:
				// The listener has run; failing now would run it again.
				res["reply_ignored"] = err.Error()
			case ok:
				res["follow_up"] = fu.Key
				out.FollowUps = []store.NewRow{fu}
			}
		default:
			res["reply_ignored"] = "the request has no response_url to post the app's answer to"
		}
	}
	b, _ := json.Marshal(res)
	out.Result = string(b)
	return out, nil
}

// classifyRedeliver reads the app's status (measured against @slack/bolt
// 5.1.0 with processBeforeResponse: true). nil means done.
//
//	2xx          listeners done (a body is the listener's ack(…))   done
//	401          bad signature, or the app's authorize() failed    retry (nothing ran)
//	404          nobody acked in time, or a wrong path             park: the listener may have run
//	3xx          —                                                 park: redirects are never followed
//	408, 429     a proxy in front of the app                       retry (429 at Retry-After, 30 s without)
//	other 4xx    the app could not parse it                        park
//	5xx          a listener threw, or the app is down              retry
func classifyRedeliver(status int, location string, wait time.Duration, body []byte) *Failure {
	msg := fmt.Errorf("HTTP %d %s", status, snippet(body))
	switch {
	case status >= 200 && status <= 299:
		return nil
	case status == http.StatusUnauthorized:
		return &Failure{Class: Retryable, Code: "http_401",
			Err: fmt.Errorf("%w: the app refused the signature or its authorize() failed; check that ACKD_REDELIVER_SECRET (or SLACK_SIGNING_SECRET) is the app's signing secret", msg)}
	case status == http.StatusNotFound:
		return &Failure{Class: Permanent, Code: "http_404",
			Err: fmt.Errorf("%w: no listener acked in time (raise the app's unhandledRequestTimeoutMillis), or the url's path is wrong; not retried because the listener may have run", msg)}
	case status >= 300 && status <= 399:
		return &Failure{Class: Permanent, Code: "http_" + strconv.Itoa(status),
			Err: fmt.Errorf("%w: redirect to %s is not followed; point the route's url at the app itself", msg, cmp.Or(location, "(no Location header)"))}
	default:
		return statusFailure(status, wait, msg)
	}
}

// ackFollowUp turns the body a listener passed to ack() into the respond row
// that posts it to the response_url: a string comes as plain text (Bolt sends
// no content type), an object as JSON {text, blocks, response_type, …}.
func ackFollowUp(job Job, body []byte, ctype string) (store.NewRow, bool, error) {
	mt, _, _ := mime.ParseMediaType(ctype)
	trimmed := bytes.TrimSpace(body)
	if mt == ContentTypeJSON || (mt == "" && json.Valid(trimmed) && len(trimmed) > 0 && trimmed[0] == '{') {
		return followUp(job, trimmed)
	}
	if mt != "" && !strings.HasPrefix(mt, "text/") {
		return store.NewRow{}, false, fmt.Errorf("answer of content type %q is neither text nor JSON", ctype)
	}
	reply, err := json.Marshal(map[string]string{"text": string(body)})
	if err != nil {
		return store.NewRow{}, false, err
	}
	return followUp(job, reply)
}
