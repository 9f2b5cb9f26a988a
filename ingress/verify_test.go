package ingress_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/ingress"
)

// Slack's documented signing example
// (https://api.slack.com/authentication/verifying-requests-from-slack).
const (
	verifyExampleSecret    = "8f742231b10e8888abcd99yyyzzz85a5"
	verifyExampleTimestamp = 1531420618
	verifyExampleBody      = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	verifyExampleSignature = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
)

// verifyFlipByte returns s with the byte at i replaced by a different one of the
// same kind (a digit stays a digit, a hex letter a hex letter).
func verifyFlipByte(s string, i int) string {
	b := []byte(s)
	switch c := b[i]; {
	case c == '9':
		b[i] = '8'
	case c >= '0' && c < '9':
		b[i] = c + 1
	case c == 'f':
		b[i] = 'e'
	default:
		b[i] = c + 1
	}
	return string(b)
}

func verifyHeaders(ts, sig string) http.Header {
	h := http.Header{}
	if ts != "" {
		h.Set("X-Slack-Request-Timestamp", ts)
	}
	if sig != "" {
		h.Set("X-Slack-Signature", sig)
	}
	return h
}

func TestVerifier(t *testing.T) {
	exampleTS := strconv.Itoa(verifyExampleTimestamp)
	at := time.Unix(verifyExampleTimestamp, 0)
	sigHex := strings.TrimPrefix(verifyExampleSignature, "v0=")
	const maxTS = math.MaxInt64
	const wrapsToZero = int64(1) << 55
	if n := wrapsToZero; time.Duration(n)*time.Second != 0 {
		t.Fatal("2^55 s as a Duration does not wrap to 0; the overflow cases below test nothing")
	}

	for _, tc := range []struct {
		name string
		now  time.Time
		ts   string
		sig  string
		body string
		want error // nil: verifies
	}{
		{name: "Slack's documented example verifies", now: at, ts: exampleTS, sig: verifyExampleSignature, body: verifyExampleBody},

		// One changed byte anywhere fails.
		{name: "first byte of body changed", now: at, ts: exampleTS, sig: verifyExampleSignature,
			body: verifyFlipByte(verifyExampleBody, 0), want: ingress.ErrSignatureMismatch},
		{name: "last byte of body changed", now: at, ts: exampleTS, sig: verifyExampleSignature,
			body: verifyFlipByte(verifyExampleBody, len(verifyExampleBody)-1), want: ingress.ErrSignatureMismatch},
		{name: "body with a byte appended", now: at, ts: exampleTS, sig: verifyExampleSignature,
			body: verifyExampleBody + "&", want: ingress.ErrSignatureMismatch},
		{name: "empty body", now: at, ts: exampleTS, sig: verifyExampleSignature, body: "", want: ingress.ErrSignatureMismatch},
		{name: "timestamp changed by one second", now: at, ts: verifyFlipByte(exampleTS, len(exampleTS)-1),
			sig: verifyExampleSignature, body: verifyExampleBody, want: ingress.ErrSignatureMismatch},
		{name: "first hex digit of signature changed", now: at, ts: exampleTS,
			sig: "v0=" + verifyFlipByte(sigHex, 0), body: verifyExampleBody, want: ingress.ErrSignatureMismatch},
		{name: "last hex digit of signature changed", now: at, ts: exampleTS,
			sig: "v0=" + verifyFlipByte(sigHex, len(sigHex)-1), body: verifyExampleBody, want: ingress.ErrSignatureMismatch},
		{name: "signature made with another secret", now: at, ts: exampleTS,
			sig: sign(verifyExampleSecret+"x", verifyExampleTimestamp, []byte(verifyExampleBody)), body: verifyExampleBody,
			want: ingress.ErrSignatureMismatch},

		// The timestamp must be within 5 minutes of now, either way.
		{name: "4 minutes old passes", now: at.Add(4 * time.Minute), ts: exampleTS, sig: verifyExampleSignature, body: verifyExampleBody},
		{name: "4 minutes ahead passes", now: at.Add(-4 * time.Minute), ts: exampleTS, sig: verifyExampleSignature, body: verifyExampleBody},
		{name: "exactly 5 minutes old passes", now: at.Add(5 * time.Minute), ts: exampleTS, sig: verifyExampleSignature, body: verifyExampleBody},
		{name: "5 minutes and 1 second old fails", now: at.Add(5*time.Minute + time.Second), ts: exampleTS,
			sig: verifyExampleSignature, body: verifyExampleBody, want: ingress.ErrStaleTimestamp},
		{name: "6 minutes old fails", now: at.Add(6 * time.Minute), ts: exampleTS, sig: verifyExampleSignature,
			body: verifyExampleBody, want: ingress.ErrStaleTimestamp},
		{name: "6 minutes ahead fails", now: at.Add(-6 * time.Minute), ts: exampleTS, sig: verifyExampleSignature,
			body: verifyExampleBody, want: ingress.ErrStaleTimestamp},

		// Missing headers.
		{name: "missing timestamp header", now: at, sig: verifyExampleSignature, body: verifyExampleBody, want: ingress.ErrMissingHeaders},
		{name: "missing signature header", now: at, ts: exampleTS, body: verifyExampleBody, want: ingress.ErrMissingHeaders},
		{name: "missing both headers", now: at, body: verifyExampleBody, want: ingress.ErrMissingHeaders},

		// Malformed signatures.
		{name: "signature without v0= prefix", now: at, ts: exampleTS, sig: sigHex, body: verifyExampleBody, want: ingress.ErrMalformedSig},
		{name: "signature with v1= prefix", now: at, ts: exampleTS, sig: "v1=" + sigHex, body: verifyExampleBody, want: ingress.ErrMalformedSig},
		{name: "signature with non-hex digits", now: at, ts: exampleTS, sig: "v0=" + strings.Repeat("zz", 32),
			body: verifyExampleBody, want: ingress.ErrMalformedSig},
		{name: "signature one hex digit short", now: at, ts: exampleTS, sig: verifyExampleSignature[:len(verifyExampleSignature)-1],
			body: verifyExampleBody, want: ingress.ErrMalformedSig},
		{name: "signature one byte too long", now: at, ts: exampleTS, sig: verifyExampleSignature + "00",
			body: verifyExampleBody, want: ingress.ErrMalformedSig},
		{name: "signature v0= alone", now: at, ts: exampleTS, sig: "v0=", body: verifyExampleBody, want: ingress.ErrMalformedSig},

		// Timestamps that are not small unix times.
		{name: "timestamp not a number", now: at, ts: "yesterday", sig: verifyExampleSignature, body: verifyExampleBody, want: ingress.ErrBadTimestamp},
		{name: "timestamp with fraction", now: at, ts: exampleTS + ".5", sig: verifyExampleSignature, body: verifyExampleBody, want: ingress.ErrBadTimestamp},
		{name: "timestamp beyond int64", now: at, ts: "99999999999999999999", sig: verifyExampleSignature, body: verifyExampleBody, want: ingress.ErrBadTimestamp},
		{name: "largest int64 timestamp correctly signed does not overflow into the window", now: at,
			ts: strconv.FormatInt(maxTS, 10), sig: sign(verifyExampleSecret, maxTS, []byte(verifyExampleBody)),
			body: verifyExampleBody, want: ingress.ErrStaleTimestamp},
		{name: "smallest int64 timestamp correctly signed does not overflow into the window", now: at,
			ts: strconv.FormatInt(math.MinInt64, 10), sig: sign(verifyExampleSecret, math.MinInt64, []byte(verifyExampleBody)),
			body: verifyExampleBody, want: ingress.ErrStaleTimestamp},
		// 2^55 s is 1953125·2^64 ns: converted to a time.Duration it wraps
		// to exactly 0, which a naive skew check would accept.
		{name: "timestamp 2^55 seconds ahead does not wrap into the window", now: at,
			ts:   strconv.FormatInt(verifyExampleTimestamp+wrapsToZero, 10),
			sig:  sign(verifyExampleSecret, verifyExampleTimestamp+wrapsToZero, []byte(verifyExampleBody)),
			body: verifyExampleBody, want: ingress.ErrStaleTimestamp},
		{name: "timestamp 2^55 seconds old does not wrap into the window", now: at,
			ts:   strconv.FormatInt(verifyExampleTimestamp-wrapsToZero, 10),
			sig:  sign(verifyExampleSecret, verifyExampleTimestamp-wrapsToZero, []byte(verifyExampleBody)),
			body: verifyExampleBody, want: ingress.ErrStaleTimestamp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := ingress.NewVerifier(verifyExampleSecret, func() time.Time { return tc.now })
			err := v.Verify(verifyHeaders(tc.ts, tc.sig), []byte(tc.body))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Verify = %v, want it to verify", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

// The clock is read at every call, not captured at construction: a verifier
// built long ago still rejects a request that is stale now.
func TestVerifierReadsTheClockPerRequest(t *testing.T) {
	now := time.Unix(verifyExampleTimestamp, 0)
	v := ingress.NewVerifier(verifyExampleSecret, func() time.Time { return now })
	h := verifyHeaders(strconv.Itoa(verifyExampleTimestamp), verifyExampleSignature)
	if err := v.Verify(h, []byte(verifyExampleBody)); err != nil {
		t.Fatalf("at the example's time: %v", err)
	}
	now = now.Add(6 * time.Minute)
	if err := v.Verify(h, []byte(verifyExampleBody)); !errors.Is(err, ingress.ErrStaleTimestamp) {
		t.Fatalf("6 minutes later: Verify = %v, want %v", err, ingress.ErrStaleTimestamp)
	}
}

// sign returns Slack's v0 signature of body at ts.
func sign(secret string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%d:", ts)
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}
