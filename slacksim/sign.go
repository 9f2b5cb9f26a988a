package slacksim

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/ackd/ackd/ingress"
	"github.com/ackd/ackd/internal/slacksig"
)

// Header names Slack uses to sign and to mark retries.
const (
	HeaderTimestamp   = "X-Slack-Request-Timestamp"
	HeaderSignature   = "X-Slack-Signature"
	HeaderRetryNum    = "X-Slack-Retry-Num"
	HeaderRetryReason = "X-Slack-Retry-Reason"
)

// MaxSkew is how far a request timestamp may be from the receiver's clock,
// in either direction, before the request is rejected as a replay.
const MaxSkew = slacksig.MaxSkew

// Sign returns Slack's v0 signature of body sent at ts:
// "v0=" + hex(HMAC-SHA256(secret, "v0:" + unix(ts) + ":" + body)).
func Sign(secret string, ts time.Time, body []byte) string {
	return slacksig.Sign(secret, strconv.FormatInt(ts.Unix(), 10), body)
}

// SignRequest sets X-Slack-Request-Timestamp and X-Slack-Signature on req
// for body sent at ts. body must be exactly the bytes req will carry.
func SignRequest(req *http.Request, secret string, ts time.Time, body []byte) {
	unix := strconv.FormatInt(ts.Unix(), 10)
	req.Header.Set(HeaderTimestamp, unix)
	req.Header.Set(HeaderSignature, slacksig.Sign(secret, unix, body))
}

var errNoSecret = errors.New("no signing secret")

// verify checks a request exactly as ackd's ingress does (ingress.Verifier),
// so the ceiling measures the same verification code; an empty secret
// rejects everything.
func verify(h http.Header, body []byte, secret string, now time.Time) error {
	if secret == "" {
		return errNoSecret
	}
	return ingress.NewVerifier(secret, func() time.Time { return now }).Verify(h, body)
}
