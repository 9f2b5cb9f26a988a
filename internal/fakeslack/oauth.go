package fakeslack

import (
	"cmp"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// The OAuth side of the fake: oauth.v2.access (code exchange and, with
// token rotation, grant_type=refresh_token), an authorize page stand-in at
// /oauth/v2/authorize that approves at once, and many valid bot tokens, one
// set per installation. Tokens it issues are accepted by every Web API
// method until they expire or are revoked; auth.test names the token's own
// team and bot.

// Grant is one installation the fake's authorize page (or AddCode) grants.
type Grant struct {
	TeamID, TeamName             string // empty TeamID for an org-wide install
	EnterpriseID, EnterpriseName string
	EnterpriseInstall            bool
	BotUserID, BotID             string
	AppID                        string // default A0FAKEAPP
	Scope, UserScope             string
	InstallerUserID              string
}

// Key is the installation key ackd files the grant under.
func (g Grant) Key() string {
	if g.EnterpriseInstall {
		return g.EnterpriseID
	}
	return g.TeamID
}

// bot is who the grant's tokens post as.
func (g Grant) bot() Bot {
	return Bot{UserID: g.BotUserID, BotID: g.BotID, AppID: cmp.Or(g.AppID, "A0FAKEAPP"), TeamID: g.TeamID}
}

// Refresh is one grant_type=refresh_token call the fake answered.
type Refresh struct {
	Key          string
	RefreshToken string        // the refresh token spent
	Age, Life    time.Duration // how old the access token it replaced was, and its whole life
	OK           bool          // false: refused (invalid_refresh_token)
	// Reused: the refresh token had been spent already and was accepted
	// again within the grace period (SetRefreshGrace).
	Reused bool
	Time   time.Time // when the fake answered (its real clock)
}

type issued struct {
	grant   Grant
	expires time.Time // zero: never
	issued  time.Time
	revoked bool
}

type oauthState struct {
	clientID, secret string
	life             time.Duration // >0: token rotation, tokens expire after life
	grace            time.Duration // a spent refresh token is still accepted this long
	spent            map[string]spentRefresh
	now              func() time.Time // Slack's clock: the Date of oauth.v2.access's answers
	codes            map[string]codeGrant
	tokens           map[string]*issued // access token → its grant
	refresh          map[string]*issued // unspent refresh token → the access token's record
	refreshes        []Refresh
	next             []Grant // grants the authorize page hands out, in order
	issuedRefresh    []string
}

// spentRefresh is a refresh token used once, still accepted until until.
type spentRefresh struct {
	rec   *issued
	until time.Time
}

type codeGrant struct {
	grant    Grant
	redirect string
}

// EnableOAuth makes oauth.v2.access accept this client id and secret.
func (s *Server) EnableOAuth(clientID, clientSecret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oauthLocked().clientID, s.oauth.secret = clientID, clientSecret
}

// SetTokenLife turns on token rotation: tokens issued from now on expire
// after d and come with a single-use refresh token (expires_in, refresh_token).
func (s *Server) SetTokenLife(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oauthLocked().life = d
}

// SetRefreshGrace models Slack's grace period for a spent refresh token
// ("Refresh tokens are designed to be used once. After calling
// oauth.v2.access, the refresh token you used is revoked after a short
// grace period"; Slack does not say how short): for d after its first use,
// the same refresh token is accepted again and mints a new pair, as a
// client whose answer was lost needs. 0 (the default): single use at once.
// Slack's "2 active tokens" limit is not modelled.
func (s *Server) SetRefreshGrace(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oauthLocked().grace = d
}

// SetOAuthClock sets Slack's clock as the OAuth side shows it: the Date
// header of oauth.v2.access's answers (default: time.Now). A test that
// puts Slack's clock off ackd's stamps event_time with OAuthNow too.
func (s *Server) SetOAuthClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oauthLocked().now = now
}

// OAuthNow is Slack's clock as SetOAuthClock set it.
func (s *Server) OAuthNow() time.Time {
	s.mu.Lock()
	now := s.oauthLocked().now
	s.mu.Unlock()
	if now == nil {
		return time.Now()
	}
	return now()
}

// oauthDate sets the Date header of an oauth.v2.access answer from Slack's
// clock (Go's server would otherwise stamp its own).
func (s *Server) oauthDate(w http.ResponseWriter) {
	w.Header().Set("Date", s.OAuthNow().UTC().Format(http.TimeFormat))
}

// AddCode makes code exchangeable (once) for g; a non-empty redirect must
// match the exchange's redirect_uri.
func (s *Server) AddCode(code, redirect string, g Grant) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oauthLocked().codes[code] = codeGrant{g, redirect}
}

// NextInstall queues grants for the authorize page: each visit approves the
// next one (and, when none is queued, refuses with error=access_denied).
func (s *Server) NextInstall(gs ...Grant) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oauthLocked().next = append(s.oauth.next, gs...)
}

// Revoke invalidates every token issued for installation key.
func (s *Server) Revoke(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.oauthLocked().tokens {
		if t.grant.Key() == key {
			t.revoked = true
		}
	}
}

// Refreshes returns every refresh answered, oldest first.
func (s *Server) Refreshes() []Refresh {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Refresh(nil), s.oauthLocked().refreshes...)
}

// TokensOf returns the access tokens issued for installation key, oldest first.
func (s *Server) TokensOf(key string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	type tt struct {
		tok string
		at  time.Time
	}
	var list []tt
	for tok, t := range s.oauthLocked().tokens {
		if t.grant.Key() == key {
			list = append(list, tt{tok, t.issued})
		}
	}
	for i := range list { // few: insertion sort by issue time
		for j := i; j > 0 && list[j].at.Before(list[j-1].at); j-- {
			list[j], list[j-1] = list[j-1], list[j]
		}
	}
	out := make([]string, len(list))
	for i, t := range list {
		out[i] = t.tok
	}
	return out
}

// KeyOf names the installation a token was issued for ("" if none).
func (s *Server) KeyOf(token string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.oauthLocked().tokens[token]; t != nil {
		return t.grant.Key()
	}
	return ""
}

// oauthLocked returns the OAuth state, creating it; s.mu is held.
func (s *Server) oauthLocked() *oauthState {
	if s.oauth == nil {
		s.oauth = &oauthState{codes: map[string]codeGrant{}, tokens: map[string]*issued{}, refresh: map[string]*issued{},
			spent: map[string]spentRefresh{}}
	}
	return s.oauth
}

// tokenError is why token cannot call the Web API ("" when it can); s.mu is held.
func (s *Server) tokenError(token string) string {
	switch {
	case token == "":
		return "not_authed"
	case token == s.token:
		return ""
	}
	if _, ok := s.bots[token]; ok {
		return ""
	}
	t := s.oauthLocked().tokens[token]
	switch {
	case t == nil:
		return "invalid_auth"
	case t.revoked:
		return "token_revoked"
	case !t.expires.IsZero() && !time.Now().Before(t.expires):
		return "token_expired"
	}
	return ""
}

// authTest is auth.test's answer for an issued token; ok is false for the
// fake's own token. s.mu is held.
func (s *Server) authTest(token string) (map[string]any, bool) {
	t := s.oauthLocked().tokens[token]
	if t == nil {
		return nil, false
	}
	g := t.grant
	return map[string]any{"ok": true, "url": "https://fake.slack.test/", "team": g.TeamName, "user": "bot",
		"team_id": g.TeamID, "user_id": g.BotUserID, "bot_id": g.BotID, "app_id": g.bot().AppID, "enterprise_id": g.EnterpriseID,
		"is_enterprise_install": g.EnterpriseInstall}, true
}

// serveAuthorize is the authorize page: it checks the client id and sends
// the browser to redirect_uri with a fresh code and the state, as Slack does
// once the user approves.
func (s *Server) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	o := s.oauthLocked()
	s.calls = append(s.calls, Call{Method: "oauth/v2/authorize", Params: q, Time: time.Now()})
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Host == "" || q.Get("client_id") != o.clientID {
		s.mu.Unlock()
		http.Error(w, "invalid client_id or redirect_uri", http.StatusBadRequest)
		return
	}
	rq := redirect.Query()
	rq.Set("state", q.Get("state"))
	if len(o.next) == 0 {
		rq.Set("error", "access_denied")
	} else {
		code := "code-" + rand.Text()
		o.codes[code] = codeGrant{o.next[0], q.Get("redirect_uri")}
		o.next = o.next[1:]
		rq.Set("code", code)
	}
	s.mu.Unlock()
	redirect.RawQuery = rq.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

// oauthAccess answers oauth.v2.access; s.mu is held.
func (s *Server) oauthAccess(p url.Values) any {
	o := s.oauthLocked()
	fail := func(code string) any { return map[string]any{"ok": false, "error": code} }
	switch {
	case o.clientID == "" || p.Get("client_id") != o.clientID:
		return fail("invalid_client_id")
	case p.Get("client_secret") != o.secret:
		return fail("bad_client_secret")
	}
	now := time.Now()
	if p.Get("grant_type") == "refresh_token" {
		rt := p.Get("refresh_token")
		old, reused := o.refresh[rt], false
		if old == nil {
			if sp, ok := o.spent[rt]; ok && now.Before(sp.until) {
				old, reused = sp.rec, true
			}
		}
		if old == nil {
			o.refreshes = append(o.refreshes, Refresh{RefreshToken: rt, Time: now})
			return fail("invalid_refresh_token")
		}
		delete(o.refresh, rt) // single use, but for the grace period
		if _, ok := o.spent[rt]; !ok && o.grace > 0 {
			o.spent[rt] = spentRefresh{rec: old, until: now.Add(o.grace)}
		}
		o.refreshes = append(o.refreshes, Refresh{Key: old.grant.Key(), RefreshToken: rt,
			Age: now.Sub(old.issued), Life: old.expires.Sub(old.issued), OK: true, Reused: reused, Time: now})
		return s.issue(old.grant, now)
	}
	cg, ok := o.codes[p.Get("code")]
	if !ok {
		return fail("invalid_code")
	}
	delete(o.codes, p.Get("code"))
	if cg.redirect != "" && p.Get("redirect_uri") != cg.redirect {
		return fail("bad_redirect_uri")
	}
	return s.issue(cg.grant, now)
}

// issue mints a token (and, with rotation, a refresh token) for g and
// answers as oauth.v2.access does; s.mu is held.
func (s *Server) issue(g Grant, now time.Time) any {
	o := s.oauth
	tok := "xoxb-" + g.Key() + "-" + rand.Text()[:12]
	rec := &issued{grant: g, issued: now}
	resp := map[string]any{"ok": true, "access_token": tok, "token_type": "bot", "scope": g.Scope,
		"bot_user_id": g.BotUserID, "app_id": g.bot().AppID,
		"team": nil, "enterprise": nil, "is_enterprise_install": g.EnterpriseInstall,
		"authed_user": map[string]any{"id": g.InstallerUserID, "scope": g.UserScope}}
	if g.TeamID != "" {
		resp["team"] = map[string]any{"id": g.TeamID, "name": g.TeamName}
	}
	if g.EnterpriseID != "" {
		resp["enterprise"] = map[string]any{"id": g.EnterpriseID, "name": g.EnterpriseName}
	}
	if o.life > 0 {
		tok = "xoxe.xoxb-" + g.Key() + "-" + rand.Text()[:12]
		resp["access_token"] = tok
		rec.expires = now.Add(o.life)
		rt := "xoxe-1-" + rand.Text()
		o.refresh[rt] = rec
		o.issuedRefresh = append(o.issuedRefresh, rt)
		resp["refresh_token"] = rt
		resp["expires_in"] = int(o.life / time.Second)
	}
	o.tokens[tok] = rec
	return resp
}

// String describes a grant in test failures.
func (g Grant) String() string {
	return fmt.Sprintf("grant(team=%s enterprise=%s org-wide=%t)", g.TeamID, g.EnterpriseID, g.EnterpriseInstall)
}

// IssuedSecrets returns every access and refresh token the fake issued.
func (s *Server) IssuedSecrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.oauthLocked()
	var out []string
	for tok := range o.tokens {
		out = append(out, tok)
	}
	out = append(out, o.issuedRefresh...)
	return out
}
