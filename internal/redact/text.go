package redact

import (
	"regexp"
	"strings"
)

// minKnown is the shortest known secret masked wherever it appears: a
// shorter one ("abc") would mask ordinary words. The shape backstop still
// catches Slack's tokens of any length.
const minKnown = 8

// tokenShape is any string shaped like a Slack token: bot, user, app
// config and refresh tokens (xox?-…), app-level tokens (xapp-…) and a
// workflow step's execution token (xwfp-…).
var tokenShape = regexp.MustCompile(`\b(xox[a-z]|xapp|xwfp)-[A-Za-z0-9._-]+`)

// Text masks, in a text ackd stores, logs or shows (an error, a result, an
// attempt's note), every one of known (the row's execution token, the bot
// token, ackd's own secrets) and anything shaped like a Slack token. A
// mask keeps a token's kind ("xwfp-…(masked)") and nothing else, so the
// text stays readable; known secrets shorter than 8 characters are left
// to the shape backstop.
func Text(s string, known ...string) string {
	for _, k := range known {
		if len(k) >= minKnown && strings.Contains(s, k) {
			s = strings.ReplaceAll(s, k, mask(k))
		}
	}
	if !strings.Contains(s, "x") {
		return s
	}
	return tokenShape.ReplaceAllStringFunc(s, mask)
}

// mask is a secret's replacement: its token prefix when it has one.
func mask(secret string) string {
	if m := tokenShape.FindStringSubmatch(secret); m != nil && strings.HasPrefix(secret, m[0][:len(m[1])]) {
		return m[1] + "-…(masked)"
	}
	return "…(masked)"
}

// Texts applies Text, with no known secrets, to each text in place: for
// showing what an older ackd stored before it masked its texts.
func Texts(texts ...*string) {
	for _, t := range texts {
		*t = Text(*t)
	}
}
