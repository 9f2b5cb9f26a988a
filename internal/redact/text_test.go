package redact

import (
	"strings"
	"testing"
)

func TestTextMasksTokens(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		known    []string
		want     string
	}{
		{"execution token by shape", "http_500: bad token xwfp-123-abc.DEF given", nil, "http_500: bad token xwfp-…(masked) given"},
		{"bot token by shape", `{"error":"invalid_auth","token":"xoxb-1-2-abc"}`, nil, `{"error":"invalid_auth","token":"xoxb-…(masked)"}`},
		{"app token by shape", "xapp-1-A1-2-ff", nil, "xapp-…(masked)"},
		{"known secret of any shape", "sig mismatch: secret s3cr3t-signing-value used", []string{"s3cr3t-signing-value"}, "sig mismatch: secret …(masked) used"},
		{"short known secret not masked as a substring", "channel_not_found", []string{"not"}, "channel_not_found"},
		{"plain error kept", "http_503: upstream down", []string{"", "xoxb-zzz"}, "http_503: upstream down"},
		{"prefix inside a word is not a token", "boxoxb-1", nil, "boxoxb-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Text(tc.in, tc.known...); got != tc.want {
				t.Fatalf("Text(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestTextMaskedTokenNotLeft(t *testing.T) {
	tok := "xwfp-7-" + strings.Repeat("Z", 40)
	got := Text("the handler said: "+tok[:30], tok)
	if strings.Contains(got, "ZZZZ") {
		t.Fatalf("a cut token is still shown: %q", got)
	}
}
