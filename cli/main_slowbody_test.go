package cli

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ackd/ackd/ingress"
)

// procStatus is the number field key of /proc/pid/status ("VmHWM",
// "Threads"); sizes are in bytes.
func procStatus(tb testing.TB, pid int, key string) int64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			v = strings.TrimSpace(v)
			kb := strings.HasSuffix(v, " kB")
			n, err := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64)
			if err != nil {
				tb.Fatalf("%s %q: %v", key, v, err)
			}
			if kb {
				n <<= 10
			}
			return n
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", key, pid)
	return 0
}

// procBodyBytesHeld scrapes ackd_request_body_bytes_held from url/metrics.
func procBodyBytesHeld(tb testing.TB, url string) int64 {
	tb.Helper()
	resp, err := procClient.Get(url + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "ackd_request_body_bytes_held "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatalf("ackd_request_body_bytes_held %q: %v", v, err)
			}
			return int64(f)
		}
	}
	tb.Fatal("no ackd_request_body_bytes_held in /metrics")
	return 0
}

// slowBodyLimit is the peak RSS the daemon may reach under the slow-body
// flood below. Before bodies were bounded the same flood pinned a megabyte
// per connection (600 connections: well over 600 MiB); bounded, the bodies
// can hold at most the 16 MiB budget, and the rest is the Go runtime, SQLite
// and a few KiB per connection. 160 MiB leaves room for a noisy machine
// without coming near the unbounded figure.
const slowBodyLimit = 160 << 20

// A flood of request bodies that never complete — unsigned ones, and ones
// with Slack's header shape and a fresh timestamp but a wrong signature —
// keeps the real ackd's memory bounded, and signed events sent meanwhile are
// still acked with their receipts on disk.
func TestProcSlowBodiesStayBounded(t *testing.T) {
	t.Parallel()
	// Each stalled connection costs this process one descriptor (the daemon
	// is another process with its own limit). Go raised the soft limit to the
	// hard one at start; stay well inside it.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	perKind := min(300, (int(lim.Cur)-200)/4)
	if perKind < 100 {
		t.Fatalf("RLIMIT_NOFILE %d leaves room for only %d stalled connections of each kind; raise it (ulimit -n)", lim.Cur, perKind)
	}

	dir := t.TempDir()
	cfg := procWriteConfig(t, dir, "ackd.toml", `
[[route]]
name   = "log"
event  = "app_mention"
effect = "log"
`)
	d := procServe(t, procServeOpts{Config: cfg, DB: filepath.Join(dir, "ackd.db")})
	pid := d.cmd.Process.Pid
	before := procStatus(t, pid, "VmHWM")

	// One shared body: the test process does not grow with the flood.
	payload := []byte(strings.Repeat("x", 1<<20-1))
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[string]int{}
		stop     = make(chan struct{})
	)
	count := func(what string) {
		mu.Lock()
		statuses[what]++
		mu.Unlock()
	}
	// stallOnce declares a 1 MiB body, sends all but its last byte, never
	// sends that, and returns the status of the answer ("" for none).
	stallOnce := func(hdr string) string {
		conn, err := net.Dial("tcp", d.Addr)
		if err != nil {
			return "dial error"
		}
		defer conn.Close()
		head := fmt.Sprintf("POST /slack/events HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n",
			d.Addr, len(payload)+1, hdr)
		go func() {
			if _, err := conn.Write([]byte(head)); err == nil {
				_, _ = conn.Write(payload)
			}
		}()
		_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return "no answer"
		}
		resp.Body.Close()
		return strconv.Itoa(resp.StatusCode)
	}
	for range perKind {
		wg.Add(2)
		go func() {
			defer wg.Done()
			count("unsigned " + stallOnce(""))
		}()
		// A Slack-shaped staller that was let in stalls again as soon as it
		// is cut off, as an attacker would, so the budget stays full.
		go func() {
			defer wg.Done()
			for {
				st := stallOnce(fmt.Sprintf("X-Slack-Request-Timestamp: %d\r\nX-Slack-Signature: v0=%s\r\n",
					time.Now().Unix(), strings.Repeat("0", 64)))
				count("slack-shaped " + st)
				select {
				case <-stop:
					return
				default:
				}
				if st != "408" {
					return
				}
			}
		}()
	}
	t.Cleanup(func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	})

	// Signed events once the stalled bodies fill the large bodies' half of
	// the budget, and while they do.
	procWaitFor(t, "stalled bodies holding the budget's large half", 30*time.Second, func() bool {
		return procBodyBytesHeld(t, d.URL) >= ingress.DefaultBodyBudget/2
	})
	const events = 20
	for i := range events {
		d.mustPostEvent(procMention(fmt.Sprintf("EvSlow%02d", i), "hello"))
	}
	held := procBodyBytesHeld(t, d.URL)
	close(stop)
	wg.Wait()
	peak := procStatus(t, pid, "VmHWM")
	t.Logf("daemon VmHWM: %d MiB before the flood, %d MiB after %d stalled connections of each kind (%d threads); %d KiB of bodies held after the signed events; answers: %v",
		before>>20, peak>>20, perKind, procStatus(t, pid, "Threads"), held>>10, statuses)

	db := procOpenDB(t, d.DB)
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM slack_event_receipts WHERE event_id LIKE 'EvSlow%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != events {
		t.Errorf("%d receipts for the %d acked events", n, events)
	}
	if err := db.QueryRow(`SELECT count(*) FROM slack_event_receipts WHERE event_id NOT LIKE 'EvSlow%'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d other receipts (err %v): the flood wrote something", n, err)
	}
	if statuses["unsigned 401"] != perKind {
		t.Errorf("unsigned stalled bodies were answered %v, want all %d with 401", statuses, perKind)
	}
	if peak > slowBodyLimit {
		t.Errorf("daemon peak RSS %d MiB under the flood, over the %d MiB bound", peak>>20, slowBodyLimit>>20)
	}
}
