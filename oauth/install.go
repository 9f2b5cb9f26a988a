package oauth

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/ackd/ackd/store"
)

// InstallHandler answers GET install_path: a fresh state (signed, valid
// for StateTTL, set in a cookie for the browser) and a redirect to Slack's
// authorize page. It writes nothing: anyone may load the page.
func (s *Service) InstallHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		state := s.keys.newState(s.st.Now().Add(StateTTL))
		http.SetCookie(w, &http.Cookie{Name: StateCookie, Value: state, Path: s.cookiePath(), MaxAge: int(StateTTL.Seconds()),
			HttpOnly: true, Secure: strings.HasPrefix(s.cfg.RedirectURL, "https:"), SameSite: http.SameSiteLaxMode})
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, s.authorizeURL(state), http.StatusFound)
	})
}

// cookiePath is the path the browser will request the redirect URL at.
func (s *Service) cookiePath() string {
	if u, err := url.Parse(s.cfg.RedirectURL); err == nil && u.Path != "" {
		return u.Path
	}
	return s.cfg.RedirectPath
}

// RedirectHandler answers GET redirect_path: Slack sends the browser back
// with a code and the state. A state that is missing, not the browser's
// cookie, not signed by this ackd, expired or used already is refused (400)
// before anything is sent to Slack; otherwise the code is exchanged by
// oauth.v2.access and the installation stored, with the state's use, in one
// transaction (PutInstallationWithState).
//
// Anyone can take a state and its cookie from the install page, so
// everything before a successful exchange is unauthenticated: it writes
// nothing (the state's use is only read), and its failures are logged
// through Options.Refusals (rate limited). A state is accepted once: of
// two redirects with one state, the first whose installation commits wins;
// the other is refused, and the tokens its code got are not kept.
func (s *Service) RedirectHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		q := r.URL.Query()
		state := q.Get("state")
		c, cerr := r.Cookie(StateCookie)
		switch {
		case state == "":
			s.fail(w, r, http.StatusBadRequest, "state", "The link has no state. Start again from the install page.")
			return
		case cerr != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(state)) != 1:
			s.fail(w, r, http.StatusBadRequest, "state", "This install was not started in this browser (the state does not match its cookie). Start again from the install page.")
			return
		}
		switch err := s.keys.checkState(state, s.st.Now()); {
		case errors.Is(err, errStateExpired):
			s.fail(w, r, http.StatusBadRequest, "state", "This install link has expired (each one works for 10 minutes). Start again from the install page.")
			return
		case err != nil:
			s.fail(w, r, http.StatusBadRequest, "state", "This install link was not issued by this server. Start again from the install page.")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
		defer cancel()
		used, err := s.st.OAuthStateUsed(ctx, hashState(state))
		if err != nil {
			s.refused(slog.LevelError, "install: could not check the state", http.StatusServiceUnavailable, "store", "err", err.Error())
			s.fail(w, r, http.StatusServiceUnavailable, "store", "ackd could not check the install request (database unavailable). Please try again.")
			return
		}
		// The cookie has done its job either way.
		http.SetCookie(w, &http.Cookie{Name: StateCookie, Value: "", Path: s.cookiePath(), MaxAge: -1, HttpOnly: true,
			Secure: strings.HasPrefix(s.cfg.RedirectURL, "https:"), SameSite: http.SameSiteLaxMode})
		if used {
			s.fail(w, r, http.StatusBadRequest, "state", usedText)
			return
		}
		if e := q.Get("error"); e != "" {
			s.fail(w, r, http.StatusBadRequest, "denied", "Slack did not install the app: "+clip(e, 64)+".")
			return
		}
		code := q.Get("code")
		if code == "" {
			s.fail(w, r, http.StatusBadRequest, "exchange", "Slack sent no code. Start again from the install page.")
			return
		}
		resp, slackAt, err := s.exchange(ctx, code)
		if err != nil {
			var ser slack.SlackErrorResponse
			if errors.As(err, &ser) {
				s.refused(slog.LevelWarn, "install: Slack refused the code exchange", http.StatusBadRequest, "exchange "+clip(ser.Err, 40))
				s.fail(w, r, http.StatusBadRequest, "exchange", "Slack refused the installation: "+clip(ser.Err, 64)+". Start again from the install page.")
				return
			}
			s.refused(slog.LevelError, "install: code exchange failed", http.StatusBadGateway, "exchange unreachable", "err", err.Error())
			s.fail(w, r, http.StatusBadGateway, "exchange", "ackd could not reach Slack to finish the installation. Start again from the install page.")
			return
		}
		// Slack has authenticated the request: from here on it is logged.
		in, first, err := s.store(ctx, resp, slackAt, hashState(state))
		if err != nil {
			s.log.Error("install: could not store the installation", "err", err)
			s.fail(w, r, http.StatusServiceUnavailable, "store", "Slack installed the app, but ackd could not record it (database unavailable). Please install again.")
			return
		}
		if !first {
			s.log.Warn("install: another redirect with the same state stored its installation first; this one's tokens are not kept",
				"team", in.Key)
			s.fail(w, r, http.StatusBadRequest, "state", usedText)
			return
		}
		s.m.installs.WithLabelValues("ok").Inc()
		select {
		case s.kick <- struct{}{}:
		default:
		}
		s.log.Info("installed", "team", in.Key, "team_id", in.TeamID, "enterprise_id", in.EnterpriseID,
			"enterprise_install", in.EnterpriseInstall, "installer", in.InstallerUserID, "scopes", in.Scopes,
			"slack_time", formatTime(in.SlackInstalledAt))
		if s.cfg.SuccessURL != "" {
			http.Redirect(w, r, s.cfg.SuccessURL, http.StatusFound)
			return
		}
		name := resp.Team.Name
		if in.EnterpriseInstall {
			name = resp.Enterprise.Name
		}
		s.page(w, http.StatusOK, "Installed", "The app is installed in "+cmp.Or(name, in.Key)+". You can close this page.")
	})
}

const usedText = "This install link was used already (each one works once). Start again from the install page."

// refused logs a failure that anyone can cause, rate limited when the
// daemon gave Options.Refusals.
func (s *Service) refused(level slog.Level, msg string, status int, reason string, attrs ...string) {
	as := []slog.Attr{slog.String("component", "oauth"), slog.Int("status", status), slog.String("reason", reason)}
	for i := 0; i+1 < len(attrs); i += 2 {
		as = append(as, slog.String(attrs[i], attrs[i+1]))
	}
	if s.refuse != nil {
		s.refuse.Record(level, msg, as, status, reason)
		return
	}
	s.log.LogAttrs(context.Background(), level, msg, as[1:]...)
}

func clip(v string, n int) string {
	if len(v) <= n {
		return v
	}
	return v[:n] + "…"
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.UTC().Format(time.RFC3339)
}

// exchange calls oauth.v2.access with code, and returns Slack's clock at
// its answer (the Date header; zero when there is none or it does not
// parse): an uninstall's event_time is compared with it.
func (s *Service) exchange(ctx context.Context, code string) (*slack.OAuthV2Response, time.Time, error) {
	hc := *s.hc
	dt := &dateTransport{base: hc.Transport}
	if dt.base == nil {
		dt.base = http.DefaultTransport
	}
	hc.Transport = dt
	resp, err := slack.GetOAuthV2ResponseContext(ctx, &hc, s.cfg.ClientID, s.cfg.ClientSecret, code, s.cfg.RedirectURL, s.oauthOpts()...)
	return resp, dt.date, err
}

// dateTransport records the Date header of the last answer it carried.
type dateTransport struct {
	base http.RoundTripper
	date time.Time
}

func (d *dateTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := d.base.RoundTrip(r)
	if err == nil {
		if t, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
			d.date = t
		}
	}
	return resp, err
}

// store seals the exchanged tokens and stores the installation with the
// state's use; first false: the state was used meanwhile, nothing was
// stored. The bot's id comes from auth.test with the new token (best
// effort).
func (s *Service) store(ctx context.Context, resp *slack.OAuthV2Response, slackAt time.Time, stateHash string) (store.Installation, bool, error) {
	in := store.Installation{
		Key:          Key(resp.Team.ID, resp.Enterprise.ID, resp.IsEnterpriseInstall),
		TeamID:       resp.Team.ID,
		EnterpriseID: resp.Enterprise.ID, EnterpriseInstall: resp.IsEnterpriseInstall,
		AppID: resp.AppID, BotUserID: resp.BotUserID, Scopes: resp.Scope,
		UserScopes: resp.AuthedUser.Scope, InstallerUserID: resp.AuthedUser.ID,
		SlackInstalledAt: slackAt,
	}
	if in.Key == "" || resp.AccessToken == "" {
		return in, false, errors.New("oauth.v2.access named no team or no bot token")
	}
	api := slack.New(resp.AccessToken, slack.OptionAPIURL(s.cfg.APIURL), slack.OptionHTTPClient(s.hc))
	if at, err := api.AuthTestContext(ctx); err == nil {
		in.BotID = at.BotID
	} else {
		s.log.Warn("install: auth.test failed; the installation is stored without its bot id", "team", in.Key, "err", err)
	}
	now := s.st.Now()
	t := Tokens{Bot: resp.AccessToken, Refresh: resp.RefreshToken, Issued: now}
	if resp.ExpiresIn > 0 {
		t.Expires = now.Add(time.Duration(resp.ExpiresIn) * time.Second)
	}
	in.Secret = s.keys.Seal(in.Key, t)
	first, err := s.st.PutInstallationWithState(ctx, in, stateHash, StateTTL)
	return in, first, err
}

// fail answers a failed install: a redirect to failure_url with
// ?error=outcome when one is set, else a page saying what went wrong.
func (s *Service) fail(w http.ResponseWriter, r *http.Request, status int, outcome, msg string) {
	s.m.installs.WithLabelValues(outcome).Inc()
	if s.cfg.FailureURL != "" {
		u := s.cfg.FailureURL
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		http.Redirect(w, r, u+sep+"error="+url.QueryEscape(outcome), http.StatusFound)
		return
	}
	s.page(w, status, "Installation failed", msg)
}

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>{{.Title}}</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 4em auto">
<h1>{{.Title}}</h1><p>{{.Msg}}</p>{{if .Link}}<p><a href="{{.Link}}">Add to Slack</a></p>{{end}}
</body></html>
`))

func (s *Service) page(w http.ResponseWriter, status int, title, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	link := ""
	if status != http.StatusOK {
		link = s.cfg.InstallPath
	}
	_ = pageTmpl.Execute(w, map[string]string{"Title": title, "Msg": msg, "Link": link})
}
