package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/testreq"
)

// TestEIOOverHTTP runs the real ackd binary under strace, which makes every
// so many of its pwrite64 (or fsync) calls fail with EIO for a while, and
// plays bursts of Slack events at it: every 200 has its receipt and both
// rows on disk, every 500 left nothing, and once the device works again ackd
// acks again without a restart.
func TestEIOOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ackd under strace")
	}
	strace, err := exec.LookPath("strace")
	testreq.Need(t, err == nil, "strace is not installed (apt-get install strace; .ci/with-strace.sh does it in CI)")
	for _, c := range []struct{ name, syscall, when string }{
		// In each thread, every 7th pwrite64 from the 30th to the 150th fails.
		{"EIO on writes", "pwrite64", "30..150+7"},
		// In each thread, every 4th fsync from the 5th to the 100th fails:
		// a commit whose frames were written but not made durable.
		{"EIO on fsync", "fsync", "5..100+4"},
	} {
		t.Run(c.name, func(t *testing.T) { eioOverHTTP(t, strace, c.syscall, c.when) })
	}
}

// storageFault is the reason logged with a 500 when the database could not
// write an intent.
const storageFault = `"reason":"database cannot write (disk full or I/O error)"`

func eioOverHTTP(t *testing.T, strace, syscallName, when string) {
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	addr := freeAddr(t, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1)))
	config := filepath.Join(dir, "ackd.toml")
	cfg := fmt.Sprintf(`listen = %q
db     = %q

[sweep]
interval = "100ms"

[[route]]
name   = "forward"
event  = "message"
effect = "log"

[[route]]
name   = "eyes"
event  = "message"
effect = "log"
`, addr, db)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// Create and migrate the database before the faults begin.
	if out, err := exec.Command(ackdBin, "migrate", "--config", config).CombinedOutput(); err != nil {
		t.Fatalf("ackd migrate: %v\n%s", err, out)
	}

	logPath := filepath.Join(dir, "ackd.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(strace, "-f", "-qq", "-o", "/dev/null",
		"-e", "trace="+syscallName, "-e", "inject="+syscallName+":error=EIO:when="+when,
		ackdBin, "serve", "--config", config)
	cmd.Env = append(os.Environ(), "SLACK_SIGNING_SECRET="+signingSecret, "ACKD_LOG_LEVEL=info")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		// strace's tracee is ackd; SIGTERM it and strace exits with it.
		if pid := traceePID(cmd.Process.Pid); pid > 0 {
			syscall.Kill(pid, syscall.SIGTERM)
		} else {
			cmd.Process.Kill()
		}
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}
	defer stop()

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 250}}
	waitUp(t, client, "http://"+addr+"/healthz", exited, logPath)

	// Holding the write lock from this process while every other burst
	// arrives makes ackd's group commits as large as behind a slow disk
	// (SQLite spills them to the WAL before the commit, where the errors
	// land mid-transaction); it is released well inside the ack budget.
	holder, err := sql.Open("sqlite", db+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	hold, err := holder.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()

	status := map[string]int{}
	var order []string
	failed, recovered := 0, false
	for b := 0; b < 150 && !recovered; b++ {
		const size = 250
		held := b%2 == 0
		if held {
			if _, err := hold.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
				t.Fatal(err)
			}
		}
		got := make([]int, size)
		var wg sync.WaitGroup
		for i := range size {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i] = postEIOEvent(client, "http://"+addr+"/slack/events", fmt.Sprintf("EvEIO%03d-%03d", b, i))
			}()
		}
		if held {
			time.Sleep(300 * time.Millisecond) // lets the requests queue; the assertions do not depend on it
			if _, err := hold.ExecContext(context.Background(), "ROLLBACK"); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		ok := 0
		for i, st := range got {
			id := fmt.Sprintf("EvEIO%03d-%03d", b, i)
			status[id], order = st, append(order, id)
			if st == http.StatusOK {
				ok++
			}
		}
		if ok < size {
			failed += size - ok
		} else if failed > 0 && strings.Contains(readFile(t, logPath), storageFault) {
			// Recovered from a storage fault an intent met: a loaded
			// machine's 408/503, or a fault only a sweep's commit met,
			// does not end the bursts before one has.
			recovered = true
		}
	}
	stop()

	h, err := sql.Open("sqlite", db+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var integrity string
	if err := h.QueryRow(`PRAGMA integrity_check`).Scan(&integrity); err != nil || integrity != "ok" {
		t.Fatalf("integrity_check: %q %v", integrity, err)
	}
	have := map[string]int{}
	for _, q := range []string{
		`SELECT event_id FROM slack_event_receipts WHERE event_id LIKE 'EvEIO%'`,
		`SELECT substr(idempotency_key, 1, instr(idempotency_key, ':') - 1) FROM outbox WHERE idempotency_key LIKE 'EvEIO%'`,
	} {
		res, err := h.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for res.Next() {
			var id string
			if err := res.Scan(&id); err != nil {
				t.Fatal(err)
			}
			have[id]++
		}
		res.Close()
	}
	lies := 0
	for _, id := range order {
		st, n := status[id], have[id]
		bad := ""
		switch {
		case st == 0:
			bad = "got no answer"
		case st == http.StatusOK && n != 3:
			bad = fmt.Sprintf("answered 200 but the file has %d of its 3 rows", n)
		case st != http.StatusOK && n != 0:
			// 500, or a 408/503 from the body rules under this load.
			bad = fmt.Sprintf("answered %d but the file has %d of its 3 rows", st, n)
		}
		if bad != "" {
			if lies++; lies <= 10 {
				t.Errorf("%s %s", id, bad)
			}
		}
	}
	t.Logf("%d events in %d bursts, %d not answered 200, recovered=%v, %d answers the file contradicts", len(order), len(order)/250, failed, recovered, lies)
	if failed == 0 {
		t.Fatal("every event was answered 200: strace injected nothing")
	}
	if !recovered {
		t.Fatalf("after the injected errors stopped, ackd never acked a whole burst again\n%s", tail(logPath, 20))
	}
	if !strings.Contains(readFile(t, logPath), storageFault) {
		t.Errorf("no 500 was logged with the storage fault as its reason\n%s", tail(logPath, 20))
	}
}

// traceePID returns the first child of process pid (strace's tracee), or 0.
func traceePID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

func waitUp(t *testing.T, client *http.Client, url string, exited <-chan error, logPath string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("ackd exited while starting: %v\n%s", err, tail(logPath, 30))
		default:
		}
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("ackd not healthy after a minute\n%s", tail(logPath, 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// postEIOEvent posts a signed message event of about 4 KB; 0 if no answer.
func postEIOEvent(client *http.Client, url, id string) int {
	text := strings.Repeat("lorem ipsum ", 340)
	body, _ := json.Marshal(map[string]any{
		"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": id, "event_time": 1700000000,
		"event": map[string]any{"type": "message", "user": "U1", "channel": "C1", "ts": "1700000000.000100", "text": text},
	})
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", slackSign(signingSecret, ts, body))
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
