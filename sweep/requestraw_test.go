package sweep_test

import (
	"encoding/json"
	"net/url"
	"reflect"
	"testing"

	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// RequestRaw turns Slack's stored request back into what a row used to
// carry as Payload.Raw: the envelope, the command form as a JSON object of
// strings, the interaction payload.
func TestRequestRaw(t *testing.T) {
	event := `{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention","text":"caf\u00e9"}}`
	cmd := url.Values{"command": {"/deploy"}, "text": {"a b"}, "trigger_id": {"t.1"}}.Encode()
	ix := url.Values{"payload": {`{"type":"block_actions","actions":[{"action_id":"go"}]}`}}.Encode()
	tests := []struct {
		name, source, ctype, body string
		want                      any // decoded JSON; nil: RequestRaw returns nil
	}{
		{"event: the body itself", sweep.SourceEvent, sweep.ContentTypeJSON, event,
			map[string]any{"type": "event_callback", "event_id": "Ev1", "event": map[string]any{"type": "app_mention", "text": "café"}}},
		{"command: the form as strings", sweep.SourceCommand, sweep.ContentTypeForm, cmd,
			map[string]any{"command": "/deploy", "text": "a b", "trigger_id": "t.1"}},
		{"interaction: its payload field", sweep.SourceInteraction, sweep.ContentTypeForm, ix,
			map[string]any{"type": "block_actions", "actions": []any{map[string]any{"action_id": "go"}}}},
		{"interaction without payload", sweep.SourceInteraction, sweep.ContentTypeForm, "a=b", nil},
		{"a form that does not parse", sweep.SourceCommand, sweep.ContentTypeForm, "%zz", nil},
		{"a reply has no request", sweep.SourceReply, sweep.ContentTypeJSON, `{}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := sweep.RequestRaw(tt.source, &store.Request{ContentType: tt.ctype, Body: []byte(tt.body)})
			if tt.want == nil {
				if raw != nil {
					t.Fatalf("RequestRaw = %s, want nil", raw)
				}
				return
			}
			var got any
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("RequestRaw = %q: %v", raw, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("RequestRaw = %v, want %v", got, tt.want)
			}
		})
	}
	if raw := sweep.RequestRaw(sweep.SourceEvent, nil); raw != nil {
		t.Errorf("RequestRaw(nil) = %s", raw)
	}
}
