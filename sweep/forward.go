package sweep

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/ackd/ackd/internal/redact"
	"github.com/ackd/ackd/internal/slacksig"
	"github.com/ackd/ackd/store"
)

// Headers of a forward request.
const (
	HeaderIdempotencyKey = "Idempotency-Key"  // the outbox row's key: the same on every attempt
	HeaderAttempt        = "X-Ackd-Attempt"   // 1 for the first attempt
	HeaderTimestamp      = "X-Ackd-Timestamp" // unix seconds when the attempt was sent
	HeaderSignature      = "X-Ackd-Signature" // v0=hex(HMAC-SHA256(secret, "v0:{timestamp}:{body}"))
)

// forwardBody is what a team's handler receives.
type forwardBody struct {
	IdempotencyKey string          `json:"idempotency_key"`
	Attempt        int             `json:"attempt"`
	Route          string          `json:"route"`
	Source         string          `json:"source"`
	Envelope       json.RawMessage `json:"envelope"` // Payload.Raw: the event envelope, command form or interaction payload
}

// forwardReply is the part of a handler's 2xx reply that ackd acts on.
type forwardReply struct {
	Text            string          `json:"text"`
	Blocks          json.RawMessage `json:"blocks"`
	Thread          *bool           `json:"thread"` // events: false posts to the channel, not the thread
	ResponseType    string          `json:"response_type"`
	ReplaceOriginal bool            `json:"replace_original"`
}

// forward POSTs the Slack request to the route's URL, signed, with the row's
// key so that the handler can deduplicate attempts. A 2xx reply carrying
// "text" or "blocks" becomes one follow-up row (key {key}:reply): a post in
// the event's thread, or a respond to the command's response_url.
func (e *effects) forward(ctx context.Context, job Job) (Outcome, error) {
	p := job.Payload
	if p.Params.URL == "" {
		return Outcome{}, permanent("no_url", "forward: the route names no url")
	}
	env, err := e.openRaw(job, p.Raw)
	if err != nil {
		return Outcome{}, err
	}
	resp, err := e.toHandler(ctx, job, env)
	if err != nil {
		return Outcome{}, err
	}
	if resp.status < 200 || resp.status > 299 {
		return Outcome{}, resp.failure(e.cfg.Now())
	}

	res := map[string]any{"status": resp.status}
	fu, ok, err := followUp(job, resp.body)
	switch {
	case err != nil:
		// The handler has acted; failing now would forward again. Keep
		// the reason where an operator will see it instead.
		res["reply_ignored"] = err.Error()
	case ok:
		res["follow_up"] = fu.Key
		o := result(res)
		o.FollowUps = []store.NewRow{fu}
		return o, nil
	}
	return result(res), nil
}

// toHandler POSTs the request (env: the envelope, command form or
// interaction payload, tokens opened) to the route's URL as a forward does
// (forwardRequest). An error is a classified failure: no reply came.
func (e *effects) toHandler(ctx context.Context, job Job, env json.RawMessage) (httpResponse, error) {
	body, h, err := e.forwardRequest(job, env)
	if err != nil {
		return httpResponse{}, err
	}
	e.log.DebugContext(ctx, job.Row.Effect, "key", job.Row.Key, "attempt", job.Attempt, "route", job.Payload.Route)
	resp, err := e.postJSON(ctx, job.Payload.Params.URL, body, h)
	if err != nil {
		return httpResponse{}, Classify(err)
	}
	return resp, nil
}

// followUp turns a handler's reply into the row that delivers it. ok is false
// when the reply asks for nothing: not a JSON object, or no text and no blocks.
func followUp(job Job, reply []byte) (row store.NewRow, ok bool, err error) {
	// A token the handler echoed is not posted, nor kept in the reply's
	// row. A mask is plain text inside a JSON string: the reply stays
	// the JSON it was.
	reply = []byte(redact.Text(string(reply)))
	var fields map[string]json.RawMessage
	if json.Unmarshal(reply, &fields) != nil {
		return store.NewRow{}, false, nil
	}
	if _, t := fields["text"]; !t && !present(fields["blocks"]) {
		return store.NewRow{}, false, nil
	}
	var r forwardReply
	if err := json.Unmarshal(reply, &r); err != nil {
		return store.NewRow{}, false, err
	}
	if r.Text == "" && !present(r.Blocks) {
		return store.NewRow{}, false, nil
	}
	if !present(r.Blocks) {
		r.Blocks = nil
	}

	p := job.Payload
	fu := Payload{Route: p.Route + ":reply", Source: SourceReply, Facts: p.Facts}
	var effect string
	switch p.Source {
	case SourceEvent:
		effect = "post"
		fu.Params = Params{Text: r.Text, Blocks: r.Blocks, Literal: true, Channel: p.Facts.Channel}
		if r.Thread == nil || *r.Thread {
			fu.Params.ThreadTS = cmp.Or(p.Facts.ThreadTS, p.Facts.TS)
		}
	case SourceCommand, SourceInteraction:
		effect = "respond"
		fu.Params = Params{
			Text: r.Text, Blocks: r.Blocks, Literal: true, ResponseURL: p.Facts.ResponseURL,
			ResponseType: r.ResponseType, ReplaceOriginal: r.ReplaceOriginal,
		}
	default:
		return store.NewRow{}, false, nil
	}
	var raw bytes.Buffer
	if err := json.Compact(&raw, reply); err != nil {
		return store.NewRow{}, false, err
	}
	fu.Raw = raw.Bytes()
	enc, err := fu.Encode()
	if err != nil {
		return store.NewRow{}, false, err
	}
	return store.NewRow{Key: job.Row.Key + ":reply", Effect: effect, Payload: enc}, true, nil
}

// forwardRequest is what a forward of job sends to its route's url (the
// step and stream effects ask their handler and agent with the same): the
// body (key, attempt, route, source and env, the Slack request with its
// tokens opened: openRaw), and the headers that carry the row's key, the
// attempt number and, with ACKD_FORWARD_SECRET, the signature. A row
// recorded by a daemon that signs cannot be sent by a process without the
// secret: it is handed back (class Unavailable).
func (e *effects) forwardRequest(job Job, env json.RawMessage) ([]byte, http.Header, error) {
	p := job.Payload
	if p.Params.Signed && e.cfg.ForwardSecret == "" {
		// The handler expects a signature; an unsigned request would be
		// refused and the row parked. Leave it for a process that can sign.
		return nil, nil, &Failure{Class: Unavailable, Code: "no_forward_secret", Needs: CapForwardSigned,
			Err: errors.New(CredForwardSecret + " is not set; this row was recorded by a daemon that signs forwards")}
	}
	if !present(env) && job.Row.RequestID != "" {
		// The row is performed from Slack's stored request, and it is gone
		// (or does not parse): forwarding "null" would look like a success.
		return nil, nil, permanent("no_request", "%s: Slack's stored request (%q) is missing or unreadable; it cannot be forwarded", job.Row.Effect, job.Row.RequestID)
	}
	if !present(env) {
		env = json.RawMessage("null")
	}
	body, err := json.Marshal(forwardBody{
		IdempotencyKey: job.Row.Key, Attempt: job.Attempt, Route: p.Route, Source: p.Source, Envelope: env,
	})
	if err != nil {
		return nil, nil, permanent("bad_payload", "%s: raw request is not JSON: %w", job.Row.Effect, err)
	}
	ts := strconv.FormatInt(e.cfg.Now().Unix(), 10)
	h := http.Header{}
	h.Set(HeaderIdempotencyKey, job.Row.Key)
	h.Set(HeaderAttempt, strconv.Itoa(job.Attempt))
	h.Set(HeaderTimestamp, ts)
	if e.cfg.ForwardSecret != "" {
		h.Set(HeaderSignature, slacksig.Sign(e.cfg.ForwardSecret, ts, body))
	}
	return body, h, nil
}
