package manifest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// memProgress is Job.Progress in memory.
type memProgress struct{ s string }

func (p *memProgress) Load(context.Context) (string, error)           { return p.s, nil }
func (p *memProgress) Save(_ context.Context, s string) (bool, error) { p.s = s; return true, nil }

// Issue 33: the manifest for stream routes grants what the stream effect
// calls: chat:write for the status, the streaming methods, chat.update and
// chat.delete (performed here: a streamed answer that Slack ends midway, and
// one finished in the messages an earlier attempt started), and
// assistant:write with the assistant_thread_started subscription.
func TestStreamManifest(t *testing.T) {
	cfg, err := config.Parse([]byte(`
[[route]]
name   = "agent"
events = ["app_mention", "message"]
key    = "message"
effect = "stream"
url    = "http://127.0.0.1:1/agent"

[[route]]
name   = "assistant"
event  = "assistant_thread_started"
effect = "stream"
url    = "http://127.0.0.1:1/agent"
`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Build(&cfg, Options{URL: testURL})
	if err != nil {
		t.Fatal(err)
	}
	granted := res.Manifest.OAuthConfig.Scopes.Bot
	for _, want := range []string{"chat:write", "assistant:write", "app_mentions:read", "im:history"} {
		if !slices.Contains(granted, want) {
			t.Errorf("scopes %v lack %s", granted, want)
		}
	}
	for _, want := range []string{"app_mention", "assistant_thread_started", "message.im"} {
		if !slices.Contains(res.Manifest.Settings.EventSubscriptions.BotEvents, want) {
			t.Errorf("bot_events %v lack %s", res.Manifest.Settings.EventSubscriptions.BotEvents, want)
		}
	}

	fake := fakeslack.New(t, "xoxb-test")
	fake.SetStreamLifetime(100 * time.Millisecond)
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		for i := range 12 {
			fmt.Fprintf(w, "{\"text\":\"part %d \"}\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(25 * time.Millisecond)
		}
	}))
	defer agent.Close()
	reg := sweep.Effects(sweep.EffectConfig{BotToken: "xoxb-test", APIURL: fake.URL(),
		Stream: sweep.StreamConfig{FlushEvery: 10 * time.Millisecond}})
	env := `{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention","channel":"C1","ts":"1.000001","text":"hi"}}`
	p := sweep.Payload{Route: "agent", Source: sweep.SourceEvent, Params: sweep.Params{URL: agent.URL},
		Facts: sweep.Facts{EventID: "Ev1", Team: "T1", User: "U1", Channel: "C1", TS: "1.000001"}, Raw: json.RawMessage(env)}
	run := func(prog *memProgress) {
		job := sweep.Job{Row: store.Row{ID: 1, Key: "Ev1:agent", Effect: "stream"}, Payload: p, Attempt: 1, Progress: prog}
		if _, err := reg["stream"].Perform(context.Background(), job); err != nil {
			t.Fatal(err)
		}
	}
	run(&memProgress{})
	// An earlier attempt left two messages: the answer is laid out over
	// them again; what is left is deleted.
	api := slack.New("xoxb-test", slack.OptionAPIURL(fake.URL()))
	var msgs []map[string]any
	for range 2 {
		_, ts, err := api.StartStream("C1", slack.MsgOptionTS("1.000001"), slack.MsgOptionMarkdownText("old"),
			slack.MsgOptionRecipientUserID("U1"), slack.MsgOptionRecipientTeamID("T1"))
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, map[string]any{"ts": ts, "from": 0, "n": 3, "open": true})
	}
	b, _ := json.Marshal(map[string]any{"text": "old", "msgs": msgs})
	run(&memProgress{s: string(b)})

	seen := map[string]bool{}
	for _, c := range fake.Calls() {
		seen[c.Method] = true
		for _, sc := range methodScopes[c.Method] {
			if _, ok := methodScopes[c.Method]; !ok || (sc != historyScope && !slices.Contains(granted, sc)) {
				t.Errorf("the stream effect called %s (scope %q); the manifest grants %v", c.Method, sc, granted)
			}
		}
		if _, ok := methodScopes[c.Method]; !ok {
			t.Errorf("the stream effect called %s, which methodScopes does not list", c.Method)
		}
	}
	for _, m := range []string{"assistant.threads.setStatus", "chat.startStream", "chat.appendStream", "chat.stopStream", "chat.update", "chat.delete"} {
		if !seen[m] {
			t.Errorf("the runs did not call %s; calls: %v", m, seen)
		}
	}
}

// Issue 39.5: stream routes subscribe to agent_session_stopped (Slack shows
// the Stop button only then), ask for assistant:write (agents.sessions.*),
// and declare the agent feature: agent_view unless Options ask for the
// legacy assistant_view. Without stream routes, none of it.
func TestAgentFeature(t *testing.T) {
	parse := func(t *testing.T, toml string) config.Config {
		t.Helper()
		cfg, err := config.Parse([]byte(toml))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	mention := parse(t, "[[route]]\nname=\"agent\"\nevent=\"app_mention\"\neffect=\"stream\"\nurl=\"http://127.0.0.1:1/a\"\n")
	assistant := parse(t, "[[route]]\nname=\"assistant\"\nevent=\"assistant_thread_started\"\neffect=\"stream\"\nurl=\"http://127.0.0.1:1/a\"\n")
	build := func(t *testing.T, cfg config.Config, o Options) Result {
		t.Helper()
		o.URL = testURL
		res, err := Build(&cfg, o)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	t.Run("agent_view by default, with the Stop button's event and assistant:write", func(t *testing.T) {
		res := build(t, mention, Options{})
		m := res.Manifest
		if m.Features.AgentView == nil || m.Features.AgentView.AgentDescription != DefaultAgentDescription || m.Features.AssistantView != nil {
			t.Errorf("features = %+v, want agent_view with the default description and no assistant_view", m.Features)
		}
		if !slices.Contains(m.Settings.EventSubscriptions.BotEvents, "agent_session_stopped") {
			t.Errorf("bot_events %v lack agent_session_stopped", m.Settings.EventSubscriptions.BotEvents)
		}
		for _, s := range []string{"assistant:write", "chat:write", "app_mentions:read"} {
			if !slices.Contains(m.OAuthConfig.Scopes.Bot, s) {
				t.Errorf("scopes %v lack %s", m.OAuthConfig.Scopes.Bot, s)
			}
		}
		if m.Features.AppHome == nil || !m.Features.AppHome.MessagesTabEnabled {
			t.Errorf("app_home = %+v: an agent's conversations live in its Messages tab", m.Features.AppHome)
		}
		if len(res.Notes) != 0 {
			t.Errorf("notes %q", res.Notes)
		}
	})
	t.Run("assistant_view when asked, with its description and a deprecation note", func(t *testing.T) {
		res := build(t, assistant, Options{AgentView: AssistantViewLegacy, AgentDescription: "Answers questions about deploys"})
		f := res.Manifest.Features
		if f.AssistantView == nil || f.AssistantView.AssistantDescription != "Answers questions about deploys" || f.AgentView != nil {
			t.Errorf("features = %+v, want assistant_view with the given description only", f)
		}
		if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "assistant_view, which Slack deprecates from February 2027") {
			t.Errorf("notes %q, want one deprecation note", res.Notes)
		}
	})
	t.Run("assistant_thread_started under agent_view is a note", func(t *testing.T) {
		res := build(t, assistant, Options{AgentView: AgentViewNew})
		want := `route "assistant" takes assistant_thread_started, which agent_view replaces with app_home_opened (tab = "messages")`
		if len(res.Notes) != 1 || !strings.HasPrefix(res.Notes[0], want) {
			t.Errorf("notes %q, want one starting %q", res.Notes, want)
		}
	})
	t.Run("bad options are refused", func(t *testing.T) {
		for o, want := range map[*Options]string{
			{AgentView: "agent"}:                         `agent view "agent" is not "agent_view" (new apps) or "assistant_view" (an app that still uses the assistant view)`,
			{AgentDescription: strings.Repeat("é", 301)}: "agent description is 301 characters; Slack allows at most 300",
		} {
			o.URL = testURL
			if _, err := Build(&mention, *o); err == nil || err.Error() != want {
				t.Errorf("Build(%+v) = %v, want %q", *o, err, want)
			}
		}
	})
	t.Run("no stream route, no agent feature", func(t *testing.T) {
		cfg := parse(t, "[[route]]\nname=\"m\"\nevent=\"app_mention\"\neffect=\"forward\"\nurl=\"http://127.0.0.1:1/a\"\n")
		m := build(t, cfg, Options{AgentView: AssistantViewLegacy}).Manifest
		if m.Features.AgentView != nil || m.Features.AssistantView != nil || m.Features.AppHome != nil ||
			slices.Contains(m.Settings.EventSubscriptions.BotEvents, "agent_session_stopped") || slices.Contains(m.OAuthConfig.Scopes.Bot, "assistant:write") {
			t.Errorf("manifest for a forward route: %+v", m)
		}
	})
}
