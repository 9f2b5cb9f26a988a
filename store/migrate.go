package store

import (
	"fmt"
	"regexp"
	"strconv"
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
