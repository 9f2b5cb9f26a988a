package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// accessError explains an SQLite database this process cannot open or
// write because of file permissions: which user it runs as, who owns the
// file and its directory (SQLite writes its -wal and -shm files beside the
// database, so even a read-only command such as status needs the
// directory), and the two fixes. It returns err unchanged when permissions
// are not the cause.
func accessError(path string, err error) error {
	const rw = 0x2 | 0x4 // W_OK | R_OK
	abs, aerr := filepath.Abs(path)
	if aerr != nil {
		abs = path
	}
	dir := filepath.Dir(abs)
	var denied []string
	if _, serr := os.Stat(abs); serr == nil && syscall.Access(abs, rw) != nil {
		denied = append(denied, "the file "+describe(abs))
	} else if errors.Is(serr, fs.ErrPermission) {
		denied = append(denied, "the file "+abs+" (not even visible)")
	}
	if syscall.Access(dir, rw|0x1) != nil {
		denied = append(denied, "its directory "+describe(dir))
	}
	if len(denied) == 0 {
		return err
	}
	me := strconv.Itoa(os.Getuid())
	name := "uid " + me
	if u, uerr := user.LookupId(me); uerr == nil {
		name = u.Username + " (uid " + me + ")"
	}
	owner := ownerOf(abs)
	if owner == "" {
		owner = ownerOf(dir)
	}
	fix := "run ackd as the user that owns the database"
	if owner != "" {
		fix = fmt.Sprintf("run ackd as %s, its owner (under the packaged unit: sudo -u %s ackd …)", owner, owner)
	}
	return fmt.Errorf("database %s: this process runs as %s and cannot read and write %s (SQLite also writes %s-wal and %s-shm beside it, even for a command that only reads); %s, or give this user access (chown or chmod the file and its directory): %w",
		abs, name, joinAnd(denied), filepath.Base(abs), filepath.Base(abs), fix, err)
}

// describe is path with its owner and mode, e.g. "/var/lib/ackd (owned by
// ackd, drwx------)".
func describe(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return path
	}
	return fmt.Sprintf("%s (owned by %s, %s)", path, ownerOf(path), fi.Mode())
}

// ownerOf is the name (or uid) of path's owner, "" when unknown.
func ownerOf(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	uid := strconv.FormatUint(uint64(st.Uid), 10)
	if u, err := user.LookupId(uid); err == nil {
		return u.Username
	}
	return "uid " + uid
}

func joinAnd(parts []string) string {
	if len(parts) == 2 {
		return parts[0] + " and " + parts[1]
	}
	return parts[0]
}
