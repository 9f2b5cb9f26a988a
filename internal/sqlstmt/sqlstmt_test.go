package sqlstmt

import (
	"reflect"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string
		err        bool
	}{
		{"two statements and comments", "-- a; comment\nCREATE TABLE a (x); -- b;\nSELECT 1;", []string{"CREATE TABLE a (x)", "SELECT 1"}, false},
		{"semicolons in quotes", `SELECT 'a;b', "c;d", 'it''s;';`, []string{`SELECT 'a;b', "c;d", 'it''s;'`}, false},
		{"a dollar body", "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1; $$;\nSELECT 2", []string{"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1; $$", "SELECT 2"}, false},
		{"a tagged dollar body", "DO $x$ BEGIN PERFORM 1; END $x$;", []string{"DO $x$ BEGIN PERFORM 1; END $x$"}, false},
		{"a positional parameter is not a body", "SELECT $1; SELECT 2", []string{"SELECT $1", "SELECT 2"}, false},
		{"an unterminated quote", "SELECT 'a", nil, true},
		{"a trigger", "CREATE TRIGGER t AFTER INSERT ON a BEGIN SELECT 1; SELECT 2; END; SELECT 3",
			[]string{"CREATE TRIGGER t AFTER INSERT ON a BEGIN SELECT 1; SELECT 2; END", "SELECT 3"}, false},
		{"PostgreSQL's trigger has no body", "CREATE TRIGGER t AFTER UPDATE ON a FOR EACH ROW EXECUTE FUNCTION f(); SELECT 1",
			[]string{"CREATE TRIGGER t AFTER UPDATE ON a FOR EACH ROW EXECUTE FUNCTION f()", "SELECT 1"}, false},
		{"a trigger cut short", "CREATE TRIGGER t AFTER INSERT ON a BEGIN SELECT 1;", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Split(tc.text)
			if (err != nil) != tc.err || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Split = %q, %v; want %q (error %v)", got, err, tc.want, tc.err)
			}
		})
	}
}
