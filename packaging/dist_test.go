package packaging

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/base64"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ackd/ackd/internal/testreq"
)

const testVersion = "0.0.1~test"

var arches = []string{"amd64", "arm64"}

func have(cmds ...string) bool {
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			return false
		}
	}
	return true
}

func run(tb testing.TB, dir string, env []string, name string, args ...string) string {
	tb.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// Issue 26: scripts/dist.sh VERSION writes the two static binaries, a
// Debian package per architecture and SHA256SUMS over all of them; the
// native package installs as docs/howto/install-on-a-vm.md says and leaves
// the database at remove and at purge.
func TestReleaseBuild(t *testing.T) {
	testreq.Short(t, "runs the release build for two architectures and dpkg")
	t.Parallel()
	testreq.Need(t, have("bash", "git", "dpkg-deb", "dpkg", "sha256sum"),
		"dpkg-deb, dpkg and sha256sum are needed (Debian's dpkg and coreutils)")
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dist := t.TempDir()
	commit := strings.TrimSpace(run(t, repo, nil, "git", "rev-parse", "HEAD"))
	run(t, repo, []string{"DIST_DIR=" + dist}, "bash", "scripts/dist.sh", testVersion)

	t.Run("SHA256SUMS covers every artifact, and each sum is right", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		var listed []string
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			sum, name, ok := strings.Cut(sc.Text(), "  ")
			if !ok {
				t.Fatalf("SHA256SUMS line %q is not sha256sum's format", sc.Text())
			}
			data, err := os.ReadFile(filepath.Join(dist, name))
			if err != nil {
				t.Fatal(err)
			}
			if h := sha256.Sum256(data); hex.EncodeToString(h[:]) != sum {
				t.Errorf("%s: SHA256SUMS says %s, the file hashes to %x", name, sum, h)
			}
			listed = append(listed, name)
		}
		entries, err := os.ReadDir(dist)
		if err != nil {
			t.Fatal(err)
		}
		var artifacts []string
		for _, e := range entries {
			if e.Name() != "SHA256SUMS" {
				artifacts = append(artifacts, e.Name())
			}
		}
		var want []string
		for _, a := range arches {
			want = append(want, "ackd_"+testVersion+"_linux_"+a, "ackd_"+testVersion+"_"+a+".deb")
		}
		slices.Sort(want)
		slices.Sort(listed)
		if !slices.Equal(artifacts, want) || !slices.Equal(listed, want) {
			t.Errorf("dist/ holds %v and SHA256SUMS lists %v, want both %v", artifacts, listed, want)
		}
	})

	t.Run("the binaries are static, for their architecture, and stamped", func(t *testing.T) {
		machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
		for _, a := range arches {
			bin := filepath.Join(dist, "ackd_"+testVersion+"_linux_"+a)
			f, err := elf.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			if f.Machine != machine[a] {
				t.Errorf("%s: ELF machine %v, want %v", a, f.Machine, machine[a])
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
					t.Errorf("%s: has a %v program header: not a static binary", a, p.Type)
				}
			}
			f.Close()
			if a == runtime.GOARCH {
				out := run(t, dist, nil, bin, "version")
				if !strings.HasPrefix(out, "ackd "+testVersion+" commit "+commit) || !strings.HasSuffix(out, " "+runtime.Version()+"\n") {
					t.Errorf("ackd version: %q, want version %s, commit %s and %s", out, testVersion, commit, runtime.Version())
				}
			}
		}
	})

	t.Run("each package's control fields, contents and conffiles", func(t *testing.T) {
		for _, a := range arches {
			deb := filepath.Join(dist, "ackd_"+testVersion+"_"+a+".deb")
			fields := run(t, dist, nil, "dpkg-deb", "--field", deb, "Package", "Version", "Architecture", "Section", "Priority")
			want := "Package: ackd\nVersion: " + testVersion + "\nArchitecture: " + a + "\nSection: net\nPriority: optional\n"
			if fields != want {
				t.Errorf("%s control fields:\n%s\nwant:\n%s", a, fields, want)
			}
			for _, f := range []string{"Maintainer", "Description", "Installed-Size"} {
				if strings.TrimSpace(run(t, dist, nil, "dpkg-deb", "--field", deb, f)) == "" {
					t.Errorf("%s: control field %s is empty", a, f)
				}
			}
			if got := run(t, dist, nil, "dpkg-deb", "--info", deb, "conffiles"); got != "/etc/ackd/ackd.toml\n" {
				t.Errorf("%s conffiles: %q, want /etc/ackd/ackd.toml only", a, got)
			}
			// mode owner path, for every file: all root-owned, the
			// binary executable, nothing that enables or starts the unit.
			files := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(run(t, dist, nil, "dpkg-deb", "--contents", deb)), "\n") {
				f := strings.Fields(line)
				if len(f) < 6 {
					t.Fatalf("dpkg-deb --contents line %q", line)
				}
				if f[1] != "root/root" {
					t.Errorf("%s: %s is owned by %s, want root/root", a, f[5], f[1])
				}
				if !strings.HasPrefix(f[0], "d") {
					files[strings.TrimPrefix(f[5], ".")] = f[0]
				}
			}
			wantFiles := map[string]string{
				"/usr/bin/ackd":                               "-rwxr-xr-x",
				"/usr/lib/systemd/system/ackd.service":        "-rw-r--r--",
				"/usr/lib/systemd/system/ackd-backup.service": "-rw-r--r--",
				"/usr/lib/systemd/system/ackd-backup.timer":   "-rw-r--r--",
				"/etc/ackd/ackd.toml":                         "-rw-r--r--",
				"/usr/share/ackd/Caddyfile":                   "-rw-r--r--",
				"/usr/share/ackd/litestream.service":          "-rw-r--r--",
				"/usr/share/ackd/litestream.yml":              "-rw-r--r--",
				"/usr/share/doc/ackd/README.md":               "-rw-r--r--",
				"/usr/share/doc/ackd/CHANGELOG.md":            "-rw-r--r--",
				"/usr/share/doc/ackd/copyright":               "-rw-r--r--",
			}
			// The documentation pages, for an operator on the VM, and the
			// images they show (a page's broken image is a missing file).
			if err := filepath.WalkDir(filepath.Join(repo, "docs"), func(path string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".md") || strings.HasSuffix(path, ".png")) {
					wantFiles["/usr/share/doc/ackd/docs/"+strings.TrimPrefix(path, filepath.Join(repo, "docs")+"/")] = "-rw-r--r--"
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			for path, mode := range wantFiles {
				if files[path] != mode {
					t.Errorf("%s: %s has mode %q, want %s", a, path, files[path], mode)
				}
			}
			for path := range files {
				if _, ok := wantFiles[path]; !ok {
					t.Errorf("%s: unexpected file %s in the package", a, path)
				}
			}
			// Every image a shipped page shows is in the package beside it.
			for path := range files {
				if !strings.HasPrefix(path, "/usr/share/doc/ackd/docs/") || !strings.HasSuffix(path, ".md") {
					continue
				}
				page, err := os.ReadFile(filepath.Join(repo, "docs", strings.TrimPrefix(path, "/usr/share/doc/ackd/docs/")))
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range imageLink.FindAllStringSubmatch(string(page), -1) {
					if img := filepath.Join(filepath.Dir(path), m[1]); files[img] == "" {
						t.Errorf("%s: %s shows %s, which the package lacks", a, path, img)
					}
				}
			}
		}
	})

	t.Run("the maintainer scripts never enable or start ackd", func(t *testing.T) {
		deb := filepath.Join(dist, "ackd_"+testVersion+"_amd64.deb")
		// A command line (not the message postinst prints) that runs
		// systemctl enable/start/restart. try-restart, which restarts a
		// running ackd at an upgrade, and disable are allowed.
		for _, script := range []string{"postinst", "prerm", "postrm"} {
			text := run(t, dist, nil, "dpkg-deb", "--info", deb, script)
			for _, line := range strings.Split(text, "\n") {
				f := strings.Fields(line)
				if len(f) == 0 || (f[0] != "systemctl" && f[0] != "deb-systemd-invoke") {
					continue
				}
				for _, verb := range f[1:] {
					switch verb {
					case "enable", "start", "restart", "reenable", "reload-or-restart":
						t.Errorf("%s runs %q", script, strings.TrimSpace(line))
					}
				}
			}
		}
	})

	// Issue 30.1: the install page's commands, followed literally, install
	// the package and start the unit, empty credential files and all.
	t.Run("the documented install starts as written", func(t *testing.T) {
		testDocumentedInstall(t, dist)
	})

	t.Run("installed as the install page says: unit, config, credentials; remove and purge keep the database", func(t *testing.T) {
		testreq.Need(t, os.Geteuid() == 0, "installing into a scratch root with dpkg needs root (CI runs as root)")
		testreq.Need(t, have("systemd-analyze"), "systemd-analyze is needed (apt-get install systemd)")
		deb := filepath.Join(dist, "ackd_"+testVersion+"_"+runtime.GOARCH+".deb")
		if _, err := os.Stat(deb); err != nil {
			t.Skipf("no package for %s", runtime.GOARCH)
		}
		root := t.TempDir()
		for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates"} {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range []string{"var/lib/dpkg/status", "var/lib/dpkg/available"} {
			if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// The maintainer scripts run outside a chroot with $DPKG_ROOT set,
		// and leave systemd alone there.
		dpkg := func(args ...string) string {
			return run(t, root, nil, "dpkg", append([]string{"--root=" + root, "--force-script-chrootless"}, args...)...)
		}
		out := dpkg("--install", deb)
		if !strings.Contains(out, "ackd is installed but not enabled") {
			t.Errorf("install does not tell the operator what to do before starting:\n%s", out)
		}
		at := func(p string) string { return filepath.Join(root, p) }
		st, err := os.Stat(at("etc/ackd/credentials"))
		if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
			t.Errorf("/etc/ackd/credentials: %v %v, want a 0700 directory", st, err)
		}
		for _, p := range []string{"usr/bin/ackd", "usr/lib/systemd/system/ackd.service", "etc/ackd/ackd.toml", "usr/share/ackd/Caddyfile"} {
			if _, err := os.Stat(at(p)); err != nil {
				t.Errorf("installed: %v", err)
			}
		}
		if m, _ := filepath.Glob(at("etc/systemd/system/*.wants/ackd.service")); len(m) != 0 {
			t.Errorf("install enabled the unit: %v", m)
		}

		// systemd-analyze verify insists that ExecStart's binary exists:
		// verify the installed unit with ExecStart pointing into the root
		// (the one change), as .ci/systemd-check.sh does for the checkout.
		unit, err := os.ReadFile(at("usr/lib/systemd/system/ackd.service"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(unit, []byte("\nExecStart=/usr/bin/ackd serve --config /etc/ackd/ackd.toml\n")) {
			t.Fatalf("the installed unit does not run /usr/bin/ackd serve --config /etc/ackd/ackd.toml")
		}
		vdir := t.TempDir()
		verified := filepath.Join(vdir, "ackd.service")
		if err := os.WriteFile(verified, bytes.Replace(unit, []byte("\nExecStart=/usr/bin/ackd "), []byte("\nExecStart="+at("usr/bin/ackd")+" "), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("systemd-analyze", "verify", verified)
		if out, err := cmd.CombinedOutput(); err != nil || len(out) != 0 {
			t.Errorf("systemd-analyze verify of the installed unit: %v\n%s", err, out)
		}

		// The install page's next step: the secrets go into the credentials
		// directory. Then the shipped config passes the installed binary's
		// own check, run with the environment the unit gives the daemon:
		// its Environment= lines, %d (the credentials systemd loads) mapped
		// through its LoadCredential= lines, the state directory in the
		// scratch root.
		// Every LoadCredential= source must exist or systemd refuses to
		// start the unit; token-key is 32 random bytes in base64, as the
		// install page makes it.
		if err := os.MkdirAll(at("var/lib/ackd"), 0o700); err != nil {
			t.Fatal(err)
		}
		creds := map[string]string{}
		var unitEnv []string
		for _, line := range strings.Split(string(unit), "\n") {
			if v, ok := strings.CutPrefix(line, "LoadCredential="); ok {
				name, path, _ := strings.Cut(v, ":")
				creds["%d/"+name] = at(path)
				content := "test-" + name
				if name == "token-key" {
					content = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
				}
				if err := os.WriteFile(at(path), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, line := range strings.Split(string(unit), "\n") {
			kv, ok := strings.CutPrefix(line, "Environment=")
			if !ok {
				continue
			}
			k, v, _ := strings.Cut(kv, "=")
			switch {
			case strings.HasPrefix(v, "%d/"):
				if creds[v] == "" {
					t.Errorf("the unit sets %s=%s, but no LoadCredential= provides it", k, v)
				}
				v = creds[v]
			case k == "ACKD_DB":
				t.Errorf("the unit sets ACKD_DB=%s, which would override the db an operator writes into /etc/ackd/ackd.toml (issue 29.8)", v)
			}
			unitEnv = append(unitEnv, k+"="+v)
		}
		t.Run("the shipped config passes the installed binary's ackd config check", func(t *testing.T) {
			// The config's db (/var/lib/ackd/ackd.db) mapped into the
			// scratch root with --db, the explicit override.
			cmd := exec.Command(at("usr/bin/ackd"), "config", "check", "--config", at("etc/ackd/ackd.toml"), "--db", at("var/lib/ackd/ackd.db"))
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + root}, unitEnv...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("ackd config check of the shipped config, with the unit's environment %v: %v\n%s", unitEnv, err, out)
			}
		})

		// The operator's edit of the conffile survives a reinstall.
		edited := append(readFile(t, at("etc/ackd/ackd.toml")), []byte("# edited by the operator\n")...)
		if err := os.WriteFile(at("etc/ackd/ackd.toml"), edited, 0o644); err != nil {
			t.Fatal(err)
		}
		dpkg("--install", deb)
		if got := readFile(t, at("etc/ackd/ackd.toml")); !bytes.Equal(got, edited) {
			t.Errorf("a reinstall replaced the operator's /etc/ackd/ackd.toml")
		}

		// The database (what ackd serve creates in its StateDirectory),
		// then remove, then purge.
		if err := os.WriteFile(at("var/lib/ackd/ackd.db"), []byte("database"), 0o600); err != nil {
			t.Fatal(err)
		}
		dpkg("--remove", "ackd")
		for _, p := range []string{"usr/bin/ackd", "usr/lib/systemd/system/ackd.service"} {
			if _, err := os.Stat(at(p)); err == nil {
				t.Errorf("remove left %s", p)
			}
		}
		for _, p := range []string{"var/lib/ackd/ackd.db", "etc/ackd/ackd.toml", "etc/ackd/credentials/slack-signing-secret"} {
			if _, err := os.Stat(at(p)); err != nil {
				t.Errorf("remove deleted %s: %v", p, err)
			}
		}
		out = dpkg("--purge", "ackd")
		for _, p := range []string{"etc/ackd/ackd.toml", "etc/ackd/credentials"} {
			if _, err := os.Stat(at(p)); err == nil {
				t.Errorf("purge left %s", p)
			}
		}
		if b, err := os.ReadFile(at("var/lib/ackd/ackd.db")); err != nil || string(b) != "database" {
			t.Errorf("purge touched the database: %q %v", b, err)
		}
		if !strings.Contains(out, "database in /var/lib/ackd is kept") {
			t.Errorf("purge does not say the database was kept:\n%s", out)
		}
	})
}

func readFile(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Issue 29.11 and 30.4: dist.sh stamps "-dirty" when untracked files that
// .gitignore does not name are present (they can change the build), and a
// second run with another version into the same directory keeps the first
// version's lines in SHA256SUMS. It runs in a clone of HEAD, so the
// developer's own tree is never touched; one architecture keeps it short.
func TestReleaseBuildStampAndSums(t *testing.T) {
	t.Parallel()
	testreq.Need(t, have("bash", "git", "dpkg-deb", "sha256sum"),
		"dpkg-deb and sha256sum are needed (Debian's dpkg and coreutils)")
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "src")
	run(t, repo, nil, "git", "clone", "--quiet", "--no-hardlinks", repo, clone)
	// The script under test is the working tree's, committed in the clone
	// when it differs from HEAD's.
	script, err := os.ReadFile(filepath.Join(repo, "scripts", "dist.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(clone, "scripts", "dist.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(run(t, clone, nil, "git", "status", "--porcelain")) != "" {
		run(t, clone, []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"},
			"git", "commit", "--quiet", "-am", "dist.sh under test")
	}
	commit := strings.TrimSpace(run(t, clone, nil, "git", "rev-parse", "HEAD"))
	dist := t.TempDir()
	env := []string{"DIST_DIR=" + dist, "DIST_ARCHES=" + runtime.GOARCH}
	version := func(v string) string {
		return run(t, dist, nil, filepath.Join(dist, "ackd_"+v+"_linux_"+runtime.GOARCH), "version")
	}

	run(t, clone, env, "bash", "scripts/dist.sh", "0.0.1~a")
	if out := version("0.0.1~a"); !strings.HasPrefix(out, "ackd 0.0.1~a commit "+commit+" ") {
		t.Errorf("a clean clone: ackd version says %q, want commit %s without -dirty", out, commit)
	}

	if err := os.WriteFile(filepath.Join(clone, "extra.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, clone, env, "bash", "scripts/dist.sh", "0.0.2~b")
	if out := version("0.0.2~b"); !strings.HasPrefix(out, "ackd 0.0.2~b commit "+commit+"-dirty ") {
		t.Errorf("an untracked extra.go: ackd version says %q, want commit %s-dirty", out, commit)
	}

	b, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not sha256sum's format", line)
		}
		data, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		if h := sha256.Sum256(data); hex.EncodeToString(h[:]) != sum {
			t.Errorf("%s: SHA256SUMS says %s, the file hashes to %x", name, sum, h)
		}
		listed = append(listed, name)
	}
	var want []string
	for _, v := range []string{"0.0.1~a", "0.0.2~b"} {
		want = append(want, "ackd_"+v+"_linux_"+runtime.GOARCH, "ackd_"+v+"_"+runtime.GOARCH+".deb")
	}
	slices.Sort(want)
	slices.Sort(listed)
	if !slices.Equal(listed, want) {
		t.Errorf("after two versions SHA256SUMS lists %v, want %v", listed, want)
	}
}

// imageLink is a Markdown image with a relative path: ![alt](path).
var imageLink = regexp.MustCompile(`!\[[^\]]*\]\(([^):/][^):]*)\)`)
