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
// A token ends in a letter or digit: a full stop after one is kept.
var tokenShape = regexp.MustCompile(`\b(xox[a-z]|xapp|xwfp)-[A-Za-z0-9._-]*[A-Za-z0-9]`)

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

// Stream masks a text that arrives in pieces (an agent's streamed
// answer) as Text masks it whole, with no known secrets: what it returns
// is settled, never taken back, and never holds a piece of a token. A
// piece is let out at once, but for a last word that is, or may become,
// a token ("xo", "xoxb-12"): that is held until the text goes on past it,
// or Flush.
type Stream struct {
	held     []rune
	prevWord bool // the last rune let out is a word character (\w)
}

// Add takes the next piece and returns the masked text settled by it.
func (m *Stream) Add(piece string) string {
	m.held = append(m.held, []rune(piece)...)
	// A token is its prefix and then only token runes: none can run
	// past the last other rune, so only the word after it may be held,
	// from the first place in it where a token could begin.
	start := len(m.held)
	for start > 0 && tokenRune(m.held[start-1]) {
		start--
	}
	hold := len(m.held)
	for p := start; p < len(m.held); p++ {
		before := m.prevWord
		if p > 0 {
			before = isWord(m.held[p-1])
		}
		if !before && mayBeToken(m.held[p:]) {
			hold = p
			break
		}
	}
	return m.let(hold)
}

// Flush returns the masked rest: the text has ended.
func (m *Stream) Flush() string { return m.let(len(m.held)) }

// let masks and returns the first n held runes. Text sees the rune
// before them as a word character or not, as the whole text would.
func (m *Stream) let(n int) string {
	if n == 0 {
		return ""
	}
	lead := " "
	if m.prevWord {
		lead = "a"
	}
	out := Text(lead + string(m.held[:n]))[1:]
	m.prevWord = isWord(m.held[n-1])
	m.held = append(m.held[:0], m.held[n:]...)
	return out
}

// tokenPrefixes are the starts of Slack's tokens; '?' is any letter.
var tokenPrefixes = []string{"xox?-", "xapp-", "xwfp-"}

// mayBeToken: s begins with a token's prefix, or is the start of one.
func mayBeToken(s []rune) bool {
	for _, pre := range tokenPrefixes {
		ok := true
		for i := 0; i < len(pre) && i < len(s); i++ {
			if c := pre[i]; c == '?' && (s[i] < 'a' || s[i] > 'z') || c != '?' && rune(c) != s[i] {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// tokenRune: a rune a token's body may hold.
func tokenRune(r rune) bool {
	return isWord(r) || r == '.' || r == '-'
}

// isWord: \w, as the \b of tokenShape reads it.
func isWord(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_'
}
