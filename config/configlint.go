package config

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// lintTOML checks a config document against Config's own toml tags before
// it is decoded, so that a mistake is told in the operator's words: an
// unknown key with the nearest known one ("did you mean interval?"), a value
// of the wrong kind with the key, the line and what was expected ("must be a
// whole number without quotes, e.g. 25, not a string"). It reads the struct
// by reflection, so a section added to Config is checked with no code here.
// A document that does not parse is left to the decoder (see decodeError).
func lintTOML(b []byte) error {
	var errs []error
	p := &unstable.Parser{}
	p.Reset(b)
	table := reflect.TypeFor[Config]()
	tableName := ""
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			path, key := keyOf(e.Key())
			line := lineOf(p, key)
			t, err := walkKey(reflect.TypeFor[Config](), path, "")
			if err != nil {
				errs = append(errs, fmt.Errorf("line %d: %w", line, err))
				table = nil // its keys are not checked: the table itself is wrong
				continue
			}
			if e.Kind == unstable.ArrayTable {
				if t.Kind() != reflect.Slice || t.Elem().Kind() != reflect.Struct {
					errs = append(errs, fmt.Errorf("line %d: [[%s]] is not a list of tables; write [%s]", line, strings.Join(path, "."), strings.Join(path, ".")))
					table = nil
					continue
				}
				t = t.Elem()
			} else if t.Kind() != reflect.Struct && t.Kind() != reflect.Map {
				errs = append(errs, fmt.Errorf("line %d: [%s] is not a table: %s", line, strings.Join(path, "."), expected(t)))
				table = nil
				continue
			}
			table, tableName = t, strings.Join(path, ".")
		case unstable.KeyValue:
			if table == nil {
				continue
			}
			path, key := keyOf(e.Key())
			line := lineOf(p, key)
			t, err := walkKey(table, path, tableName)
			if err != nil {
				errs = append(errs, fmt.Errorf("line %d: %w", line, err))
				continue
			}
			if msg := kindMismatch(t, e.Value()); msg != "" {
				full := strings.Join(append(splitName(tableName), path...), ".")
				errs = append(errs, fmt.Errorf("line %d: key %q must be %s, not %s: %s", line, full, expected(t), msg,
					strings.TrimSpace(string(p.Raw(e.Raw)))))
			}
		}
	}
	if p.Error() != nil {
		return nil // the decoder reports it, with its position
	}
	return errors.Join(errs...)
}

func splitName(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ".")
}

// keyOf is a key's parts and its first key node (for the line).
func keyOf(it unstable.Iterator) ([]string, *unstable.Node) {
	var parts []string
	var first *unstable.Node
	for it.Next() {
		if first == nil {
			first = it.Node()
		}
		parts = append(parts, string(it.Node().Data))
	}
	return parts, first
}

func lineOf(p *unstable.Parser, n *unstable.Node) int {
	if n == nil || n.Raw.Length == 0 && n.Raw.Offset == 0 {
		return 0
	}
	return p.Shape(n.Raw).Start.Line
}

// tomlFields maps the toml keys of struct t to their types.
func tomlFields(t reflect.Type) (names []string, types map[string]reflect.Type) {
	types = map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		names = append(names, name)
		types[name] = deref(f.Type)
	}
	return names, types
}

// walkKey follows a dotted key from struct t (the table named in) and
// returns the type at its end, or an unknown-key error naming the nearest
// known key.
func walkKey(t reflect.Type, path []string, in string) (reflect.Type, error) {
	for i, k := range path {
		if t.Kind() == reflect.Map && deref(t.Elem()).Kind() == reflect.Struct {
			t = deref(t.Elem()) // a table of named tables ([route.inputs.NAME]): k is a free name
			continue
		}
		if t.Kind() == reflect.Map || t.Kind() == reflect.Interface {
			return t, nil
		}
		if t.Kind() != reflect.Struct {
			return nil, fmt.Errorf("%s is not a table: %s", strings.Join(append(splitName(in), path[:i]...), "."), expected(t))
		}
		names, types := tomlFields(t)
		ft, ok := types[k]
		if !ok {
			full := strings.Join(append(splitName(in), path[:i+1]...), ".")
			where := "at the top level"
			if parent := strings.Join(append(splitName(in), path[:i]...), "."); parent != "" {
				where = "in [" + parent + "]"
			}
			if s := nearest(k, names); s != "" {
				return nil, fmt.Errorf("unknown key %q: did you mean %q?", full, s)
			}
			return nil, fmt.Errorf("unknown key %q; the keys %s are %s", full, where, strings.Join(names, ", "))
		}
		t = ft
		if i < len(path)-1 && t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct {
			t = t.Elem()
		}
	}
	return t, nil
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// deref is t without its pointers (an optional section, *OAuthConfig, is
// written like OAuthConfig), and a slice of pointers like a slice of values.
func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Pointer {
		return reflect.SliceOf(deref(t.Elem()))
	}
	return t
}

// expected says in words what a value of type t looks like.
func expected(t reflect.Type) string {
	if t == reflect.TypeFor[Duration]() {
		return `a duration in quotes, e.g. "5s", "10m" or "48h"`
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		return "a string in quotes"
	}
	switch t.Kind() {
	case reflect.String:
		return `a string in quotes, e.g. "…"`
	case reflect.Bool:
		return "true or false, without quotes"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number without quotes, e.g. 25"
	case reflect.Float32, reflect.Float64:
		return "a number without quotes, e.g. 0.5"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Struct {
			return "a list of tables, each written [[…]]"
		}
		switch e := t.Elem(); {
		case e.Kind() == reflect.String:
			return `a list in brackets of strings in quotes, e.g. ["a", "b"]`
		case e.Kind() >= reflect.Int && e.Kind() <= reflect.Float64:
			return "a list in brackets of numbers, e.g. [1, 2]"
		default:
			return "a list in brackets"
		}
	case reflect.Struct, reflect.Map:
		return "a table"
	}
	return "a value of another kind"
}

// kindMismatch says what was written ("a string", "a number"…) when v
// cannot be decoded into t, or "" when it can.
func kindMismatch(t reflect.Type, v *unstable.Node) string {
	got := map[unstable.Kind]string{
		unstable.String: "a string", unstable.Integer: "a whole number", unstable.Float: "a number",
		unstable.Bool: "true/false", unstable.Array: "a list", unstable.InlineTable: "a table",
		unstable.LocalDate: "a date", unstable.LocalTime: "a time", unstable.LocalDateTime: "a date and time",
		unstable.DateTime: "a date and time",
	}[v.Kind]
	ok := true
	switch {
	case t.Kind() == reflect.Interface || t.Kind() == reflect.Map:
	case reflect.PointerTo(t).Implements(textUnmarshaler):
		ok = v.Kind == unstable.String
	case t.Kind() == reflect.String:
		ok = v.Kind == unstable.String
	case t.Kind() == reflect.Bool:
		ok = v.Kind == unstable.Bool
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		ok = v.Kind == unstable.Integer
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		ok = v.Kind == unstable.Integer || v.Kind == unstable.Float
	case t.Kind() == reflect.Struct:
		ok = v.Kind == unstable.InlineTable
	case t.Kind() == reflect.Slice:
		if v.Kind != unstable.Array {
			ok = false
			break
		}
		it := v.Children()
		for it.Next() {
			if m := kindMismatch(t.Elem(), it.Node()); m != "" {
				return "a list holding " + m
			}
		}
	}
	if ok {
		return ""
	}
	return got
}

// nearest is the name in names closest to s, if it is close enough to be
// a typo of it (at most 2 edits, fewer than half of s), or "".
// Nearest is the name among names closest to s, if one is close enough to
// be what s meant ("did you mean …?"), else "".
func Nearest(s string, names []string) string { return nearest(s, names) }

func nearest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(s, n); d < bestD && d*2 < len(s) {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and swaps of two neighbours each cost 1.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// decodeError words a decoder error for the operator: the line, the key,
// and no Go type names.
func decodeError(err error) error {
	var de *toml.DecodeError
	if !errors.As(err, &de) {
		return err
	}
	row, _ := de.Position()
	msg := strings.TrimPrefix(de.Error(), "toml: ")
	switch {
	case strings.Contains(msg, "basic strings cannot have new lines"), strings.Contains(msg, "unterminated basic string"):
		msg = `a string is not closed: its closing " is missing on this line`
	case strings.Contains(msg, "unterminated literal string"), strings.Contains(msg, "literal strings cannot have new lines"):
		msg = `a string is not closed: its closing ' is missing on this line`
	}
	key := strings.Join(de.Key(), ".")
	if key == "" {
		return fmt.Errorf("line %d: %s", row, msg)
	}
	if t, err := walkKey(reflect.TypeFor[Config](), de.Key(), ""); err == nil {
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct {
			t = t.Elem()
		}
		if t == reflect.TypeFor[Duration]() || strings.Contains(msg, "duration") {
			return fmt.Errorf("line %d: key %q must be %s: %s", row, key, expected(reflect.TypeFor[Duration]()), strings.TrimPrefix(msg, "time: "))
		}
	}
	return fmt.Errorf("line %d: key %q: %s", row, key, msg)
}
