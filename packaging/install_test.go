package packaging

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/testreq"
)

// installPage is the documentation page whose install commands the tests
// follow literally.
const installPage = "../docs/howto/install-on-a-vm.md"

// installBlock is the install page's ```sh block that installs the
// package (the one with `apt install ./ackd_…`), one command per entry,
// backslash continuations joined, with each line's trailing comment.
func installBlock(tb testing.TB) []string {
	tb.Helper()
	page := string(readFile(tb, installPage))
	for _, m := range regexp.MustCompile("(?ms)^```sh\\n(.*?)^```").FindAllStringSubmatch(page, -1) {
		if !strings.Contains(m[1], "apt install ./ackd_") {
			continue
		}
		var out []string
		for _, l := range strings.Split(regexp.MustCompile(`\\\n\s*`).ReplaceAllString(m[1], " "), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
		return out
	}
	tb.Fatalf("%s has no ```sh block with `apt install ./ackd_…`", installPage)
	return nil
}

// unitDirectives are the [Service] directives of a unit file, each with its
// values in order (comments and other sections left out).
func unitDirectives(unit string) map[string][]string {
	out := map[string][]string{}
	inService := false
	for _, l := range strings.Split(unit, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "["):
			inService = l == "[Service]"
		case inService && l != "" && !strings.HasPrefix(l, "#"):
			k, v, _ := strings.Cut(l, "=")
			out[k] = append(out[k], v)
		}
	}
	return out
}

// credentialNames are the credentials a unit loads: LoadCredential=
// name:/etc/ackd/credentials/name, in order.
func credentialNames(tb testing.TB, unit string) []string {
	tb.Helper()
	var names []string
	for _, v := range unitDirectives(unit)["LoadCredential"] {
		name, src, _ := strings.Cut(v, ":")
		if src != "/etc/ackd/credentials/"+name {
			tb.Errorf("LoadCredential=%s: the source is not /etc/ackd/credentials/%s", v, name)
		}
		names = append(names, name)
	}
	return names
}

// Issue 30.1: every credential the unit loads (LoadCredential=) is named,
// and nothing else, by the unit's header comment, the package's postinst
// message, the install page's commands and its table of credentials; and
// the install page's `config check` is given the same …_FILE variables as
// the unit's Environment= lines, each naming the same credential.
func TestCredentialListsAgree(t *testing.T) {
	t.Parallel()
	unit := string(readFile(t, "../systemd/ackd.service"))
	want := credentialNames(t, unit)
	slices.Sort(want)
	if len(want) < 5 {
		t.Fatalf("the unit loads %v", want)
	}
	listed := func(what string, re *regexp.Regexp, text string) {
		t.Helper()
		var got []string
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			if !slices.Contains(got, m[1]) {
				got = append(got, m[1])
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s names the credentials %v; the unit loads %v", what, got, want)
		}
	}
	header, _, _ := strings.Cut(unit, "\n[Unit]")
	listed("the unit's header comment", regexp.MustCompile(`(?m)^#\s{3,}([a-z][a-z-]+)\s{2,}`), header)
	listed("the postinst message", regexp.MustCompile(`(?m)^\s{5,}([a-z][a-z-]+)\s{2,}`), string(readFile(t, "deb/postinst")))
	block := strings.Join(installBlock(t), "\n")
	listed(installPage+"'s install commands", regexp.MustCompile(`tee /etc/ackd/credentials/([a-z-]+)`), block)
	page := string(readFile(t, installPage))
	table := page[strings.Index(page, "**The credentials.**"):]
	table = table[:strings.Index(table, "\n\n**")]
	listed(installPage+"'s table of credentials", regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\|"), table)

	// The check before the first start has the daemon's environment.
	unitEnv := map[string]string{}
	for _, v := range unitDirectives(unit)["Environment"] {
		if k, file, ok := strings.Cut(v, "=%d/"); ok {
			unitEnv[k] = file
		}
	}
	checkEnv := map[string]string{}
	for _, line := range installBlock(t) {
		if strings.Contains(line, " config check") {
			for _, m := range regexp.MustCompile(`(\w+_FILE)=/etc/ackd/credentials/([a-z-]+)`).FindAllStringSubmatch(line, -1) {
				checkEnv[m[1]] = m[2]
			}
		}
	}
	if len(unitEnv) < 5 || !equalMaps(unitEnv, checkEnv) {
		t.Errorf("the install page runs config check with %v; the unit sets %v", checkEnv, unitEnv)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// testDocumentedInstall follows the install page's block on the package
// built into dist, in a scratch root, as an operator would on a fresh VM,
// with these substitutions only: the version and architecture of the
// package; `sudo` dropped; `apt install` is dpkg --root; `sudoedit` is
// skipped (the config is used as installed); paths under /etc/ackd are the
// scratch root's; ackd runs chrooted into the root (static, it needs
// nothing else there); and `systemctl enable --now ackd` starts the
// installed unit's ExecStart= the way systemd does: its Environment= lines,
// $CREDENTIALS_DIRECTORY filled from its LoadCredential= sources (a
// missing one fails, as systemd fails the start), its StateDirectory=
// created (with DynamicUser=, /var/lib/private/ackd and the symlink), its
// WorkingDirectory=, and ACKD_LISTEN on a free port (as a drop-in would).
// The secrets the page's variables hold: a signing secret and a bot token;
// FORWARD_SECRET and CLIENT_SECRET unset, so those files are empty.
func testDocumentedInstall(t *testing.T, dist string) {
	testreq.Need(t, os.Geteuid() == 0, "installing into a scratch root with dpkg and chroot needs root (CI runs as root)")
	deb := "ackd_" + testVersion + "_" + runtime.GOARCH + ".deb"
	if _, err := os.Stat(filepath.Join(dist, deb)); err != nil {
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
	at := func(p string) string { return filepath.Join(root, p) }
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root,
		"SIGNING_SECRET=doc-install-signing-secret", "BOT_TOKEN=xoxb-doc-install"}

	started := false
	var postinst string
	for _, line := range installBlock(t) {
		code, _, _ := strings.Cut(line, " # ")
		code = strings.TrimSpace(code)
		code = strings.ReplaceAll(code, "0.2.0", testVersion)
		code = strings.ReplaceAll(code, "_amd64.deb", "_"+runtime.GOARCH+".deb")
		code = strings.TrimPrefix(code, "sudo ")
		code = strings.ReplaceAll(code, "| sudo ", "| ")
		fields := strings.Fields(code)
		switch {
		case strings.HasPrefix(code, "sha256sum "):
			run(t, dist, env, "bash", "-c", code)
		case strings.HasPrefix(code, "apt install ./"):
			if fields[2] != "./"+deb {
				t.Fatalf("%q installs %s, not the package built (%s)", line, fields[2], deb)
			}
			postinst = run(t, root, nil, "dpkg", "--root="+root, "--force-script-chrootless", "--install", filepath.Join(dist, deb))
		case fields[0] == "sudoedit":
			// The config as installed: it must start and do nothing.
		case fields[0] == "env" || fields[0] == "ackd":
			i := slices.Index(fields, "ackd")
			var vars []string
			if fields[0] == "env" {
				vars = fields[1:i]
			}
			out, err := chrootAckd(root, vars, fields[i+1:]...).CombinedOutput()
			if err != nil {
				t.Fatalf("%s (chrooted into the scratch root): %v\n%s", line, err, out)
			}
			if strings.Contains(code, " config check") && !strings.Contains(string(out), "serve would start") {
				t.Errorf("%s: %s", line, out)
			}
			t.Logf("%s:\n%s", code, out)
		case code == "systemctl enable --now ackd":
			startUnit(t, root)
			started = true
		case fields[0] == "systemctl" || fields[0] == "journalctl":
			// Reading the unit's state: the started unit answered /healthz.
		default:
			for _, p := range regexp.MustCompile(`(?:^|[\s=|>])(/[^\s'"*]+)`).FindAllStringSubmatch(code, -1) {
				if !strings.HasPrefix(p[1], "/etc/ackd/") && p[1] != "/dev/urandom" && p[1] != "/dev/null" {
					t.Fatalf("%q names %s, which this test cannot map into the scratch root", line, p[1])
				}
			}
			run(t, root, env, "bash", "-eo", "pipefail", "-c", strings.ReplaceAll(code, "/etc/ackd/", at("etc/ackd")+"/"))
		}
	}
	if !started {
		t.Fatalf("%s's install block never starts the unit", installPage)
	}
	if !strings.Contains(postinst, "ackd is installed but not enabled") {
		t.Errorf("the install does not say what to do before starting:\n%s", postinst)
	}
	for _, f := range []string{"forward-secret", "slack-client-secret"} {
		if b, err := os.ReadFile(at("etc/ackd/credentials/" + f)); err != nil || len(b) != 0 {
			t.Errorf("%s: %q %v, want the empty file the page writes without its variable", f, b, err)
		}
	}
}

// chrootAckd is the installed ackd run chrooted into root, with the
// environment vars only (and PATH).
func chrootAckd(root string, vars []string, args ...string) *exec.Cmd {
	cmd := exec.Command("/usr/bin/ackd", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	cmd.Dir = "/"
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, vars...)
	return cmd
}

// startUnit starts the installed ackd.service's ExecStart= in root as
// systemd would (see testDocumentedInstall) and waits for /healthz; the
// daemon is stopped when the test ends.
func startUnit(t *testing.T, root string) {
	t.Helper()
	at := func(p string) string { return filepath.Join(root, p) }
	unit := unitDirectives(string(readFile(t, at("usr/lib/systemd/system/ackd.service"))))
	const creds = "/run/credentials/ackd.service"
	if err := os.MkdirAll(at(creds), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, v := range unit["LoadCredential"] {
		name, src, _ := strings.Cut(v, ":")
		b, err := os.ReadFile(at(src))
		if err != nil {
			t.Fatalf("systemd would fail the start at step CREDENTIALS: LoadCredential=%s: %v", v, err)
		}
		if err := os.WriteFile(at(creds+"/"+name), b, 0o400); err != nil {
			t.Fatal(err)
		}
	}
	if unit["DynamicUser"][0] != "yes" || unit["StateDirectory"][0] != "ackd" {
		t.Fatalf("the unit's DynamicUser=%v StateDirectory=%v: this emulation knows DynamicUser=yes, StateDirectory=ackd", unit["DynamicUser"], unit["StateDirectory"])
	}
	if err := os.MkdirAll(at("var/lib/private/ackd"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("private/ackd", at("var/lib/ackd")); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	vars := []string{"CREDENTIALS_DIRECTORY=" + creds, "STATE_DIRECTORY=/var/lib/ackd", "ACKD_LISTEN=" + addr}
	for _, v := range unit["Environment"] {
		vars = append(vars, strings.ReplaceAll(v, "%d", creds))
	}
	execStart := strings.Fields(unit["ExecStart"][0])
	cmd := chrootAckd(root, vars, execStart[1:]...)
	if execStart[0] != "/usr/bin/ackd" {
		t.Fatalf("ExecStart=%s: not /usr/bin/ackd", unit["ExecStart"][0])
	}
	cmd.Dir = unit["WorkingDirectory"][0]
	var log syncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s chrooted into %s: %v", unit["ExecStart"][0], root, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("ackd serve's log:\n%s", log.String())
		}
	})
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-done:
			t.Fatalf("the unit's ackd serve exited: %v\n%s", cmd.ProcessState, log.String())
		default:
		}
		if resp, err := client.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the unit's ackd serve did not answer /healthz with 200 within 30s:\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// It runs on the state directory's database, and says what the
	// installed config holds back.
	if _, err := os.Stat(at("var/lib/private/ackd/ackd.db")); err != nil {
		t.Errorf("the database is not in the state directory: %v", err)
	}
	sc := bufio.NewScanner(strings.NewReader(log.String()))
	placeholders := 0
	for sc.Scan() {
		if strings.Contains(sc.Text(), "is a placeholder") {
			placeholders++
		}
	}
	if placeholders == 0 {
		t.Errorf("serve's log names no placeholder of the installed config:\n%s", log.String())
	}
}

func freeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// syncBuffer is a bytes.Buffer safe for a process writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
