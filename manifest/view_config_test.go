package manifest_test

import (
	"strings"
	"testing"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/manifest"
)

// [stream] view and description reach the manifest through the command's
// options; the config refuses a view Slack does not have.
func TestStreamViewFromTheConfig(t *testing.T) {
	const route = "[[route]]\nname = \"agent\"\nevent = \"app_mention\"\neffect = \"stream\"\nurl = \"http://127.0.0.1:9/agent\"\n"
	cfg, err := config.Parse([]byte("[stream]\nview = \"assistant_view\"\ndescription = \"Answers questions about deploys\"\n\n" + route))
	if err != nil {
		t.Fatal(err)
	}
	res, err := manifest.Build(&cfg, manifest.Options{URL: "https://ackd.example.com", AgentView: cfg.Stream.View, AgentDescription: cfg.Stream.Description})
	if err != nil {
		t.Fatal(err)
	}
	out, err := res.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if s := string(out); !strings.Contains(s, `"assistant_view"`) || strings.Contains(s, `"agent_view"`) || !strings.Contains(s, "Answers questions about deploys") {
		t.Errorf("manifest for [stream] view = assistant_view:\n%s", s)
	}
	if _, err := config.Parse([]byte("[stream]\nview = \"agent-view\"\n\n" + route)); err == nil || !strings.Contains(err.Error(), `did you mean "agent_view"?`) {
		t.Errorf("view = \"agent-view\": %v; want a refusal with a did-you-mean", err)
	}
	if _, err := config.Parse([]byte("[stream]\ndescription = \"" + strings.Repeat("x", 301) + "\"\n\n" + route)); err == nil || !strings.Contains(err.Error(), "at most 300") {
		t.Errorf("a 301-character description: %v; want a refusal", err)
	}
}
