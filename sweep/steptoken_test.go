package sweep

import (
	"bytes"
	"net/url"
	"strings"
	"testing"

	"github.com/ackd/ackd/internal/seal"
)

func testSealer(t *testing.T, b byte) *seal.Keys {
	t.Helper()
	k, err := seal.New(bytes.Repeat([]byte{b}, seal.KeySize), nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealTokens(t *testing.T) {
	t.Parallel()
	k := testSealer(t, 3)
	const tok = "xwfp-123-abcDEF456"
	event := []byte(`{"type":"event_callback","event_id":"Ev1","event":{"type":"function_executed","function_execution_id":"Fx1","bot_access_token":"` + tok + `","inputs":{"echo":"` + tok + `"}}}`)
	payload := `{"type":"block_actions","bot_access_token":"` + tok + `","function_data":{"execution_id":"Fx1"}}`
	form := []byte("payload=" + url.QueryEscape(payload))

	for _, c := range []struct {
		name, ctype string
		body        []byte
		esc         func(string) string
	}{
		{"an event", ContentTypeJSON, event, jsonEscape},
		{"an interaction's form", ContentTypeForm, form, formEscape},
	} {
		t.Run(c.name+": sealed in place, every copy, and opened byte for byte", func(t *testing.T) {
			out, n, err := SealTokens(k, "Ev1", c.ctype, c.body)
			if err != nil || n != 1 {
				t.Fatalf("n=%d err=%v", n, err)
			}
			if bytes.Contains(out, []byte(tok)) || bytes.Contains(out, []byte("abcDEF456")) {
				t.Fatalf("token left in %s", out)
			}
			if !HasSealedTokens(out) {
				t.Fatal("no sealed token")
			}
			back, err := OpenTokens(k, "Ev1", out, c.esc)
			if err != nil || !bytes.Equal(back, c.body) {
				t.Fatalf("opened %s, %v", back, err)
			}
			if _, err := OpenTokens(k, "Ev2", out, c.esc); err == nil {
				t.Fatal("opened under another request's id")
			}
			if _, err := OpenTokens(testSealer(t, 4), "Ev1", out, c.esc); err == nil {
				t.Fatal("opened with another key")
			}
			if _, err := OpenTokens(nil, "Ev1", out, c.esc); err != errNoTokenKey {
				t.Fatalf("without a key: %v", err)
			}
		})
	}

	t.Run("a body without tokens is returned as it is; without a key the count says tokens are there", func(t *testing.T) {
		plain := []byte(`{"type":"event_callback","event":{"type":"app_mention"}}`)
		if out, n, err := SealTokens(k, "Ev1", ContentTypeJSON, plain); err != nil || n != 0 || !bytes.Equal(out, plain) {
			t.Fatalf("%s %d %v", out, n, err)
		}
		if out, n, err := SealTokens(nil, "Ev1", ContentTypeJSON, event); err != nil || n != 1 || !bytes.Equal(out, event) {
			t.Fatalf("%s %d %v", out, n, err)
		}
	})

	t.Run("a token Slack escaped is sealed in the decoded request, never left in clear", func(t *testing.T) {
		escaped := []byte(strings.Replace(string(event), `"bot_access_token":"xwfp`, `"bot_access_token":"\u0078wfp`, 1))
		out, n, err := SealTokens(k, "Ev1", ContentTypeJSON, escaped)
		if err != nil || n != 1 {
			t.Fatalf("%d %v", n, err)
		}
		if bytes.Contains(out, []byte("abcDEF456")) {
			t.Fatalf("token left in %s", out)
		}
		back, err := OpenTokens(k, "Ev1", out, jsonEscape)
		if err != nil {
			t.Fatal(err)
		}
		doc, _ := requestJSON(ContentTypeJSON, back)
		if got := findTokens(doc, nil); len(got) != 1 || got[0] != tok {
			t.Fatalf("opened tokens %v", got)
		}
	})
}

func TestParseStepReply(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body, kind, err string
	}{
		{`{"outputs":{"a":1,"b":["x"]}}`, stepSuccess, ""},
		{`{"outputs":{}}`, stepSuccess, ""},
		{`{"error":"no budget"}`, stepError, ""},
		{``, stepOpen, ""},
		{`ok`, stepOpen, ""},
		{`{}`, stepOpen, ""},
		{`{"text":"hi"}`, stepOpen, ""},
		{`{"outputs":null}`, stepOpen, ""},
		{`{"outputs":{"a":1},"error":"x"}`, "", "both"},
		{`{"outputs":[1]}`, "", "must be an object"},
		{`{"error":""}`, "", "non-empty string"},
		{`{"error":42}`, "", "non-empty string"},
	} {
		r, kind, err := parseStepReply([]byte(c.body))
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: err %v, want %q", c.body, err, c.err)
		case c.err == "" && (err != nil || kind != c.kind):
			t.Errorf("%s: %q %v, want %q", c.body, kind, err, c.kind)
		case kind == stepSuccess && !strings.HasPrefix(string(r.Outputs), "{"):
			t.Errorf("%s: outputs %s", c.body, r.Outputs)
		}
	}
}
