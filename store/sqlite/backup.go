package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// BackupInfo describes a backup Backup wrote.
type BackupInfo struct {
	Path          string // the backup file
	Bytes         int64
	SchemaVersion int
}

// Backup copies the database at src into dst while other processes keep
// writing it, the way an operator can trust with every request ackd
// recorded:
//
//   - consistent: VACUUM INTO reads one snapshot of the database (one read
//     transaction; WAL lets the daemon commit meanwhile), so the copy holds
//     every transaction committed before it began and no half of any other;
//   - private: the copy is written into a file created 0600 beside dst
//     (verification tokens and response_urls are inside), never readable
//     by others, whatever the umask;
//   - checked: PRAGMA integrity_check must answer "ok" on the copy;
//   - durable and whole: the copy is fsynced, then renamed (or linked) to
//     dst, and dst's directory fsynced, so dst is either absent or the
//     complete checked copy.
//
// dst must not exist unless overwrite is set. The source is opened
// read-only (mode=ro) and is never migrated or written. The copy is one
// file in rollback-journal mode; ackd serve puts it back in WAL mode when
// it opens it after a restore.
func Backup(ctx context.Context, src, dst string, overwrite bool) (BackupInfo, error) {
	info, err := backup(ctx, src, dst, overwrite)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("backup %s to %s: %w", src, dst, err)
	}
	return info, nil
}

func backup(ctx context.Context, src, dst string, overwrite bool) (BackupInfo, error) {
	if _, err := os.Stat(src); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return BackupInfo{}, errors.New("no database file here")
		}
		return BackupInfo{}, errors.Unwrap(err)
	}
	switch st, err := os.Stat(dst); {
	case err == nil && st.IsDir():
		return BackupInfo{}, errors.New("the target is a directory; name the backup file")
	case err == nil && !overwrite:
		return BackupInfo{}, errors.New("the target exists; choose a new name, or give --force to replace it")
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return BackupInfo{}, errors.Unwrap(err)
	}
	if same, _ := sameFile(src, dst); same {
		return BackupInfo{}, errors.New("the target is the database itself")
	}

	dir := filepath.Dir(dst)
	if st, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		// Said here, not as CreateTemp's ENOENT on a temporary name.
		return BackupInfo{}, fmt.Errorf("the directory %s does not exist: create it first (install -d -m 0700 %s)", dir, dir)
	} else if err == nil && !st.IsDir() {
		return BackupInfo{}, fmt.Errorf("%s is not a directory", dir)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".tmp-*") // 0600
	if err != nil {
		return BackupInfo{}, err
	}
	tmpPath := tmp.Name()
	tmp.Close()
	done := false
	defer func() {
		if !done {
			os.Remove(tmpPath)
			os.Remove(tmpPath + "-journal")
		}
	}()

	if err := vacuumInto(ctx, src, tmpPath); err != nil {
		return BackupInfo{}, err
	}
	version, err := checkCopy(ctx, tmpPath)
	if err != nil {
		return BackupInfo{}, err
	}
	f, err := os.OpenFile(tmpPath, os.O_RDWR, 0)
	if err != nil {
		return BackupInfo{}, err
	}
	// Whatever SQLite did to the file, it stays private.
	err = errors.Join(f.Chmod(0o600), f.Sync())
	st, statErr := f.Stat()
	err = errors.Join(err, statErr, f.Close())
	if err != nil {
		return BackupInfo{}, fmt.Errorf("sync the copy: %w", err)
	}
	if overwrite {
		err = os.Rename(tmpPath, dst)
	} else if err = os.Link(tmpPath, dst); err == nil {
		// Link, not rename: a file that appeared at dst meanwhile is
		// never replaced.
		err = os.Remove(tmpPath)
	} else if errors.Is(err, os.ErrExist) {
		err = errors.New("the target appeared while the backup ran; choose a new name, or give --force to replace it")
	}
	if err != nil {
		return BackupInfo{}, err
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		err = errors.Join(d.Sync(), d.Close())
		if err != nil {
			return BackupInfo{}, fmt.Errorf("sync the directory %s: %w", dir, err)
		}
	}
	return BackupInfo{Path: dst, Bytes: st.Size(), SchemaVersion: version}, nil
}

// vacuumInto writes one consistent snapshot of src into the empty file
// tmp. (query_only would refuse VACUUM INTO; mode=ro alone keeps src
// unwritten.)
func vacuumInto(ctx context.Context, src, tmp string) error {
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(5000)")
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: src}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var version int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return sqliteReason(err)
	}
	if version == 0 {
		return errors.New("not an ackd database (schema version 0)")
	}
	// VACUUM INTO runs in one read transaction: the snapshot.
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", tmp); err != nil {
		return fmt.Errorf("copy: %w", sqliteReason(err))
	}
	return nil
}

// checkCopy runs PRAGMA integrity_check on the copy and returns its schema
// version.
func checkCopy(ctx context.Context, path string) (int, error) {
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?mode=ro")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return 0, fmt.Errorf("integrity check of the copy: %w", err)
	}
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			return 0, fmt.Errorf("integrity check of the copy: %w", err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, fmt.Errorf("integrity check of the copy: %w", err)
	}
	if len(problems) > 0 {
		return 0, fmt.Errorf("integrity check of the copy failed: %s", strings.Join(problems, "; "))
	}
	var v int
	err = db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	return v, err
}

func sameFile(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}
