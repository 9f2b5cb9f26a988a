package fakeslack

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// sockClient opens a connection the way a Socket Mode client does and
// returns it after reading hello.
func sockClient(t *testing.T, s *Server, token string) *websocket.Conn {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"apps.connections.open", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var open struct {
		OK    bool   `json:"ok"`
		URL   string `json:"url"`
		Error string `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&open)
	resp.Body.Close()
	if !open.OK || !strings.HasPrefix(open.URL, "ws://127.0.0.1:") {
		t.Fatalf("apps.connections.open: %+v", open)
	}
	ws, _, err := websocket.DefaultDialer.Dial(open.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	if f := readFrame(t, ws); f["type"] != "hello" {
		t.Fatalf("first frame %v, want hello", f)
	}
	return ws
}

func readFrame(t *testing.T, ws *websocket.Conn) map[string]any {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	var f map[string]any
	if err := ws.ReadJSON(&f); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestSocket(t *testing.T) {
	t.Run("a wrong or revoked token gets invalid_auth", func(t *testing.T) {
		s := New(t, "xoxb-bot")
		k := s.SocketMode(t, "xapp-good")
		for tok, want := range map[string]string{"xapp-bad": "invalid_auth", "xoxb-bot": "not_allowed_token_type", "": "not_authed"} {
			_, _, b := call(t, s, "apps.connections.open", tok, nil)
			if b["error"] != want {
				t.Errorf("token %q: %v, want %s", tok, b, want)
			}
		}
		sockClient(t, s, "xapp-good")
		k.Revoke()
		if _, _, b := call(t, s, "apps.connections.open", "xapp-good", nil); b["error"] != "invalid_auth" {
			t.Errorf("after Revoke: %v", b)
		}
	})

	t.Run("an unacked envelope is sent again with retry_attempt; an ack stops it", func(t *testing.T) {
		s := New(t, "xoxb-bot")
		k := s.SocketMode(t, "xapp-good")
		k.AckTimeout = 100 * time.Millisecond
		ws := sockClient(t, s, "xapp-good")
		k.Send("e1", "events_api", map[string]any{"type": "event_callback", "event_id": "Ev1"})
		first := readFrame(t, ws)
		second := readFrame(t, ws)
		if first["type"] != "events_api" || first["retry_attempt"] != 0.0 || second["retry_attempt"] != 1.0 || second["retry_reason"] != "timeout" {
			t.Fatalf("frames %v then %v", first, second)
		}
		if first["envelope_id"] == second["envelope_id"] {
			t.Errorf("a re-send reused the envelope_id without ReuseEnvelopeID")
		}
		if err := ws.WriteJSON(map[string]any{"envelope_id": second["envelope_id"]}); err != nil {
			t.Fatal(err)
		}
		if !k.Wait(5*time.Second, func() bool { return k.Acked("e1") }) {
			t.Fatal("ack not recorded")
		}
		n := len(k.Sent())
		time.Sleep(3 * k.AckTimeout) // nothing more may come: the absence is the point
		if len(k.Sent()) != n {
			t.Errorf("sent again after the ack: %+v", k.Sent())
		}
	})

	t.Run("an ack of 20 KB or more counts as no ack", func(t *testing.T) {
		s := New(t, "xoxb-bot")
		k := s.SocketMode(t, "xapp-good")
		ws := sockClient(t, s, "xapp-good")
		k.Send("c1", "slash_commands", map[string]any{"command": "/x"})
		f := readFrame(t, ws)
		big := strings.Repeat("x", 20*1024)
		_ = ws.WriteJSON(map[string]any{"envelope_id": f["envelope_id"], "payload": map[string]string{"text": big}})
		if !k.Wait(5*time.Second, func() bool { return len(k.Oversized()) == 1 }) {
			t.Fatal("oversized ack not recorded")
		}
		if k.Acked("c1") {
			t.Error("an oversized ack counted")
		}
	})

	t.Run("SendToTwo reaches two connections; Refresh sends disconnect and stops routing", func(t *testing.T) {
		s := New(t, "xoxb-bot")
		k := s.SocketMode(t, "xapp-good")
		a, b := sockClient(t, s, "xapp-good"), sockClient(t, s, "xapp-good")
		k.SendToTwo("d", "events_api", map[string]any{"event_id": "Ev2"})
		fa, fb := readFrame(t, a), readFrame(t, b)
		if fa["envelope_id"] == fb["envelope_id"] || fa["type"] != "events_api" || fb["type"] != "events_api" {
			t.Fatalf("copies %v and %v", fa, fb)
		}
		k.Refresh(1)
		if f := readFrame(t, a); f["type"] != "disconnect" || f["reason"] != "refresh_requested" {
			t.Fatalf("after Refresh: %v", f)
		}
		k.Send("after", "events_api", map[string]any{"event_id": "Ev3"})
		if f := readFrame(t, b); f["type"] != "events_api" {
			t.Fatalf("the remaining connection got %v", f)
		}
		a.Close()
		if !k.Wait(5*time.Second, func() bool { return len(k.Open()) == 1 }) {
			t.Fatalf("open %v", k.Open())
		}
		if k.Gaps() != 0 {
			t.Errorf("gaps %d with one connection left", k.Gaps())
		}
		b.Close()
		if !k.Wait(5*time.Second, func() bool { return k.Gaps() == 1 }) {
			t.Errorf("gaps %d after the last connection closed, want 1", k.Gaps())
		}
	})

	t.Run("envelopes wait while no connection is open", func(t *testing.T) {
		s := New(t, "xoxb-bot")
		k := s.SocketMode(t, "xapp-good")
		k.Send("early", "interactive", map[string]any{"type": "block_actions"})
		ws := sockClient(t, s, "xapp-good")
		if f := readFrame(t, ws); f["type"] != "interactive" || f["accepts_response_payload"] != true {
			t.Fatalf("queued envelope: %v", f)
		}
	})

	t.Run("pings until silenced", func(t *testing.T) {
		s := New(t, "xoxb-bot")
		k := s.SocketMode(t, "xapp-good")
		k.PingEvery = 20 * time.Millisecond
		ws := sockClient(t, s, "xapp-good")
		pings := make(chan struct{}, 100)
		ws.SetPingHandler(func(string) error {
			pings <- struct{}{}
			return nil
		})
		go func() {
			for {
				if _, _, err := ws.ReadMessage(); err != nil {
					return
				}
			}
		}()
		select {
		case <-pings:
		case <-time.After(5 * time.Second):
			t.Fatal("no ping")
		}
		k.Silence(1)
		time.Sleep(5 * k.PingEvery) // let a ping already in flight land
		for len(pings) > 0 {
			<-pings
		}
		time.Sleep(10 * k.PingEvery) // nothing may come: the absence is the point
		if n := len(pings); n != 0 {
			t.Errorf("%d pings after Silence", n)
		}
	})
}
