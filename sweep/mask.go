package sweep

import (
	"context"
	"fmt"
	"time"

	"github.com/ackd/ackd/internal/redact"
	"github.com/ackd/ackd/store"
)

// Every text the sweep stores, logs or hands on about a row (a failure's
// message, an attempt's note and result, a completion's result and note,
// a row's log line) passes mask first, with every secret ackd knows for
// that row: a handler or Slack may echo back a token it was given, and
// the database, its WAL, the log, `outbox show` and the console must
// never hold it.

// KnownSecrets returns the Config.Secrets of a sweep performing cfg's
// effects: the row's execution tokens (opened from its stored request),
// the bot token (SLACK_BOT_TOKEN, or with [oauth] the row's installation's
// when withInstall), the forward and redeliver secrets, and extra (the
// signing secret, the app token…).
func KnownSecrets(cfg EffectConfig, extra ...string) func(ctx context.Context, row store.Row, withInstall bool) []string {
	return func(ctx context.Context, row store.Row, withInstall bool) []string {
		known := append([]string{cfg.BotToken, cfg.ForwardSecret, cfg.RedeliverSecret}, extra...)
		known = append(known, executionTokens(cfg, row)...)
		if withInstall && cfg.Tokens != nil {
			if p, err := DecodePayload(row.Payload); err == nil && p.Facts.Install != "" {
				tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				if tok, err := cfg.Tokens.BotToken(tctx, p.Facts.Install); err == nil {
					known = append(known, tok)
				}
				cancel()
			}
		}
		return known
	}
}

// executionTokens lists the execution tokens of row's stored request, in
// clear (opened with the key when sealed; none when they do not open).
func executionTokens(cfg EffectConfig, row store.Row) []string {
	req := row.Request
	if req == nil {
		return nil
	}
	body := req.Body
	if HasSealedTokens(body) {
		if cfg.Sealer == nil {
			return nil
		}
		esc := jsonEscape
		if req.ContentType == ContentTypeForm {
			esc = formEscape
		}
		b, err := OpenTokens(cfg.Sealer, row.RequestID, body, esc)
		if err != nil {
			return nil
		}
		body = b
	}
	doc, err := requestJSON(req.ContentType, body)
	if err != nil {
		return nil
	}
	return findTokens(doc, nil)
}

// masker returns the mask of row's texts; withInstall also asks the
// token source for the installation's bot token (a failure's texts, not
// every completion's: a bot token is also caught by its shape).
func (s *Sweeper) masker(ctx context.Context, row store.Row, withInstall bool) func(string) string {
	var known []string
	if s.cfg.Secrets != nil {
		known = s.cfg.Secrets(ctx, row, withInstall)
	}
	return func(t string) string { return redact.Text(t, known...) }
}

// maskCompletion masks what c stores as text.
func maskCompletion(c store.Completion, mask func(string) string) store.Completion {
	c.Result, c.Note = mask(c.Result), mask(c.Note)
	c.Attempt.Result, c.Attempt.Status = mask(c.Attempt.Result), mask(c.Attempt.Status)
	return c
}

// maskArgs masks the string and error values of a log line's key-value
// pairs.
func maskArgs(args []any, mask func(string) string) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = mask(v)
		case error:
			out[i] = mask(v.Error())
		case fmt.Stringer:
			out[i] = mask(v.String())
		default:
			out[i] = a
		}
	}
	return out
}
