// Package sqlstmt splits the text of a schema migration into statements,
// for tests that look at each statement of a section on its own (its
// query plan, what it builds). It knows what ackd's schema files use:
// '…' and "…" quotes (a doubled quote inside), -- comments, and
// PostgreSQL's $$…$$ and $tag$…$tag$ bodies; it refuses what it does not
// know (SQLite's CREATE TRIGGER … BEGIN … END) rather than split it wrongly.
package sqlstmt

import (
	"errors"
	"regexp"
	"strings"
)

var dollarTag = regexp.MustCompile(`^\$[A-Za-z_]*\$`)

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
			flush()
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	for _, st := range out {
		if regexp.MustCompile(`(?i)\bCREATE\s+(TEMP\s+|TEMPORARY\s+)?TRIGGER\b`).MatchString(st) && !strings.Contains(st, "$") {
			return nil, errors.New("sqlstmt: a trigger's BEGIN … END is not split correctly; teach Split to keep it whole")
		}
	}
	return out, nil
}
