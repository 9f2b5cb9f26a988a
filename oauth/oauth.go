// Package oauth lets ackd front an app installed in many workspaces: the
// install flow (an "Add to Slack" redirect with a one-use state bound to the
// browser, the code exchanged by oauth.v2.access), the installations and
// their tokens (sealed with AES-256-GCM under ACKD_TOKEN_KEY before they
// reach the database), the token each row is performed with (a
// sweep.TokenSource, read at perform time), token rotation (refresh before
// expiry, one refresher per installation across processes by a lease in the
// database), and uninstalls.
//
// Limits: a refresh that Slack performed but whose new tokens could not be
// stored (the database failed in between) loses the installation, since
// Slack's refresh tokens are single use: it parks the team's rows and needs
// a reinstall. User tokens (user_scopes) are not kept: no effect uses one.
package oauth

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/slack-go/slack"

	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// Defaults of the install flow.
const (
	DefaultInstallPath  = "/slack/install"
	DefaultRedirectPath = "/slack/oauth_redirect"
	// DefaultAuthorizeURL is Slack's authorize page.
	DefaultAuthorizeURL = "https://slack.com/oauth/v2/authorize"
	// StateTTL is how long an install's state is accepted.
	StateTTL = 10 * time.Minute
	// StateCookie holds the state in the installing browser.
	StateCookie = "ackd_oauth_state"
)

// Config is the [oauth] section with its secrets.
type Config struct {
	ClientID     string
	ClientSecret string // SLACK_CLIENT_SECRET
	Scopes       []string
	UserScopes   []string
	RedirectURL  string
	InstallPath  string
	RedirectPath string
	SuccessURL   string
	FailureURL   string
	AuthorizeURL string // default DefaultAuthorizeURL
	APIURL       string // Web API base ([slack] api_url); empty: Slack's
}

// Options are a Service's dependencies.
type Options struct {
	Logger     *slog.Logger
	HTTPClient *http.Client // for oauth.v2.access and auth.test; nil: a client with a 10s timeout
	// Registerer receives the metrics (nil: none).
	Registerer prometheus.Registerer
	// Holder names this process in refresh leases (default host:pid:random).
	Holder string
}

// Service is the install flow, the installations' tokens and their refresh.
type Service struct {
	cfg    Config
	st     store.Store
	keys   *Keys
	log    *slog.Logger
	hc     *http.Client
	holder string
	m      *metrics
	kick   chan struct{} // an install was stored: the refresher looks again
}

// New returns a Service over st. Its handlers and refresher run when the
// daemon mounts and starts them; commands use it directly.
func New(cfg Config, st store.Store, keys *Keys, opts Options) *Service {
	cfg.InstallPath = cmp.Or(cfg.InstallPath, DefaultInstallPath)
	cfg.RedirectPath = cmp.Or(cfg.RedirectPath, DefaultRedirectPath)
	cfg.AuthorizeURL = cmp.Or(cfg.AuthorizeURL, DefaultAuthorizeURL)
	cfg.APIURL = cmp.Or(cfg.APIURL, slack.APIURL)
	if !strings.HasSuffix(cfg.APIURL, "/") {
		cfg.APIURL += "/"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Holder == "" {
		host, _ := os.Hostname()
		opts.Holder = fmt.Sprintf("%s:%d:%s", host, os.Getpid(), rand.Text()[:8])
	}
	return &Service{cfg: cfg, st: st, keys: keys, log: opts.Logger.With("component", "oauth"),
		hc: opts.HTTPClient, holder: opts.Holder, m: newMetrics(opts.Registerer, st), kick: make(chan struct{}, 1)}
}

// Config returns the effective configuration.
func (s *Service) Config() Config { return s.cfg }

// Key is the key of the installation that serves a request: the enterprise
// id for an org-wide install, else the team id.
func Key(team, enterprise string, enterpriseInstall bool) string {
	if enterpriseInstall && enterprise != "" {
		return enterprise
	}
	return team
}

func hashState(state string) string {
	sum := sha256.Sum256([]byte(state))
	return hex.EncodeToString(sum[:])
}

func (s *Service) oauthOpts() []slack.OAuthOption {
	return []slack.OAuthOption{slack.OAuthOptionAPIURL(s.cfg.APIURL)}
}

// BotToken is the sweep's TokenSource: installation key's current bot
// token, refreshed first when it is due (see due). A refresh that another
// process holds the lease for leaves the current token in use while it is
// still valid.
func (s *Service) BotToken(ctx context.Context, key string) (string, error) {
	in, err := s.st.GetInstallation(ctx, key)
	if errors.Is(err, store.ErrNoInstallation) {
		return "", fmt.Errorf("%w: %s", sweep.ErrNotInstalled, key)
	}
	if err != nil {
		return "", err
	}
	if in.Error != "" {
		return "", &sweep.Failure{Class: sweep.Permanent, Code: "token_unusable",
			Err: fmt.Errorf("installation %s: %s; reinstall the app in that workspace", key, in.Error)}
	}
	t, _, err := s.keys.Open(key, in.Secret)
	if err != nil {
		return "", &sweep.Failure{Class: sweep.Permanent, Code: "token_sealed", Err: err}
	}
	now := s.st.Now()
	if due(t, now) {
		nt, rerr := s.refresh(ctx, key)
		switch {
		case rerr == nil:
			t = nt
		case !t.Expires.IsZero() && !now.Before(t.Expires):
			var f *sweep.Failure
			if errors.As(rerr, &f) {
				return "", f
			}
			return "", &sweep.Failure{Class: sweep.Retryable, Code: "token_expired", Err: fmt.Errorf("installation %s: token expired and not yet refreshed: %w", key, rerr)}
		}
	}
	return t.Bot, nil
}

// due reports whether t should be refreshed now: it rotates, and half its
// life is gone (never with more than half of it left, so one refresh per
// expiry; and long before it ends, so a refresher that is late by a sweep
// or two still refreshes in time).
func due(t Tokens, now time.Time) bool {
	if t.Refresh == "" || t.Expires.IsZero() {
		return false
	}
	life := t.Expires.Sub(t.Issued)
	if t.Issued.IsZero() || life <= 0 {
		return true
	}
	return t.Expires.Sub(now) <= life/2
}

// dueAt is when t becomes due (zero: never).
func dueAt(t Tokens) time.Time {
	if t.Refresh == "" || t.Expires.IsZero() {
		return time.Time{}
	}
	if t.Issued.IsZero() {
		return t.Expires
	}
	return t.Expires.Add(-t.Expires.Sub(t.Issued) / 2)
}

// errLeaseHeld: another process is refreshing this installation.
var errLeaseHeld = errors.New("another process holds the refresh lease")

// refreshLease bounds one refresh: longer than the call's timeout.
const refreshLease = 30 * time.Second

// refresh renews installation key's token pair under the lease
// "refresh:{key}": re-read under the lease, so a second refresher finds the
// pair already renewed and does nothing. The new pair replaces the old one
// in one fenced write; Slack's refresh token is single use.
func (s *Service) refresh(ctx context.Context, key string) (Tokens, error) {
	lease := "refresh:" + key
	// A holder per attempt, not per process: the sweep's workers and the
	// refresher loop of one process exclude each other too.
	holder := s.holder + "/" + rand.Text()[:8]
	ok, err := s.st.AcquireLease(ctx, lease, holder, refreshLease)
	if err != nil {
		return Tokens{}, err
	}
	if !ok {
		s.m.refresh("lease_held")
		return Tokens{}, errLeaseHeld
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := s.st.ReleaseLease(rctx, lease, holder); err != nil {
			s.log.Warn("could not release the refresh lease; it expires by itself", "team", key, "err", err)
		}
	}()
	in, err := s.st.GetInstallation(ctx, key)
	if err != nil {
		return Tokens{}, err
	}
	t, _, err := s.keys.Open(key, in.Secret)
	if err != nil {
		return Tokens{}, err
	}
	now := s.st.Now()
	if in.Error != "" || !due(t, now) {
		return t, nil // refreshed by another process meanwhile
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	resp, err := slack.RefreshOAuthV2TokenContext(cctx, s.hc, s.cfg.ClientID, s.cfg.ClientSecret, t.Refresh, s.oauthOpts()...)
	cancel()
	if err != nil {
		var ser slack.SlackErrorResponse
		if errors.As(err, &ser) && permanentRefresh[ser.Err] {
			s.refreshRefused(ctx, key, ser.Err)
			return Tokens{}, &sweep.Failure{Class: sweep.Permanent, Code: "token_refresh_failed",
				Err: fmt.Errorf("installation %s: Slack refused the token refresh: %s; reinstall the app in that workspace", key, ser.Err)}
		}
		s.m.refresh("error")
		s.log.Warn("token refresh failed; retried", "team", key, "err", err)
		return Tokens{}, fmt.Errorf("refresh token of %s: %w", key, err)
	}
	now = s.st.Now()
	nt := Tokens{Bot: resp.AccessToken, Refresh: resp.RefreshToken, Issued: now}
	if resp.ExpiresIn > 0 {
		nt.Expires = now.Add(time.Duration(resp.ExpiresIn) * time.Second)
	}
	// Written even if ctx ended: Slack has spent the old refresh token.
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer wcancel()
	if _, ok, err := s.st.UpdateInstallationSecret(wctx, key, in.Version, s.keys.Seal(key, nt)); err != nil || !ok {
		s.m.refresh("lost")
		s.log.Error("token refreshed at Slack but not stored: the installation's old refresh token is spent; reinstall the app in that workspace if its rows park",
			"team", key, "written", ok, "err", err)
		if err == nil {
			err = errors.New("the installation changed during the refresh")
		}
		return Tokens{}, err
	}
	s.m.refresh("ok")
	s.log.Info("token refreshed", "team", key, "expires_in_s", resp.ExpiresIn)
	return nt, nil
}

// permanentRefresh are refresh errors no retry can fix.
var permanentRefresh = map[string]bool{
	"invalid_refresh_token": true, "invalid_grant_type": true, "token_revoked": true,
	"invalid_client_id": true, "bad_client_secret": true,
}

// refreshRefused records a refresh Slack refused for good: the
// installation's error (its rows park instead of calling Slack) and the
// team's pending rows parked with the reason.
func (s *Service) refreshRefused(ctx context.Context, key, code string) {
	s.m.refresh("failed")
	reason := "token_refresh_failed: Slack refused the token refresh (" + code + "); reinstall the app in that workspace, then ackd outbox retry"
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := s.st.SetInstallationError(wctx, key, "token refresh refused: "+code)
	n, perr := s.st.ParkInstallRows(wctx, key, reason)
	s.log.Error("token refresh refused by Slack: the team's rows are parked until the app is reinstalled",
		"team", key, "code", code, "parked", n, "err", errors.Join(err, perr))
}

// RefreshResult counts one refresh pass.
type RefreshResult struct {
	Refreshed, Held, Failed int
	// Next is when the next token becomes due (zero: none rotates).
	Next time.Time
}

// RefreshDue refreshes every installation whose token is due, once. An
// installation whose lease another process holds is left to it.
func (s *Service) RefreshDue(ctx context.Context) (RefreshResult, error) {
	var res RefreshResult
	list, err := s.st.ListInstallations(ctx)
	if err != nil {
		return res, err
	}
	now := s.st.Now()
	for _, in := range list {
		if in.Error != "" {
			continue
		}
		t, _, err := s.keys.Open(in.Key, in.Secret)
		if err != nil {
			res.Failed++
			continue
		}
		if due(t, now) {
			nt, err := s.refresh(ctx, in.Key)
			switch {
			case errors.Is(err, errLeaseHeld):
				res.Held++
				continue
			case err != nil:
				if ctx.Err() != nil {
					return res, ctx.Err()
				}
				res.Failed++
				continue
			}
			res.Refreshed++
			t = nt
		}
		if at := dueAt(t); !at.IsZero() && (res.Next.IsZero() || at.Before(res.Next)) {
			res.Next = at
		}
	}
	return res, nil
}

// Run refreshes tokens until ctx ends: each pass sleeps until the next
// token is due (at least 100ms, at most runMax: installs stored by another
// process are seen within that), or until this process stores an install.
func (s *Service) Run(ctx context.Context) {
	for {
		res, err := s.RefreshDue(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("token refresh pass failed", "err", err)
		}
		wait := runMax
		if !res.Next.IsZero() {
			wait = min(wait, max(res.Next.Sub(s.st.Now()), 100*time.Millisecond))
		}
		if res.Held > 0 || res.Failed > 0 {
			wait = min(wait, time.Second)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.kick:
			t.Stop()
		case <-t.C:
		}
	}
}

// runMax bounds the refresher's sleep.
const runMax = 30 * time.Second

// Uninstalled handles app_uninstalled (and a revoked bot token): the
// installation is removed, so no later call uses its token, and its pending
// rows are parked with reason. Unknown keys do nothing.
func (s *Service) Uninstalled(ctx context.Context, key, reason string) (removed bool, parked int64, err error) {
	removed, err = s.st.DeleteInstallation(ctx, key)
	if err != nil {
		return false, 0, err
	}
	parked, err = s.st.ParkInstallRows(ctx, key, reason)
	if err != nil {
		return removed, 0, err
	}
	if removed {
		s.m.uninstalls.Inc()
		s.log.Info("installation removed", "team", key, "reason", reason, "parked", parked)
	}
	return removed, parked, nil
}

// BotRevoked handles tokens_revoked: when the revoked bot users include
// this installation's bot (or it names none), the installation's bot token
// is gone, so it is removed as on an uninstall. User tokens are not kept.
func (s *Service) BotRevoked(ctx context.Context, key string, botUsers []string) (bool, int64, error) {
	if len(botUsers) == 0 {
		return false, 0, nil
	}
	in, err := s.st.GetInstallation(ctx, key)
	if errors.Is(err, store.ErrNoInstallation) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	hit := in.BotUserID == ""
	for _, u := range botUsers {
		hit = hit || u == in.BotUserID
	}
	if !hit {
		return false, 0, nil
	}
	return s.Uninstalled(ctx, key, "tokens_revoked: the bot token was revoked; reinstall the app in that workspace")
}

// Known reports whether key has an installation (metrics of events from
// unknown teams).
func (s *Service) Known(ctx context.Context, key string) (bool, error) {
	_, err := s.st.GetInstallation(ctx, key)
	if errors.Is(err, store.ErrNoInstallation) {
		return false, nil
	}
	return err == nil, err
}

// UnknownTeam counts one request from a team with no installation.
func (s *Service) UnknownTeam() { s.m.unknown.Inc() }

// Rekey rewrites every installation's secret under the current key (after
// ACKD_TOKEN_KEY changed and the old one went to ACKD_TOKEN_KEY_OLD). It
// returns how many were rewritten; one that changed meanwhile is retried.
func (s *Service) Rekey(ctx context.Context) (int, error) {
	list, err := s.st.ListInstallations(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, in := range list {
		for try := 0; ; try++ {
			t, _, err := s.keys.Open(in.Key, in.Secret)
			if err != nil {
				return n, fmt.Errorf("installation %s: %w", in.Key, err)
			}
			_, ok, err := s.st.UpdateInstallationSecret(ctx, in.Key, in.Version, s.keys.Seal(in.Key, t))
			if err != nil {
				return n, err
			}
			if ok {
				if in.Error != "" { // the update cleared it: keep it
					if err := s.st.SetInstallationError(ctx, in.Key, in.Error); err != nil {
						return n, err
					}
				}
				n++
				break
			}
			if in, err = s.st.GetInstallation(ctx, in.Key); errors.Is(err, store.ErrNoInstallation) {
				break
			} else if err != nil || try > 5 {
				return n, cmp.Or(err, fmt.Errorf("installation %s keeps changing; run rekey again", in.Key))
			}
		}
	}
	return n, nil
}

// Expiry is installation in's token expiry (zero: no rotation), for the
// operator commands; it opens the secret but returns no token.
func (s *Service) Expiry(in store.Installation) (time.Time, bool, error) {
	t, old, err := s.keys.Open(in.Key, in.Secret)
	return t.Expires, old, err
}

// authorizeURL is Slack's authorize URL for one install.
func (s *Service) authorizeURL(state string) string {
	q := url.Values{}
	q.Set("client_id", s.cfg.ClientID)
	q.Set("scope", strings.Join(s.cfg.Scopes, ","))
	if len(s.cfg.UserScopes) > 0 {
		q.Set("user_scope", strings.Join(s.cfg.UserScopes, ","))
	}
	q.Set("redirect_uri", s.cfg.RedirectURL)
	q.Set("state", state)
	sep := "?"
	if strings.Contains(s.cfg.AuthorizeURL, "?") {
		sep = "&"
	}
	return s.cfg.AuthorizeURL + sep + q.Encode()
}
