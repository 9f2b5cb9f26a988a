package config

import (
	"cmp"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/ackd/ackd/internal/slackrate"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// Secrets come from the environment or files, never flags or the config.
type Secrets struct {
	SigningSecret string
	BotToken      string
	ForwardSecret string
	AppToken      string // xapp-…, for Socket Mode
	// RedeliverSecret signs re-delivered requests when the app verifies
	// with another secret than ackd's (ACKD_REDELIVER_SECRET); empty means
	// SigningSecret.
	RedeliverSecret string
	// With [oauth]: the app's client secret (SLACK_CLIENT_SECRET) and the
	// key sealing installation tokens (ACKD_TOKEN_KEY, base64 of 32 bytes),
	// with the previous key during a rotation (ACKD_TOKEN_KEY_OLD).
	ClientSecret, TokenKey, TokenKeyOld string
	// ConsolePassword is the console's Basic auth password for user ackd
	// (ACKD_CONSOLE_PASSWORD); required with [console] listen.
	ConsolePassword string
	// EmptyFiles maps each secret (SLACK_BOT_TOKEN, …) whose …_FILE named an
	// empty file to that file (ReadSecret): the secret is not set, and an
	// error about it, where the configuration needs it, names the file.
	EmptyFiles map[string]string
	// CredentialsDir is systemd's $CREDENTIALS_DIRECTORY, if set: an empty
	// file there is a copy, so the error names the LoadCredential= source.
	CredentialsDir string
}

// StoreOptions maps the configuration onto the store's options.
func (c Config) StoreOptions(schema string, now func() time.Time) store.Options {
	return store.Options{
		Synchronous: c.Synchronous, CommitDelay: c.CommitDelay.Duration, Now: now, Schema: schema,
		MaxAttempts: c.Sweep.MaxAttempts, BackoffBase: c.Sweep.Backoff.Duration, BackoffMax: c.Sweep.MaxBackoff.Duration,
	}
}

// RoutedSkips keeps the skipped effects (sweep.Config.Skip) that this
// configuration's routes name. A forward's reply posted in an event's
// thread is a post row too, but only when the handler replies with text;
// ForwardRepliesNeedToken says that separately.
func (c Config) RoutedSkips(skip map[string]string) map[string]string {
	out := map[string]string{}
	for _, r := range c.Routes {
		if why, ok := skip[r.Effect]; ok {
			out[r.Effect] = why
		}
	}
	return out
}

// forwardsToEvents reports whether a forward route takes Events API
// events: its handler's reply becomes a post in the event's thread.
func (c Config) ForwardsToEvents() bool {
	return slices.ContainsFunc(c.Routes, func(r Route) bool { return r.Effect == "forward" && r.source() == sweep.SourceEvent })
}

// EffectConfig maps configuration and secrets onto the effects'. The
// caller sets Steps (the store) and, with [oauth], Tokens. Its History
// budget ([backfill] rate) serves a process that reads history for post
// confirmation only (sweep --once); serve replaces it with the budget it
// shares with catch-up.
func (c Config) EffectConfig(sec Secrets, log *slog.Logger, hc *http.Client) sweep.EffectConfig {
	ec := sweep.EffectConfig{BotToken: sec.BotToken, APIURL: c.Slack.APIURL, ForwardSecret: sec.ForwardSecret,
		RedeliverSecret: cmp.Or(sec.RedeliverSecret, sec.SigningSecret), HTTPClient: hc, Logger: log,
		NoConfirm: !c.Slack.ConfirmPosts, History: slackrate.New(c.Backfill.Rate),
		Sealer:      StepSealer(sec),
		Stream:      sweep.StreamConfig{Status: c.Stream.Status, FailedText: c.Stream.FailedText, MaxChars: c.Stream.MaxChars},
		MaxAttempts: c.Sweep.MaxAttempts}
	if c.OAuth != nil {
		// Each row takes its team's token (EffectConfig.Tokens, set by the
		// caller); SLACK_BOT_TOKEN is not used.
		ec.BotToken = ""
		ec.NotInstalledWait = c.OAuth.NotInstalledWait.Duration
	}
	return ec
}
