package daemon

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ackd/ackd/oauth"
	"github.com/ackd/ackd/store"
)

// slackPaths are the Slack endpoints; no install or passthrough path may
// take one.
var slackPaths = []string{"/slack/events", "/slack/commands", "/slack/interactivity", "/healthz", "/metrics"}

// validateOAuth checks [oauth] and [redeliver].
func (c *Config) validateOAuth(bad func(string, ...any)) {
	path := func(key, p string) {
		switch {
		case !strings.HasPrefix(p, "/"):
			bad("%s: %q must be a path starting with /", key, p)
		case slices.Contains(slackPaths, p):
			bad("%s: %q is one of ackd's own endpoints", key, p)
		}
	}
	absolute := func(key, v string) {
		if u, err := url.Parse(v); v != "" && (err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http")) {
			bad("%s: %q must be an absolute http(s) URL", key, v)
		}
	}
	hasRedeliver := slices.ContainsFunc(c.Routes, func(r Route) bool { return r.Effect == "redeliver" })
	for _, p := range c.Redeliver.Passthrough {
		path("redeliver.passthrough", p)
	}
	if len(c.Redeliver.Passthrough) > 0 && !hasRedeliver {
		bad("redeliver.passthrough: no route has effect redeliver: there is no app to pass requests to")
	}
	o := c.OAuth
	if o == nil {
		return
	}
	if len(c.Redeliver.Passthrough) > 0 {
		bad("redeliver.passthrough: with [oauth] ackd runs the install flow itself; remove one of them")
	}
	if o.ClientID == "" {
		bad("oauth.client_id: required (the app's Client ID, from its Basic Information page)")
	}
	if len(o.Scopes) == 0 || slices.Contains(o.Scopes, "") {
		bad("oauth.scopes: list the bot scopes to request, e.g. [\"chat:write\", \"reactions:write\"]")
	}
	u, err := url.Parse(o.RedirectURL)
	switch {
	case o.RedirectURL == "":
		bad("oauth.redirect_url: required: the public HTTPS URL of redirect_path, as set in the app's OAuth & Permissions page")
	case err != nil || u.Host == "":
		bad("oauth.redirect_url: %q is not an absolute URL", o.RedirectURL)
	case u.Scheme != "https" && !(u.Scheme == "http" && loopback(u.Hostname())):
		bad("oauth.redirect_url: %q must be https (Slack requires it; http only for a loopback host)", o.RedirectURL)
	}
	o.InstallPath = cmp.Or(o.InstallPath, oauth.DefaultInstallPath)
	o.RedirectPath = cmp.Or(o.RedirectPath, oauth.DefaultRedirectPath)
	path("oauth.install_path", o.InstallPath)
	path("oauth.redirect_path", o.RedirectPath)
	if o.InstallPath == o.RedirectPath {
		bad("oauth.redirect_path: %q is also install_path", o.RedirectPath)
	}
	absolute("oauth.success_url", o.SuccessURL)
	absolute("oauth.failure_url", o.FailureURL)
	absolute("oauth.authorize_url", o.AuthorizeURL)
	if o.NotInstalledWait.Duration < 0 {
		bad("oauth.not_installed_wait: %s must not be negative", o.NotInstalledWait.Duration)
	}
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// OAuthService builds the install flow and token source of [oauth] over st
// with the secrets SLACK_CLIENT_SECRET and ACKD_TOKEN_KEY (and
// ACKD_TOKEN_KEY_OLD); nil, nil without [oauth].
func (c Config) OAuthService(sec Secrets, st store.Store, log *slog.Logger, hc *http.Client, reg prometheus.Registerer, refusals oauth.Refusals) (*oauth.Service, error) {
	o := c.OAuth
	if o == nil {
		return nil, nil
	}
	keys, err := TokenKeys(sec)
	if err != nil {
		return nil, err
	}
	if sec.ClientSecret == "" {
		return nil, c.clientSecretMissing(sec)
	}
	return oauth.New(oauth.Config{
		ClientID: o.ClientID, ClientSecret: sec.ClientSecret, Scopes: o.Scopes, UserScopes: o.UserScopes,
		RedirectURL: o.RedirectURL, InstallPath: o.InstallPath, RedirectPath: o.RedirectPath,
		SuccessURL: o.SuccessURL, FailureURL: o.FailureURL, AuthorizeURL: o.AuthorizeURL, APIURL: c.Slack.APIURL,
	}, st, keys, oauth.Options{Logger: log, HTTPClient: hc, Registerer: reg, Refusals: refusals}), nil
}

// TokenKeys parses ACKD_TOKEN_KEY (and ACKD_TOKEN_KEY_OLD).
func TokenKeys(sec Secrets) (*oauth.Keys, error) {
	if sec.TokenKey == "" {
		return nil, sec.needs("ACKD_TOKEN_KEY",
			errMissing("ACKD_TOKEN_KEY", "[oauth] seals every installation's tokens with it (32 random bytes, base64: head -c 32 /dev/urandom | base64)"),
			"[oauth] seals every installation's tokens with it", "the key (32 random bytes, base64: head -c 32 /dev/urandom | base64)",
			"remove the [oauth] section from the config")
	}
	cur, err := oauth.ParseKey("ACKD_TOKEN_KEY", sec.TokenKey)
	if err != nil {
		return nil, err
	}
	var old []byte
	if sec.TokenKeyOld != "" {
		if old, err = oauth.ParseKey("ACKD_TOKEN_KEY_OLD", sec.TokenKeyOld); err != nil {
			return nil, err
		}
	}
	return oauth.NewKeys(cur, old)
}

type missingSecret struct{ name, why string }

func (e missingSecret) Error() string {
	return e.name + " is not set (nor " + e.name + "_FILE): " + e.why
}

func errMissing(name, why string) error { return missingSecret{name, why} }

// passthrough proxies GET requests for the configured paths to the app
// behind the first redeliver route (its scheme and host), with their query,
// headers and cookies, and answers with the app's answer as it is: a
// redirect is passed on, never followed.
func (c Config) passthrough(log *slog.Logger) http.Handler {
	var target *url.URL
	for _, r := range c.Routes {
		if r.Effect == "redeliver" {
			target, _ = url.Parse(r.URL)
			break
		}
	}
	if target == nil || len(c.Redeliver.Passthrough) == 0 || c.OAuth != nil {
		return nil
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: target.Scheme, Host: target.Host})
			pr.Out.Host = pr.In.Host // the app builds its URLs from the public host
			pr.SetXForwarded()
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("passthrough: the app did not answer", "path", r.URL.Path, "err", err)
			http.Error(w, "the app behind ackd did not answer", http.StatusBadGateway)
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		rp.ServeHTTP(w, r)
	})
}

// installEnd says, with [oauth], whether an event ends an installation
// and how: app_uninstalled ends it; tokens_revoked does when it names
// revoked bot users (its bot's among them, or it has none recorded); a
// user token's revocation changes nothing (user tokens are not kept).
func (s *Server) installEnd(env Envelope, body []byte) (store.InstallEnd, bool) {
	if s.oauth == nil {
		return store.InstallEnd{}, false
	}
	var ev struct {
		EventTime int64 `json:"event_time"`
		Event     struct {
			Tokens struct {
				Bot []string `json:"bot"`
			} `json:"tokens"`
		} `json:"event"`
	}
	_ = json.Unmarshal(body, &ev) // the envelope parsed already; what is missing is zero
	end := store.InstallEnd{Key: env.Install, EventTime: time.Unix(ev.EventTime, 0)}
	switch env.Inner.Type {
	case "app_uninstalled":
		end.Reason = "uninstalled: app_uninstalled: the app was removed from this workspace; its rows are not performed"
	case "tokens_revoked":
		if len(ev.Event.Tokens.Bot) == 0 {
			return store.InstallEnd{}, false
		}
		end.BotUsers = ev.Event.Tokens.Bot
		end.Reason = "tokens_revoked: the bot token was revoked; reinstall the app in that workspace"
	default:
		return store.InstallEnd{}, false
	}
	if ev.EventTime <= 0 {
		// Slack always sends event_time; without it the event is taken
		// as new (ackd's clock), so an uninstall is never ignored.
		end.EventTime = s.store.Now()
		s.log.Warn("Slack event without event_time: taken as sent now", "event", env.Inner.Type, "event_id", env.EventID, "team", env.Install)
	}
	return end, true
}

// recordEnd records an installation-ending event: its receipt, its rows
// and its change to the installation in one transaction, the change only
// for the first delivery and only if the installation is not newer than
// the event (store.RecordInstallEnd).
func (s *Server) recordEnd(ctx context.Context, req request, a answer, in store.Intent, end store.InstallEnd) answer {
	var res store.InstallEndResult
	a = s.recordWith(ctx, req, a, in, func(ctx context.Context, in store.Intent) (bool, error) {
		var err error
		res, err = s.store.RecordInstallEnd(ctx, in, end)
		return res.First, err
	})
	if a.outcome == outcomeFirst {
		s.oauth.Ended(in.EventType, end.Key, end.EventTime, res)
		if res.Outcome != store.EndRemoved {
			a.reason = "installation kept: " + res.Outcome
		}
	}
	return a
}

// countUnknownTeam counts, after the answer, a request from a team with no
// installation ([oauth]): it was answered 200 like any other (Slack turns
// off an app's events when most deliveries fail), and its rows wait.
func (s *Server) countUnknownTeam(a answer) {
	if s.oauth == nil || a.install == "" || (a.outcome != outcomeFirst && a.outcome != outcomeIgnored) {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, time.Second)
	defer cancel()
	if known, err := s.oauth.Known(ctx, a.install); err == nil && !known {
		s.oauth.UnknownTeam()
		s.log.Info("request from a team with no installation: answered 200; its rows wait for an install", "team", a.install, "event_id", a.id)
	}
}
