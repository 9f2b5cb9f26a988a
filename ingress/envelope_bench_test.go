package ingress_test

import (
	"testing"

	"github.com/ackd/ackd/ingress"
)

// BenchmarkParseEnvelope measures the decode of a typical event_callback
// (about 700 bytes) on the ack path.
//
//	go test -run '^$' -bench ParseEnvelope ./daemon/
func BenchmarkParseEnvelope(b *testing.B) {
	body := []byte(`{"token":"bench","team_id":"TBENCH","api_app_id":"ABENCH","event":{"type":"message","channel":"CBENCH","channel_type":"channel","user":"UBENCH","ts":"1700000000.000100","event_ts":"1700000000.000100","text":"bench event 12345","blocks":[{"type":"rich_text","block_id":"x1","elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"bench event 12345"}]}]}]},"type":"event_callback","event_id":"Ev0123456789ABC","event_time":1700000000,"event_context":"EC-bench","authorizations":[{"enterprise_id":null,"team_id":"TBENCH","user_id":"UBENCHBOT","is_bot":true,"is_enterprise_install":false}],"is_ext_shared_channel":false,"context_team_id":"TBENCH","context_enterprise_id":null}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		env, err := ingress.ParseEnvelope(body)
		if err != nil || env.Inner.Channel != "CBENCH" {
			b.Fatal(env, err)
		}
	}
}
