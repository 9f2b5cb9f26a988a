package ingress

import (
	"context"
	"encoding/json"
	"time"

	"github.com/ackd/ackd/store"
)

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
