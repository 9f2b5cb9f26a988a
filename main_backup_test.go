package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 21.7 / 25.9: `ackd backup FILE` as the operator runs it: one line
// saying what it wrote, a 0600 file even under umask 000, an existing file
// refused in one line unless --force, and PostgreSQL sent to pg_dump
// without connecting.
func TestBackupCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	procMustRun(t, procEnv(), "migrate", "--db", db)
	backup := filepath.Join(dir, "ackd-backup.db")
	cmd := exec.Command("sh", "-c", `umask 000; exec "$0" "$@"`, procBin, "backup", "--db", db, backup)
	cmd.Env = procEnv()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("backup under umask 000: %v", err)
	}
	if s := string(out); !strings.HasPrefix(s, "backed up "+db+" to "+backup+" (") || !strings.Contains(s, "integrity ok, mode 0600)") {
		t.Errorf("backup printed %q", s)
	}
	st, err := os.Stat(backup)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("backup mode %v, want 0600", st.Mode().Perm())
	}
	if out := procMustRun(t, procEnv(), "status", "--db", backup).Stdout; !strings.Contains(out, "receipts") {
		t.Errorf("status of the backup printed %q", out)
	}

	again := procRun(t, procEnv(), "backup", "--db", db, backup)
	if again.Code == 0 || strings.Count(strings.TrimSpace(again.Stderr), "\n") != 0 || !strings.Contains(again.Stderr, "--force") {
		t.Errorf("backup onto an existing file: exit %d, stderr %q; want one line naming --force", again.Code, again.Stderr)
	}
	procMustRun(t, procEnv(), "backup", "--force", "--db", db, backup)

	pg := procRun(t, procEnv(), "backup", "--db", "postgres://ackd@127.0.0.1:1/ackd", filepath.Join(dir, "pg.db"))
	if pg.Code == 0 || strings.Count(strings.TrimSpace(pg.Stderr), "\n") != 0 || !strings.Contains(pg.Stderr, "pg_dump") {
		t.Errorf("backup of PostgreSQL: exit %d, stderr %q; want one line naming pg_dump", pg.Code, pg.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "pg.db")); !os.IsNotExist(err) {
		t.Errorf("a file was written for the PostgreSQL backup: %v", err)
	}
}
