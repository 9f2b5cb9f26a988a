// Package redact hides, in a stored payload or Slack request shown to an
// operator (`ackd outbox show`, the console), what a screen does not need
// and must not leak.
package redact

import (
	"bytes"
	"encoding/json"
	"net/url"
)

// Pretty returns doc, a JSON object, indented with Secrets applied; ok is
// false (and doc is returned as it is) when doc is not a JSON object.
func Pretty(doc []byte) (out []byte, ok bool) {
	var v map[string]any
	if json.Unmarshal(doc, &v) != nil {
		return doc, false
	}
	Secrets(v)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // Slack's "<@U123>" as it is, not "\u003c@U123\u003e"
	_ = enc.Encode(v)
	return b.Bytes(), true
}

// Secrets hides, at any depth: Slack's deprecated verification token
// ("token"), a workflow step's execution token ("bot_access_token", sealed
// at rest, but not even its sealed form is shown) and every response_url,
// a bearer capability (anyone who holds one can post to the user for 30
// minutes). A URL keeps its scheme and host, so that the operator still
// sees where it points.
func Secrets(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			switch s, isString := e.(string); {
			case (k == "token" || k == "bot_access_token") && e != nil:
				v[k] = "(redacted)"
			case k == "response_url" && isString && s != "":
				v[k] = URL(s)
			default:
				Secrets(e)
			}
		}
	case []any:
		for _, e := range v {
			Secrets(e)
		}
	}
}

// URL keeps a URL's scheme and host.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(redacted)"
	}
	return u.Scheme + "://" + u.Host + "/(redacted)"
}
