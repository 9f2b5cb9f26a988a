package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/internal/testreq"
	"github.com/ackd/ackd/store/postgres"
)

const replicas = 3

// TestReplicas is the fault suite on PostgreSQL with several replicas:
// three `ackd serve` processes on one database behind a round-robin "load
// balancer" (the player sends each attempt to the next replica, and the two
// copies of a duplicate to two replicas at the same moment), `ackd sweep
// --once` run by hand beside them, flaky Slack and forward fakes, and
// SIGKILLs of random replicas with restarts, and a SIGSTOP of all of them
// at once for longer than a lease. The same
// assertions as TestFaults: nothing acked is lost, one receipt per event,
// every row finished, no effect performed twice without a cause, and every
// write after a lost lease refused by the fence and logged.
func TestReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-replica end-to-end suite: skipped with -short")
	}
	dbURL := pgtest.URL(t)
	began := time.Now()
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	loadFor := min(*flagDuration, 15*time.Second)
	fmt.Printf("e2e replicas: seed=%d duration=%s rate=%d/s race=%v (replay with -e2e.seed=%d)\n", seed, loadFor, *flagRate, raceBuild(), seed)
	rng := rand.New(rand.NewPCG(seed, 0x3e9))

	dir := t.TempDir()
	if *flagKeep {
		var err error
		if dir, err = os.MkdirTemp("", "ackd-e2e-replicas-"); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("e2e replicas: keeping the run in %s\n", dir)
	}
	slack := fakeslack.New(t, botToken)
	expected := *flagRate * int(loadFor/time.Second)
	reactScript := slackScript(rng, 8*expected+4000)
	postScript := slackScript(rng, 4*expected+2000)
	slack.Script("reactions.add", reactScript...)
	slack.Script("chat.postMessage", postScript...)
	fwd := newForwardHandler(t, forwardSecret, seed)
	secrets := map[string]string{
		"SLACK_SIGNING_SECRET": signingSecret, "SLACK_BOT_TOKEN": botToken, "ACKD_FORWARD_SECRET": forwardSecret,
	}
	var rigs []*rig
	var urls []string
	for i := range replicas {
		addr := freeAddr(t, rng)
		config := filepath.Join(dir, fmt.Sprintf("ackd-%d.toml", i))
		writeConfig(t, config, addr, dbURL, slack.URL(), fwd.URL())
		r := newRig(t, ackdBin, dir, config, addr, secrets)
		r.prefix = fmt.Sprintf("r%d-", i)
		rigs = append(rigs, r)
		urls = append(urls, "http://"+addr+"/slack/events")
	}
	// The replicas start together: the schema is migrated once, under the
	// advisory lock.
	var wg sync.WaitGroup
	errs := make([]error, replicas)
	for i, r := range rigs {
		wg.Go(func() { errs[i] = r.start() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	stopSweeping := rigs[0].sweepInBackground(seed)
	defer stopSweeping()

	player := newSlackPlayer(urls[0], signingSecret, seed)
	player.urls = urls
	loadCtx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		player.run(loadCtx, *flagRate)
	}()
	start := time.Now()
	plan := planFaults(rng, max(loadFor, 24*time.Second)) // at least three crashes and a stall
	for _, f := range plan {
		at := time.Duration(int64(f.at) * int64(loadFor) / int64(max(loadFor, 24*time.Second)))
		time.Sleep(time.Until(start.Add(at))) // the schedule itself
		if f.kind == "stall" {
			// Every replica at once, with an effect in flight: only the
			// hand-run sweeps go on, take the rows when the leases expire,
			// and the replicas wake up to a fence that refuses them.
			waitInflight(fwd, 3*time.Second)
			var wg sync.WaitGroup
			errs := make([]error, replicas)
			for i, r := range rigs {
				wg.Go(func() { errs[i] = r.stall(stallFor) })
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatalf("stall at %s: %v", at, err)
				}
			}
			continue
		}
		r := rigs[rng.IntN(replicas)]
		if err := inject(r, player, fwd, rng, f.kind); err != nil {
			t.Fatalf("fault %s at %s on %s: %v", f.kind, at, r.prefix, err)
		}
	}
	time.Sleep(time.Until(start.Add(loadFor)))
	stopLoad()
	loadEnded := time.Now()
	<-loadDone
	if !player.wait(60 * time.Second) {
		t.Fatal("Slack's delivery chains did not finish within 60s of the end of the load")
	}

	for _, r := range rigs {
		if _, err := r.current(); err != nil {
			t.Fatal(err)
		}
	}
	dbh, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer dbh.Close()
	chainsEnded := time.Now()
	if err := waitDrained(dbh, max(drainLimit, 2*loadFor)); err != nil {
		t.Fatal(err)
	}
	drained := time.Now()
	sweeps := stopSweeping()
	for _, r := range rigs {
		if err := r.stop(30 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	var faults []fault
	for _, r := range rigs {
		faults = append(faults, r.injected()...)
	}
	// A stall stops every replica at once, some inside a claim's
	// transaction: the rows it locked stay locked for the whole stall, and
	// a hand-run sweep then claims nothing and says which transactions
	// hold them (exit 1), as documented. Any other failure is a finding.
	for _, f := range sweeps.failures {
		if strings.Contains(f.Msg, "other transactions hold locks on the outbox") && stalledWithin(faults, f.Start, f.End) {
			t.Logf("ackd sweep --once during a stall: %s", f.Msg)
			continue
		}
		t.Errorf("ackd sweep --once failed: %s", f.Msg)
	}
	st := collect(t, dbh, rigs[0].logs(), faults, player, fwd, slack, reactScript, postScript)
	st.sweepRuns = sweeps.runs
	st.phases = fmt.Sprintf("load=%s retries_tail=%s drain=%s", loadEnded.Sub(start).Round(100*time.Millisecond),
		chainsEnded.Sub(loadEnded).Round(100*time.Millisecond), drained.Sub(chainsEnded).Round(100*time.Millisecond))
	st.check(t)
	if n, want := pgtest.Count(t, dbURL, `SELECT count(*) FROM ackd_migrations`), strings.Count(postgres.Schema, "\n-- migrate: "); n != want {
		t.Errorf("ackd_migrations has %d rows after %d replicas started together, want %d", n, replicas, want)
	}

	summary := fmt.Sprintf("replicas=%d events=%d acked=%d lost=%d duplicate_effects=%d parked=%d crashes=%d",
		replicas, len(st.events), st.acked, st.lost, len(st.duplicates), st.parked, st.crashes)
	t.Log(summary)
	fmt.Println(summary)
	details := st.details(time.Since(began))
	t.Log(details)
	fmt.Println("e2e replicas: " + details)
}

// pgCluster is a PostgreSQL server of the test's own, so that stopping it
// disturbs no other test: initdb in a temporary directory (as the postgres
// user when we are root: initdb refuses root), a private port, its socket
// in that directory.
type pgCluster struct {
	t       *testing.T
	bin     string // directory of initdb, pg_ctl, postgres
	data    string
	logFile string
	user    string // run the server as this OS user ("" = as ourselves)
	port    int
	sockDir string // the directory of its Unix socket, its only listener
}

func newPGCluster(t *testing.T) *pgCluster {
	t.Helper()
	pgCtl := os.Getenv("ACKD_TEST_PG_CTL")
	testreq.Need(t, pgCtl != "", "set ACKD_TEST_PG_CTL to pg_ctl (see .ci/with-postgres.sh)")
	c := &pgCluster{t: t, bin: filepath.Dir(pgCtl)}
	if os.Geteuid() == 0 {
		c.user = os.Getenv("ACKD_TEST_PG_USER")
		testreq.Need(t, c.user != "", "set ACKD_TEST_PG_USER: initdb refuses root (see .ci/with-postgres.sh)")
	}
	dir, err := os.MkdirTemp("", "ackd-e2e-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if c.user != "" {
		if out, err := exec.Command("chown", c.user+":", dir).CombinedOutput(); err != nil {
			t.Fatalf("chown %s: %v %s", dir, err, out)
		}
	}
	c.data, c.logFile = filepath.Join(dir, "data"), filepath.Join(dir, "log")
	c.port = freePGPort()
	c.run("initdb", "-D", c.data, "-U", "ackd", "--auth=trust", "-E", "UTF8", "--no-instructions")
	// A Unix socket only, no TCP: the replicas reconnect in a loop while the
	// server is down, and a TCP connect to a port in the kernel's ephemeral
	// range can pick that very port as its source and connect to itself,
	// which then keeps the restarted server from binding it. The port only
	// names the socket file.
	c.sockDir = dir
	conf := fmt.Sprintf("listen_addresses = ''\nport = %d\nunix_socket_directories = '%s'\nmax_connections = 60\n", c.port, dir)
	f, err := os.OpenFile(filepath.Join(c.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(conf)
	f.Close()
	// A port that was free a moment ago may be taken by the time the server
	// binds it (the other tests open loopback connections all the time):
	// try a few.
	for attempt := 1; ; attempt++ {
		err := c.cmd("pg_ctl", "-D", c.data, "-l", c.logFile, "-w", "-t", "60", "start").Run()
		if err == nil {
			break
		}
		if attempt == 3 {
			c.t.Fatalf("pg_ctl start: %v\n%s", err, tail(c.logFile, 20))
		}
		c.port = freePGPort()
		f, err := os.OpenFile(filepath.Join(c.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "port = %d\n", c.port) // a later line wins
		f.Close()
	}
	t.Cleanup(func() { _ = c.cmd("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop").Run() })
	return c
}

// freePGPort returns a port below Linux's ephemeral range (32768…) that
// nothing listens on now.
func freePGPort() int {
	for {
		p := 20000 + rand.IntN(12000)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err == nil {
			ln.Close()
			return p
		}
	}
}

func (c *pgCluster) cmd(prog string, args ...string) *exec.Cmd {
	path := filepath.Join(c.bin, prog)
	var cmd *exec.Cmd
	if c.user != "" {
		cmd = exec.Command("runuser", append([]string{"-u", c.user, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = filepath.Dir(c.data)
	return cmd
}

func (c *pgCluster) run(prog string, args ...string) {
	c.t.Helper()
	if out, err := c.cmd(prog, args...).CombinedOutput(); err != nil {
		c.t.Fatalf("%s %v: %v\n%s\n%s", prog, args, err, out, tail(c.logFile, 20))
	}
}

func (c *pgCluster) start() {
	c.run("pg_ctl", "-D", c.data, "-l", c.logFile, "-w", "-t", "60", "start")
}

// crash stops the server the way a power cut or an OOM kill would:
// immediate mode, no checkpoint, recovery from the WAL at the next start.
func (c *pgCluster) crash() { c.run("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop") }

func (c *pgCluster) url() string {
	return "postgres://ackd@/postgres?host=" + url.QueryEscape(c.sockDir) + "&port=" + strconv.Itoa(c.port) + "&sslmode=disable"
}

// TestPostgresDown stops PostgreSQL mid-load (pg_ctl stop -m immediate) under
// two replicas and starts it again: while it is down every answer is a 500
// within Slack's deadline (never a 200, never a hang), /healthz says 503
// and why, and afterwards every event that was answered 200 has its receipt
// and rows, and the replicas serve again without a restart.
func TestPostgresDown(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	pg := newPGCluster(t)
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0xd0))
	slack := fakeslack.New(t, botToken)
	fwd := newForwardHandler(t, forwardSecret, seed)
	secrets := map[string]string{
		"SLACK_SIGNING_SECRET": signingSecret, "SLACK_BOT_TOKEN": botToken, "ACKD_FORWARD_SECRET": forwardSecret,
	}
	var rigs []*rig
	var urls []string
	for i := range 2 {
		addr := freeAddr(t, rng)
		config := filepath.Join(dir, fmt.Sprintf("ackd-%d.toml", i))
		writeConfig(t, config, addr, pg.url(), slack.URL(), fwd.URL())
		r := newRig(t, ackdBin, dir, config, addr, secrets)
		r.prefix = fmt.Sprintf("r%d-", i)
		if err := r.start(); err != nil {
			t.Fatal(err)
		}
		rigs = append(rigs, r)
		urls = append(urls, "http://"+addr+"/slack/events")
	}
	player := newSlackPlayer(urls[0], signingSecret, seed)
	player.urls = urls
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		player.run(ctx, 40)
	}()

	time.Sleep(2 * time.Second) // load before the outage
	pg.crash()
	downFrom := time.Now()
	// While down: /healthz is 503 and says why.
	var health string
	for i, r := range rigs {
		resp, err := http.Get("http://" + r.addr + "/healthz")
		if err != nil {
			t.Fatalf("replica %d /healthz: %v", i, err)
		}
		b := make([]byte, 512)
		n, _ := resp.Body.Read(b)
		resp.Body.Close()
		health = strings.TrimSpace(string(b[:n]))
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(health, "database") {
			t.Errorf("replica %d /healthz with the database down: %d %q", i, resp.StatusCode, health)
		}
	}
	time.Sleep(4 * time.Second) // the outage: every delivery in it must be answered 500
	downUntil := time.Now()
	pg.start()
	time.Sleep(3 * time.Second) // load after the outage
	stopLoad()
	<-loadDone
	if !player.wait(60 * time.Second) {
		t.Fatal("delivery chains did not finish")
	}

	dbh, err := sql.Open("pgx", pg.url())
	if err != nil {
		t.Fatal(err)
	}
	defer dbh.Close()
	receipts := map[string]bool{}
	rows, err := dbh.Query(`SELECT event_id FROM slack_event_receipts`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		receipts[id] = true
	}
	rows.Close()
	keys := map[string]bool{}
	rows, err = dbh.Query(`SELECT idempotency_key FROM outbox`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		rows.Scan(&k)
		keys[k] = true
	}
	rows.Close()

	var inOutage, ok500, okAfter, lost, acked int
	statuses := map[string]int{}
	for _, ev := range player.all() {
		ev.mu.Lock()
		for _, d := range ev.deliveries {
			switch {
			case d.Status != 0:
				statuses[strconv.Itoa(d.Status)]++
			default:
				statuses["no answer: "+d.Err]++
			}
			// An answer given well inside the outage (the daemon's view of
			// the database lags the stop by at most the ack budget).
			if d.At.After(downFrom.Add(2500*time.Millisecond)) && d.At.Before(downUntil) {
				inOutage++
				if d.Status != http.StatusInternalServerError {
					t.Errorf("%s retry %d answered %d %q during the outage, want 500", ev.ID, d.Retry, d.Status, d.Err)
				} else {
					ok500++
				}
			}
			if d.Status == http.StatusOK && d.At.After(downUntil) {
				okAfter++
			}
		}
		if ev.acked {
			acked++
		}
		if ev.acked && (!receipts[ev.ID] || !keys[ev.ID+":fwd"] || !keys[ev.ID+":eyes"]) {
			lost++
			t.Errorf("%s answered 200 but receipt=%v rows fwd=%v eyes=%v", ev.ID, receipts[ev.ID], keys[ev.ID+":fwd"], keys[ev.ID+":eyes"])
		}
		ev.mu.Unlock()
	}
	if inOutage == 0 {
		t.Error("no delivery was answered during the outage: the test proved nothing")
	}
	if okAfter == 0 {
		t.Error("no 200 after PostgreSQL came back: the replicas did not reconnect")
	}
	for i, r := range rigs {
		if err := r.waitHealthy(r.cur, 30*time.Second); err != nil {
			t.Errorf("replica %d not healthy after the restart: %v", i, err)
		}
		if err := r.stop(30 * time.Second); err != nil {
			t.Error(err)
		}
	}
	summary := fmt.Sprintf("postgres down: events=%d acked=%d lost=%d answered_in_outage=%d (all 500: %v) ok_after=%d healthz=%q statuses=%v",
		len(player.all()), acked, lost, inOutage, ok500 == inOutage, okAfter, health, statuses)
	t.Log(summary)
	fmt.Println(summary)
}
