package oauth

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"html/template"
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
// cookie, not signed by this ackd, expired or used already (the database
// decides, UseOAuthState) is refused (400) before anything is sent to
// Slack; otherwise the code is exchanged by oauth.v2.access and the
// installation stored.
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
		ok, err := s.st.UseOAuthState(ctx, hashState(state), StateTTL)
		if err != nil {
			s.log.Error("install: could not check the state", "err", err)
			s.fail(w, r, http.StatusServiceUnavailable, "store", "ackd could not check the install request (database unavailable). Please try again.")
			return
		}
		// The cookie has done its job either way.
		http.SetCookie(w, &http.Cookie{Name: StateCookie, Value: "", Path: s.cookiePath(), MaxAge: -1, HttpOnly: true,
			Secure: strings.HasPrefix(s.cfg.RedirectURL, "https:"), SameSite: http.SameSiteLaxMode})
		if !ok {
			s.fail(w, r, http.StatusBadRequest, "state", "This install link was used already (each one works once). Start again from the install page.")
			return
		}
		if e := q.Get("error"); e != "" {
			s.fail(w, r, http.StatusBadRequest, "denied", "Slack did not install the app: "+e+".")
			return
		}
		code := q.Get("code")
		if code == "" {
			s.fail(w, r, http.StatusBadRequest, "exchange", "Slack sent no code. Start again from the install page.")
			return
		}
		resp, err := slack.GetOAuthV2ResponseContext(ctx, s.hc, s.cfg.ClientID, s.cfg.ClientSecret, code, s.cfg.RedirectURL, s.oauthOpts()...)
		if err != nil {
			var ser slack.SlackErrorResponse
			if errors.As(err, &ser) {
				s.log.Warn("install: Slack refused the code exchange", "code", ser.Err)
				s.fail(w, r, http.StatusBadRequest, "exchange", "Slack refused the installation: "+ser.Err+". Start again from the install page.")
				return
			}
			s.log.Error("install: code exchange failed", "err", err)
			s.fail(w, r, http.StatusBadGateway, "exchange", "ackd could not reach Slack to finish the installation. Start again from the install page.")
			return
		}
		in, err := s.store(ctx, resp)
		if err != nil {
			s.log.Error("install: could not store the installation", "err", err)
			s.fail(w, r, http.StatusServiceUnavailable, "store", "Slack installed the app, but ackd could not record it (database unavailable). Please install again.")
			return
		}
		s.m.installs.WithLabelValues("ok").Inc()
		select {
		case s.kick <- struct{}{}:
		default:
		}
		s.log.Info("installed", "team", in.Key, "team_id", in.TeamID, "enterprise_id", in.EnterpriseID,
			"enterprise_install", in.EnterpriseInstall, "installer", in.InstallerUserID, "scopes", in.Scopes)
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

// store seals the exchanged tokens and stores the installation. The bot's
// id comes from auth.test with the new token (best effort).
func (s *Service) store(ctx context.Context, resp *slack.OAuthV2Response) (store.Installation, error) {
	in := store.Installation{
		Key:          Key(resp.Team.ID, resp.Enterprise.ID, resp.IsEnterpriseInstall),
		TeamID:       resp.Team.ID,
		EnterpriseID: resp.Enterprise.ID, EnterpriseInstall: resp.IsEnterpriseInstall,
		AppID: resp.AppID, BotUserID: resp.BotUserID, Scopes: resp.Scope,
		UserScopes: resp.AuthedUser.Scope, InstallerUserID: resp.AuthedUser.ID,
	}
	if in.Key == "" || resp.AccessToken == "" {
		return in, errors.New("oauth.v2.access named no team or no bot token")
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
	return in, s.st.PutInstallation(ctx, in)
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
