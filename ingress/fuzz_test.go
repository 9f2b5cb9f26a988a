package ingress_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/ingress"
)

// Fuzz targets for everything ackd reads from the network before it
// decides: the signature check and the three parsers. Run them with
// .ci/fuzz.sh, or one at a time:
//
//	go test -run '^$' -fuzz '^FuzzParseEnvelope$' -fuzztime 30s ./daemon/
//
// Seeds are the request files in ../examples (read at test time, so new
// examples become seeds) plus inline bodies, so the targets work without them.

// fuzzExamples returns the example files matching pattern, with the trailing
// newline trimmed the way `ackd send` trims it.
func fuzzExamples(tb testing.TB, pattern string) [][]byte {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("..", "examples", pattern))
	if err != nil {
		tb.Fatal(err)
	}
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, bytes.TrimRight(b, "\r\n"))
	}
	return out
}

var fuzzEventSeeds = []string{
	`{"type":"url_verification","token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}`,
	`{"type":"event_callback","team_id":"T1","event_id":"Ev1","event_time":1700000000,"event":{"type":"app_mention","user":"U1","text":"<@U0> hi","ts":"1.1","channel":"C1"}}`,
	`{"type":"event_callback","event_id":"Ev2","event":{"type":"reaction_added","user":"U1","reaction":"eyes","item":{"type":"message","channel":"C1","ts":"1.2"}}}`,
	`{"type":"event_callback","event_id":"Ev3","event":{"type":"channel_created","channel":{"id":"C9","name":"x"}}}`,
	`{"type":"event_callback","event_id":"Ev4","event":{"type":"message","subtype":"message_changed","channel":"C1","message":{"text":"x"},"ts":"1.3"}}`,
	`{"type":"app_rate_limited","team_id":"T1","minute_rate_limited":1518467820}`,
	`{"type":"event_callback","event_id":"Ev5","event_time":99999999999999999999999,"event":{"type":"message","text":"\xff\xfe"}}`,
	`{"type":"event_callback","event_id":"Ev6","event":"not an object"}`,
	`{"type":"event_callback","event_id":"Ev7"}`,
	`{"type":"event_callback","event_id":"Ev8","event":{}}`,
	`{"type":"event_callback","event_id":"Ev9","event":null}`,
	`{"type":42}`, `[]`, `"x"`, `null`, `1`, `{}`, ``, `{"type":"event_callback","event_id":"","event":{"type":"x"}}`,
}

var fuzzFormSeeds = []string{
	"token=t&team_id=T1&channel_id=C1&user_id=U1&command=%2Fdeploy&text=api+v2&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2F1&trigger_id=13345224609.738474920.8088930838d88f008e0",
	"ssl_check=1&token=t",
	"command=%2Fdeploy",
	"text=no+command",
	"command=%zz&text=%",
	"payload=%7B%22type%22%3A%22block_actions%22%2C%22trigger_id%22%3A%22t1%22%2C%22actions%22%3A%5B%7B%22action_id%22%3A%22approve%22%2C%22value%22%3A%22v%22%7D%5D%7D",
	`payload={"type":"view_submission","view":{"callback_id":"cb"},"response_urls":[{"response_url":"https://hooks.slack.com/x"}]}`,
	`payload={"type":"block_actions","user":{"id":"U1"},"actions":[{"action_id":"a","value":"1","action_ts":"1.5"}]}`,
	"payload=not+json",
	"payload=%7B%7D",
	"payload=null",
	"payload=%5B%5D",
	"payload=&payload=x",
	"%",
	"",
}

func FuzzVerify(f *testing.F) {
	for _, b := range fuzzExamples(f, "*.json") {
		f.Add(int64(0), "", "", b)
	}
	for _, s := range fuzzEventSeeds {
		f.Add(int64(-299), "", "", []byte(s))
	}
	f.Add(int64(300), "1700000000", "v0="+strings.Repeat("a", 64), []byte("{}"))
	f.Add(int64(1), "-1", "v0=zz", []byte(""))
	f.Add(int64(2), "9999999999999999999", "v1="+strings.Repeat("0", 64), []byte("x"))
	f.Add(int64(3), " 1700000000", "v0="+strings.Repeat("A", 64), []byte("x"))

	now := time.Unix(1_700_000_000, 0)
	v := ingress.NewVerifier(testSecret, func() time.Time { return now })
	skewSeconds := int64(ingress.MaxSkew / time.Second)
	f.Fuzz(func(t *testing.T, skew int64, tsHeader, sigHeader string, body []byte) {
		// Arbitrary headers: never a panic, and never accepted unless they
		// are in fact a valid signature of this body.
		h := http.Header{}
		h.Set("X-Slack-Request-Timestamp", tsHeader)
		h.Set("X-Slack-Signature", sigHeader)
		if err := v.Verify(h, body); err == nil {
			ts, perr := strconv.ParseInt(tsHeader, 10, 64)
			if perr != nil || ts < now.Unix()-skewSeconds || ts > now.Unix()+skewSeconds {
				t.Fatalf("accepted timestamp %q outside ±%ds of now", tsHeader, skewSeconds)
			}
			if !strings.EqualFold(sigHeader, fuzzSign(tsHeader, body)) {
				t.Fatalf("accepted signature %q for a body it does not sign", sigHeader)
			}
		}

		// A valid signature at any timestamp within the skew verifies, over
		// any body; one byte more in the body does not.
		if skew < 0 {
			skew = -skew
		}
		if skew < 0 { // math.MinInt64
			skew = 0
		}
		skew = skew%(2*skewSeconds+1) - skewSeconds
		ts := strconv.FormatInt(now.Unix()+skew, 10)
		good := http.Header{}
		good.Set("X-Slack-Request-Timestamp", ts)
		good.Set("X-Slack-Signature", fuzzSign(ts, body))
		if err := v.Verify(good, body); err != nil {
			t.Fatalf("valid signature at skew %ds rejected: %v", skew, err)
		}
		if err := v.Verify(good, append(bytes.Clone(body), 'x')); !errors.Is(err, ingress.ErrSignatureMismatch) {
			t.Fatalf("signature of another body: got %v, want ErrSignatureMismatch", err)
		}
	})
}

// fuzzSign is Slack's v0 signature with the test secret.
func fuzzSign(ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(testSecret))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

func FuzzParseEnvelope(f *testing.F) {
	for _, b := range fuzzExamples(f, "*.json") {
		f.Add(b)
	}
	for _, s := range fuzzEventSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		env, err := ingress.ParseEnvelope(body)
		if err != nil {
			if !errors.Is(err, ingress.ErrMalformed) {
				t.Fatalf("error is not ErrMalformed (would not be a 400): %v", err)
			}
			return
		}
		if env.Type == "" {
			t.Fatal("parsed an envelope without a type")
		}
		if env.Type == "event_callback" && (env.EventID == "" || env.Inner.Type == "") {
			t.Fatalf("event_callback parsed with event_id %q and inner type %q: it could not be keyed or routed",
				env.EventID, env.Inner.Type)
		}
		again, err := ingress.ParseEnvelope(body)
		if err != nil || !reflect.DeepEqual(env, again) {
			t.Fatalf("parsing the same body twice differs: %+v / %+v (%v)", env, again, err)
		}
		facts := env.Facts()
		if facts.EventID != env.EventID || facts.Channel != env.Inner.Channel || facts.TS != env.Inner.TS {
			t.Fatalf("facts %+v disagree with the envelope %+v", facts, env)
		}
	})
}

func FuzzParseCommand(f *testing.F) {
	for _, b := range fuzzExamples(f, "*.form") {
		f.Add(b)
	}
	for _, s := range fuzzFormSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		cmd, err := ingress.ParseCommand(body)
		if err != nil {
			if !errors.Is(err, ingress.ErrMalformed) {
				t.Fatalf("error is not ErrMalformed (would not be a 400): %v", err)
			}
			return
		}
		if cmd.Command == "" && cmd.Form.Get("ssl_check") == "" {
			t.Fatal("parsed a command with neither command nor ssl_check")
		}
		id := cmd.OperationID(body)
		if !strings.HasPrefix(id, "cmd:") || (cmd.Trigger != "" && id != "cmd:"+cmd.Trigger) {
			t.Fatalf("operation id %q for trigger_id %q", id, cmd.Trigger)
		}
		again, err := ingress.ParseCommand(body)
		if err != nil || again.OperationID(body) != id {
			t.Fatalf("operation id is not stable for the same body: %q / %v", id, err)
		}
		if raw := cmd.RawJSON(); !json.Valid(raw) {
			t.Fatalf("RawJSON is not JSON: %q", raw)
		}
	})
}

func FuzzParseInteraction(f *testing.F) {
	for _, b := range fuzzExamples(f, "*.form") {
		f.Add(b)
	}
	for _, s := range fuzzFormSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ix, err := ingress.ParseInteraction(body)
		if err != nil {
			if !errors.Is(err, ingress.ErrMalformed) {
				t.Fatalf("error is not ErrMalformed (would not be a 400): %v", err)
			}
			return
		}
		if ix.Type == "" {
			t.Fatal("parsed an interaction without a type")
		}
		if !json.Valid(ix.Raw) {
			t.Fatalf("Raw is not JSON: %q", ix.Raw)
		}
		id := ix.OperationID()
		if !strings.HasPrefix(id, "ix:") || (ix.TriggerID != "" && id != "ix:"+ix.TriggerID) {
			t.Fatalf("operation id %q for trigger_id %q", id, ix.TriggerID)
		}
		again, err := ingress.ParseInteraction(body)
		if err != nil || again.OperationID() != id {
			t.Fatalf("operation id is not stable for the same body: %q / %q (%v)", id, again.OperationID(), err)
		}
	})
}

// FuzzParseConfig: any bytes as a config file give a Config or an error
// (with configlint's words), never a panic: the lint walks the document and
// Config's types by reflection before the decoder sees it.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		"[sweep]\nbatch = \"100\"\n", "[sweep]\nintervl = \"5s\"\n", "[[route]]\nname = \"r\nevent = \"x\"\n",
		"[[route]]\nname = \"r\"\nevent = \"app_mentoin\"\neffect = \"log\"\n", "a.b.c = 1\n[x.y]\n[[z]]\n",
		"[filter]\nchannels = [[1], {a = 1}]\n", "sweep = 1\n", "[sweep.batch]\n", "[[sweep]]\n", "route = [{name = 1}]\n",
		"[slack]\napi_url.x = 1\n", "listen = 1979-05-27\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := config.Parse(b)
		if err == nil && len(c.Routes) == 0 {
			t.Fatalf("Parse accepted %q with no routes at all (the built-in one is kept when none is given)", b)
		}
	})
}

// testSecret signs the fuzzed requests (as daemon's harness does).
const testSecret = "8f742231b10e8888abcd99yyyzzz85a5"
