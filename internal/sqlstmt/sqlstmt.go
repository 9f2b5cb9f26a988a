// Package sqlstmt splits the text of a schema migration into statements,
// for tests that look at each statement of a section on its own (its
// query plan, what it builds). It knows what ackd's schema files use:
// '…' and "…" quotes (a doubled quote inside), -- comments, and
// PostgreSQL's $$…$$ and $tag$…$tag$ bodies, and SQLite's CREATE TRIGGER …
// BEGIN … END (kept whole up to the ";" after its END: a statement of its
// body must not itself end in END, as a CASE … END would). It refuses a
// trigger it cannot see the end of rather than split it wrongly.
package sqlstmt

import (
	"errors"
	"regexp"
	"strings"
)

var (
	dollarTag   = regexp.MustCompile(`^\$[A-Za-z_]*\$`)
	trigger     = regexp.MustCompile(`(?i)^\s*CREATE\s+(TEMP\s+|TEMPORARY\s+)?TRIGGER\b`)
	triggerBody = regexp.MustCompile(`(?is)\bBEGIN\b.*`)
	bodyEnd     = regexp.MustCompile(`(?i)\bEND\s*$`)
)

// Split returns the statements of text, without comments, trimmed, in order.
func Split(text string) ([]string, error) {
	var out []string
	var cur strings.Builder
	flush := func() {
		if st := strings.TrimSpace(cur.String()); st != "" {
			out = append(out, st)
		}
		cur.Reset()
	}
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '-' && strings.HasPrefix(text[i:], "--"):
			for i < len(text) && text[i] != '\n' {
				i++
			}
			cur.WriteByte('\n')
		case c == '\'' || c == '"':
			j := i + 1
			for ; j < len(text); j++ {
				if text[j] == c {
					if j+1 < len(text) && text[j+1] == c {
						j++ // a doubled quote
						continue
					}
					break
				}
			}
			if j >= len(text) {
				return nil, errors.New("sqlstmt: unterminated quote")
			}
			cur.WriteString(text[i : j+1])
			i = j
		case c == '$' && dollarTag.MatchString(text[i:]):
			tag := dollarTag.FindString(text[i:])
			end := strings.Index(text[i+len(tag):], tag)
			if end < 0 {
				return nil, errors.New("sqlstmt: unterminated " + tag + " body")
			}
			end += i + 2*len(tag)
			cur.WriteString(text[i:end])
			i = end - 1
		case c == ';':
			if st := cur.String(); trigger.MatchString(st) && !strings.Contains(st, "$") &&
				triggerBody.MatchString(st) && !bodyEnd.MatchString(st) {
				cur.WriteByte(c) // a statement of the trigger's body
				continue
			}
			flush()
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	for _, st := range out {
		if trigger.MatchString(st) && !strings.Contains(st, "$") && triggerBody.MatchString(st) && !bodyEnd.MatchString(st) {
			return nil, errors.New("sqlstmt: a trigger whose BEGIN has no END")
		}
	}
	return out, nil
}
