package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
)

// clientFrom is an HTTP client whose connections leave from the loopback
// address local (Linux routes all of 127.0.0.0/8 to lo), so that a test can
// be a peer other than 127.0.0.1.
func clientFrom(local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		}}}
}

func TestClientAddressLogged(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		name     string
		config   string // TOML; "" = defaults (trusted_proxies: loopback)
		from     string
		xff      []string // X-Forwarded-For header lines
		unsigned bool     // send without Slack's signature
		want     string
	}{
		{name: "a trusted proxy's X-Forwarded-For names the client", from: "127.0.0.2",
			xff: []string{"198.51.100.7"}, want: "198.51.100.7"},
		{name: "the rightmost untrusted entry, not what the sender wrote further left", from: "127.0.0.2",
			xff: []string{"203.0.113.1, 198.51.100.7"}, want: "198.51.100.7"},
		{name: "entries added by trusted proxies are skipped", from: "127.0.0.2",
			xff: []string{"198.51.100.7", "127.0.0.9"}, want: "198.51.100.7"},
		{name: "without the header: the peer", from: "127.0.0.2", want: "127.0.0.2"},
		{name: "a header that is not an address stops the walk at the peer", from: "127.0.0.2",
			xff: []string{"198.51.100.7, not-an-ip"}, want: "127.0.0.2"},
		{name: "a peer outside trusted_proxies cannot choose what is logged",
			config: `trusted_proxies = ["127.0.0.1"]`, from: "127.0.0.2",
			xff: []string{"198.51.100.7"}, want: "127.0.0.2"},
		{name: "trusted_proxies = [] trusts no one, loopback included",
			config: `trusted_proxies = []`, from: "127.0.0.1",
			xff: []string{"198.51.100.7"}, want: "127.0.0.1"},
		{name: "a configured proxy by address", config: `trusted_proxies = ["127.0.0.2"]`, from: "127.0.0.2",
			xff: []string{"198.51.100.7"}, want: "198.51.100.7"},
		{name: "a rejected request logs its client too", from: "127.0.0.2",
			xff: []string{"198.51.100.8"}, unsigned: true, want: "198.51.100.8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, configFor(t, tc.config), daemon.Options{})
			id := fmt.Sprintf("EvClient%d", i)
			body := eventBody(id, message("C1", "1700000000.000100", "hi"))
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/slack/events", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if !tc.unsigned {
				ts := time.Now().Unix()
				req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
				req.Header.Set("X-Slack-Signature", sign(testSecret, ts, body))
			}
			for _, h := range tc.xff {
				req.Header.Add("X-Forwarded-For", h)
			}
			resp, err := clientFrom(tc.from).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := map[bool]int{false: http.StatusOK, true: http.StatusUnauthorized}[tc.unsigned]
			if resp.StatusCode != want {
				t.Fatalf("status %d, want %d", resp.StatusCode, want)
			}
			kv := []any{"endpoint", "events", "status", want}
			if !tc.unsigned {
				kv = append(kv, "event_id", id)
			}
			var line map[string]any
			waitFor(t, "the request's log line", 5*time.Second, func() bool { line = srv.Logs.Find(kv...); return line != nil })
			if got := fmt.Sprint(line["client"]); got != tc.want {
				t.Errorf("client = %q, want %q; line: %v", got, tc.want, line)
			}
		})
	}
}

func TestTrustedProxiesConfig(t *testing.T) {
	t.Parallel()
	if got := config.Default().TrustedProxies; strings.Join(got, ",") != "127.0.0.0/8,::1/128" {
		t.Errorf("default trusted_proxies = %v, want loopback", got)
	}
	_, err := config.Parse([]byte(`trusted_proxies = ["10.0.0.0/8", "caddy.internal"]` + "\n"))
	if err == nil || !strings.Contains(err.Error(), `trusted_proxies: "caddy.internal" is neither a CIDR prefix`) {
		t.Errorf("a host name in trusted_proxies: err = %v, want one naming the key and the entry", err)
	}
	if _, err := config.Parse([]byte(`trusted_proxies = ["10.0.0.0/8", "::1", "192.168.1.7"]` + "\n")); err != nil {
		t.Errorf("prefixes and addresses: %v", err)
	}
}
