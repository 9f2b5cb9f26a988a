package config

import (
	"cmp"
	"net"
	"net/url"
	"slices"
	"strings"
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
	o.InstallPath = cmp.Or(o.InstallPath, DefaultInstallPath)
	o.RedirectPath = cmp.Or(o.RedirectPath, DefaultRedirectPath)
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

type missingSecret struct{ name, why string }

func (e missingSecret) Error() string {
	return e.name + " is not set (nor " + e.name + "_FILE): " + e.why
}

func ErrMissing(name, why string) error { return missingSecret{name, why} }

// The [oauth] paths when the config names none: oauth.DefaultInstallPath
// and oauth.DefaultRedirectPath (a daemon test holds them equal).
const (
	DefaultInstallPath  = "/slack/install"
	DefaultRedirectPath = "/slack/oauth_redirect"
)
