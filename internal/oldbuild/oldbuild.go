// Package oldbuild builds the ackd binary of an older commit of this
// repository, for tests that run an older ackd against a file a newer one
// touched (an upgrade, a downgrade, an inspection by a newer binary):
//
//	rev := oldbuild.BeforeLastMigration(t, "schema.sql") // a commit hash
//	old := oldbuild.Build(t, rev)                        // that commit's ackd binary
//
// Build exports the commit with `git archive REV | tar -x` into a temporary
// directory and runs `go build` there (with the module cache and proxy the
// test run already has). Binaries are cached by commit hash under
// os.UserCacheDir()/ackd-oldbuild (or the temporary directory), so repeated
// runs build each commit once. When git, the repository's history or the
// commit is not available (an exported tarball, a shallow clone) the test
// skips locally and fails in CI (internal/testreq): CI runs in a clone of
// main with its history.
package oldbuild

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/ackd/ackd/internal/testreq"
)

// Build returns the path of the ackd binary built from commit rev (any
// revision git understands: a hash, a tag, "HEAD~3", "X^"), building it the
// first time. It fails tb if the build fails.
func Build(tb testing.TB, rev string) (binary string) {
	tb.Helper()
	root := repoRoot(tb)
	hash, err := git(root, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	testreq.Need(tb, err == nil && hash != "", fmt.Sprintf("commit %q is not in this clone's history (a full git clone is needed)", rev))
	bin := filepath.Join(cacheDir(), hash, "ackd")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	src := tb.TempDir()
	archive := exec.Command("git", "archive", "--format=tar", hash)
	archive.Dir = root
	tar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	tar.Stdin = pipe
	var archiveErr, tarErr bytes.Buffer
	archive.Stderr, tar.Stderr = &archiveErr, &tarErr
	if err := tar.Start(); err != nil {
		tb.Fatalf("oldbuild: tar: %v", err)
	}
	if err := archive.Run(); err != nil {
		tar.Wait()
		tb.Fatalf("oldbuild: git archive %s: %v\n%s", hash, err, archiveErr.Bytes())
	}
	if err := tar.Wait(); err != nil {
		tb.Fatalf("oldbuild: tar -x: %v\n%s", err, tarErr.Bytes())
	}

	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		tb.Fatal(err)
	}
	// Built beside its final name, then renamed: a concurrent test run
	// building the same commit never sees half a binary.
	tmp, err := os.CreateTemp(filepath.Dir(bin), "ackd-*.tmp")
	if err != nil {
		tb.Fatal(err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	build := exec.Command(goBin(), "build", "-o", tmp.Name(),
		// main.version before internal/buildinfo existed, buildinfo.version
		// since; the linker ignores the one a commit does not have.
		"-ldflags", "-X main.version=oldbuild-"+hash[:12]+" -X github.com/ackd/ackd/internal/buildinfo.version=oldbuild-"+hash[:12], ".")
	build.Dir = src
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("oldbuild: go build of %s: %v\n%s", hash, err, out)
	}
	if err := os.Rename(tmp.Name(), bin); err != nil {
		tb.Fatal(err)
	}
	return bin
}

// BeforeLastMigration returns the newest commit, on the first-parent
// history of HEAD, whose schemaFile (a path from the repository's root,
// e.g. "schema.sql" or "store/postgres/schema.sql") has fewer "-- migrate: N"
// sections than HEAD's, numbered 1, 2, 3… in order: the commit just before
// the last migration arrived, whose ackd knows one migration fewer (or
// more fewer) than today's. It follows history as migrations are added, so
// no test hard-codes a hash, and it passes over commits whose sections are
// misnumbered (two branches' migrations meeting in a merge, renumbered in
// a later commit).
func BeforeLastMigration(tb testing.TB, schemaFile string) string {
	tb.Helper()
	root := repoRoot(tb)
	head, err := git(root, "show", "HEAD:"+schemaFile)
	testreq.Need(tb, err == nil, "git history of "+schemaFile+" is not available (a full git clone is needed)")
	want, ok := migrations(head)
	if !ok || want == 0 {
		tb.Fatalf("oldbuild: HEAD's %s has no well-numbered \"-- migrate: N\" sections", schemaFile)
	}
	log, err := git(root, "log", "--first-parent", "-m", "--format=%H", "-n", "200", "--", schemaFile)
	testreq.Need(tb, err == nil && log != "", "git history of "+schemaFile+" is not available (a full git clone is needed)")
	for _, c := range strings.Fields(log) {
		parent, err := git(root, "rev-parse", "--verify", "--quiet", c+"^1")
		if err != nil || parent == "" {
			break // the first commit, or a shallow clone's edge
		}
		text, err := git(root, "show", parent+":"+schemaFile)
		if err != nil {
			continue // the file did not exist yet
		}
		if n, ok := migrations(text); ok && n > 0 && n < want {
			return parent
		}
	}
	testreq.Need(tb, false, "no commit with fewer migrations than HEAD in "+schemaFile+"'s history (a full git clone is needed)")
	return ""
}

var migrateMarker = regexp.MustCompile(`(?m)^-- migrate: (\d+)\s*$`)

// migrations counts a schema's "-- migrate: N" sections; ok is false unless
// they number 1, 2, 3… in order (what ackd's store.Migrations accepts).
func migrations(schema string) (n int, ok bool) {
	for i, m := range migrateMarker.FindAllStringSubmatch(schema, -1) {
		if v, err := strconv.Atoi(m[1]); err != nil || v != i+1 {
			return 0, false
		}
		n = i + 1
	}
	return n, true
}

// repoRoot is the top of the git work tree the test runs in.
func repoRoot(tb testing.TB) string {
	tb.Helper()
	_, err := exec.LookPath("git")
	testreq.Need(tb, err == nil, "git is not installed")
	root, err := git(".", "rev-parse", "--show-toplevel")
	testreq.Need(tb, err == nil && root != "", "the test does not run inside a git clone of ackd")
	return root
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

func cacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "ackd-oldbuild")
	}
	return filepath.Join(os.TempDir(), "ackd-oldbuild")
}

func goBin() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}
