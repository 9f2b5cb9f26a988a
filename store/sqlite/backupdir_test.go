package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/sqlite"
)

// Issue 30.4: a backup into a directory that does not exist names the
// directory, not a temporary file's ENOENT.
func TestBackupIntoMissingDirectory(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "ackd.db")
	s := mustOpen(t, src, store.Options{})
	defer s.Close()
	missing := filepath.Join(dir, "ackd-backup")
	dst := filepath.Join(missing, "ackd-manual.db")
	_, err := sqlite.Backup(context.Background(), src, dst, false)
	want := "backup " + src + " to " + dst + ": the directory " + missing + " does not exist: create it first (install -d -m 0700 " + missing + ")"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}
