package slacksim

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"time"
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
const MaxSkew = 5 * time.Minute

// Sign returns Slack's v0 signature of body sent at ts:
// "v0=" + hex(HMAC-SHA256(secret, "v0:" + unix(ts) + ":" + body)).
func Sign(secret string, ts time.Time, body []byte) string {
	return sign(secret, strconv.FormatInt(ts.Unix(), 10), body)
}

func sign(secret, ts string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:"))
	mac.Write([]byte(ts))
	mac.Write([]byte(":"))
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// SignRequest sets X-Slack-Request-Timestamp and X-Slack-Signature on req
// for body sent at ts. body must be exactly the bytes req will carry.
func SignRequest(req *http.Request, secret string, ts time.Time, body []byte) {
	unix := strconv.FormatInt(ts.Unix(), 10)
	req.Header.Set(HeaderTimestamp, unix)
	req.Header.Set(HeaderSignature, sign(secret, unix, body))
}

var (
	errNoSecret     = errors.New("no signing secret")
	errMissing      = errors.New("missing signature headers")
	errBadTimestamp = errors.New("bad timestamp")
	errStale        = errors.New("timestamp outside the 5-minute window")
	errBadSignature = errors.New("signature mismatch")
)

// verify checks a request the way a receiver must: both headers present, the
// timestamp within MaxSkew of now, and the signature equal in constant time.
func verify(h http.Header, body []byte, secret string, now time.Time) error {
	if secret == "" {
		return errNoSecret
	}
	ts, got := h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if ts == "" || got == "" {
		return errMissing
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errBadTimestamp
	}
	// Compare bounds in seconds: subtracting an attacker-chosen value
	// (or converting it to a time.Duration) could overflow.
	lo, hi := now.Add(-MaxSkew).Unix(), now.Add(MaxSkew).Unix()
	if unix < lo || unix > hi {
		return errStale
	}
	if !hmac.Equal([]byte(sign(secret, ts, body)), []byte(got)) {
		return errBadSignature
	}
	return nil
}
