// Package oauth lets ackd front an app installed in many workspaces: the
// install flow (an "Add to Slack" redirect with a one-use state bound to the
// browser, the code exchanged by oauth.v2.access), the installations and
// their tokens (sealed with AES-256-GCM under ACKD_TOKEN_KEY before they
// reach the database), the token each row is performed with (a
// sweep.TokenSource, read at perform time), token rotation (refresh before
// expiry, one refresher per installation across processes by a lease in the
// database), and uninstalls.
//
// Writers of a sealed row: a refresh and `ackd installs rekey` both hold
// the installation's lease ("refresh:{key}") and write fenced by its
// version, so the two never interleave; a reinstall replaces the row.
//
// Limits: Slack's refresh tokens are single use, revoked "after a short
// grace period" that Slack does not state. A refresh whose answer is lost
// (the connection drops after Slack rotated) is tried again at once with
// the same refresh token, and then by every later pass; if no try gets
// through within Slack's grace period, or the new pair cannot be stored
// (the database failed in between), the installation is lost: its rows
// park and it needs a reinstall. User tokens (user_scopes) are not kept: no
// effect uses one.
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
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
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
	// Refusals logs the install redirect's failures that anyone can cause
	// (a replayed state with a made-up code), rate limited with the
	// daemon's other unauthenticated answers. Nil: one line each.
	Refusals Refusals
}

// Refusals rate-limits the log lines of answers given to anyone: the first
// of an interval is logged, the rest are counted into one summary line.
type Refusals interface {
	Record(level slog.Level, msg string, attrs []slog.Attr, status int, reason string)
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
	refuse Refusals
	// sealed is how many installations did not open with the keys at the
	// last look (CheckKeys, each refresh pass): /healthz says so.
	sealed atomic.Int64
	// lost holds, per installation key, when a refresh call first got no
	// answer (Slack may have rotated) until a refresh succeeds or is refused.
	lost sync.Map
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
		hc: opts.HTTPClient, holder: opts.Holder, m: newMetrics(opts.Registerer, st, keys), kick: make(chan struct{}, 1),
		refuse: opts.Refusals}
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
		// A wrong ACKD_TOKEN_KEY is the operator's to fix, and fixing it
		// (the right key, a restart) makes the row work: it waits.
		return "", &sweep.Failure{Class: sweep.Waiting, RetryAfter: sealedRetry, Code: "token_sealed",
			Err: fmt.Errorf("installation %s: its tokens do not open with ACKD_TOKEN_KEY (nor ACKD_TOKEN_KEY_OLD); the row waits until ackd runs with the key that sealed them", key)}
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

// sealedRetry is how often a row whose installation does not open is
// tried again.
const sealedRetry = 30 * time.Second

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

// Bounds of one refresh. Each call to Slack has refreshCall; a call whose
// answer was lost is tried again at once (refreshTries in all, refreshWait
// apart), since Slack may have rotated and its grace period for the spent
// refresh token is short; the new pair's write has refreshWrite. The lease
// outlasts all of it, so no other refresher (or rekey) starts meanwhile.
const (
	refreshCall  = 10 * time.Second
	refreshTries = 3
	refreshWait  = 250 * time.Millisecond
	refreshWrite = 10 * time.Second
	refreshLease = refreshTries*(refreshCall+refreshWait) + refreshWrite + 10*time.Second
)

// refresh renews installation key's token pair under the lease
// "refresh:{key}": re-read under the lease, so a second refresher finds the
// pair already renewed and does nothing. The new pair replaces the old one
// in one fenced write; Slack's refresh token is single use.
func (s *Service) refresh(ctx context.Context, key string) (Tokens, error) {
	// A holder per attempt, not per process: the sweep's workers and the
	// refresher loop of one process exclude each other too.
	release, ok, err := s.lease(ctx, key)
	if err != nil {
		return Tokens{}, err
	}
	if !ok {
		s.m.refresh("lease_held")
		return Tokens{}, errLeaseHeld
	}
	defer release()
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
	var resp *slack.OAuthV2Response
	for try := 1; ; try++ {
		cctx, cancel := context.WithTimeout(ctx, refreshCall)
		resp, err = slack.RefreshOAuthV2TokenContext(cctx, s.hc, s.cfg.ClientID, s.cfg.ClientSecret, t.Refresh, s.oauthOpts()...)
		cancel()
		if err == nil {
			break
		}
		var ser slack.SlackErrorResponse
		if errors.As(err, &ser) && permanentRefresh[ser.Err] {
			if at, ok := s.lost.LoadAndDelete(key); ok {
				s.log.Error("a token refresh's answer was lost, and Slack refused the same refresh token when it was tried again: Slack's grace period for it had passed",
					"team", key, "lost_ago", s.st.Now().Sub(at.(time.Time)).Round(time.Millisecond), "tries", try)
			}
			if s.refreshRefused(ctx, in, ser.Err) {
				return Tokens{}, errors.New("the installation was replaced during the refresh")
			}
			return Tokens{}, &sweep.Failure{Class: sweep.Permanent, Code: "token_refresh_failed",
				Err: fmt.Errorf("installation %s: Slack refused the token refresh: %s; reinstall the app in that workspace", key, ser.Err)}
		}
		s.m.refresh("error")
		if maybeRotated(err) {
			s.lost.LoadOrStore(key, s.st.Now()) // the first loss, kept across passes
		}
		if try >= refreshTries || ctx.Err() != nil || !maybeRotated(err) {
			s.log.Warn("token refresh failed; retried", "team", key, "tries", try, "err", err)
			return Tokens{}, fmt.Errorf("refresh token of %s: %w", key, err)
		}
		// Slack may have rotated and its answer be lost: the spent refresh
		// token still works for a short while, so try again now.
		s.log.Warn("token refresh got no answer; Slack may have rotated the tokens: trying again with the same refresh token within its grace period",
			"team", key, "try", try, "err", err)
		select {
		case <-ctx.Done():
			return Tokens{}, fmt.Errorf("refresh token of %s: %w", key, ctx.Err())
		case <-time.After(refreshWait):
		}
	}
	now = s.st.Now()
	nt := Tokens{Bot: resp.AccessToken, Refresh: resp.RefreshToken, Issued: now}
	if resp.ExpiresIn > 0 {
		nt.Expires = now.Add(time.Duration(resp.ExpiresIn) * time.Second)
	}
	// Written even if ctx ended: Slack has spent the old refresh token.
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), refreshWrite)
	defer wcancel()
	if _, ok, err := s.st.UpdateInstallationSecret(wctx, key, in.Version, s.keys.Seal(key, nt)); err != nil || !ok {
		if now, gerr := s.st.GetInstallation(wctx, key); err == nil && gerr == nil && !now.InstalledAt.Equal(in.InstalledAt) {
			// A reinstall (it takes no lease) replaced the row with a pair
			// of its own: the refreshed one is not needed.
			s.log.Info("token refreshed, but the app was installed again meanwhile: the reinstall's tokens are kept", "team", key)
			return Tokens{}, errors.New("the installation was replaced during the refresh")
		}
		s.m.refresh("lost")
		s.log.Error("token refreshed at Slack but not stored: the installation's old refresh token is spent; reinstall the app in that workspace if its rows park",
			"team", key, "written", ok, "err", err)
		if err == nil {
			err = errors.New("the installation changed during the refresh")
		}
		return Tokens{}, err
	}
	s.m.refresh("ok")
	attrs := []any{"team", key, "expires_in_s", resp.ExpiresIn}
	if at, ok := s.lost.LoadAndDelete(key); ok {
		attrs = append(attrs, "after_lost_answer_ms", now.Sub(at.(time.Time)).Milliseconds())
	}
	s.log.Info("token refreshed", attrs...)
	return nt, nil
}

// maybeRotated reports whether a failed refresh call may have reached
// Slack and rotated the tokens: no answer (a timeout, a dropped
// connection), or a server error. A refused connection never left.
func maybeRotated(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	var ser slack.SlackErrorResponse
	if errors.As(err, &ser) {
		return ser.Err == "internal_error" || ser.Err == "fatal_error" || ser.Err == "service_unavailable"
	}
	var rl *slack.RateLimitedError
	return !errors.As(err, &rl)
}

// lease takes installation key's refresh lease, which every writer of its
// sealed secret holds; ok false: another holder has it.
func (s *Service) lease(ctx context.Context, key string) (release func(), ok bool, err error) {
	name, holder := "refresh:"+key, s.holder+"/"+rand.Text()[:8]
	ok, err = s.st.AcquireLease(ctx, name, holder, refreshLease)
	if err != nil || !ok {
		return nil, ok, err
	}
	return func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := s.st.ReleaseLease(rctx, name, holder); err != nil {
			s.log.Warn("could not release the refresh lease; it expires by itself", "team", key, "err", err)
		}
	}, true, nil
}

// leaseWait is the longest waitLease waits: a live refresh ends sooner,
// and a crashed one's lease has expired by then.
const leaseWait = refreshLease + 5*time.Second

// waitLease takes installation key's refresh lease, waiting for a refresh
// that holds it to end (at most leaseWait).
func (s *Service) waitLease(ctx context.Context, key string) (func(), error) {
	deadline := time.Now().Add(leaseWait)
	said := false
	for {
		release, ok, err := s.lease(ctx, key)
		if err != nil || ok {
			return release, err
		}
		if !said {
			s.log.Info("waiting for a token refresh of this installation to end", "team", key)
			said = true
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("installation %s: its refresh lease stayed held for %s; run the command again", key, leaseWait.Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// permanentRefresh are refresh errors no retry can fix.
var permanentRefresh = map[string]bool{
	"invalid_refresh_token": true, "invalid_grant_type": true, "token_revoked": true,
	"invalid_client_id": true, "bad_client_secret": true,
}

// refreshRefused records a refresh Slack refused for good: the
// installation's error (its rows park instead of calling Slack) and the
// team's pending rows parked with the reason. A reinstall (it takes no
// lease) that replaced in while the refresh was under way is not the
// installation Slack refused: then nothing is recorded, and replaced says
// so.
func (s *Service) refreshRefused(ctx context.Context, in store.Installation, code string) (replaced bool) {
	key := in.Key
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if now, err := s.st.GetInstallation(wctx, key); err == nil && !now.InstalledAt.Equal(in.InstalledAt) {
		s.log.Info("token refresh refused by Slack, but the app was installed again meanwhile: the reinstall's tokens are kept",
			"team", key, "code", code)
		return true
	}
	s.m.refresh("failed")
	reason := "token_refresh_failed: Slack refused the token refresh (" + code + "); reinstall the app in that workspace, then ackd outbox retry"
	err := s.st.SetInstallationError(wctx, key, "token refresh refused: "+code)
	n, perr := s.st.ParkInstallRows(wctx, key, reason)
	s.log.Error("token refresh refused by Slack: the team's rows are parked until the app is reinstalled",
		"team", key, "code", code, "parked", n, "err", errors.Join(err, perr))
	return false
}

// RefreshResult counts one refresh pass.
type RefreshResult struct {
	Refreshed, Held, Failed int
	// Sealed counts installations whose secret opens with neither key (a
	// wrong ACKD_TOKEN_KEY): not refreshed, and no reason to look sooner.
	Sealed int
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
		t, _, err := s.keys.Open(in.Key, in.Secret)
		if err != nil {
			res.Sealed++
			continue
		}
		if in.Error != "" {
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
	if prev := s.sealed.Swap(int64(res.Sealed)); prev != int64(res.Sealed) && res.Sealed > 0 {
		s.log.Error("installations whose tokens do not open with ACKD_TOKEN_KEY (nor ACKD_TOKEN_KEY_OLD): their rows wait; run ackd with the key that sealed them",
			"sealed", res.Sealed, "installations", len(list))
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

// Ended logs and counts what an installation-ending event (typ:
// app_uninstalled or tokens_revoked, at Slack's eventTime) did to
// installation key, as the store decided it (store.RecordInstallEnd).
func (s *Service) Ended(typ, key string, eventTime time.Time, res store.InstallEndResult) {
	attrs := []any{"event", typ, "team", key, "event_time", eventTime.UTC().Format(time.RFC3339)}
	switch res.Outcome {
	case store.EndRemoved:
		s.m.uninstalls.Inc()
		s.log.Info("installation removed by Slack event", append(attrs, "parked_rows", res.Parked)...)
	case store.EndNewer:
		clock := "Slack's clock"
		if !res.SlackClock {
			clock = "ackd's clock (this installation predates Slack's time of it being kept)"
		}
		s.log.Warn("Slack event older than the installation: nothing changed (a retry, or a late delivery, of an uninstall that came before the app was installed again)",
			append(attrs, "installed_at", res.Made.UTC().Format(time.RFC3339), "compared_on", clock)...)
	case store.EndOtherBot:
		s.log.Info("tokens_revoked names other bot users: the installation stays", attrs...)
	case store.EndNone:
		s.log.Info("Slack event for a team with no installation: nothing to remove", attrs...)
	}
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
// holds each installation's refresh lease while it does (waiting for a
// refresh in flight to end), so a refresh never finds its pair replaced
// under it. It returns how many were rewritten.
func (s *Service) Rekey(ctx context.Context) (int, error) {
	list, err := s.st.ListInstallations(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, in := range list {
		ok, err := s.rekeyOne(ctx, in.Key)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// rekeyOne re-seals installation key under its lease; false: it is gone.
func (s *Service) rekeyOne(ctx context.Context, key string) (bool, error) {
	release, err := s.waitLease(ctx, key)
	if err != nil {
		return false, err
	}
	defer release()
	for try := 0; ; try++ {
		in, err := s.st.GetInstallation(ctx, key)
		if errors.Is(err, store.ErrNoInstallation) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		t, _, err := s.keys.Open(key, in.Secret)
		if err != nil {
			return false, fmt.Errorf("installation %s: %w", key, err)
		}
		_, ok, err := s.st.UpdateInstallationSecret(ctx, key, in.Version, s.keys.Seal(key, t))
		if err != nil {
			return false, err
		}
		if ok {
			if in.Error != "" { // the update cleared it: keep it
				if err := s.st.SetInstallationError(ctx, key, in.Error); err != nil {
					return false, err
				}
			}
			return true, nil
		}
		// Only a reinstall writes without the lease: read it again.
		if try > 5 {
			return false, fmt.Errorf("installation %s keeps changing; run rekey again", key)
		}
	}
}

// KeyCheck is how the installations' sealed secrets open with the
// configured keys.
type KeyCheck struct {
	Total int
	// Old open only with ACKD_TOKEN_KEY_OLD (ackd installs rekey moves them).
	Old []string
	// Sealed open with neither key: a wrong ACKD_TOKEN_KEY.
	Sealed []string
}

// CheckKeys opens every installation's secret (they are few) with the
// configured keys and says which do not open. It reads only.
func (s *Service) CheckKeys(ctx context.Context) (KeyCheck, error) {
	return CheckKeys(ctx, s.st, s.keys)
}

// CheckKeys is Service.CheckKeys over a store, for `ackd config check`.
func CheckKeys(ctx context.Context, st store.Installations, keys *Keys) (KeyCheck, error) {
	var kc KeyCheck
	list, err := st.ListInstallations(ctx)
	if err != nil {
		return kc, err
	}
	kc.Total = len(list)
	for _, in := range list {
		switch _, old, err := keys.Open(in.Key, in.Secret); {
		case err != nil:
			kc.Sealed = append(kc.Sealed, in.Key)
		case old:
			kc.Old = append(kc.Old, in.Key)
		}
	}
	return kc, nil
}

// Announce checks the keys at start and logs what an operator must know:
// installations that do not open (an Error: their rows wait), and ones
// still sealed with the old key.
func (s *Service) Announce(ctx context.Context) {
	kc, err := s.CheckKeys(ctx)
	if err != nil {
		s.log.Warn("could not check the installations' keys at start", "err", err)
		return
	}
	s.sealed.Store(int64(len(kc.Sealed)))
	if len(kc.Sealed) > 0 {
		s.log.Error("ACKD_TOKEN_KEY (nor ACKD_TOKEN_KEY_OLD) does not open these installations' tokens: their rows wait and are not performed until ackd runs with the key that sealed them (a key rotated without ACKD_TOKEN_KEY_OLD, or a new key generated by the install steps); or reinstall the app in those workspaces",
			"sealed", len(kc.Sealed), "installations", kc.Total, "teams", names(kc.Sealed))
	}
	if len(kc.Old) > 0 {
		s.log.Warn("installations sealed with ACKD_TOKEN_KEY_OLD: run ackd installs rekey", "old_key", len(kc.Old), "teams", names(kc.Old))
	}
}

// SealedInstallations is how many installations did not open with the
// keys at the last look (at start, then each refresh pass).
func (s *Service) SealedInstallations() int64 { return s.sealed.Load() }

// names lists a few keys for a log line.
func names(keys []string) string {
	const shown = 10
	if len(keys) <= shown {
		return strings.Join(keys, ",")
	}
	return strings.Join(keys[:shown], ",") + fmt.Sprintf(",… (%d more)", len(keys)-shown)
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
