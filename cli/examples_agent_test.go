package cli

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/testreq"
)

// Issue 33: the example agent (examples/agent/agent.mjs, shown whole in
// docs/howto/agents.md) runs under node behind the real binary: it checks ackd's
// signature, sets a status and streams its answer into one message.
func TestExampleAgent(t *testing.T) {
	t.Parallel()
	_, nodeErr := exec.LookPath("node")
	testreq.Need(t, nodeErr == nil, "node ≥ 20 (.ci/with-node.sh)")

	src, err := os.ReadFile("examples/agent/agent.mjs")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("docs/howto/agents.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```js\n"+string(src)+"```") {
		t.Error("docs/howto/agents.md does not show examples/agent/agent.mjs as it is")
	}

	const secret = "agent-forward-secret"
	addr := procFreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	node := exec.Command("node", filepath.Join("examples", "agent", "agent.mjs"))
	node.Env = append(procEnv(), "PORT="+port, "ACKD_FORWARD_SECRET="+secret)
	var nodeOut procSyncBuffer
	node.Stdout, node.Stderr = &nodeOut, &nodeOut
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = node.Process.Kill()
		_ = node.Wait()
		if t.Failed() {
			t.Logf("agent output:\n%s", nodeOut.String())
		}
	})
	procWaitFor(t, "the agent listening", 20*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	// It refuses what ackd did not sign.
	resp, err := http.Post("http://"+addr+"/", "application/json", strings.NewReader(`{"envelope":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unsigned request: %d, want 401", resp.StatusCode)
	}

	dir := t.TempDir()
	slack := fakeslack.New(t, procStreamToken)
	cfg := procStreamConfig(t, dir, slack.URL(), "http://"+addr+"/", `interval = "200ms"`)
	d := procServe(t, procServeOpts{Config: cfg, DB: filepath.Join(dir, "ackd.db"),
		Env: procEnv("SLACK_BOT_TOKEN="+procStreamToken, "ACKD_FORWARD_SECRET="+secret)})
	d.mustPostEvent(procMention("EvAgent1", "<@UBOT> what is ackd?"))
	procWaitFor(t, "the answer", 30*time.Second, func() bool {
		return procStreamStatus(t, d.DB, "EvAgent1:agent") == "done"
	})
	d.stop()

	msgs := procThread(slack)
	if want := "You asked: <@UBOT> what is ackd?"; len(msgs) != 1 || msgs[0].Text != want {
		t.Fatalf("thread %+v, want one message %q", msgs, want)
	}
	var statuses []string
	for _, s := range slack.Statuses() {
		statuses = append(statuses, s.Status)
	}
	if got := fmt.Sprint(statuses); !strings.HasPrefix(got, "[is thinking… is writing…") {
		t.Fatalf("statuses %s, want ackd's, then the agent's", got)
	}
}
