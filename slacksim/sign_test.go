package slacksim

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// Slack's documented example (SLACK_FACTS.md §2).
const (
	vectorSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	vectorTS     = 1531420618
	vectorBody   = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	vectorSig    = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
)

func TestSignMatchesSlackExample(t *testing.T) {
	if got := Sign(vectorSecret, time.Unix(vectorTS, 0), []byte(vectorBody)); got != vectorSig {
		t.Fatalf("Sign = %s, want %s", got, vectorSig)
	}
}

func TestSignRequestSetsBothHeaders(t *testing.T) {
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/slack/commands", nil)
	if err != nil {
		t.Fatal(err)
	}
	SignRequest(req, vectorSecret, time.Unix(vectorTS, 0), []byte(vectorBody))
	if got := req.Header.Get("X-Slack-Request-Timestamp"); got != strconv.Itoa(vectorTS) {
		t.Errorf("timestamp header = %q", got)
	}
	if got := req.Header.Get("X-Slack-Signature"); got != vectorSig {
		t.Errorf("signature header = %q", got)
	}
}

func TestVerify(t *testing.T) {
	now := time.Unix(vectorTS, 0)
	body := []byte(vectorBody)
	headers := func(ts int64, sig string) http.Header {
		h := http.Header{}
		if ts != 0 {
			h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
		}
		if sig != "" {
			h.Set(HeaderSignature, sig)
		}
		return h
	}
	signedAt := func(ts int64) http.Header { return headers(ts, Sign(vectorSecret, time.Unix(ts, 0), body)) }
	badTS := http.Header{}
	badTS.Set(HeaderTimestamp, "soon")
	badTS.Set(HeaderSignature, vectorSig)

	tests := []struct {
		name   string
		h      http.Header
		secret string
		body   []byte
		ok     bool
	}{
		{"the documented example verifies at its own time", headers(vectorTS, vectorSig), vectorSecret, body, true},
		{"exactly five minutes old is accepted", signedAt(vectorTS - 300), vectorSecret, body, true},
		{"exactly five minutes ahead is accepted", signedAt(vectorTS + 300), vectorSecret, body, true},
		{"older than five minutes is rejected", signedAt(vectorTS - 301), vectorSecret, body, false},
		{"more than five minutes ahead is rejected", signedAt(vectorTS + 301), vectorSecret, body, false},
		{"a far-past timestamp does not overflow", signedAt(-1 << 62), vectorSecret, body, false},
		{"a changed body is rejected", headers(vectorTS, vectorSig), vectorSecret, append([]byte(vectorBody), ' '), false},
		{"another secret is rejected", headers(vectorTS, vectorSig), "other", body, false},
		{"an empty secret rejects everything", headers(vectorTS, Sign("", now, body)), "", body, false},
		{"a missing signature is rejected", headers(vectorTS, ""), vectorSecret, body, false},
		{"a missing timestamp is rejected", headers(0, vectorSig), vectorSecret, body, false},
		{"a non-numeric timestamp is rejected", badTS, vectorSecret, body, false},
		{"a signature without v0= is rejected", headers(vectorTS, vectorSig[3:]), vectorSecret, body, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := verify(tt.h, tt.body, tt.secret, now)
			if (err == nil) != tt.ok {
				t.Fatalf("verify = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
