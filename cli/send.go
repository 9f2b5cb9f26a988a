package cli

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/ingress"
	"github.com/ackd/ackd/slacksim"
	"github.com/spf13/cobra"
)

func (g *globals) baseURL() string {
	cfg, err := g.loadConfig()
	listen := "127.0.0.1:3000"
	if err == nil {
		listen = cfg.Listen
	}
	return "http://" + listen
}

func sendCmd(g *globals) *cobra.Command {
	var url, cacert string
	var form bool
	var retryNum int
	c := &cobra.Command{
		Use:   "send FILE",
		Short: "Sign a payload file with SLACK_SIGNING_SECRET and POST it to a running ackd",
		Long: "Signs FILE with the signing secret in SLACK_SIGNING_SECRET (or the file named by\n" +
			"SLACK_SIGNING_SECRET_FILE), the same secret the daemon uses, and POSTs it.\n" +
			"JSON files go to /slack/events. With --form the file is a form body: a slash command,\n" +
			"or an interaction when it has a payload= field. --url overrides the target URL.\n" +
			"An https:// --url is checked against the system's CAs (SSL_CERT_FILE names another\n" +
			"bundle) and, with --cacert, the certificates in that PEM file: Caddy's local CA is\n" +
			"/var/lib/caddy/.local/share/caddy/pki/authorities/local/root.crt.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			var client *http.Client
			if cacert != "" {
				if client, err = caClient(cacert); err != nil {
					return err
				}
			}
			sec, err := config.Secret("SLACK_SIGNING_SECRET", os.Getenv)
			if err != nil {
				return err
			}
			if sec == "" {
				return errors.New("set SLACK_SIGNING_SECRET (the same secret the daemon uses)")
			}
			body = []byte(strings.TrimRight(string(body), "\r\n"))
			if url == "" {
				path := "/slack/events"
				if form {
					path = "/slack/commands"
					if strings.HasPrefix(string(body), "payload=") || strings.Contains(string(body), "&payload=") {
						path = "/slack/interactivity"
					}
				}
				url = g.baseURL() + path
			}
			a, err := slacksim.SendAnswer(cmd.Context(), slacksim.SendOptions{
				URL: url, Secret: sec, Body: body, Form: form, RetryNum: retryNum, Client: client})
			if err != nil {
				return err
			}
			line := fmt.Sprintf("%d %s", a.Status, http.StatusText(a.Status))
			if o := a.Header.Get(ingress.HeaderOutcome); o != "" {
				line += " (ackd: " + outcomeText(o, a.Header.Get(ingress.HeaderReason)) + ")"
			}
			fmt.Fprintln(g.stdout, line)
			if resp := strings.TrimSpace(string(a.Body)); resp != "" && resp != http.StatusText(a.Status) {
				fmt.Fprintln(g.stdout, resp)
			}
			switch {
			case a.Status == http.StatusUnauthorized:
				return errors.New("rejected (401): the signing secret differs from the daemon's, or the clock is off (a signature is valid for 5 minutes)")
			case a.Status == http.StatusBadRequest && !form && !json.Valid(body):
				return fmt.Errorf("the daemon answered 400: %s is not JSON; a form body (a slash command, or an interaction with payload=) is sent with --form", args[0])
			case a.Status == http.StatusNotFound && strings.Contains(string(a.Body), ingress.RoutesOffText):
				return errors.New("not served (404): that ackd runs without SLACK_SIGNING_SECRET (Socket Mode only), so its HTTP Slack routes are off; give it SLACK_SIGNING_SECRET to take HTTP requests")
			case a.Status == http.StatusNotFound:
				return fmt.Errorf("not found (404): nothing answers %s there; is --url (or --listen / ACKD_LISTEN) the address of an ackd serve?", url)
			case a.Status >= 300:
				return fmt.Errorf("the daemon answered %d", a.Status)
			}
			return nil
		},
	}
	c.Flags().StringVar(&cacert, "cacert", "", "PEM file of CA certificates to trust for an https:// --url, besides the system's (e.g. Caddy's local CA)")
	c.Flags().StringVar(&url, "url", "", "target URL (default http://{listen}/slack/events, /slack/commands or /slack/interactivity)")
	c.Flags().BoolVar(&form, "form", false, "the file is a form body (slash command or interaction), not Events API JSON")
	c.Flags().IntVar(&retryNum, "retry-num", 0, "add X-Slack-Retry-Num: N and X-Slack-Retry-Reason: http_timeout")
	return c
}

// caClient is an HTTP client for send that trusts the certificates in the
// PEM file besides the system's.
func caClient(file string) (*http.Client, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--cacert: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--cacert: %s holds no PEM certificate", file)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, nil
}

// outcomeText says what ackd decided, from its X-Ackd-Outcome header.
func outcomeText(outcome, reason string) string {
	switch outcome {
	case "first":
		return "first delivery, recorded"
	case "duplicate":
		return "duplicate, already recorded: nothing added"
	case "ignored":
		if reason != "" {
			return "ignored (" + reason + "), nothing recorded"
		}
		return "ignored, nothing recorded"
	case "challenge":
		return "url_verification challenge answered"
	case "failed":
		return "failed: not recorded within the ack budget"
	case "unknown":
		return "unknown: the commit got no answer and the database could not say whether it was recorded"
	default:
		return outcome
	}
}
