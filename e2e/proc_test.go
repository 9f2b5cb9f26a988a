package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
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
)

// daemonProc is one generation of `ackd serve`.
type daemonProc struct {
	gen  int
	cmd  *exec.Cmd
	log  string        // its stderr (JSON log)
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result; read after done
}

func (p *daemonProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// fault is one injected failure, as the assertions need it.
type fault struct {
	Kind  string    // "kill-burst", "kill-inflight", "kill", "stall"
	At    time.Time // SIGKILL sent, or SIGSTOP sent
	Until time.Time // SIGCONT sent (stall); At for kills
	Log   string    // base name of the generation's log
}

// rig runs the daemon generations and the `ackd sweep --once` loop, all on
// one database, and keeps their logs in dir.
type rig struct {
	t       *testing.T
	bin     string
	dir     string
	config  string
	addr    string // fixed 127.0.0.1:port, reused by every generation
	prefix  string // of its log files' names, when several rigs share dir
	env     []string
	started int

	mu     sync.Mutex
	cur    *daemonProc
	procs  []*daemonProc
	faults []fault
}

func newRig(t *testing.T, bin, dir, config, addr string, secrets map[string]string) *rig {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		// The processes get exactly our settings, not the caller's.
		if strings.HasPrefix(kv, "ACKD_") || strings.HasPrefix(kv, "SLACK_") {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range secrets {
		env = append(env, k+"="+v)
	}
	env = append(env, "ACKD_LOG_LEVEL=info", "ACKD_SLACK_CHECK=off") // serve's auth.test is tested in cli
	r := &rig{t: t, bin: bin, dir: dir, config: config, addr: addr, env: env}
	t.Cleanup(r.killAll)
	return r
}

// freeAddr returns a loopback address whose port was free a moment ago.
// Every daemon generation listens on it, so Slack keeps one URL. The port is
// taken below the kernel's ephemeral range when it can be, so that no
// outgoing connection is handed it while the daemon is down.
func freeAddr(t *testing.T, rng *rand.Rand) string {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	candidates := []string{"127.0.0.1:0"}
	if low > 11000 {
		candidates = nil
		for range 50 {
			candidates = append(candidates, net.JoinHostPort("127.0.0.1", strconv.Itoa(10000+rng.IntN(low-11000))))
		}
		candidates = append(candidates, "127.0.0.1:0")
	}
	for _, c := range candidates {
		ln, err := net.Listen("tcp", c)
		if err != nil {
			continue
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	t.Fatal("no free loopback port")
	return ""
}

// start launches a new daemon generation and waits until /healthz answers.
func (r *rig) start() error {
	p, err := r.launch()
	if err != nil {
		return err
	}
	return r.waitHealthy(p, 30*time.Second)
}

// launch starts a new daemon generation without waiting for it.
func (r *rig) launch() (*daemonProc, error) {
	r.mu.Lock()
	r.started++
	gen := r.started
	r.mu.Unlock()
	logPath := filepath.Join(r.dir, fmt.Sprintf("%sdaemon-%02d.log", r.prefix, gen))
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(r.bin, "serve", "--config", r.config)
	cmd.Env = r.env
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start daemon: %w", err)
	}
	p := &daemonProc{gen: gen, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	r.mu.Lock()
	r.cur = p
	r.procs = append(r.procs, p)
	r.mu.Unlock()
	return p, nil
}

// waitHealthy polls /healthz until it answers 200, the process exits, or
// timeout passes.
func (r *rig) waitHealthy(p *daemonProc, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		if p.exited() {
			return fmt.Errorf("daemon generation %d exited while starting: %v\n%s", p.gen, p.err, tail(p.log, 30))
		}
		resp, err := client.Get("http://" + r.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("daemon generation %d not healthy after %s (last: %v)\n%s", p.gen, timeout, err, tail(p.log, 30))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// current returns the running generation, or an error naming how the last
// one ended if it died on its own: ackd must never exit unless told to.
func (r *rig) current() (*daemonProc, error) {
	r.mu.Lock()
	p := r.cur
	r.mu.Unlock()
	if p == nil {
		return nil, errors.New("no daemon running")
	}
	if p.exited() {
		return nil, fmt.Errorf("daemon generation %d exited on its own: %v\n%s", p.gen, p.err, tail(p.log, 40))
	}
	return p, nil
}

// kill SIGKILLs the running generation and records the crash.
func (r *rig) kill(kind string) error {
	p, err := r.current()
	if err != nil {
		return err
	}
	at := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill generation %d: %w", p.gen, err)
	}
	<-p.done
	r.mu.Lock()
	r.faults = append(r.faults, fault{Kind: kind, At: at, Until: at, Log: filepath.Base(p.log)})
	r.cur = nil
	r.mu.Unlock()
	return nil
}

// stall stops the running generation with SIGSTOP for d, then continues it.
func (r *rig) stall(d time.Duration) error {
	p, err := r.current()
	if err != nil {
		return err
	}
	at := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("stop generation %d: %w", p.gen, err)
	}
	time.Sleep(d) // the fault itself is a pause of this length
	until := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("continue generation %d: %w", p.gen, err)
	}
	r.mu.Lock()
	r.faults = append(r.faults, fault{Kind: "stall", At: at, Until: until, Log: filepath.Base(p.log)})
	r.mu.Unlock()
	return nil
}

// stop asks the running generation to shut down (SIGTERM) and checks that it
// exits 0 within timeout.
func (r *rig) stop(timeout time.Duration) error {
	p, err := r.current()
	if err != nil {
		return err
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("daemon generation %d did not stop within %s of SIGTERM\n%s", p.gen, timeout, tail(p.log, 30))
	}
	r.mu.Lock()
	r.cur = nil
	r.mu.Unlock()
	if p.err != nil {
		return fmt.Errorf("daemon generation %d exited with %v after SIGTERM\n%s", p.gen, p.err, tail(p.log, 30))
	}
	return nil
}

func (r *rig) injected() []fault {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]fault(nil), r.faults...)
}

// logs lists every log file the run wrote.
func (r *rig) logs() []string {
	files, _ := filepath.Glob(filepath.Join(r.dir, "*.log"))
	return files
}

// killAll is the cleanup: nothing the test started outlives it.
func (r *rig) killAll() {
	r.mu.Lock()
	procs := append([]*daemonProc(nil), r.procs...)
	r.mu.Unlock()
	for _, p := range procs {
		if !p.exited() {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// sweepFailure is a run of `ackd sweep --once` that exited non-zero, which
// it does only when the database itself failed.
type sweepFailure struct {
	Start, End time.Time
	Msg        string
}

// sweepResult is what a background sweepLoop did.
type sweepResult struct {
	runs     int
	failures []sweepFailure
}

// sweepInBackground runs sweepLoop in its own goroutine, pausing 50–300 ms
// (seeded) between runs, until the returned stop is called; stop returns
// the loop's result and may be called more than once.
func (r *rig) sweepInBackground(seed uint64) (stop func() sweepResult) {
	quit := make(chan struct{})
	done := make(chan sweepResult, 1)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	go func() {
		runs, failures := r.sweepLoop(quit, func() time.Duration {
			return time.Duration(50+rng.IntN(250)) * time.Millisecond
		})
		done <- sweepResult{runs, failures}
	}()
	return sync.OnceValue(func() sweepResult {
		close(quit)
		return <-done
	})
}

// sweepLoop runs `ackd sweep --once` again and again until stop is closed,
// appending every run's log to sweep.log. It returns the number of runs and
// the failed ones.
func (r *rig) sweepLoop(stop <-chan struct{}, pause func() time.Duration) (runs int, failures []sweepFailure) {
	f, err := os.Create(filepath.Join(r.dir, "sweep.log"))
	if err != nil {
		return 0, []sweepFailure{{Msg: err.Error()}}
	}
	defer f.Close()
	for {
		select {
		case <-stop:
			return runs, failures
		default:
		}
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(r.bin, "sweep", "--once", "--config", r.config)
		cmd.Env = r.env
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		runs++
		_, _ = f.Write(stderr.Bytes())
		if err != nil {
			failures = append(failures, sweepFailure{Start: start, End: time.Now(),
				Msg: fmt.Sprintf("run %d: %v: %s%s", runs, err, stdout.String(), lastLines(stderr.String(), 3))})
		}
		select {
		case <-stop:
			return runs, failures
		case <-time.After(pause()):
		}
	}
}

// tail returns the last n lines of a file, for failure messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return lastLines(string(b), n)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
