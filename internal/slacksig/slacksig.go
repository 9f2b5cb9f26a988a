// Package slacksig is Slack's v0 request signature, in one place: the
// daemon verifies with it, slacksim signs with it, and the forward effect
// signs ackd's own requests to a team's handler with the same scheme.
package slacksig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// MaxSkew is how far a request's timestamp may be from the receiver's
// clock, either way, before it is rejected as a replay.
const MaxSkew = 5 * time.Minute

// Sign returns "v0=" + hex(HMAC-SHA256(secret, "v0:" + ts + ":" + body)),
// where ts is the unix-seconds timestamp header exactly as sent.
func Sign(secret, ts string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:"))
	mac.Write([]byte(ts))
	mac.Write([]byte(":"))
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}
