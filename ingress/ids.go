package ingress

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// MaxIDLen bounds the ids ackd keys receipts and outbox rows on (event_id,
// trigger_id, and the channel and ts of a message key). Slack's are short
// ASCII: event_id "Ev0A1B2C3D4E" is about 12 bytes, a trigger_id
// "398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c" 57, a channel id
// 9–11 and a ts 17. 128 leaves more than twice the longest seen for Slack to
// grow into, while an id still fits comfortably in a log line, a primary key
// and an Idempotency-Key header.
const MaxIDLen = 128

// checkID reports why v cannot be an id Slack sent, or nil. Ids must be
// printable ASCII without spaces (0x21–0x7E): invalid UTF-8 would be replaced
// by U+FFFD when decoded from JSON, so two different ids would collide in one
// receipt; a control character (NUL included) makes the forward's
// Idempotency-Key header invalid; an over-long one is stored and sent as is.
// rawInvalid says the raw JSON the value came from was not valid UTF-8 (the
// decoder hides that), so the reason can name it.
func checkID(name, v string, rawInvalid bool) error {
	if len(v) > MaxIDLen {
		return malformed("%s is %d bytes, over the %d that a Slack id can be", name, len(v), MaxIDLen)
	}
	if rawInvalid || !utf8.ValidString(v) {
		return malformed("%s is not valid UTF-8", name)
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c < 0x20 || c == 0x7f:
			return malformed("%s contains the control character %s at byte %d", name, strconv.QuoteRune(rune(c)), i)
		case c == ' ' || c > 0x7e:
			return malformed("%s contains %s at byte %d: Slack ids are printable ASCII", name, strconv.QuoteRune([]rune(v[i:])[0]), i)
		}
	}
	return nil
}

// rawIDInvalid reports whether the raw JSON of the top-level string field
// key of obj is not valid UTF-8. It parses only when obj as a whole is
// invalid, which Slack never sends.
func rawIDInvalid(obj []byte, key string) bool {
	if utf8.Valid(obj) {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return false
	}
	return !utf8.Valid(m[key])
}
