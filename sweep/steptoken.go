package sweep

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/ackd/ackd/internal/seal"
	"github.com/ackd/ackd/store"
)

// Execution tokens at rest.
//
// A workflow step's function_executed event carries the execution's own
// token ("bot_access_token": "xwfp-…"), and so does an interaction inside
// the step (a top-level bot_access_token beside function_data). Slack's
// request is stored for the rows performed from it (store.Intent.Request),
// and the token must not be stored in clear. SealTokens replaces every
// occurrence of each such token in the request's bytes with a sealed
// marker (sealedPrefix, then the token sealed with ACKD_TOKEN_KEY bound to
// the request's id, in base64url): nothing else of the request changes,
// and OpenTokens puts the token back byte for byte, so that a forward, a
// step or a redeliver sends the request as Slack sent it.
//
// The marker's characters need escaping neither in JSON nor in a form, so
// the replacement keeps both kinds of body valid. A token that is not found
// literally in the bytes (Slack escaped a character of it) is replaced in
// the decoded request instead, which is then encoded again: the token
// never reaches the database in clear, at the cost of the request's exact
// bytes.

// sealedPrefix starts every sealed token in a stored request.
const sealedPrefix = "ackd-sealed-1."

var sealedToken = regexp.MustCompile(regexp.QuoteMeta(sealedPrefix) + `[A-Za-z0-9_-]+`)

// tokenKey is the field that carries an execution token.
const tokenKey = "bot_access_token"

// tokenAAD binds a sealed execution token to the stored request it is in.
func tokenAAD(requestID string) string { return "ackd execution token " + requestID }

// CapTokenKey is the capability of opening sealed execution tokens: having
// ACKD_TOKEN_KEY. Instances record it; a row whose request carries sealed
// tokens is given back by a process without it.
const CapTokenKey = "token_key"

// CredTokenKey names the key that seals execution tokens (and [oauth]'s
// installation tokens).
const CredTokenKey = "ACKD_TOKEN_KEY"

// SealTokens returns body (the request stored under requestID, of Slack's
// content type) with every execution token sealed by k, and how many
// distinct tokens it held. With k nil, body is returned as it is: n says
// whether it holds tokens in clear. Cheap when the body names no
// bot_access_token (the hot path of every other request).
func SealTokens(k *seal.Keys, requestID, contentType string, body []byte) (out []byte, n int, err error) {
	if !bytes.Contains(body, []byte(tokenKey)) {
		return body, 0, nil
	}
	doc, err := requestJSON(contentType, body)
	if err != nil {
		return body, 0, nil // not a document Slack sends: nothing in it is a token ackd knows
	}
	tokens := findTokens(doc, nil)
	if len(tokens) == 0 || k == nil {
		return body, len(tokens), nil
	}
	aad := tokenAAD(requestID)
	out = body
	literal := true
	for _, t := range tokens {
		if !bytes.Contains(out, []byte(t)) {
			literal = false
			continue
		}
		mark := sealedPrefix + base64.RawURLEncoding.EncodeToString(k.Seal(aad, []byte(t)))
		out = bytes.ReplaceAll(out, []byte(t), []byte(mark))
	}
	if literal && !holdsToken(contentType, out, tokens) {
		return out, len(tokens), nil
	}
	// A token escaped in the bytes: replace it in the decoded document
	// (every string equal to a token, at any depth) and encode it again.
	marks := map[string]string{}
	for _, t := range tokens {
		marks[t] = sealedPrefix + base64.RawURLEncoding.EncodeToString(k.Seal(aad, []byte(t)))
	}
	doc = replaceStrings(doc, marks)
	enc, err := json.Marshal(doc)
	if err != nil {
		return nil, 0, fmt.Errorf("seal execution tokens: %w", err)
	}
	if contentType == ContentTypeForm {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, 0, fmt.Errorf("seal execution tokens: %w", err)
		}
		form.Set("payload", string(enc))
		enc = []byte(form.Encode())
	}
	if holdsToken(contentType, enc, tokens) {
		return nil, 0, errors.New("seal execution tokens: a token is still in the request after sealing")
	}
	return enc, len(tokens), nil
}

// holdsToken reports whether a request still holds one of tokens, in its
// bytes or once decoded.
func holdsToken(contentType string, body []byte, tokens []string) bool {
	for _, t := range tokens {
		if bytes.Contains(body, []byte(t)) {
			return true
		}
	}
	doc, err := requestJSON(contentType, body)
	return err == nil && len(findTokens(doc, tokens)) > 0
}

// requestJSON decodes a stored request: an event's body, or an
// interaction's payload field.
func requestJSON(contentType string, body []byte) (any, error) {
	raw := body
	if contentType == ContentTypeForm {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, err
		}
		raw = []byte(form.Get("payload"))
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// findTokens lists the distinct string values of bot_access_token at any
// depth of doc; with among set, every string value equal to one of those.
func findTokens(doc any, among []string) []string {
	var out []string
	add := func(s string) {
		if s != "" && !strings.HasPrefix(s, sealedPrefix) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && among == nil && k == tokenKey {
					add(s)
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		case string:
			if among != nil && slices.Contains(among, v) {
				add(v)
			}
		}
	}
	walk(doc)
	return out
}

// replaceStrings replaces, at any depth, every string value found in marks.
func replaceStrings(v any, marks map[string]string) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = replaceStrings(e, marks)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = replaceStrings(e, marks)
		}
		return v
	case string:
		if m, ok := marks[v]; ok {
			return m
		}
	}
	return v
}

// HasSealedTokens reports whether a stored request carries sealed tokens.
func HasSealedTokens(body []byte) bool { return bytes.Contains(body, []byte(sealedPrefix)) }

// OpenTokens puts the execution tokens sealed in b (part of the request
// stored under requestID) back, each escaped by escape for where it
// stands: the identity for JSON, or a form's escaping.
func OpenTokens(k *seal.Keys, requestID string, b []byte, escape func(string) string) ([]byte, error) {
	if !HasSealedTokens(b) {
		return b, nil
	}
	if k == nil {
		return nil, errNoTokenKey
	}
	aad := tokenAAD(requestID)
	var openErr error
	out := sealedToken.ReplaceAllFunc(b, func(m []byte) []byte {
		sealed, err := base64.RawURLEncoding.DecodeString(string(m[len(sealedPrefix):]))
		if err != nil {
			openErr = errors.Join(openErr, fmt.Errorf("sealed execution token: %w", err))
			return m
		}
		plain, _, err := k.Open(aad, sealed)
		if err != nil {
			openErr = errors.Join(openErr, err)
			return m
		}
		return []byte(escape(string(plain)))
	})
	if openErr != nil {
		return nil, openErr
	}
	return out, nil
}

// jsonEscape is a string's content as it stands inside a JSON string.
func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// formEscape is a string's content inside a JSON string inside a form
// field (an interaction's payload).
func formEscape(s string) string { return url.QueryEscape(jsonEscape(s)) }

var errNoTokenKey = errors.New(CredTokenKey + " is not set: the request carries a sealed execution token, which only a process with the key can open")

// openRequest returns the row's stored request with its execution tokens
// opened (nil when the row names none). A process without the key gives
// the row back for one that has it; a token that does not open with the
// key parks the row: no process can perform it as it is.
func (e *effects) openRequest(job Job) (*store.Request, error) {
	req := job.Row.Request
	if req == nil || !HasSealedTokens(req.Body) {
		return req, nil
	}
	esc := jsonEscape
	if req.ContentType == ContentTypeForm {
		esc = formEscape
	}
	b, err := OpenTokens(e.cfg.Sealer, job.Row.RequestID, req.Body, esc)
	if err != nil {
		return nil, tokenFailure(err)
	}
	return &store.Request{ContentType: req.ContentType, Body: b}, nil
}

// openRaw is openRequest for Payload.Raw, the request as JSON (an event's
// envelope, an interaction's payload).
func (e *effects) openRaw(job Job, raw json.RawMessage) (json.RawMessage, error) {
	b, err := OpenTokens(e.cfg.Sealer, job.Row.RequestID, raw, jsonEscape)
	if err != nil {
		return nil, tokenFailure(err)
	}
	return b, nil
}

// tokenFailure classifies a token that could not be opened.
func tokenFailure(err error) *Failure {
	if errors.Is(err, errNoTokenKey) {
		return &Failure{Class: Unavailable, Code: "no_token_key", Needs: CapTokenKey, Err: err}
	}
	return &Failure{Class: Permanent, Code: "token_sealed",
		Err: fmt.Errorf("the request's execution token does not open with %s (nor %s_OLD): %w", CredTokenKey, CredTokenKey, err)}
}
