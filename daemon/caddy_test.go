package daemon_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/ingress"
	"github.com/ackd/ackd/internal/testreq"
)

// caddyFront runs the real Caddy with the shipped systemd/Caddyfile in
// front of upstream, as docs/howto/install-on-a-vm.md installs it, with three test-only global
// options around it: private loopback ports instead of 80/443, Caddy's
// internal CA instead of ACME (site "localhost"), and no admin endpoint.
// HOME and the XDG directories are the test's own, so Caddy writes its
// certificates and state nowhere else and trusts nothing system-wide.
type caddyFront struct {
	httpsAddr, httpAddr string
	roots               *x509.CertPool
	log                 *logBuffer
}

func freePort(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

func startCaddy(tb testing.TB, upstream string) *caddyFront {
	tb.Helper()
	bin, err := exec.LookPath("caddy")
	testreq.Need(tb, err == nil, "caddy is not installed (apt-get install caddy; .ci/with-caddy.sh)")
	shipped, err := filepath.Abs("../systemd/Caddyfile")
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	httpPort, httpsPort := freePort(tb), freePort(tb)
	wrapper := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(wrapper, []byte(fmt.Sprintf(`{
	admin off
	http_port %s
	https_port %s
	default_bind 127.0.0.1
	local_certs
	skip_install_trust
}
import %s
`, httpPort, httpsPort, shipped)), 0o644); err != nil {
		tb.Fatal(err)
	}
	cf := &caddyFront{httpsAddr: "127.0.0.1:" + httpsPort, httpAddr: "127.0.0.1:" + httpPort, log: &logBuffer{}}
	cmd := exec.Command(bin, "run", "--adapter", "caddyfile", "--config", wrapper)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"XDG_DATA_HOME=" + filepath.Join(dir, "data"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"ACKD_HOST=localhost", "ACKD_UPSTREAM=" + upstream}
	cmd.Stdout, cmd.Stderr = cf.log, cf.log
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	// Caddy creates its local CA, then issues localhost's certificate; the
	// front door is up once a handshake verifies against that root.
	root := filepath.Join(dir, "data", "caddy", "pki", "authorities", "local", "root.crt")
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			tb.Fatalf("caddy exited: %v\n%s", waitErr, cf.log)
		default:
		}
		if pem, err := os.ReadFile(root); err == nil {
			pool := x509.NewCertPool()
			if pool.AppendCertsFromPEM(pem) {
				conn, err := tls.Dial("tcp", cf.httpsAddr, &tls.Config{RootCAs: pool, ServerName: "localhost"})
				if err == nil {
					conn.Close()
					cf.roots = pool
					return cf
				}
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("caddy did not serve a certificate for localhost within 30s\n%s", cf.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// client is an HTTPS client that trusts only Caddy's internal CA and whose
// connections leave from 127.0.0.2, so that the client address ackd logs
// can be told apart from Caddy's own (127.0.0.1). It never follows
// redirects.
func (cf *caddyFront) client() *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
	return &http.Client{
		Timeout: 15 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: cf.roots, ServerName: "localhost"},
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				switch {
				case strings.HasPrefix(addr, "localhost:"+portOf(cf.httpsAddr)):
					addr = cf.httpsAddr
				case strings.HasPrefix(addr, "localhost:"+portOf(cf.httpAddr)):
					addr = cf.httpAddr
				default:
					return nil, fmt.Errorf("test client: %s is not the front door", addr)
				}
				return d.DialContext(ctx, network, addr)
			},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// Issue 26: the shipped Caddyfile in front of ackd. Signed Slack requests
// over HTTPS reach ackd and get its answers; ackd logs the client's
// address (from Caddy's X-Forwarded-For, Caddy being on loopback, a
// trusted proxy), not Caddy's; /metrics and /healthz are not exposed.
func TestCaddyFrontDoor(t *testing.T) {
	t.Parallel()
	srv := startServer(t, configFor(t, ""), daemon.Options{})
	cf := startCaddy(t, srv.Addr())
	c := cf.client()
	base := "https://localhost:" + portOf(cf.httpsAddr)

	do := func(method, path, ctype string, body []byte, signed bool, hdr ...string) response {
		t.Helper()
		req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if signed {
			ts := time.Now().Unix()
			req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
			req.Header.Set("X-Slack-Signature", sign(testSecret, ts, body))
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Add(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v\ncaddy:\n%s", method, path, err, cf.log)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return response{Status: resp.StatusCode, Body: string(b), Header: resp.Header}
	}
	logged := func(kv ...any) map[string]any {
		t.Helper()
		var line map[string]any
		waitFor(t, fmt.Sprintf("ackd's log line %v", kv), 5*time.Second, func() bool { line = srv.Logs.Find(kv...); return line != nil })
		return line
	}

	t.Run("a signed event is recorded once, and its retry is a duplicate", func(t *testing.T) {
		body := eventBody("EvCaddy1", message("C1", "1700000000.000100", "hi"))
		// A client-sent X-Forwarded-For is dropped by Caddy, not believed.
		r := do(http.MethodPost, "/slack/events", "application/json", body, true, "X-Forwarded-For", "203.0.113.66")
		if r.Status != http.StatusOK || r.Header.Get(ingress.HeaderOutcome) != "first" {
			t.Fatalf("event through caddy: %d %q %q", r.Status, r.Header.Get(ingress.HeaderOutcome), r.Body)
		}
		line := logged("endpoint", "events", "event_id", "EvCaddy1", "outcome", "first")
		if got := fmt.Sprint(line["client"]); got != "127.0.0.2" {
			t.Errorf("client = %q, want the client's 127.0.0.2 (not Caddy's 127.0.0.1, nor the forged header)", got)
		}
		r = do(http.MethodPost, "/slack/events", "application/json", body, true, "X-Slack-Retry-Num", "1")
		if r.Status != http.StatusOK || r.Header.Get(ingress.HeaderOutcome) != "duplicate" {
			t.Fatalf("retry through caddy: %d %q", r.Status, r.Header.Get(ingress.HeaderOutcome))
		}
		if receipts, rows := srv.rows(); receipts != 1 || rows != 1 {
			t.Errorf("receipts=%d outbox=%d, want 1 and 1", receipts, rows)
		}
	})

	t.Run("url_verification gets its challenge back", func(t *testing.T) {
		body := []byte(`{"token":"t","challenge":"caddy-challenge-42","type":"url_verification"}`)
		r := do(http.MethodPost, "/slack/events", "application/json", body, true)
		if r.Status != http.StatusOK || !strings.Contains(r.Body, "caddy-challenge-42") {
			t.Errorf("challenge through caddy: %d %q", r.Status, r.Body)
		}
	})

	t.Run("a slash command gets ackd's ephemeral answer", func(t *testing.T) {
		body := []byte("command=%2Fnothing&text=x&trigger_id=13345224609.738474920.caddy&user_id=U1&channel_id=C1&team_id=T1&response_url=https%3A%2F%2Fhooks.slack.com%2Fx")
		r := do(http.MethodPost, "/slack/commands", "application/x-www-form-urlencoded", body, true)
		if r.Status != http.StatusOK || !strings.Contains(r.Body, "ephemeral") {
			t.Errorf("command through caddy: %d %q", r.Status, r.Body)
		}
	})

	t.Run("a bad signature is ackd's 401, logged with the client address", func(t *testing.T) {
		body := eventBody("EvCaddyForged", message("C1", "1700000000.000200", "hi"))
		r := do(http.MethodPost, "/slack/events", "application/json", body, false,
			"X-Slack-Request-Timestamp", strconv.FormatInt(time.Now().Unix(), 10), "X-Slack-Signature", "v0=00")
		if r.Status != http.StatusUnauthorized {
			t.Fatalf("forged request through caddy: %d, want 401", r.Status)
		}
		line := logged("endpoint", "events", "status", 401)
		if got := fmt.Sprint(line["client"]); got != "127.0.0.2" {
			t.Errorf("client = %q on the 401 line, want 127.0.0.2", got)
		}
	})

	t.Run("a body over 1 MiB stops at Caddy", func(t *testing.T) {
		big := bytes.Repeat([]byte("x"), 2<<20)
		r := do(http.MethodPost, "/slack/events", "application/json", big, true)
		// ackd would answer 413 itself, with its X-Ackd-Outcome header.
		if r.Status < 400 || r.Header.Get(ingress.HeaderOutcome) != "" {
			t.Errorf("2 MiB body through caddy: %d (ackd's outcome %q), want Caddy's refusal", r.Status, r.Header.Get(ingress.HeaderOutcome))
		}
	})

	t.Run("metrics and healthz are not exposed; ackd serves them on loopback only", func(t *testing.T) {
		for _, path := range []string{"/metrics", "/healthz", "/", "/slack"} {
			r := do(http.MethodGet, path, "", nil, false)
			if r.Status != http.StatusNotFound || strings.Contains(r.Body, "ackd_") || r.Header.Get(ingress.HeaderOutcome) != "" {
				t.Errorf("GET %s through caddy: %d %.80q, want 404 without ackd's answer", path, r.Status, r.Body)
			}
		}
		// The same paths on ackd's own address answer: the 404 above is
		// Caddy's refusal, not ackd's absence.
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte("ackd_build_info")) {
			t.Errorf("GET /metrics on ackd itself: %d", resp.StatusCode)
		}
	})

	t.Run("plain HTTP is redirected to HTTPS", func(t *testing.T) {
		resp, err := c.Get("http://localhost:" + portOf(cf.httpAddr) + "/slack/events")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 3 || !strings.HasPrefix(resp.Header.Get("Location"), "https://localhost") {
			t.Errorf("http:// through caddy: %d Location %q, want a redirect to https://", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
}

// The shipped Caddyfile's commented console block, uncommented as
// docs/howto/console.md says (a hash from `caddy hash-password`), is a
// configuration the real Caddy accepts, and puts its basic auth in front
// of the console's loopback address.
func TestCaddyConsoleBlock(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("caddy")
	testreq.Need(t, err == nil, "caddy is not installed (apt-get install caddy; .ci/with-caddy.sh)")
	shipped, err := os.ReadFile("../systemd/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	text := string(shipped)
	start := strings.Index(text, "# {$ACKD_CONSOLE_HOST} {")
	if start < 0 {
		t.Fatal("the Caddyfile has no commented console block")
	}
	var block []string
	for _, l := range strings.Split(text[start:], "\n") {
		if !strings.HasPrefix(l, "#") {
			break
		}
		block = append(block, strings.TrimPrefix(strings.TrimPrefix(l, "#"), " "))
	}
	hash, err := exec.Command(bin, "hash-password", "--plaintext", "console-pw").Output()
	if err != nil {
		t.Fatal(err)
	}
	uncommented := strings.Replace(strings.Join(block, "\n"), "<the output of caddy hash-password>", strings.TrimSpace(string(hash)), 1)
	dir := t.TempDir()
	file := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(file, []byte(text+"\n"+uncommented+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "adapt", "--adapter", "caddyfile", "--config", file)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "ACKD_HOST=ackd.example.com", "ACKD_CONSOLE_HOST=console.example.com"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("caddy adapt with the console block: %v\n%s\n%s", err, out, uncommented)
	}
	for _, want := range []string{`"console.example.com"`, `"http_basic"`, `"127.0.0.1:3002"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the adapted config lacks %s:\n%s", want, out)
		}
	}
}
