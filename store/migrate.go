package store

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var migrateMarker = regexp.MustCompile(`(?m)^-- migrate: (\d+)\s*$`)

// Migration is one "-- migrate: N" section of an engine's schema file.
type Migration struct {
	Version int
	SQL     string
}

// Migrations splits a schema at its "-- migrate: N" markers, which must
// number 1, 2, 3… in order. Each engine applies the sections newer than
// the database's version, each in its own transaction.
func Migrations(schema string) ([]Migration, error) {
	locs := migrateMarker.FindAllStringSubmatchIndex(schema, -1)
	if len(locs) == 0 {
		return nil, fmt.Errorf("schema has no \"-- migrate: N\" section")
	}
	var out []Migration
	for i, loc := range locs {
		v, _ := strconv.Atoi(schema[loc[2]:loc[3]])
		end := len(schema)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		if want := i + 1; v != want {
			return nil, fmt.Errorf("schema migration %d found where %d was expected", v, want)
		}
		out = append(out, Migration{Version: v, SQL: schema[loc[1]:end]})
	}
	return out, nil
}

// MigrationStep is one migration being applied, for Options.OnMigrate:
// called once as it begins (Done false) and once as it ends (Done true,
// with the time it held the database's write lock, or its table locks, and
// its error).
type MigrationStep struct {
	Version int
	Summary string
	Done    bool
	Took    time.Duration
	Err     error
}

// Pending is what a migration would do to a database: its version now and
// the sections newer than it, in order. Exists is false when there is no
// database yet (migrate would create it and apply every section).
type Pending struct {
	Exists  bool
	Current int
	Apply   []Migration
	// Rows counts, for each migration to apply that has a "-- rows:"
	// query (Migration.RowsSQL), the rows it would touch on this database
	// now (by version); a count that could not be taken is left out.
	Rows map[int]int64
}

// PendingFrom compares a database's version with the schema's sections. A
// database newer than the schema is an error, as it is for migrate.
func PendingFrom(schema string, exists bool, current int) (Pending, error) {
	ms, err := Migrations(schema)
	if err != nil {
		return Pending{}, err
	}
	if latest := ms[len(ms)-1].Version; current > latest {
		return Pending{}, fmt.Errorf("database schema version %d is newer than this ackd (%d)", current, latest)
	}
	p := Pending{Exists: exists, Current: current}
	for _, m := range ms {
		if m.Version > current {
			p.Apply = append(p.Apply, m)
		}
	}
	return p, nil
}

// Summary is a migration's first comment sentence, for `ackd migrate
// --dry-run`: what the section is for, in the schema author's words. The
// section's "-- cost:" and "-- rows:" lines are not part of it.
func (m Migration) Summary() string {
	var words []string
	for _, line := range strings.Split(m.SQL, "\n") {
		line = strings.TrimSpace(line)
		if line == "" && len(words) == 0 {
			continue
		}
		if _, ok := annotation(line); ok {
			continue
		}
		text, ok := strings.CutPrefix(line, "--")
		if !ok || strings.TrimSpace(text) == "" {
			break
		}
		words = append(words, strings.Fields(text)...)
	}
	s := strings.Join(words, " ")
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	if r := []rune(s); len(r) > 160 {
		s = string(r[:159]) + "…"
	}
	return s
}

// Cost is what the section costs a database that already holds rows, from
// its "-- cost:" lines: whether it works in place, which rows it reads or
// writes. Every section after the last release has one (a test holds the
// schema to it); `ackd migrate --dry-run` prints it.
func (m Migration) Cost() string { return m.annotations("cost") }

// RowsSQL is the section's "-- rows:" query, or "": one SELECT that counts,
// without writing, the rows the section would update on a database, so
// that the dry run can say how many.
func (m Migration) RowsSQL() string { return m.annotations("rows") }

// annotations joins the text of the section's "-- key: …" lines.
func (m Migration) annotations(key string) string {
	var parts []string
	for _, line := range strings.Split(m.SQL, "\n") {
		if a, ok := annotation(strings.TrimSpace(line)); ok && a[0] == key {
			parts = append(parts, a[1])
		}
	}
	return strings.Join(parts, " ")
}

// annotation splits a "-- cost: …" or "-- rows: …" line into its key and text.
func annotation(line string) ([2]string, bool) {
	for _, key := range []string{"cost", "rows"} {
		if text, ok := strings.CutPrefix(line, "-- "+key+":"); ok {
			return [2]string{key, strings.TrimSpace(text)}, true
		}
	}
	return [2]string{}, false
}
