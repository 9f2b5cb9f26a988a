package slacksim

// Compare measures, in one run on one machine, what the durable ack costs:
// the same load from Bench against `ackd serve` with synchronous=FULL, with
// synchronous=NORMAL, and against `ackd ceiling`, a server that only
// verifies the signature and answers 200 (no database). Each server is a
// child process of the ackd binary, started one after the other, so the
// three rows differ only in what the server does. `ackd bench compare` is
// the command.

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
)

// CompareOptions configures one `ackd bench compare`.
type CompareOptions struct {
	Exe     string       // binary to start as `serve` and `ceiling`
	Dir     string       // parent of the run's temporary directory
	Keep    bool         // keep the run's directory (databases, configs, logs)
	Load    BenchOptions // URL and Secret are set per server
	Command string       // the command line, for the header
	Log     io.Writer    // progress; nil: none
	// OpenDB opens a server's database for the check afterwards, with the
	// server's config file (the caller owns the schema and store options).
	OpenDB func(ctx context.Context, configPath, dbPath string) (store.Store, error)
	// Postgres, when set, is a PostgreSQL URL: the comparison adds a row
	// for one `ackd serve` on it and one for three replicas sharing it
	// (the load spread round-robin), each run in a fresh schema that is
	// dropped afterwards.
	Postgres string
	// Prefill > 0 adds two FULL rows on a database that already holds
	// Prefill receipts and as many done outbox rows, all past retention:
	// one served without pruning, one while the server prunes them all.
	Prefill int
	// PrefillDB writes those rows (direct SQL, one transaction) into the
	// database at dbPath, creating it with the server's config.
	PrefillDB func(ctx context.Context, configPath, dbPath string, n int, payload []byte) error
	// ServerEnv is added to each server's environment (GOGC=…, GOMEMLIMIT=…),
	// not to the load generator's.
	ServerEnv []string
	// SweepBatch, when > 0, sets the servers' sweep.batch.
	SweepBatch int
	// Drain bounds the wait, after the load, for the outbox to empty (0: 2m).
	Drain time.Duration
	// Routes is how many dry-run log routes every event matches, each its
	// own outbox row (0: 1).
	Routes int
	// Only, when not empty, names the configurations to measure (FULL,
	// NORMAL, FULL+1M, …); the ceiling is always measured, since every
	// ratio is to it.
	Only []string
}

func (o CompareOptions) routes() int { return max(o.Routes, 1) }

// routeTOML is the servers' routes: o.routes() log routes matching every event.
func (o CompareOptions) routeTOML() string {
	if o.routes() == 1 {
		return "[[route]]\nname = \"log-every-event\"\nevent = \"*\"\neffect = \"log\"\n"
	}
	var b strings.Builder
	for i := range o.routes() {
		fmt.Fprintf(&b, "[[route]]\nname = \"log-every-event-%d\"\nevent = \"*\"\neffect = \"log\"\n\n", i+1)
	}
	return b.String()
}

// compareServer is one of the three servers measured.
type compareServer struct {
	Name        string // FULL, NORMAL, postgres, postgres×3, ceiling
	Synchronous string // "" for the ceiling and PostgreSQL
	Replicas    int    // PostgreSQL: how many `ackd serve` share the database; 0 otherwise
	Prefill     bool   // SQLite, on a database pre-filled with CompareOptions.Prefill expired rows
	Prune       bool   // the server prunes (retention.interval 1s) while it is loaded
}

func (s compareServer) hasDB() bool { return s.Synchronous != "" || s.Replicas > 0 }

// allServers is every configuration these options can measure, in order.
func (o CompareOptions) allServers() []compareServer {
	out := []compareServer{{Name: "FULL", Synchronous: "FULL"}}
	if o.Prefill > 0 {
		out = append(out,
			compareServer{Name: "FULL+" + count(o.Prefill), Synchronous: "FULL", Prefill: true},
			compareServer{Name: "FULL+" + count(o.Prefill) + " prune", Synchronous: "FULL", Prefill: true, Prune: true})
	}
	out = append(out, compareServer{Name: "NORMAL", Synchronous: "NORMAL"})
	if o.Postgres != "" {
		out = append(out, compareServer{Name: "postgres", Replicas: 1}, compareServer{Name: "postgres×3", Replicas: 3})
	}
	return append(out, compareServer{Name: "ceiling"})
}

// servers is what a run measures: allServers, or the ones o.Only names and
// the ceiling.
func (o CompareOptions) servers() []compareServer {
	all := o.allServers()
	if len(o.Only) == 0 {
		return all
	}
	return slices.DeleteFunc(all, func(s compareServer) bool {
		return s.Name != "ceiling" && !slices.Contains(o.Only, s.Name)
	})
}

// checkOnly reports a name in o.Only that is not one of allServers.
func (o CompareOptions) checkOnly() error {
	var names []string
	for _, s := range o.allServers() {
		names = append(names, s.Name)
	}
	for _, name := range o.Only {
		if !slices.Contains(names, name) {
			return fmt.Errorf("--only %q: not one of the configurations measured here (%s)", name, strings.Join(names, ", "))
		}
	}
	return nil
}

// CompareMachine describes where the numbers came from.
type CompareMachine struct {
	CPUs        int    `json:"cpus"`
	CPUModel    string `json:"cpu_model,omitempty"`
	MemTotalMiB int64  `json:"mem_total_mib,omitempty"`
	Kernel      string `json:"kernel,omitempty"`
	GoVersion   string `json:"go_version"`
	OSArch      string `json:"os_arch"`
	Dir         string `json:"dir"`              // where the databases were
	DirFS       string `json:"dir_fs,omitempty"` // its filesystem type
}

// CompareCheck is what the database held after an ackd run.
type CompareCheck struct {
	AckedEvents   int      `json:"acked_events"`           // events with at least one 2xx
	WithReceipt   int      `json:"with_receipt"`           // of those, with a receipt
	WithRow       int      `json:"with_row"`               // of those, with an outbox row
	Receipts      int64    `json:"receipts"`               // receipts in the database
	Rows          int64    `json:"rows"`                   // outbox rows in the database
	Parked        int64    `json:"parked"`                 // outbox rows parked
	MissingSample []string `json:"missing,omitempty"`      // acked events without a receipt (first few)
	PrefillLeft   int64    `json:"prefill_left,omitempty"` // pre-filled receipts still there (not counted above)
	Problems      []string `json:"problems,omitempty"`
}

// OK reports whether the check found nothing wrong.
func (c CompareCheck) OK() bool { return len(c.Problems) == 0 }

// CompareRow is one server's measurement.
type CompareRow struct {
	Config     string      `json:"config"`
	Bench      BenchResult `json:"bench"`
	Non2xx     int         `json:"non_2xx"`
	PeakRSSMiB float64     `json:"peak_rss_mib"` // VmHWM just before SIGTERM; 0 if unknown
	// CPUs busy on average during the load (from /proc; 0 if unknown): the
	// server, this process (the load generator), and everything else on
	// the machine. A busy machine shows up in OtherCPUs.
	ServerCPUs float64 `json:"server_cpus"`
	LoadCPUs   float64 `json:"load_cpus"`
	OtherCPUs  float64 `json:"other_cpus"`
	Exit       string  `json:"exit"` // how the child ended after SIGTERM
	// LoadAvg is /proc/loadavg's 1-minute figure just before the run and
	// just after it: how busy the (shared) machine was.
	LoadAvg [2]float64    `json:"load_avg"`
	Check   *CompareCheck `json:"db_check,omitempty"`
	// What the sweep kept up with (ackd rows only, from /metrics): rows
	// the load acked, how many of them were done when the load ended,
	// and how long after that the last pending row was done (-1: not
	// within the drain bound).
	RowsAcked    int     `json:"rows_acked,omitempty"`
	DoneAtEnd    int64   `json:"done_at_end,omitempty"`
	DrainSeconds float64 `json:"drain_seconds,omitempty"`
	// SQLite: database file growth (main file and WAL, after a clean stop)
	// per event the load added, and the size itself.
	DBBytes       int64   `json:"db_bytes,omitempty"`
	BytesPerEvent float64 `json:"bytes_per_event,omitempty"`
	// Prefilled rows still in the database after the run (pruning rows).
	PrefillLeft int64 `json:"prefill_left,omitempty"`
	// Ratios to the ceiling row: p99 latency (1 = as fast as no database)
	// and achieved throughput (1 = as much as no database).
	P99VsCeiling        float64 `json:"p99_vs_ceiling"`
	ThroughputVsCeiling float64 `json:"throughput_vs_ceiling"`
}

// CompareReport is the whole comparison.
type CompareReport struct {
	Command string         `json:"command"`
	Machine CompareMachine `json:"machine"`
	Mode    string         `json:"mode"` // "open loop, 2000/s for 30s, ..." in words
	Seed    int64          `json:"seed"`
	Routes  int            `json:"routes"` // outbox rows per event (dry-run log routes)
	Rows    []CompareRow   `json:"rows"`
	OK      bool           `json:"ok"`                 // every database check passed and every child exited 0
	KeptDir string         `json:"kept_dir,omitempty"` // with --keep: databases, configs, server logs
}

// RunCompare runs the three servers one after the other. An error means
// the comparison could not be made; a failed database check is reported in
// the result (OK false) with every row still measured.
func RunCompare(ctx context.Context, o CompareOptions) (CompareReport, error) {
	if o.Load.Duration <= 0 {
		return CompareReport{}, errors.New("bench compare: --duration must be positive")
	}
	if err := o.checkOnly(); err != nil {
		return CompareReport{}, fmt.Errorf("bench compare: %w", err)
	}
	dir, err := os.MkdirTemp(o.Dir, "ackd-bench-compare-")
	if err != nil {
		return CompareReport{}, fmt.Errorf("bench compare: %w", err)
	}
	if !o.Keep {
		defer os.RemoveAll(dir)
	}
	absDir, _ := filepath.Abs(dir)
	rep := CompareReport{Command: o.Command, Machine: machineInfo(filepath.Dir(absDir)), Seed: o.Load.Seed, Routes: o.routes(), OK: true}
	if o.Keep {
		rep.KeptDir = absDir
	}
	rep.Mode = loadWords(o.Load)
	secret := rand.Text() // the servers are ours: any secret they share with the load will do

	for _, s := range o.servers() {
		fmt.Fprintf(o.logw(), "== %s: %s\n", s.Name, s.describe())
		row, err := o.measure(ctx, dir, secret, s)
		if err != nil {
			return rep, fmt.Errorf("bench compare: %s: %w", s.Name, err)
		}
		if !o.Keep {
			// Delete the database now, so the next server does not share the
			// disk with its writeback.
			_ = os.RemoveAll(filepath.Join(dir, s.Name))
		}
		if row.Check != nil && !row.Check.OK() {
			rep.OK = false
		}
		if row.Exit != "exit 0" {
			rep.OK = false
		}
		rep.Rows = append(rep.Rows, row)
	}
	ceil := rep.Rows[len(rep.Rows)-1].Bench
	for i := range rep.Rows {
		b := rep.Rows[i].Bench
		rep.Rows[i].P99VsCeiling = ratio(float64(b.P99), float64(ceil.P99))
		rep.Rows[i].ThroughputVsCeiling = ratio(b.AchievedRate, ceil.AchievedRate)
	}
	return rep, nil
}

func (o CompareOptions) logw() io.Writer {
	if o.Log == nil {
		return io.Discard
	}
	return o.Log
}

func (s compareServer) describe() string {
	if s.Replicas > 0 {
		return fmt.Sprintf("%d × ackd serve on one PostgreSQL (fresh schema), load round-robin, dry-run log route", s.Replicas)
	}
	if s.Synchronous == "" {
		return "ackd ceiling (signature check and 200, no database)"
	}
	d := "ackd serve, synchronous = " + s.Synchronous + ", dry-run log route"
	if s.Prefill {
		d += ", on a pre-filled database of expired receipts and done rows"
	}
	if s.Prune {
		d += ", pruning them while loaded"
	}
	return d
}

// count writes n the short way: 1000000 → "1M", 250000 → "250k".
func count(n int) string {
	switch {
	case n >= 1e6 && n%1e6 == 0:
		return strconv.Itoa(n/1e6) + "M"
	case n >= 1e3 && n%1e3 == 0:
		return strconv.Itoa(n/1e3) + "k"
	}
	return strconv.Itoa(n)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// measure starts one server, loads it, checks its database, and stops it.
func (o CompareOptions) measure(ctx context.Context, dir, secret string, s compareServer) (CompareRow, error) {
	row := CompareRow{Config: s.Name}
	sdir := filepath.Join(dir, s.Name)
	if err := os.Mkdir(sdir, 0o700); err != nil {
		return row, err
	}
	var args []string
	var cfgPath, dbPath string
	route := o.routeTOML()
	switch {
	case s.Replicas > 0:
		u, drop, err := freshSchema(ctx, o.Postgres)
		if err != nil {
			return row, err
		}
		defer drop()
		// The URL (it may hold a password) goes in the 0600 config file,
		// not on a command line.
		cfgPath, dbPath = filepath.Join(sdir, "ackd.toml"), u
		toml := fmt.Sprintf("# written by ackd bench compare\ndb = %q\n\n%s", u, route)
		if err := os.WriteFile(cfgPath, []byte(toml), 0o600); err != nil {
			return row, err
		}
		args = []string{"serve", "--config", cfgPath}
	case s.Synchronous != "":
		cfgPath, dbPath = filepath.Join(sdir, "ackd.toml"), filepath.Join(sdir, "ackd.db")
		interval := "1h" // no prune during a run
		if s.Prune {
			interval = "1s"
		}
		toml := fmt.Sprintf("# written by ackd bench compare\nsynchronous = %q\n\n[retention]\ninterval = %q\n\n", s.Synchronous, interval)
		if o.SweepBatch > 0 {
			toml += fmt.Sprintf("[sweep]\nbatch = %d\n\n", o.SweepBatch)
		}
		toml += route
		if err := os.WriteFile(cfgPath, []byte(toml), 0o600); err != nil {
			return row, err
		}
		if s.Prefill {
			if o.PrefillDB == nil {
				return row, errors.New("no PrefillDB")
			}
			gen := &eventGen{run: "PREFILL", key: idKey("PREFILL")}
			start := time.Now()
			if err := o.PrefillDB(ctx, cfgPath, dbPath, o.Prefill, gen.body(0)); err != nil {
				return row, fmt.Errorf("prefill: %w", err)
			}
			fmt.Fprintf(o.logw(), "pre-filled %d receipts and done rows in %s\n", o.Prefill, time.Since(start).Round(time.Millisecond))
		}
		args = []string{"serve", "--config", cfgPath, "--db", dbPath}
	default:
		args = []string{"ceiling"}
	}
	sizeBefore := int64(0)
	if s.Synchronous != "" {
		sizeBefore = dbSize(dbPath)
	}
	var children []*compareChild
	var pids []int
	var urls []string
	for i := range max(1, s.Replicas) {
		child, err := startCompareChild(ctx, o.Exe, args, secret, filepath.Join(sdir, fmt.Sprintf("server-%d.log", i)), o.ServerEnv)
		if err != nil {
			return row, err
		}
		defer child.kill() // on an early return; a no-op after stop
		children = append(children, child)
		pids = append(pids, child.cmd.Process.Pid)
		urls = append(urls, "http://"+child.addr+"/slack/events")
	}

	load := o.Load
	load.URL = urls[0]
	if len(urls) > 1 {
		load.URLs = urls
	}
	load.Secret = secret
	load.Progress = o.Log
	// Any replica's /metrics reads the outbox from the shared database.
	metricsURL := "http://" + children[0].addr + "/metrics"
	var q0 outboxCounts
	if s.hasDB() {
		var err error
		if q0, err = scrapeOutbox(ctx, metricsURL); err != nil {
			return row, err
		}
	}
	row.LoadAvg[0] = loadAvg()
	before := sampleCPU(pids...)
	res, err := Bench(ctx, load)
	after := sampleCPU(pids...)
	row.LoadAvg[1] = loadAvg()
	if err != nil {
		return row, err
	}
	row.Bench = res
	for code, n := range res.StatusCounts {
		if code < 200 || code > 299 {
			row.Non2xx += n
		}
	}
	if s.hasDB() {
		row.RowsAcked = len(res.EventIDs) * o.routes() // one row per route and acked event
		q, err := scrapeOutbox(ctx, metricsURL)
		if err != nil {
			return row, err
		}
		row.DoneAtEnd = q.done - q0.done
		if s.Prune {
			// Pruning deletes done rows while we count them: count the
			// rows still to do instead.
			row.DoneAtEnd = int64(row.RowsAcked) - q.pending
		}
		row.DrainSeconds = o.drain(ctx, metricsURL, q)
	}
	for _, c := range children {
		row.PeakRSSMiB = max(row.PeakRSSMiB, peakRSSMiB(c.cmd.Process.Pid))
	}
	row.ServerCPUs, row.LoadCPUs, row.OtherCPUs = after.since(before)
	row.Exit = "exit 0"
	for _, c := range children {
		if exit := c.stop(30 * time.Second); exit != "exit 0" {
			row.Exit = exit
			fmt.Fprintf(o.logw(), "%s did not stop cleanly after SIGTERM (%s); its log: %s\n", s.Name, exit, c.logPath)
		}
	}
	if s.hasDB() {
		// After the server stopped: the file is quiet and fully checkpointable.
		check, err := o.checkDB(ctx, cfgPath, dbPath, res, s.Prefill)
		if err != nil {
			return row, fmt.Errorf("database check: %w", err)
		}
		row.Check = &check
		row.PrefillLeft = check.PrefillLeft
		if s.Synchronous != "" {
			row.DBBytes = dbSize(dbPath)
			// check.Receipts counts the load's receipts only (pre-filled
			// ones apart); a pruning run frees pages, so its growth means
			// nothing.
			if added := check.Receipts; added > 0 && !s.Prune {
				row.BytesPerEvent = float64(row.DBBytes-sizeBefore) / float64(added)
			}
		}
	}
	return row, nil
}

// outboxCounts is what a server's /metrics says of its outbox.
type outboxCounts struct{ pending, done int64 }

// scrapeOutbox reads ackd_outbox_rows from a server's /metrics.
func scrapeOutbox(ctx context.Context, url string) (outboxCounts, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return outboxCounts{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return outboxCounts{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	var q outboxCounts
	found := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, m := range []struct {
			prefix string
			dst    *int64
		}{{`ackd_outbox_rows{status="pending"} `, &q.pending}, {`ackd_outbox_rows{status="done"} `, &q.done}} {
			if v, ok := strings.CutPrefix(line, m.prefix); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return q, fmt.Errorf("scrape %s: %q: %w", url, line, err)
				}
				*m.dst = int64(f)
				found++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return q, err
	}
	if found != 2 {
		return q, fmt.Errorf("scrape %s: no ackd_outbox_rows for pending and done", url)
	}
	return q, nil
}

// drain waits until the server's outbox has nothing pending and returns
// how long that took from now, or -1 after o.Drain.
func (o CompareOptions) drain(ctx context.Context, url string, q outboxCounts) float64 {
	bound := cmp.Or(o.Drain, 2*time.Minute)
	start := time.Now()
	for q.pending > 0 {
		if time.Since(start) > bound || ctx.Err() != nil {
			return -1
		}
		time.Sleep(100 * time.Millisecond)
		var err error
		if q, err = scrapeOutbox(ctx, url); err != nil {
			return -1
		}
	}
	return time.Since(start).Seconds()
}

// dbSize is the size of a database's main file and WAL (0 if absent).
func dbSize(path string) int64 {
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		if st, err := os.Stat(p); err == nil {
			n += st.Size()
		}
	}
	return n
}

// checkDB opens the server's database through o.OpenDB (the way `ackd bench`
// does: the server's config, store.Open) and checks that every acked event
// has its receipt and outbox row, and that duplicates added nothing: one
// receipt per event and one row per receipt and route.
func (o CompareOptions) checkDB(ctx context.Context, cfgPath, dbPath string, res BenchResult, prefilled bool) (CompareCheck, error) {
	st, err := o.OpenDB(ctx, cfgPath, dbPath)
	if err != nil {
		return CompareCheck{}, err
	}
	defer st.Close()
	ev, err := st.CheckEvents(ctx, res.EventIDs)
	if err != nil {
		return CompareCheck{}, err
	}
	stats, err := st.Stats(ctx)
	if err != nil {
		return CompareCheck{}, err
	}
	var pre store.EventCheck
	if prefilled {
		// Each pre-filled receipt has one done row; pruning takes both,
		// receipts first.
		if pre, err = st.CheckEvents(ctx, prefillIDs(o.Prefill)); err != nil {
			return CompareCheck{}, err
		}
	}
	return judgeCompareDB(res, ev, stats, pre.Receipts, pre.WithRows, o.routes()), nil
}

// prefillIDs are the event ids a PrefillDB writes (PrefillID).
func prefillIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = PrefillID(i)
	}
	return ids
}

// PrefillID is the event id of pre-filled row i. The ids are not in
// insertion order, like Slack's.
func PrefillID(i int) string {
	return (&eventGen{key: idKey("PREFILL")}).id(int64(i))
}

func judgeCompareDB(res BenchResult, ev store.EventCheck, stats store.Stats, prefillReceipts, prefillRows, routes int) CompareCheck {
	c := CompareCheck{
		AckedEvents: len(res.EventIDs), WithReceipt: ev.Receipts, WithRow: ev.WithRows,
		Receipts: stats.Receipts, Rows: stats.Pending + stats.Done + stats.Parked, Parked: stats.Parked,
		MissingSample: ev.Missing, PrefillLeft: int64(prefillReceipts),
	}
	// Pre-filled receipts and rows are counted apart: what the load added
	// must still add up.
	c.Receipts -= int64(prefillReceipts)
	c.Rows -= int64(prefillRows)
	bad := func(format string, a ...any) { c.Problems = append(c.Problems, fmt.Sprintf(format, a...)) }
	if c.WithReceipt != c.AckedEvents {
		bad("%d acked events have no receipt (e.g. %v)", c.AckedEvents-c.WithReceipt, c.MissingSample)
	}
	if c.WithRow != c.AckedEvents {
		bad("%d acked events have no outbox row", c.AckedEvents-c.WithRow)
	}
	// An event whose answer was lost may have a receipt without an ack (its
	// retry would be a duplicate); an event never sent cannot.
	if c.Receipts < int64(c.AckedEvents) || c.Receipts > int64(res.Unique) {
		bad("%d receipts for %d acked of %d distinct events sent", c.Receipts, c.AckedEvents, res.Unique)
	}
	if c.Rows != c.Receipts*int64(routes) {
		bad("%d outbox rows for %d receipts with %d route(s): a duplicate added a row or an event lost its row", c.Rows, c.Receipts, routes)
	}
	if c.Parked != 0 {
		bad("%d rows parked: the log effect cannot fail", c.Parked)
	}
	return c
}

// compareChild is a running server process.
type compareChild struct {
	cmd     *exec.Cmd
	addr    string
	logPath string
	logFile *os.File
	done    chan struct{} // closed when the process has exited
}

// startCompareChild starts exe with args on a free 127.0.0.1 port and waits
// until /healthz answers 200. If another process takes the port first, it
// tries another.
func startCompareChild(ctx context.Context, exe string, args []string, secret, logPath string, env []string) (*compareChild, error) {
	for try := 1; ; try++ {
		c, lostPort, err := tryStartCompareChild(ctx, exe, args, secret, logPath, env)
		if err == nil || !lostPort || try == 3 {
			return c, err
		}
	}
}

func tryStartCompareChild(ctx context.Context, exe string, args []string, secret, logPath string, env []string) (*compareChild, bool, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, false, err
	}
	addr := ln.Addr().String()
	ln.Close()

	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, false, err
	}
	c := &compareChild{addr: addr, logPath: logPath, logFile: logFile, done: make(chan struct{})}
	c.cmd = exec.Command(exe, append(args, "--listen", addr)...)
	c.cmd.Env = append(compareChildEnv(secret), env...)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	if err := c.cmd.Start(); err != nil {
		logFile.Close()
		return nil, false, err
	}
	go func() {
		_ = c.cmd.Wait()
		logFile.Close()
		close(c.done)
	}()

	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-c.done:
			b, _ := os.ReadFile(logPath)
			lost := strings.Contains(string(b), "address already in use")
			return nil, lost, fmt.Errorf("%s %s exited before it was healthy (%v); log %s:\n%s",
				filepath.Base(exe), args[0], c.cmd.ProcessState, logPath, lastLines(string(b), 20))
		default:
		}
		if resp, err := client.Get("http://" + addr + "/healthz"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c, false, nil
			}
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			c.kill()
			if ctx.Err() != nil {
				return nil, false, ctx.Err()
			}
			return nil, false, fmt.Errorf("%s %s on %s not healthy within 30s; log %s", filepath.Base(exe), args[0], addr, logPath)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// compareChildEnv is this process's environment without what would change
// a server's behaviour behind the comparison's back (ACKD_* overrides,
// systemd's sockets, the caller's secrets), plus the run's signing secret.
func compareChildEnv(secret string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "ACKD_"), strings.HasPrefix(k, "SLACK_"),
			k == "NOTIFY_SOCKET", strings.HasPrefix(k, "WATCHDOG_"), strings.HasPrefix(k, "LISTEN_"):
			continue
		}
		env = append(env, kv)
	}
	return append(env, "SLACK_SIGNING_SECRET="+secret)
}

// stop sends SIGTERM, waits up to timeout (then kills), and says how the
// process ended: "exit 0" is a clean stop.
func (c *compareChild) stop(timeout time.Duration) string {
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		c.kill()
		return "no SIGTERM (" + err.Error() + "), killed"
	}
	select {
	case <-c.done:
	case <-time.After(timeout):
		c.kill()
		return fmt.Sprintf("still running %s after SIGTERM, killed", timeout)
	}
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return "killed by " + ws.Signal().String()
	}
	return fmt.Sprintf("exit %d", c.cmd.ProcessState.ExitCode())
}

// kill ends the process if it is still running and waits for it.
func (c *compareChild) kill() {
	select {
	case <-c.done:
	default:
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// peakRSSMiB is the process's peak resident set (VmHWM), or 0 where
// /proc is not available.
func peakRSSMiB(pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return float64(kb) / 1024
		}
	}
	return 0
}

// cpuSample is a reading of CPU time from /proc, in clock ticks.
type cpuSample struct {
	at                 time.Time
	total, self, child int64 // busy ticks: all CPUs, this process, the server
	ok                 bool
}

// clockTicks is Linux's USER_HZ, the unit of /proc/stat and /proc/PID/stat
// times (100 on every mainstream architecture).
const clockTicks = 100

// sampleCPU reads the machine's, this process's and the servers' CPU time.
func sampleCPU(children ...int) cpuSample {
	c := cpuSample{at: time.Now()}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return c
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	if len(f) < 9 || f[0] != "cpu" {
		return c
	}
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // all but idle and iowait
		v, _ := strconv.ParseInt(f[i], 10, 64)
		c.total += v
	}
	var ok bool
	c.self, c.ok = procCPUTicks("self")
	for _, pid := range children {
		var n int64
		n, ok = procCPUTicks(strconv.Itoa(pid))
		c.child += n
		c.ok = c.ok && ok
	}
	return c
}

// procCPUTicks is a process's user+system time from /proc/PID/stat.
func procCPUTicks(pid string) (int64, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, false
	}
	// Fields after "(comm)": state is field 3, utime 14 and stime 15.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	return u + s, err1 == nil && err2 == nil
}

// since returns the average CPUs busy between two samples: the server, this
// process, and the rest of the machine.
func (c cpuSample) since(b cpuSample) (server, self, other float64) {
	wall := c.at.Sub(b.at).Seconds()
	if !c.ok || !b.ok || wall <= 0 {
		return 0, 0, 0
	}
	cpus := func(ticks int64) float64 { return float64(ticks) / clockTicks / wall }
	server, self = cpus(c.child-b.child), cpus(c.self-b.self)
	other = max(0, cpus(c.total-b.total)-server-self)
	return server, self, other
}

// loadAvg is the machine's 1-minute load average (0 if unknown).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// freshSchema creates an empty schema in the PostgreSQL database at base
// and returns a URL whose connections use it, and a func that drops it.
func freshSchema(ctx context.Context, base string) (string, func(), error) {
	name := "ackd_bench_" + strings.ToLower(rand.Text()[:10])
	run := func(ctx context.Context, sql string) error {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return fmt.Errorf("connect to %s: %w", postgres.Redact(base), err)
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, sql)
		return err
	}
	if err := run(ctx, "CREATE SCHEMA "+name); err != nil {
		return "", nil, err
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, errors.New("postgres: not a valid URL")
	}
	q := u.Query()
	q.Set("options", "-csearch_path="+name)
	u.RawQuery = q.Encode()
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = run(ctx, "DROP SCHEMA "+name+" CASCADE")
	}
	return u.String(), drop, nil
}

// machineInfo reads what is readable about this machine; missing pieces
// stay empty.
func machineInfo(dir string) CompareMachine {
	m := CompareMachine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
		OSArch: runtime.GOOS + "/" + runtime.GOARCH, Dir: dir}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				m.MemTotalMiB = kb / 1024
				break
			}
		}
	}
	m.DirFS = fsType(dir)
	return m
}

// fsType is the type of the filesystem holding dir, from /proc/self/mounts
// (the longest mount point that contains it).
func fsType(dir string) string {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	best, typ := -1, ""
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		mp := strings.ReplaceAll(f[1], `\040`, " ")
		if (dir == mp || strings.HasPrefix(dir, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= best {
			best, typ = len(mp), f[2]
		}
	}
	return typ
}

func loadWords(o BenchOptions) string {
	var s string
	if o.Rate > 0 {
		s = fmt.Sprintf("open loop, %g events/s for %s", o.Rate, o.Duration)
	} else {
		s = fmt.Sprintf("closed loop, %d workers for %s", o.Concurrency, o.Duration)
	}
	if o.DupFraction > 0 {
		s += fmt.Sprintf(", %g%% of events delivered twice at once", 100*o.DupFraction)
	}
	if o.PayloadBytes > 0 {
		s += fmt.Sprintf(", bodies padded to %d bytes", o.PayloadBytes)
	}
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// WriteTable prints the report for a person: the machine and command, one
// row per server, then the database checks and notes.
func (r CompareReport) WriteTable(w io.Writer) {
	m := r.Machine
	cpu := fmt.Sprintf("%d CPUs", m.CPUs)
	if m.CPUModel != "" {
		cpu += " (" + m.CPUModel + ")"
	}
	if m.MemTotalMiB > 0 {
		cpu += fmt.Sprintf(", %.1f GiB RAM", float64(m.MemTotalMiB)/1024)
	}
	kernel := m.OSArch
	if m.Kernel != "" {
		kernel += " " + m.Kernel
	}
	fs := m.Dir
	if m.DirFS != "" {
		fs += " (" + m.DirFS + ")"
	}
	fmt.Fprintf(w, "machine: %s; kernel %s; %s; databases in %s\n", cpu, kernel, m.GoVersion, fs)
	fmt.Fprintf(w, "command: %s\n", r.Command)
	fmt.Fprintf(w, "load:    %s; seed %d; same load for every server, one server at a time\n", r.Mode, r.Seed)
	fmt.Fprintf(w, "routes:  %d dry-run log route(s) per event, each its own outbox row\n\n", max(r.Routes, 1))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "config   \tsent\tnon-2xx\terrors\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\tachieved/s\tpeak RSS MiB\tp99 vs ceiling\tthroughput vs ceiling\t")
	for _, row := range r.Rows {
		b := row.Bench
		rss := "n/a"
		if row.PeakRSSMiB > 0 {
			rss = fmt.Sprintf("%.1f", row.PeakRSSMiB)
		}
		// Padded: a right-aligned column of padded names reads left-aligned.
		fmt.Fprintf(tw, "%-9s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t%.2f×\t%.0f%%\t\n",
			row.Config, b.Sent, row.Non2xx, b.Errors, msCell(b.P50), msCell(b.P90), msCell(b.P99), msCell(b.P999), msCell(b.Max),
			b.AchievedRate, rss, row.P99VsCeiling, 100*row.ThroughputVsCeiling)
	}
	tw.Flush()
	fmt.Fprintln(w)

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "config   \trows acked\tdone at load end\tdrained after\tdatabase MiB\tbytes per event\t")
	for _, row := range r.Rows {
		if row.Check == nil {
			continue
		}
		drain := "not within bound"
		if row.DrainSeconds >= 0 {
			drain = fmt.Sprintf("%.1fs", row.DrainSeconds)
		}
		bpe := "n/a"
		if row.BytesPerEvent > 0 {
			bpe = fmt.Sprintf("%.0f", row.BytesPerEvent)
		}
		fmt.Fprintf(tw, "%-9s\t%d\t%d (%.0f%%)\t%s\t%.1f\t%s\t\n", row.Config, row.RowsAcked, row.DoneAtEnd,
			100*ratio(float64(row.DoneAtEnd), float64(row.RowsAcked)), drain, float64(row.DBBytes)/(1<<20), bpe)
	}
	tw.Flush()
	fmt.Fprintln(w)

	for _, row := range r.Rows {
		b := row.Bench
		var notes []string
		if b.Skipped > 0 {
			notes = append(notes, fmt.Sprintf("%d skipped at the in-flight cap", b.Skipped))
		}
		if b.FirstError != "" {
			notes = append(notes, "first error: "+b.FirstError)
		}
		if row.ServerCPUs > 0 && b.Sent > 0 {
			notes = append(notes, fmt.Sprintf("CPUs busy: server %.2f (%.0f µs per request), load generator %.2f, other processes %.2f",
				row.ServerCPUs, row.ServerCPUs*b.Elapsed.Seconds()/float64(b.Sent)*1e6, row.LoadCPUs, row.OtherCPUs))
		}
		if b.Mode == "open" {
			notes = append(notes, fmt.Sprintf("client lag at most %s ms", msCell(b.MaxLag)))
		}
		if row.Exit != "exit 0" {
			notes = append(notes, "after SIGTERM: "+row.Exit)
		}
		if row.LoadAvg != [2]float64{} {
			notes = append(notes, fmt.Sprintf("load average %.2f before, %.2f after", row.LoadAvg[0], row.LoadAvg[1]))
		}
		if c := row.Check; c != nil {
			verdict := "ok"
			if !c.OK() {
				verdict = "FAILED: " + strings.Join(c.Problems, "; ")
			}
			notes = append(notes, fmt.Sprintf("db check %s: %d acked events, %d with receipt, %d with row; %d receipts, %d rows, %d parked",
				verdict, c.AckedEvents, c.WithReceipt, c.WithRow, c.Receipts, c.Rows, c.Parked))
			if c.PrefillLeft > 0 || row.Config != "FULL" && strings.Contains(row.Config, "+") {
				notes = append(notes, fmt.Sprintf("%d pre-filled receipts left", c.PrefillLeft))
			}
		}
		fmt.Fprintf(w, "%s: %d events + %d duplicates", row.Config, b.Unique, b.Duplicates)
		for _, n := range notes {
			fmt.Fprintf(w, "; %s", n)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "latency: ms from the scheduled (open loop) or actual (closed loop) send to the end of the answer.")
	fmt.Fprintln(w, "ratios:  p99 and achieved/s divided by the ceiling's (a server that only verifies the signature).")
	fmt.Fprintln(w, "rows:    outbox rows the acked events made, how many the sweep had done when the load stopped (from /metrics),")
	fmt.Fprintln(w, "         and how long the rest took; bytes per event: database growth (file + WAL after a clean stop) per receipt added.")
}

func msCell(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms >= 100:
		return fmt.Sprintf("%.0f", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1f", ms)
	default:
		return fmt.Sprintf("%.2f", ms)
	}
}
