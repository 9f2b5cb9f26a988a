package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
)

// Probe reads the schema version of the database at path without creating,
// migrating or writing anything (`ackd config check`). A missing file is
// os.ErrNotExist (serve would create it).
func Probe(ctx context.Context, path string) (int, error) {
	if _, err := os.Stat(path); err != nil {
		return 0, err
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "query_only(1)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return v, nil
}

// Settings are what ackd's startup line shows of this engine, as slog
// key-value pairs: synchronous (FULL: an ack survives power loss; NORMAL: a
// process crash only) and the group commit's delay.
func (s *Store) Settings(context.Context) []any {
	return []any{"synchronous", s.opts.Synchronous, "commit_delay", s.opts.CommitDelay.String()}
}
