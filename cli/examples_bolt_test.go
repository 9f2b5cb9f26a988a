package cli

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/testreq"
)

// Issue 25.2: examples/bolt/README.md's "Try it without Slack" works as
// written: its shell lines are run as they stand (bash, in examples/bolt),
// with only the ports (3000, 3001, 3002), the binary (../../ackd) and the
// config file (a copy of ackd.toml with the same ports and its database in a
// temporary directory) replaced. The real Bolt app runs its listener (no
// auth.test against Slack, which would have parked the row after 20 s), its
// chat.postMessage reaches fake-slack.js, and the row is done.
func TestBoltReadmeOffline(t *testing.T) {
	t.Parallel()
	modules := os.Getenv("ACKD_TEST_BOLT_DIR")
	if modules == "" {
		modules = "examples/bolt"
	}
	modules, _ = filepath.Abs(modules)
	_, nodeErr := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(modules, "node_modules", "@slack", "bolt", "package.json"))
	testreq.Need(t, nodeErr == nil && modErr == nil,
		"node ≥ 20 and the Bolt app's modules (cd examples/bolt && npm ci --prefer-offline; .ci/with-node.sh)")

	readme, err := os.ReadFile("examples/bolt/README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)[strings.Index(string(readme), "## Try it without Slack"):]
	var lines []string
	for _, b := range shellBlocks(t, "examples/bolt/README.md") {
		if len(b) > 0 && strings.Contains(section, b[0]) && strings.Contains(strings.Join(b, "\n"), "fake-slack.js") {
			lines = b
			break
		}
	}
	if len(lines) == 0 {
		t.Fatal("no shell block with fake-slack.js under \"Try it without Slack\"")
	}

	port := func() string { _, p, _ := net.SplitHostPort(procFreeAddr(t)); return p }
	ports := map[string]string{"3000": port(), "3001": port(), "3002": port()}
	dir := t.TempDir()
	toml, err := os.ReadFile("examples/bolt/ackd.toml")
	if err != nil {
		t.Fatal(err)
	}
	portRE := regexp.MustCompile(`\b300[012]\b`)
	sub := func(s string) string {
		return portRE.ReplaceAllStringFunc(s, func(p string) string { return ports[p] })
	}
	cfg := filepath.Join(dir, "ackd.toml")
	if err := os.WriteFile(cfg, []byte(sub(string(toml))), 0o600); err != nil {
		t.Fatal(err)
	}

	env := procEnv("SLACK_SIGNING_SECRET=", "NODE_PATH="+filepath.Join(modules, "node_modules"))
	type bg struct {
		line string
		port string
		out  *procSyncBuffer
		cmd  *exec.Cmd
	}
	var started []*bg
	var sendOut string
	for i, raw := range lines {
		line, comment, _ := strings.Cut(raw, " #")
		line = strings.TrimSpace(line)
		switch {
		case line == "cd examples/bolt":
			continue
		case strings.HasPrefix(line, "npm ci"):
			continue // .ci/with-node.sh installed the modules (ACKD_TEST_BOLT_DIR)
		case strings.HasPrefix(line, "export "):
			env = append(env, strings.TrimPrefix(line, "export "))
			continue
		}
		line = strings.NewReplacer("../../ackd ", procBin+" ", "ackd.toml", cfg).Replace(sub(line))
		cmd := exec.Command("bash", "-c", line)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // killed as a group
		cmd.Dir = "examples/bolt"
		cmd.Env = env
		if i == len(lines)-1 { // the last terminal: the command that sends
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", raw, err, out)
			}
			sendOut = string(out)
			break
		}
		if !strings.Contains(comment, "terminal") {
			t.Fatalf("line %q: expected a long-running command in its own terminal", raw)
		}
		b := &bg{line: raw, out: &procSyncBuffer{}, cmd: cmd}
		cmd.Stdout, cmd.Stderr = b.out, b.out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
		started = append(started, b)
		// The port it is to listen on: the one its line (or, for ackd,
		// its config) names.
		b.port = ports["3000"]
		if m := regexp.MustCompile(`PORT=(\d+)`).FindStringSubmatch(line); m != nil {
			b.port = m[1]
		}
		procWaitFor(t, raw+" listening", 60*time.Second, func() bool {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+b.port, time.Second)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
	}
	dump := func() string {
		var s strings.Builder
		for _, b := range started {
			fmt.Fprintf(&s, "--- %s\n%s\n", b.line, b.out.String())
		}
		return s.String()
	}
	if len(started) != 3 {
		t.Fatalf("started %d long-running commands, want 3 (fake Slack, app, ackd)", len(started))
	}
	fake, app, ackd := started[0], started[1], started[2]
	if sendOut != "200 OK (ackd: first delivery, recorded)\n" {
		t.Errorf("send printed %q", sendOut)
	}
	procWaitFor(t, "the listener's chat.postMessage at the fake Web API", 30*time.Second, func() bool {
		return strings.Contains(app.out.String(), "app_mention Ev0LAN670R:bolt-events attempt 1") &&
			strings.Contains(fake.out.String(), `chat.postMessage {`) && strings.Contains(fake.out.String(), `"text":"Hello <@U061F7AUR>"`)
	})
	var st map[string]any
	procWaitFor(t, "the row done", 20*time.Second, func() bool {
		out := procRun(t, env, "status", "--json", "--config", cfg).Stdout
		return json.Unmarshal([]byte(out), &st) == nil && st["done"] == float64(1)
	})
	if st["parked"] != float64(0) || st["pending"] != float64(0) {
		t.Errorf("status: %v\n%s", st, dump())
	}
	if strings.Contains(fake.out.String(), "auth.test") {
		t.Errorf("Bolt called auth.test without a token:\n%s", dump())
	}
	if s := ackd.out.String(); strings.Contains(s, "outlasts the lease") {
		t.Errorf("examples/bolt/ackd.toml: ackd warns that a full batch outlasts the lease:\n%s", s)
	}
	for _, b := range started[:2] {
		if addr := listenAddr(t, b.port); addr != "127.0.0.1" {
			t.Errorf("%s listens on %s, not 127.0.0.1 only", b.line, addr)
		}
	}
	if t.Failed() {
		t.Log(dump())
	}
}

// listenAddr is the local address of the listening TCP socket on port,
// from /proc/net/tcp and tcp6 ("0.0.0.0", "::" or "127.0.0.1").
func listenAddr(t *testing.T, port string) string {
	t.Helper()
	p, _ := strconv.Atoi(port)
	want := fmt.Sprintf(":%04X", p)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(l)
			if len(fs) < 4 || fs[3] != "0A" || !strings.HasSuffix(fs[1], want) {
				continue
			}
			switch host := strings.TrimSuffix(fs[1], want); host {
			case "0100007F":
				return "127.0.0.1"
			case "00000000":
				return "0.0.0.0"
			default:
				if strings.Trim(host, "0") == "" {
					return "::"
				}
				return host
			}
		}
	}
	t.Fatalf("no listening socket on port %s", port)
	return ""
}
