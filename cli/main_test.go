package cli

// Tests of the real ackd binary as separate OS processes: built once in
// TestMain, run with exec.Command and an explicit environment, killed with
// real signals, sharing real SQLite files with each other and with the
// sqlite3 CLI. Every daemon listens on a free 127.0.0.1 port and every
// forward target is an httptest server on 127.0.0.1.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/internal/testreq"
	"github.com/ackd/ackd/slacksim"
	"github.com/ackd/ackd/store/postgres"
)

// procBin is the ackd binary built by TestMain.
var procBin string

func TestMain(m *testing.M) {
	// These tests run the whole binary and read the repository's own files
	// (README, docs, examples, systemd units, schema.sql) by their paths
	// from its root, where `go build .` builds the binary.
	if err := os.Chdir(".."); err != nil {
		fmt.Fprintln(os.Stderr, "main_test: chdir to the repository root:", err)
		os.Exit(2)
	}
	b, err := os.ReadFile("schema.sql")
	if err != nil {
		fmt.Fprintln(os.Stderr, "main_test: schema.sql:", err)
		os.Exit(2)
	}
	schema = string(b) // what package main embeds and hands to Execute
	dir, err := os.MkdirTemp("", "ackd-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "main_test: temp dir:", err)
		os.Exit(2)
	}
	procBin = filepath.Join(dir, "ackd")
	if out, err := exec.Command("go", "build", "-o", procBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "main_test: go build -o %s . failed: %v\n%s", procBin, err, out)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	testreq.Report() // what skipped, and why, without -v too
	os.Exit(code)
}

const procSecret = "proc-test-signing-secret-0123456789"

// procSyncBuffer is a bytes.Buffer safe for a process writer and test readers.
type procSyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *procSyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *procSyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// procEnv is the complete environment of an ackd process: PATH, HOME and the
// signing secret, nothing inherited (no ACKD_*, no NOTIFY_SOCKET). Each
// override is "KEY=value"; "KEY=" removes KEY.
func procEnv(overrides ...string) []string {
	env := map[string]string{
		"PATH":                 os.Getenv("PATH"),
		"HOME":                 os.TempDir(),
		"SLACK_SIGNING_SECRET": procSecret,
		// No test reaches Slack: serve's and config check's auth.test is
		// tested against a fake (errors_test.go) with this unset.
		"ACKD_SLACK_CHECK": "off",
	}
	for _, o := range overrides {
		k, v, _ := strings.Cut(o, "=")
		if v == "" {
			delete(env, k)
		} else {
			env[k] = v
		}
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// procResult is a finished ackd command.
type procResult struct {
	Code           int
	Stdout, Stderr string
}

// procRun runs ackd with args to completion (at most 30 s).
func procRun(tb testing.TB, env []string, args ...string) procResult {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, procBin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		tb.Fatalf("ackd %s: %v", strings.Join(args, " "), err)
	}
	if ctx.Err() != nil {
		tb.Fatalf("ackd %s did not finish within 30s; stderr:\n%s", strings.Join(args, " "), stderr.String())
	}
	return procResult{Code: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String()}
}

// procMustRun runs ackd and fails the test unless it exits 0.
func procMustRun(tb testing.TB, env []string, args ...string) procResult {
	tb.Helper()
	r := procRun(tb, env, args...)
	if r.Code != 0 {
		tb.Fatalf("ackd %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r
}

// procProc is an ackd process running in the background; it is killed at
// cleanup if still running, and its stderr is printed if the test failed.
type procProc struct {
	t      testing.TB
	cmd    *exec.Cmd
	args   []string
	Stdout procSyncBuffer
	Stderr procSyncBuffer // JSON log lines
	done   chan struct{}  // closed when the process has exited
}

// procStart starts a command (ackd, or a shell that execs ackd) in the
// background.
func procStart(tb testing.TB, env []string, name string, args ...string) *procProc {
	tb.Helper()
	p := &procProc{t: tb, args: args, done: make(chan struct{})}
	p.cmd = exec.Command(name, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = &p.Stdout, &p.Stderr
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("start %s %s: %v", name, strings.Join(args, " "), err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	tb.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if tb.Failed() {
			tb.Logf("ackd %s (pid %d) stderr:\n%s", strings.Join(args, " "), p.cmd.Process.Pid, p.Stderr.String())
		}
	})
	return p
}

func (p *procProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process.
func (p *procProc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait waits for the process to exit and returns its wait status.
func (p *procProc) wait(timeout time.Duration) syscall.WaitStatus {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("ackd %s did not exit within %s", strings.Join(p.args, " "), timeout)
	}
	return p.cmd.ProcessState.Sys().(syscall.WaitStatus)
}

// stop sends SIGTERM and requires a clean exit 0.
func (p *procProc) stop() {
	p.t.Helper()
	p.signal(syscall.SIGTERM)
	if ws := p.wait(30 * time.Second); !ws.Exited() || ws.ExitStatus() != 0 {
		p.t.Fatalf("ackd %s after SIGTERM: %v, want exit 0", strings.Join(p.args, " "), ws)
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (p *procProc) kill() {
	p.t.Helper()
	p.signal(syscall.SIGKILL)
	if ws := p.wait(10 * time.Second); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		p.t.Fatalf("ackd %s: %v, want killed by SIGKILL", strings.Join(p.args, " "), ws)
	}
}

// procDaemon is a running `ackd serve`.
type procDaemon struct {
	*procProc
	Addr string // 127.0.0.1:port
	URL  string // http://127.0.0.1:port
	DB   string
}

// procServeOpts says how to start `ackd serve`.
type procServeOpts struct {
	Config string   // config file path ("" = built-in defaults)
	DB     string   // database path
	Env    []string // full environment (nil = procEnv())
	Umask  bool     // start through `sh -c 'umask 000; exec ackd …'`
}

// procFreeAddr picks a free loopback port.
func procFreeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// procServe starts `ackd serve` and waits until /healthz answers 200. If
// another process took the free port first, it tries another one.
func procServe(tb testing.TB, o procServeOpts) *procDaemon {
	tb.Helper()
	for try := 1; ; try++ {
		d, lostPort := procTryServe(tb, o)
		if !lostPort {
			return d
		}
		if try == 3 {
			tb.Fatalf("ackd serve: no free port after %d tries; stderr:\n%s", try, d.Stderr.String())
		}
	}
}

func procTryServe(tb testing.TB, o procServeOpts) (d *procDaemon, lostPort bool) {
	tb.Helper()
	addr := procFreeAddr(tb)
	args := []string{"serve", "--listen", addr}
	if o.DB != "" { // "": the database the config and the environment name
		args = append(args, "--db", o.DB)
	}
	if o.Config != "" {
		args = append(args, "--config", o.Config)
	}
	env := o.Env
	if env == nil {
		env = procEnv()
	}
	var p *procProc
	if o.Umask {
		p = procStart(tb, env, "sh", append([]string{"-c", `umask 000; exec "$0" "$@"`, procBin}, args...)...)
	} else {
		p = procStart(tb, env, procBin, args...)
	}
	d = &procDaemon{procProc: p, Addr: addr, URL: "http://" + addr, DB: o.DB}
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if p.exited() {
			if strings.Contains(p.Stderr.String(), "address already in use") {
				return d, true
			}
			tb.Fatalf("ackd serve exited before it was healthy: %v\nstderr:\n%s", p.cmd.ProcessState, p.Stderr.String())
		}
		if resp, err := client.Get(d.URL + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d, false
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("ackd serve on %s not healthy within 20s; stderr:\n%s", addr, p.Stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// procWriteConfig writes a TOML config file into dir.
func procWriteConfig(tb testing.TB, dir, name, toml string) string {
	tb.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// procLogAndForwardConfig writes a config with two app_mention routes: a
// log route and a forward to url.
func procLogAndForwardConfig(tb testing.TB, dir, url string) string {
	tb.Helper()
	return procWriteConfig(tb, dir, "ackd.toml", fmt.Sprintf(`
[[route]]
name   = "log"
event  = "app_mention"
effect = "log"

[[route]]
name   = "fwd"
event  = "app_mention"
effect = "forward"
url    = %q
`, url))
}

// procMention is a signed-ready Events API app_mention envelope.
func procMention(eventID, text string) []byte {
	const ts = "1700000000.000100"
	b, _ := json.Marshal(map[string]any{
		"token": "tok", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
		"event_id": eventID, "event_time": 1700000000,
		"event": map[string]any{"type": "app_mention", "user": "U1", "text": text, "ts": ts,
			"channel": "C1", "event_ts": ts},
	})
	return b
}

var procClient = &http.Client{Timeout: 15 * time.Second}

// procPost signs body with secret and POSTs it to url. It returns the status,
// or the error for a request that got no answer at all.
func procPost(url, secret string, body []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	slacksim.SignRequest(req, secret, time.Now(), body)
	resp, err := procClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// mustPostEvent sends a signed event to the daemon and requires a 200.
func (d *procDaemon) mustPostEvent(body []byte) {
	d.t.Helper()
	status, err := procPost(d.URL+"/slack/events", procSecret, body)
	if err != nil || status != http.StatusOK {
		d.t.Fatalf("POST /slack/events: status %d, err %v; want 200", status, err)
	}
}

// procOpenDB opens the database file from the test process (no ackd code).
func procOpenDB(tb testing.TB, path string) *sql.DB {
	tb.Helper()
	if config.IsPostgres(path) {
		db, err := sql.Open("pgx", path)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { db.Close() })
		return db
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func procQueryInt(tb testing.TB, db *sql.DB, q string, args ...any) int64 {
	tb.Helper()
	var n sql.NullInt64
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", q, err)
	}
	return n.Int64
}

// procWaitFor polls cond until it holds or timeout passes.
func procWaitFor(tb testing.TB, what string, timeout time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// procHookRequest is one request a forward target received.
type procHookRequest struct {
	Key, Attempt string
	Body         []byte
}

// procHook is a forward target on 127.0.0.1 that records every request. It
// answers with status; with blockFirst, the first request is held without an
// answer until its client goes away or the test ends.
type procHook struct {
	*httptest.Server
	status     atomic.Int32
	blockFirst bool
	release    chan struct{}
	arrived    chan struct{} // one token per request

	mu   sync.Mutex
	reqs []procHookRequest
}

func procNewHook(tb testing.TB, status int, blockFirst bool) *procHook {
	tb.Helper()
	h := &procHook{blockFirst: blockFirst, release: make(chan struct{}), arrived: make(chan struct{}, 1024)}
	h.status.Store(int32(status))
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.reqs = append(h.reqs, procHookRequest{Key: r.Header.Get("Idempotency-Key"),
			Attempt: r.Header.Get("X-Ackd-Attempt"), Body: body})
		n := len(h.reqs)
		h.mu.Unlock()
		h.arrived <- struct{}{}
		if h.blockFirst && n == 1 {
			select {
			case <-h.release:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(int(h.status.Load()))
	}))
	tb.Cleanup(func() {
		close(h.release)
		h.Close()
	})
	return h
}

func (h *procHook) requests() []procHookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]procHookRequest(nil), h.reqs...)
}

// procOneLine requires s to be exactly one line and returns it.
func procOneLine(tb testing.TB, s string) string {
	tb.Helper()
	line := strings.TrimRight(s, "\n")
	if line == "" || strings.Contains(line, "\n") {
		tb.Fatalf("want exactly one line, got %q", s)
	}
	return line
}

// Issue 2: a sweep process dies (SIGKILL) while its effect is in flight. The
// row stays pending under the dead sweep's lease, no other sweep may touch it
// while the lease holds, and after expiry the next sweep repeats the effect:
// at-least-once, with the same Idempotency-Key, and the row ends done.
func TestSweepKilledDuringEffectRepeatsAfterLease(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	hook := procNewHook(t, http.StatusOK, true)
	// The effect's timeout (4s) outlasts the moment of the kill; the lease
	// (5s) exceeds the timeout, as validation demands.
	cfg := procWriteConfig(t, dir, "ackd.toml", fmt.Sprintf(`
[sweep]
immediate = false
interval  = "1h"
lease     = "5s"

[[route]]
name    = "fwd"
event   = "app_mention"
effect  = "forward"
url     = %q
timeout = "4s"
`, hook.URL))

	// Record the intent through the binary: serve, `ackd send`, SIGTERM.
	d := procServe(t, procServeOpts{Config: cfg, DB: db})
	payload := filepath.Join(dir, "mention.json")
	if err := os.WriteFile(payload, procMention("EvCrash1", "<@UBOT> deploy"), 0o600); err != nil {
		t.Fatal(err)
	}
	sent := procMustRun(t, procEnv(), "send", "--listen", d.Addr, payload)
	if !strings.HasPrefix(sent.Stdout, "200 ") {
		t.Fatalf("ackd send: %q, want 200", sent.Stdout)
	}
	d.stop()
	if n := len(hook.requests()); n != 0 {
		t.Fatalf("forward target saw %d requests before any sweep (immediate = false)", n)
	}

	sdb := procOpenDB(t, db)
	const key = "EvCrash1:fwd"
	lease := func() (status string, token sql.NullString, expires sql.NullInt64, attempts int) {
		t.Helper()
		err := sdb.QueryRow(`SELECT status, claim_token, claim_expires_at, attempts FROM outbox WHERE idempotency_key = ?`, key).
			Scan(&status, &token, &expires, &attempts)
		if err != nil {
			t.Fatalf("outbox row %s: %v", key, err)
		}
		return
	}
	if st, tok, _, _ := lease(); st != "pending" || tok.Valid {
		t.Fatalf("before the sweep: status %q token %v, want pending and unclaimed", st, tok)
	}

	sweep1 := procStart(t, procEnv(), procBin, "sweep", "--once", "--config", cfg, "--db", db)
	select {
	case <-hook.arrived:
	case <-sweep1.done:
		t.Fatalf("sweep exited before the effect reached the target; stdout %q", sweep1.Stdout.String())
	case <-time.After(20 * time.Second):
		t.Fatal("the forward target never received the effect")
	}
	sweep1.kill()

	st, tok, exp, attempts := lease()
	if st != "pending" || !tok.Valid || !exp.Valid || attempts != 0 {
		t.Fatalf("after SIGKILL mid-effect: status %q token %v expires %v attempts %d; want pending under the dead sweep's lease",
			st, tok, exp, attempts)
	}

	t.Run("a sweep while the dead sweep's lease holds claims nothing", func(t *testing.T) {
		if time.Now().UnixMilli() >= exp.Int64 {
			t.Skip("the lease already expired on this slow machine; nothing to prove")
		}
		out := procMustRun(t, procEnv(), "sweep", "--once", "--config", cfg, "--db", db)
		// The lease may run out during this run; then the row is claimed and done.
		if out.Stdout != "claimed=0 done=0 retried=0 parked=0 fenced=0\n" && time.Now().UnixMilli() < exp.Int64 {
			t.Fatalf("sweep under a live lease printed %q", out.Stdout)
		}
	})

	procWaitFor(t, "the dead sweep's lease to expire", 30*time.Second, func() bool {
		return time.Now().UnixMilli() > exp.Int64
	})
	if st, _, _, _ := lease(); st == "pending" {
		out := procMustRun(t, procEnv(), "sweep", "--once", "--config", cfg, "--db", db)
		if want := "claimed=1 done=1 retried=0 parked=0 fenced=0\n"; out.Stdout != want {
			t.Fatalf("sweep after lease expiry printed %q, want %q", out.Stdout, want)
		}
	}

	reqs := hook.requests()
	if len(reqs) != 2 {
		t.Fatalf("forward target received %d requests, want exactly 2 (at-least-once: the killed attempt and the repeat)", len(reqs))
	}
	for i, r := range reqs {
		if r.Key != key {
			t.Errorf("request %d: Idempotency-Key %q, want %q", i+1, r.Key, key)
		}
	}
	for i, r := range reqs {
		if !strings.Contains(string(r.Body), `"event_id":"EvCrash1"`) {
			t.Errorf("request %d does not carry the event:\n%s", i+1, r.Body)
		}
	}
	if st, tok, _, _ := lease(); st != "done" {
		t.Fatalf("row %s is %q (token %v), want done", key, st, tok)
	}
}

// Issue 3: the daemon answers 200 and dies (SIGKILL) before the effect ran.
// The intent was durable: a restarted daemon's ticker performs the effect
// exactly once. The sweep is the contract, not the immediate attempt.
func TestDaemonKilledAfterAckDeliversOnRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	hook := procNewHook(t, http.StatusOK, false)
	route := fmt.Sprintf(`
[[route]]
name   = "fwd"
event  = "app_mention"
effect = "forward"
url    = %q
`, hook.URL)
	idle := procWriteConfig(t, dir, "idle.toml", "[sweep]\nimmediate = false\ninterval = \"1h\"\n"+route)
	ticking := procWriteConfig(t, dir, "ticking.toml", "[sweep]\nimmediate = false\ninterval = \"200ms\"\n"+route)

	d := procServe(t, procServeOpts{Config: idle, DB: db})
	d.mustPostEvent(procMention("EvKill1", "<@UBOT> hello"))
	d.kill()
	if n := len(hook.requests()); n != 0 {
		t.Fatalf("forward target saw %d requests before the daemon died; want 0 (no immediate attempt, no tick)", n)
	}

	d2 := procServe(t, procServeOpts{Config: ticking, DB: db})
	sdb := procOpenDB(t, db)
	procWaitFor(t, "the restarted daemon's ticker to complete the row", 20*time.Second, func() bool {
		return procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE idempotency_key = 'EvKill1:fwd' AND status = 'done'`) == 1
	})
	d2.stop()

	reqs := hook.requests()
	if len(reqs) != 1 {
		t.Fatalf("forward target received %d requests, want exactly 1", len(reqs))
	}
	if reqs[0].Key != "EvKill1:fwd" || reqs[0].Attempt != "1" {
		t.Errorf("delivery: Idempotency-Key %q attempt %q, want EvKill1:fwd attempt 1", reqs[0].Key, reqs[0].Attempt)
	}
	if n := procQueryInt(t, sdb, `SELECT count(*) FROM slack_event_receipts WHERE event_id = 'EvKill1'`); n != 1 {
		t.Errorf("receipts for EvKill1: %d, want 1", n)
	}
}

// Issue 3: SIGTERM while ~50 clients are sending. Every request answered
// 200 was recorded, none got a 5xx, the process exits 0 and the file is
// intact. Requests that found the listener closed got no answer at all.
func TestSIGTERMWithRequestsInFlight(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	cfg := procWriteConfig(t, dir, "ackd.toml", `
[[route]]
name   = "log"
event  = "app_mention"
effect = "log"
`)
	d := procServe(t, procServeOpts{Config: cfg, DB: db})

	type outcome struct {
		id     string
		status int
		err    error
		at     time.Time // when the answer (or the error) came back
	}
	const clients = 50
	var (
		mu       sync.Mutex
		outcomes []outcome
		ok       atomic.Int64
		wg       sync.WaitGroup
	)
	enough := make(chan struct{})
	var enoughOnce sync.Once
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each client sends until the daemon stops answering.
			for i := 0; ; i++ {
				id := fmt.Sprintf("EvTerm-%02d-%04d", c, i)
				status, err := procPost(d.URL+"/slack/events", procSecret, procMention(id, "load"))
				mu.Lock()
				outcomes = append(outcomes, outcome{id, status, err, time.Now()})
				mu.Unlock()
				if err != nil || i >= 2000 {
					return
				}
				if status == http.StatusOK && ok.Add(1) == 150 {
					enoughOnce.Do(func() { close(enough) })
				}
			}
		}()
	}
	select {
	case <-enough:
	case <-time.After(30 * time.Second):
		t.Fatalf("fewer than 150 acks within 30s (got %d)", ok.Load())
	}
	termAt := time.Now()
	d.signal(syscall.SIGTERM) // requests are in flight right now
	ws := d.wait(30 * time.Second)
	wg.Wait()
	if !ws.Exited() || ws.ExitStatus() != 0 {
		t.Fatalf("ackd serve after SIGTERM under load: %v, want exit 0", ws)
	}

	sdb := procOpenDB(t, db)
	receipts := map[string]bool{}
	rows, err := sdb.Query(`SELECT r.event_id FROM slack_event_receipts r
		JOIN outbox o ON o.idempotency_key = r.event_id || ':log'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		receipts[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var acked, ackedAfterTerm, refused int
	for _, o := range outcomes {
		switch {
		case o.err != nil:
			refused++
		case o.status != http.StatusOK:
			t.Errorf("%s: status %d; want 200 or no answer at all", o.id, o.status)
		default:
			acked++
			if o.at.After(termAt) {
				ackedAfterTerm++
			}
			if !receipts[o.id] {
				t.Errorf("%s was answered 200 but has no receipt and outbox row", o.id)
			}
		}
	}
	t.Logf("%d acked (%d of them answered after the SIGTERM), %d without an answer, %d receipts",
		acked, ackedAfterTerm, refused, len(receipts))
	var check string
	if err := sdb.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check: %q, %v", check, err)
	}
	if strings.Contains(d.Stderr.String(), `"level":"ERROR"`) {
		t.Errorf("the daemon logged errors during a graceful shutdown:\n%s", d.Stderr.String())
	}
}

// DESIGN: the daemon and a hand-run `ackd sweep --once` share one file. The
// hand-run sweep performs what the idle daemon enqueued and prints its
// one-line summary; the daemon stays healthy.
func TestSweepOnceBesideRunningDaemon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	cfg := procWriteConfig(t, dir, "ackd.toml", `
[sweep]
immediate = false
interval  = "1h"

[[route]]
name   = "log"
event  = "app_mention"
effect = "log"
`)
	d := procServe(t, procServeOpts{Config: cfg, DB: db})
	for i := range 3 {
		d.mustPostEvent(procMention(fmt.Sprintf("EvHand%d", i), "by hand"))
	}

	out := procMustRun(t, procEnv(), "sweep", "--once", "--config", cfg, "--db", db)
	if want := "claimed=3 done=3 retried=0 parked=0 fenced=0\n"; out.Stdout != want {
		t.Fatalf("sweep --once printed %q, want %q", out.Stdout, want)
	}
	if n := strings.Count(out.Stderr, "dry run: effect logged"); n != 3 {
		t.Errorf("sweep --once logged %d dry-run effects, want 3:\n%s", n, out.Stderr)
	}
	sdb := procOpenDB(t, db)
	if n := procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE status = 'done'`); n != 3 {
		t.Errorf("done rows: %d, want 3", n)
	}
	resp, err := procClient.Get(d.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("daemon /healthz after the hand-run sweep: %d", resp.StatusCode)
	}
	again := procMustRun(t, procEnv(), "sweep", "--once", "--config", cfg, "--db", db)
	if want := "claimed=0 done=0 retried=0 parked=0 fenced=0\n"; again.Stdout != want {
		t.Errorf("second sweep --once printed %q, want %q", again.Stdout, want)
	}
	d.stop()
}

// Issue 2: a database path that cannot be used fails the command with a
// non-zero exit and one line on stderr naming the path and the reason.
func TestBadDatabasePath(t *testing.T) {
	t.Parallel()
	env := procEnv()
	failsNaming := func(t *testing.T, path, reason string, args ...string) {
		t.Helper()
		r := procRun(t, env, append(args, "--db", path)...)
		if r.Code == 0 {
			t.Fatalf("ackd %s --db %s: exit 0, want failure\nstdout: %s", strings.Join(args, " "), path, r.Stdout)
		}
		line := procOneLine(t, r.Stderr)
		if !strings.Contains(line, path) || !strings.Contains(line, reason) {
			t.Fatalf("ackd %s: stderr %q does not name the path %s and the reason %q", strings.Join(args, " "), line, path, reason)
		}
	}

	t.Run("a missing directory is named", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "no-such-dir", "ackd.db")
		for _, cmd := range [][]string{{"migrate"}, {"status"}} {
			failsNaming(t, path, "no such file or directory", cmd...)
		}
		if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the missing directory was created: %v", err)
		}
	})

	t.Run("inspection commands do not create a database at a mistyped path", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "typo.db")
		for _, cmd := range [][]string{{"status"}, {"outbox", "list"}, {"prune"}, {"sweep", "--once"}} {
			failsNaming(t, path, "no database file here", cmd...)
		}
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a database was created at the mistyped path: %v", err)
		}
	})

	t.Run("a file that is not SQLite is refused and left untouched", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "notes.db")
		text := []byte("these are my notes, not a database\n")
		if err := os.WriteFile(path, text, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range [][]string{{"migrate"}, {"status"}} {
			failsNaming(t, path, "not an SQLite database", cmd...)
		}
		if b, _ := os.ReadFile(path); !bytes.Equal(b, text) {
			t.Errorf("the text file was changed: %q", b)
		}
	})

	t.Run("an immutable database reads but refuses writes", func(t *testing.T) {
		if _, err := exec.LookPath("chattr"); err != nil {
			t.Skip("chattr is not installed; root ignores chmod, so there is no other honest read-only file")
		}
		path := filepath.Join(t.TempDir(), "ackd.db")
		procMustRun(t, env, "migrate", "--db", path)
		if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
			t.Skipf("chattr +i is not supported here: %v: %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("chattr", "-i", path).Run() })

		// Reading needs no write access to the main file: status works.
		st := procMustRun(t, env, "status", "--json", "--db", path)
		var s map[string]any
		if err := json.Unmarshal([]byte(st.Stdout), &s); err != nil || s["schema_version"] != float64(schemaVersion(t)) {
			t.Fatalf("status --json on an immutable database: %q (%v)", st.Stdout, err)
		}
		// Writing does not, and says which file and why.
		failsNaming(t, path, "is read-only", "prune")
		failsNaming(t, path, "is read-only", "outbox", "retry", "--all-parked")
	})
}

// procSQLiteJSON runs the sqlite3 CLI with -json and decodes its rows.
func procSQLiteJSON(tb testing.TB, db, query string) []map[string]any {
	tb.Helper()
	cmd := exec.Command("sqlite3", "-json", db, query)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("sqlite3 %q: %v: %s", query, err, stderr.String())
	}
	var rows []map[string]any
	if len(bytes.TrimSpace(out)) == 0 {
		return rows
	}
	if err := json.Unmarshal(out, &rows); err != nil {
		tb.Fatalf("sqlite3 %q printed %q: %v", query, out, err)
	}
	return rows
}

// DESIGN §1 and §3: an operator reads the queue with the sqlite3 CLI while the
// daemon holds the file open for writing and keeps acking events.
func TestSQLiteCLIReadsViewsWhileServing(t *testing.T) {
	if _, err := exec.LookPath("sqlite3"); err != nil {
		t.Skip("the sqlite3 CLI is not installed (CI installs it)")
	}
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	hook := procNewHook(t, http.StatusBadRequest, false) // a 400 parks at once
	cfg := procLogAndForwardConfig(t, dir, hook.URL)
	d := procServe(t, procServeOpts{Config: cfg, DB: db})
	for i := range 4 {
		d.mustPostEvent(procMention(fmt.Sprintf("EvView%d", i), "look"))
	}

	summary := func() map[string]map[string]any {
		by := map[string]map[string]any{}
		for _, r := range procSQLiteJSON(t, db, `SELECT * FROM queue_summary`) {
			by[fmt.Sprint(r["status"])] = r
		}
		return by
	}
	procWaitFor(t, "queue_summary to show 4 done and 4 parked", 20*time.Second, func() bool {
		s := summary()
		return s["done"] != nil && s["done"]["rows"] == float64(4) &&
			s["parked"] != nil && s["parked"]["rows"] == float64(4) && s["pending"] == nil
	})

	t.Run("parked shows each parked row with its last error", func(t *testing.T) {
		rows := procSQLiteJSON(t, db, `SELECT * FROM parked`)
		if len(rows) != 4 {
			t.Fatalf("parked: %d rows, want 4: %v", len(rows), rows)
		}
		for i, r := range rows {
			if want := fmt.Sprintf("EvView%d:fwd", i); r["idempotency_key"] != want {
				t.Errorf("parked row %d: key %v, want %s", i, r["idempotency_key"], want)
			}
			if r["effect"] != "forward" || r["attempts"] != float64(1) || !strings.Contains(fmt.Sprint(r["last_error"]), "400") {
				t.Errorf("parked row %d: %v; want forward, 1 attempt, last_error naming the 400", i, r)
			}
		}
	})
	t.Run("receipts_readable shows each event with a readable time", func(t *testing.T) {
		rows := procSQLiteJSON(t, db, `SELECT * FROM receipts_readable ORDER BY event_id`)
		if len(rows) != 4 {
			t.Fatalf("receipts_readable: %d rows, want 4", len(rows))
		}
		stamp := regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$`)
		for i, r := range rows {
			if r["event_id"] != fmt.Sprintf("EvView%d", i) || r["event_type"] != "app_mention" ||
				!stamp.MatchString(fmt.Sprint(r["received"])) {
				t.Errorf("receipt %d: %v", i, r)
			}
		}
	})
	t.Run("outbox_readable shows completion times for done rows only", func(t *testing.T) {
		rows := procSQLiteJSON(t, db, `SELECT * FROM outbox_readable ORDER BY id`)
		if len(rows) != 8 {
			t.Fatalf("outbox_readable: %d rows, want 8", len(rows))
		}
		for _, r := range rows {
			done := r["status"] == "done"
			if done != (r["completed"] != nil) || r["lease_until"] != nil {
				t.Errorf("outbox_readable row: %v", r)
			}
		}
	})

	t.Run("reads succeed while the daemon keeps acking", func(t *testing.T) {
		stop := make(chan struct{})
		errc := make(chan error, 1)
		go func() {
			defer close(errc)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				status, err := procPost(d.URL+"/slack/events", procSecret, procMention(fmt.Sprintf("EvBusy%d", i), "busy"))
				if err != nil || status != http.StatusOK {
					errc <- fmt.Errorf("event %d during reads: status %d, err %v", i, status, err)
					return
				}
			}
		}()
		for range 10 {
			for _, view := range []string{"queue_summary", "outbox_readable", "parked", "receipts_readable"} {
				procSQLiteJSON(t, db, "SELECT count(*) AS n FROM "+view)
			}
		}
		close(stop)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		s := procSQLiteJSON(t, db, `SELECT count(*) AS n FROM receipts_readable`)
		if n := s[0]["n"].(float64); n <= 4 {
			t.Errorf("receipts after the concurrent phase: %v, want more than 4", n)
		}
	})
	d.stop()
}

// Issue 3: startup refuses to run on a bad configuration or without the
// signing secret, and says what is wrong; the secret may come from a file.
func TestStartupFailures(t *testing.T) {
	t.Parallel()

	refuses := func(t *testing.T, env []string, toml string, want ...string) {
		t.Helper()
		dir := t.TempDir()
		db := filepath.Join(dir, "ackd.db")
		args := []string{"serve", "--listen", procFreeAddr(t), "--db", db}
		if toml != "" {
			args = append(args, "--config", procWriteConfig(t, dir, "ackd.toml", toml))
		}
		r := procRun(t, env, args...)
		if r.Code == 0 {
			t.Fatalf("ackd serve exited 0; stderr:\n%s", r.Stderr)
		}
		for _, w := range want {
			if !strings.Contains(r.Stderr, w) {
				t.Errorf("stderr does not name %q:\n%s", w, r.Stderr)
			}
		}
		if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a refused startup created the database (%v)", err)
		}
	}

	t.Run("no signing secret", func(t *testing.T) {
		refuses(t, procEnv("SLACK_SIGNING_SECRET="), "", "SLACK_SIGNING_SECRET")
	})
	t.Run("socket mode without an app-level token", func(t *testing.T) {
		refuses(t, procEnv("SLACK_SIGNING_SECRET="), "[socket_mode]\nenabled = true\n", "SLACK_APP_TOKEN")
	})
	t.Run("socket mode with a bot token in SLACK_APP_TOKEN_FILE", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "app-token")
		if err := os.WriteFile(file, []byte("xoxb-not-an-app-token\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		refuses(t, procEnv("SLACK_APP_TOKEN_FILE="+file), "[socket_mode]\nenabled = true\n", "must start with xapp-")
	})
	t.Run("both the secret and its file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "secret")
		if err := os.WriteFile(file, []byte(procSecret), 0o600); err != nil {
			t.Fatal(err)
		}
		refuses(t, procEnv("SLACK_SIGNING_SECRET_FILE="+file), "", "SLACK_SIGNING_SECRET_FILE")
	})
	t.Run("unknown key", func(t *testing.T) {
		refuses(t, procEnv(), "[sweep]\ninterval = \"1s\"\nintervall = \"2s\"\n", "sweep.intervall", "line 3")
	})
	t.Run("duplicate route name", func(t *testing.T) {
		refuses(t, procEnv(), `
[[route]]
name   = "twice"
event  = "message"
effect = "log"

[[route]]
name   = "twice"
event  = "app_mention"
effect = "log"
`, `line 7: route "twice": duplicate route name (first at line 2`)
	})
	t.Run("unknown effect", func(t *testing.T) {
		refuses(t, procEnv(), `
[[route]]
name   = "psychic"
event  = "message"
effect = "telepathy"
`, `route "psychic"`, `effect "telepathy"`)
	})
	t.Run("lease not longer than a route timeout", func(t *testing.T) {
		refuses(t, procEnv(), `
[sweep]
lease = "30s"

[[route]]
name    = "slow"
event   = "message"
effect  = "forward"
url     = "http://127.0.0.1:9/"
timeout = "30s"
`, `route "slow"`, "sweep.lease")
	})

	t.Run("the secret from SLACK_SIGNING_SECRET_FILE verifies requests", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "signing-secret")
		const fileSecret = "secret-from-a-systemd-credential"
		if err := os.WriteFile(file, []byte(fileSecret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		env := procEnv("SLACK_SIGNING_SECRET=", "SLACK_SIGNING_SECRET_FILE="+file)
		d := procServe(t, procServeOpts{DB: filepath.Join(dir, "ackd.db"), Env: env})
		if status, err := procPost(d.URL+"/slack/events", fileSecret, procMention("EvFile1", "hi")); err != nil || status != http.StatusOK {
			t.Errorf("signed with the file's secret: %d %v, want 200", status, err)
		}
		if status, err := procPost(d.URL+"/slack/events", procSecret, procMention("EvFile2", "hi")); err != nil || status != http.StatusUnauthorized {
			t.Errorf("signed with another secret: %d %v, want 401", status, err)
		}
		d.stop()
	})
}

// Issue 6: the database and its -wal and -shm files are private (0600) even
// when ackd runs under umask 000.
func TestDatabaseFilesArePrivateUnderUmask000(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	d := procServe(t, procServeOpts{DB: db, Umask: true})
	if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid)); err == nil {
		if m := regexp.MustCompile(`(?m)^Umask:\s*(\d+)$`).FindSubmatch(status); m != nil && string(m[1]) != "0000" {
			t.Fatalf("the daemon runs with umask %s, not 0000: the test proves nothing", m[1])
		}
	}
	d.mustPostEvent(procMention("EvMode1", "private"))
	for _, f := range []string{db, db + "-wal", db + "-shm"} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
			continue
		}
		if perm := fi.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s: mode %04o, want 0600", filepath.Base(f), perm)
		}
	}
	d.stop()
}

// status --json counts what happened, and the outbox commands find, show and
// requeue a parked row; a requeued row is delivered by the next sweep.
func TestStatusAndOutboxCommands(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		testStatusAndOutboxCommands(t, filepath.Join(t.TempDir(), "ackd.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		testStatusAndOutboxCommands(t, pgtest.URL(t))
	})
}

// testStatusAndOutboxCommands runs serve, status, outbox list|show|retry
// and sweep --once on one database, SQLite or PostgreSQL: the same
// commands and the same output.
func testStatusAndOutboxCommands(t *testing.T, db string) {
	dir := t.TempDir()
	hook := procNewHook(t, http.StatusBadRequest, false)
	cfg := procLogAndForwardConfig(t, dir, hook.URL)
	d := procServe(t, procServeOpts{Config: cfg, DB: db})
	d.mustPostEvent(procMention("EvOps1", "one"))
	d.mustPostEvent(procMention("EvOps2", "two"))
	sdb := procOpenDB(t, db)
	procWaitFor(t, "2 done and 2 parked rows", 20*time.Second, func() bool {
		return procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE status = 'done'`) == 2 &&
			procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE status = 'parked'`) == 2
	})
	d.stop()

	ackd := func(args ...string) procResult {
		t.Helper()
		return procMustRun(t, procEnv(), append(args, "--db", db, "--config", cfg)...)
	}
	status := func() map[string]any {
		t.Helper()
		var s map[string]any
		out := ackd("status", "--json").Stdout
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("status --json printed %q: %v", out, err)
		}
		return s
	}
	counts := func(s map[string]any) string {
		return fmt.Sprintf("receipts=%v pending=%v leased=%v done=%v parked=%v",
			s["receipts"], s["pending"], s["leased"], s["done"], s["parked"])
	}

	s := status()
	if got, want := counts(s), "receipts=2 pending=0 leased=0 done=2 parked=2"; got != want {
		t.Fatalf("status --json: %s, want %s", got, want)
	}
	wantV := schemaVersion(t)
	if config.IsPostgres(db) {
		wantV = strings.Count(postgres.Schema, "\n-- migrate: ")
	}
	if s["db"] != config.RedactDB(db) || s["schema_version"] != float64(wantV) || s["oldest_pending_seconds"] != float64(0) {
		t.Errorf("status --json: %v", s)
	}

	list := ackd("outbox", "list", "--status", "parked").Stdout
	lines := strings.Split(strings.TrimRight(list, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("outbox list --status parked:\n%s\nwant a header and 2 rows", list)
	}
	var ids []string
	for i, want := range []string{"EvOps2:fwd", "EvOps1:fwd"} { // newest first
		f := strings.Fields(lines[i+1])
		if len(f) < 7 || f[1] != "parked" || f[2] != "forward" || f[3] != "1" || f[6] != want || !strings.Contains(lines[i+1], "400") {
			t.Errorf("outbox list row %d: %q; want parked forward, 1 attempt, key %s, the 400 as last error", i, lines[i+1], want)
		}
		if len(f) > 0 {
			ids = append(ids, f[0])
		}
	}
	if len(ids) != 2 {
		t.Fatal("no row ids in the list")
	}
	older := ids[1]

	show := ackd("outbox", "show", older).Stdout
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^id\s+` + older + `$`),
		regexp.MustCompile(`(?m)^key\s+EvOps1:fwd$`),
		regexp.MustCompile(`(?m)^status\s+parked$`),
		regexp.MustCompile(`(?m)^next attempt\s+-$`), // parked: no sweep will attempt it
		regexp.MustCompile(`(?m)^attempts\s+1$`),
		regexp.MustCompile(`(?m)^last error\s+.*400`),
		regexp.MustCompile(`(?m)^payload:$`),
		regexp.MustCompile(regexp.QuoteMeta(hook.URL)),
		regexp.MustCompile(`"token": "\(redacted\)"`),
	} {
		if !want.MatchString(show) {
			t.Errorf("outbox show %s lacks %s:\n%s", older, want, show)
		}
	}
	if strings.Contains(show, `"tok"`) {
		t.Errorf("outbox show printed Slack's verification token:\n%s", show)
	}
	if r := procRun(t, procEnv(), "outbox", "show", "999999", "--db", db); r.Code == 0 || !strings.Contains(r.Stderr, "no outbox row 999999") {
		t.Errorf("outbox show of a missing row: exit %d, stderr %q", r.Code, r.Stderr)
	}

	if out := ackd("outbox", "retry", older).Stdout; out != "requeued row "+older+"\n" {
		t.Errorf("outbox retry %s printed %q", older, out)
	}
	if got, want := counts(status()), "receipts=2 pending=1 leased=0 done=2 parked=1"; got != want {
		t.Errorf("after retry of one row: %s, want %s", got, want)
	}
	if r := procRun(t, procEnv(), "outbox", "retry", older, "--db", db); r.Code == 0 {
		t.Errorf("retrying a row that is no longer parked succeeded: %q", r.Stdout)
	}
	if out := ackd("outbox", "retry", "--all-parked").Stdout; out != "requeued 1 parked rows\n" {
		t.Errorf("outbox retry --all-parked printed %q", out)
	}
	if got, want := counts(status()), "receipts=2 pending=2 leased=0 done=2 parked=0"; got != want {
		t.Errorf("after retry --all-parked: %s, want %s", got, want)
	}
	if n := procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE status = 'pending' AND attempts = 0`); n != 2 {
		t.Errorf("requeued rows with a fresh attempt budget: %d, want 2", n)
	}

	// The handler is fixed; the next sweep delivers both requeued rows.
	hook.status.Store(http.StatusOK)
	if out := ackd("sweep", "--once").Stdout; out != "claimed=2 done=2 retried=0 parked=0 fenced=0\n" {
		t.Errorf("sweep after requeue printed %q", out)
	}
	if got, want := counts(status()), "receipts=2 pending=0 leased=0 done=4 parked=0"; got != want {
		t.Errorf("after the sweep: %s, want %s", got, want)
	}
	if n := len(hook.requests()); n != 4 {
		t.Errorf("forward target received %d requests, want 4 (2 parked attempts + 2 after requeue)", n)
	}
	if out := ackd("prune").Stdout; out != "pruned receipts=0 done=0 discarded=0 requests=0\n" {
		t.Errorf("prune of fresh rows printed %q", out)
	}
	if out, want := ackd("migrate").Stdout, config.RedactDB(db)+fmt.Sprintf(": schema version %d\n", wantV); out != want {
		t.Errorf("migrate of a current database printed %q, want %q", out, want)
	}
	// ACKD_DB_FILE: the database setting from a file (a systemd credential).
	dbFile := filepath.Join(dir, "db-url")
	if err := os.WriteFile(dbFile, []byte(db+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := procMustRun(t, procEnv("ACKD_DB_FILE="+dbFile), "status", "--json", "--config", cfg).Stdout
	if !strings.Contains(out, `"receipts":2`) || !strings.Contains(out, `"done":4`) {
		t.Errorf("status with ACKD_DB_FILE printed %q", out)
	}
	// Issue 21.7: the shipped unit sets ACKD_DB; docs/howto/postgresql-replicas.md's
	// advice adds ACKD_DB_FILE in a drop-in. The file wins, as documented.
	elsewhere := filepath.Join(dir, "unit-default.db")
	out = procMustRun(t, procEnv("ACKD_DB_FILE="+dbFile, "ACKD_DB="+elsewhere), "status", "--json", "--config", cfg).Stdout
	if !strings.Contains(out, `"receipts":2`) || !strings.Contains(out, `"done":4`) {
		t.Errorf("status with ACKD_DB and ACKD_DB_FILE printed %q, want the database ACKD_DB_FILE names", out)
	}
	if _, err := os.Stat(elsewhere); !os.IsNotExist(err) {
		t.Errorf("ACKD_DB's database was touched although ACKD_DB_FILE overrides it: %v", err)
	}
	empty := filepath.Join(dir, "empty-db-url")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := procRun(t, procEnv("ACKD_DB_FILE="+empty), "status", "--config", cfg); r.Code == 0 || !strings.Contains(r.Stderr, "ACKD_DB_FILE") {
		t.Errorf("an empty ACKD_DB_FILE: exit %d, stderr %q; want a refusal naming it", r.Code, r.Stderr)
	}
}
