package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
	"github.com/ackd/ackd/store/sqlite"
)

// checkDatabase says whether the database is reachable and how its schema
// compares with the binary's, without creating or migrating it.
func checkDatabase(ctx context.Context, db, schema string) config.Check {
	c := func(status, format string, a ...any) config.Check {
		return config.Check{Name: "database", Status: status, Detail: fmt.Sprintf(format, a...)}
	}
	where := config.RedactDB(db)
	if config.IsPostgres(db) {
		v, err := postgres.Probe(ctx, db)
		if err != nil {
			return c(config.CheckFail, "%v", err)
		}
		status, note := schemaNote(v, migrationsIn(postgres.Schema))
		return c(status, "%s: postgres reachable, %s", where, note)
	}
	v, err := sqlite.Probe(ctx, db)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		dir := filepath.Dir(db)
		st, derr := os.Stat(dir)
		if derr != nil && filepath.Clean(dir) == config.UnitStateDirectory {
			// Before the unit's first start: systemd creates its
			// StateDirectory= when it starts ackd (serve itself does not
			// create a missing directory).
			return c(config.CheckWarn, "%s: sqlite, not created yet; %s does not exist yet: ackd.service creates it at start (StateDirectory=ackd), "+
				"serve run by hand does not (install -d -m 0700 %s)", where, dir, dir)
		}
		if derr != nil || !st.IsDir() {
			return c(config.CheckFail, "%s does not exist, and neither does its directory %s: serve could not create it", where, dir)
		}
		return c(config.CheckOK, "%s: sqlite, not created yet (serve creates it in %s)", where, dir)
	case err != nil:
		return c(config.CheckFail, "%s: %v", where, err)
	}
	status, note := schemaNote(v, migrationsIn(schema))
	return c(status, "%s: sqlite, %s", where, note)
}

func migrationsIn(schema string) int {
	ms, err := store.Migrations(schema)
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}

func schemaNote(have, want int) (status, note string) {
	switch {
	case have == want:
		return config.CheckOK, fmt.Sprintf("schema %d (current)", have)
	case have == 0:
		return config.CheckOK, fmt.Sprintf("no schema yet (serve creates schema %d)", want)
	case have < want:
		return config.CheckOK, fmt.Sprintf("schema %d (serve migrates it to %d)", have, want)
	default:
		return config.CheckFail, fmt.Sprintf("schema %d is newer than this ackd (%d): serve would refuse it", have, want)
	}
}

// CheckConfig runs the checks serve runs before it serves, without serving
// or writing anything: config.CheckConfig's (routes, templates, secrets,
// credentials), then the database (reachable, and its schema version
// against the binary's) and, with sealed values in it, the token key. cfg
// is the configuration as serve would load it (file, environment, flags)
// and already validated; schema is SQLite's embedded schema text.
func CheckConfig(ctx context.Context, cfg config.Config, sec config.Secrets, schema string) []config.Check {
	out := config.CheckConfig(cfg, sec)
	out = append(out, checkDatabase(ctx, cfg.DB, schema))
	if c, ok := checkTokenKey(ctx, cfg, sec, schema); ok {
		out = append(out, c)
	}
	return out
}
