package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/testreq"
)

// monitoringExprs returns every PromQL expression in the shipped Grafana
// dashboard (panel targets and template queries) and in the rules file.
func monitoringExprs(tb testing.TB) (dashboard, rules []string) {
	tb.Helper()
	b, err := os.ReadFile("monitoring/ackd-dashboard.json")
	if err != nil {
		tb.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		tb.Fatalf("dashboard JSON: %v", err)
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			tb.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, t := range p.Targets {
			dashboard = append(dashboard, t.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok && v.Type == "query" {
			dashboard = append(dashboard, q)
		}
	}
	r, err := os.ReadFile("monitoring/ackd-rules.yml")
	if err != nil {
		tb.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*expr:\s*(.+?)\s*$`).FindAllStringSubmatch(string(r), -1) {
		rules = append(rules, m[1])
	}
	if len(dashboard) == 0 || len(rules) == 0 {
		tb.Fatalf("found %d dashboard and %d rule expressions", len(dashboard), len(rules))
	}
	return dashboard, rules
}

// Issue 16.12: every metric the dashboard and the alert rules use is one a
// running ackd exports, read from a real /metrics scrape, and the dashboard
// shows what an operator needs.
func TestMonitoringUsesExportedMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// With [oauth] and Socket Mode (fakeslack's), so that their metrics are
	// exported too: the dashboard and the rules use them.
	const appToken = "xapp-1-A0MON-monitoring"
	api := fakeslack.New(t, "xoxb-mon")
	sock := api.SocketMode(t, appToken)
	cfg := procWriteConfig(t, dir, "ackd.toml", "[oauth]\nclient_id = \"1.2\"\nscopes = [\"chat:write\"]\nredirect_url = \"https://ackd.example/slack/oauth_redirect\"\n\n"+
		fmt.Sprintf("[slack]\napi_url = %q\n[socket_mode]\nenabled = true\nconnections = 1\n", api.URL())+
		"[[route]]\nname = \"log\"\nevent = \"app_mention\"\neffect = \"log\"\n")
	d := procServe(t, procServeOpts{Config: cfg, DB: filepath.Join(dir, "ackd.db"),
		Env: procEnv("SLACK_CLIENT_SECRET=client-secret", "ACKD_TOKEN_KEY=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "SLACK_APP_TOKEN="+appToken)})
	// One request and one effect, so that the labelled families exist, and
	// one Socket Mode refresh (a reconnect).
	d.mustPostEvent(procMention("EvMon1", "hi"))
	if !sock.Wait(15*time.Second, func() bool { return len(sock.Open()) == 1 }) {
		t.Fatal("no Socket Mode connection")
	}
	sock.Refresh(sock.Open()[0])
	var families map[string]*dto.MetricFamily
	procWaitFor(t, "an effect attempt in /metrics", 20*time.Second, func() bool {
		resp, err := procClient.Get(d.URL + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
		p := expfmt.NewTextParser(model.LegacyValidation)
		families, err = p.TextToMetricFamilies(resp.Body)
		return err == nil && families["ackd_effect_attempts_total"] != nil && families["ackd_socket_reconnects_total"] != nil
	})
	d.stop()
	exported := map[string]bool{}
	for name, f := range families {
		exported[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				exported[name+s] = true
			}
		}
	}

	// Issue 30.3: the metrics reference lists every ackd series exported.
	reference := readText(t, "docs/reference/metrics.md")
	for name := range families {
		if strings.HasPrefix(name, "ackd_") && !strings.Contains(reference, "`"+name+"`") {
			t.Errorf("ackd exports %s, which docs/reference/metrics.md does not list", name)
		}
	}

	dashboard, rules := monitoringExprs(t)
	ackdName := regexp.MustCompile(`\backd_[a-z0-9_]+`)
	// A selector of a metric that is not ackd's (say up{job="ackd"}) would
	// depend on how Prometheus is set up; the files use ackd's own.
	otherSelector := regexp.MustCompile(`\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{`)
	used := map[string]bool{}
	for _, e := range append(slices.Clone(dashboard), rules...) {
		for _, name := range ackdName.FindAllString(e, -1) {
			used[name] = true
			if !exported[name] {
				t.Errorf("%s is used in %q but ackd does not export it", name, e)
			}
		}
		for _, m := range otherSelector.FindAllStringSubmatch(e, -1) {
			if !strings.HasPrefix(m[1], "ackd_") {
				t.Errorf("%q selects %s, which is not an ackd metric", e, m[1])
			}
		}
	}
	joined := strings.Join(dashboard, "\n")
	for _, want := range []string{
		"ackd_ack_latency_seconds_bucket", "by (le, outcome)", // ack latency percentiles by outcome
		"ackd_requests_total", "by (status)",
		"ackd_outbox_rows", "ackd_outbox_oldest_pending_seconds",
		"ackd_effect_attempts_total", "ackd_fence_rejections_total",
		`status="parked"`, "ackd_sqlite_busy_errors_total",
		"ackd_socket_connections", "ackd_socket_connections_configured", "ackd_socket_envelopes_total",
		"ackd_socket_reconnects_total", `outcome="failed"`,
		"ackd_post_confirmations_total", "by (outcome)",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
	for _, want := range []string{"ackd_outbox_oldest_pending_seconds", "ackd_parked_total", "ackd_fence_rejections_total",
		"ackd_socket_connections_configured", `outcome="failed"`, "up == 0", "absent(ackd_database_up)"} {
		if !slices.ContainsFunc(rules, func(e string) bool { return strings.Contains(e, want) }) {
			t.Errorf("no alert rule uses %s", want)
		}
	}
}

// Issue 16.12: promtool accepts the rules file, and every dashboard query
// (with Grafana's variables filled in) as PromQL.
func TestMonitoringPromtool(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	testreq.Need(t, err == nil, "promtool is not installed (Debian: apt-get install prometheus; .ci/with-promtool.sh)")
	if out, err := exec.Command(promtool, "check", "rules", "monitoring/ackd-rules.yml").CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules monitoring/ackd-rules.yml: %v\n%s", err, out)
	}
	dashboard, _ := monitoringExprs(t)
	var b strings.Builder
	b.WriteString("groups:\n- name: ackd-dashboard\n  rules:\n")
	fill := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*")
	for i, e := range dashboard {
		if strings.HasPrefix(e, "label_values(") { // a Grafana function, not PromQL
			continue
		}
		q, _ := json.Marshal(fill.Replace(e)) // a JSON string is a YAML string
		fmt.Fprintf(&b, "  - record: ackd:dashboard:%d\n    expr: %s\n", i, q)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("a dashboard query is not valid PromQL: %v\n%s", err, out)
	}
}

// Issue 25.1 and 25.8: the alert rules behave as their unit tests in
// monitoring/ackd-rules.test.yml say (promtool test rules): a parked row
// pages when it is new, not forever.
func TestMonitoringRuleUnitTests(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	testreq.Need(t, err == nil, "promtool is not installed (Debian: apt-get install prometheus; .ci/with-promtool.sh)")
	if out, err := exec.Command(promtool, "test", "rules", "monitoring/ackd-rules.test.yml").CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules monitoring/ackd-rules.test.yml: %v\n%s", err, out)
	}
}

// runbookPage is the alerts runbook every rule's runbook_url points into,
// as a path in the repository and as the URL GitHub serves it at.
const (
	runbookPage = "docs/howto/alerts.md"
	runbookURL  = "https://github.com/ackd/ackd/blob/main/" + runbookPage
)

// Issue 25.8 and 30.3: every alert has a runbook_url, and each points at
// its own section of the alerts runbook (GitHub's anchor of a heading).
func TestMonitoringRunbooks(t *testing.T) {
	t.Parallel()
	rules, err := os.ReadFile("monitoring/ackd-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	anchors := mdAnchors(readText(t, runbookPage))
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\S+)`).FindAllStringSubmatch(string(rules), -1)
	urls := regexp.MustCompile(`(?m)^\s*runbook_url: "([^"]+)"`).FindAllStringSubmatch(string(rules), -1)
	if len(alerts) == 0 || len(urls) != len(alerts) {
		t.Fatalf("%d alerts, %d runbook_url annotations: want one each", len(alerts), len(urls))
	}
	for i, u := range urls {
		base, anchor, ok := strings.Cut(u[1], "#")
		if !ok || base != runbookURL || !anchors[anchor] {
			t.Errorf("%s: runbook_url %s is not a section of %s", alerts[i][1], u[1], runbookURL)
		}
		if anchor != strings.ToLower(alerts[i][1]) {
			t.Errorf("%s: runbook_url points at #%s, not its own section", alerts[i][1], anchor)
		}
	}
}

// Issue 30.4: monitoring/prometheus.yml wires the scrape job and the rules
// (promtool check config loads both), and the monitoring page shows that
// file.
func TestMonitoringPrometheusWiring(t *testing.T) {
	t.Parallel()
	wiring, err := os.ReadFile("monitoring/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(readText(t, "docs/howto/monitoring.md"), "```yaml\n"+string(wiring)+"```\n") {
		t.Error("docs/howto/monitoring.md does not show monitoring/prometheus.yml as it is (a ```yaml block)")
	}
	for _, want := range []string{"\nrule_files:\n  - ackd-rules.yml", "\nscrape_configs:\n  - job_name: ackd"} {
		if !strings.Contains(string(wiring), want) {
			t.Errorf("monitoring/prometheus.yml lacks %q", want)
		}
	}
	promtool, err := exec.LookPath("promtool")
	testreq.Need(t, err == nil, "promtool is not installed (Debian: apt-get install prometheus; .ci/with-promtool.sh)")
	out, err := exec.Command(promtool, "check", "config", "monitoring/prometheus.yml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS: 1 rule files found") {
		t.Fatalf("promtool check config monitoring/prometheus.yml: %v\n%s", err, out)
	}
}
