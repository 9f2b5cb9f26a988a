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

// A token split over any two pieces is masked whole, and what Stream
// returns, piece by piece, is what Text makes of the whole answer.
func TestStreamMasksTokensAcrossPieces(t *testing.T) {
	answer := "Your token is xoxb-1234-5678-abcdefSECRET. Keep it, and xapp-1-A2-ff too; boxoxb-1 is a word, xwfp no; 日本語 ok x"
	want := Text(answer)
	if strings.Contains(want, "SECRET") || !strings.Contains(want, "xoxb-…(masked).") || !strings.Contains(want, "boxoxb-1") {
		t.Fatalf("Text(%q) = %q", answer, want)
	}
	runes := []rune(answer)
	for cut := 0; cut <= len(runes); cut++ {
		for cut2 := cut; cut2 <= len(runes); cut2 += 7 {
			var m Stream
			var got strings.Builder
			for _, piece := range []string{string(runes[:cut]), string(runes[cut:cut2]), string(runes[cut2:])} {
				out := m.Add(piece)
				if strings.Contains(out, "SECRET") || strings.Contains(out, "1234") {
					t.Fatalf("cut at %d,%d: a piece of the token was let out: %q", cut, cut2, out)
				}
				got.WriteString(out)
			}
			got.WriteString(m.Flush())
			if got.String() != want {
				t.Fatalf("cut at %d,%d: %q, want %q", cut, cut2, got.String(), want)
			}
		}
	}
}

// An answer that ends in a token's middle is masked at Flush.
func TestStreamFlushMasksTheLastWord(t *testing.T) {
	var m Stream
	if out := m.Add("plain words go out at once"); out != "plain words go out at once" {
		t.Fatalf("Add = %q", out)
	}
	if out := m.Add(" done: xoxp-99"); out != " done: " {
		t.Fatalf("Add = %q", out)
	}
	if out := m.Add("88-SECRET"); out != "" {
		t.Fatalf("Add = %q", out)
	}
	if out := m.Flush(); out != "xoxp-…(masked)" {
		t.Fatalf("Flush = %q", out)
	}
}
