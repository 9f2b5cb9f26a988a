package daemon

import (
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/oauth"
	"github.com/ackd/ackd/store"
)

// OAuthService builds the install flow and token source of [oauth] over st
// with the secrets SLACK_CLIENT_SECRET and ACKD_TOKEN_KEY (and
// ACKD_TOKEN_KEY_OLD); nil, nil without [oauth].
func OAuthService(c config.Config, sec config.Secrets, st store.Store, log *slog.Logger, hc *http.Client, reg prometheus.Registerer, refusals oauth.Refusals) (*oauth.Service, error) {
	o := c.OAuth
	if o == nil {
		return nil, nil
	}
	keys, err := TokenKeys(sec)
	if err != nil {
		return nil, err
	}
	if sec.ClientSecret == "" {
		return nil, c.ClientSecretMissing(sec)
	}
	return oauth.New(oauth.Config{
		ClientID: o.ClientID, ClientSecret: sec.ClientSecret, Scopes: o.Scopes, UserScopes: o.UserScopes,
		RedirectURL: o.RedirectURL, InstallPath: o.InstallPath, RedirectPath: o.RedirectPath,
		SuccessURL: o.SuccessURL, FailureURL: o.FailureURL, AuthorizeURL: o.AuthorizeURL, APIURL: c.Slack.APIURL,
	}, st, keys, oauth.Options{Logger: log, HTTPClient: hc, Registerer: reg, Refusals: refusals}), nil
}

// TokenKeys parses ACKD_TOKEN_KEY (and ACKD_TOKEN_KEY_OLD).
func TokenKeys(sec config.Secrets) (*oauth.Keys, error) {
	if sec.TokenKey == "" {
		return nil, sec.Needs("ACKD_TOKEN_KEY",
			config.ErrMissing("ACKD_TOKEN_KEY", "[oauth] seals every installation's tokens with it (32 random bytes, base64: head -c 32 /dev/urandom | base64)"),
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

// passthrough proxies GET requests for the configured paths to the app
// behind the first redeliver route (its scheme and host), with their query,
// headers and cookies, and answers with the app's answer as it is: a
// redirect is passed on, never followed.
func passthrough(c config.Config, log *slog.Logger) http.Handler {
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
