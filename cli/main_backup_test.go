package cli

import (
	"encoding/json"
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

// Issue 29.11: `ackd status` of a backup taken from a running daemon's
// database does not show that daemon as running: the heartbeat row was
// copied with the file (fresh, and its pid alive on this host), but it
// names the live file. Status of the live file still lists it.
func TestStatusOfABackupShowsNoRunningDaemon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	d := procServe(t, procServeOpts{DB: db})
	defer d.stop()
	backup := filepath.Join(dir, "ackd-copy.db")
	procMustRun(t, procEnv(), "backup", "--db", db, backup)

	type status struct {
		Daemons []struct {
			PID int `json:"pid"`
		} `json:"daemons"`
		Copied []struct {
			PID int    `json:"pid"`
			Why string `json:"why"`
		} `json:"copied_heartbeats"`
	}
	read := func(path string) status {
		t.Helper()
		var s status
		out := procMustRun(t, procEnv(), "status", "--json", "--db", path).Stdout
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		return s
	}
	pid := d.cmd.Process.Pid
	if live := read(db); len(live.Daemons) != 1 || live.Daemons[0].PID != pid || len(live.Copied) != 0 {
		t.Errorf("status of the live file: %+v, want the daemon (pid %d) running and no copied heartbeat", live, pid)
	}
	cp := read(backup)
	if len(cp.Daemons) != 0 {
		t.Errorf("status of the backup lists running daemons %+v, want none", cp.Daemons)
	}
	if len(cp.Copied) != 1 || cp.Copied[0].PID != pid || !strings.Contains(cp.Copied[0].Why, db) {
		t.Errorf("status of the backup: copied heartbeats %+v, want pid %d naming %s", cp.Copied, pid, db)
	}
	text := procMustRun(t, procEnv(), "status", "--db", backup).Stdout
	if !strings.Contains(text, "none running") || !strings.Contains(text, "copied heartbeat") {
		t.Errorf("status of the backup (text) does not say no daemon runs and the heartbeat was copied:\n%s", text)
	}
}
