package sweep

import (
	"bytes"
	"context"
	"fmt"
	"strings"
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

// SecretMask returns the Config.Mask of a sweep performing cfg's
// effects. It masks the process's own secrets (the bot token
// SLACK_BOT_TOKEN, the forward and redeliver secrets, and extra: the
// signing secret, the app token…) and the row's: its execution tokens
// (opened from its stored request) and, when withInstall, its
// installation's bot token ([oauth]). The row's are Slack tokens, so they
// are looked up, once per mask, only for a text that holds a token's
// prefix: most texts ("200", a ts) cost no request opened and no query.
func SecretMask(cfg EffectConfig, extra ...string) func(ctx context.Context, row store.Row, withInstall bool) func(string) string {
	own := append([]string{cfg.BotToken, cfg.ForwardSecret, cfg.RedeliverSecret}, extra...)
	return func(ctx context.Context, row store.Row, withInstall bool) func(string) string {
		known, looked := own, false
		return func(t string) string {
			if !looked && mayHoldToken(t) {
				known, looked = append(append(own[:len(own):len(own)], executionTokens(cfg, row)...), installToken(ctx, cfg, row, withInstall)...), true
			}
			return redact.Text(t, known...)
		}
	}
}

// mayHoldToken: t holds the prefix of a bot or execution token.
func mayHoldToken(t string) bool {
	return strings.Contains(t, "xox") || strings.Contains(t, "xwf")
}

// installToken is the bot token of row's installation ([oauth]), when
// withInstall and it can be read.
func installToken(ctx context.Context, cfg EffectConfig, row store.Row, withInstall bool) []string {
	if !withInstall || cfg.Tokens == nil {
		return nil
	}
	p, err := DecodePayload(row.Payload)
	if err != nil || p.Facts.Install == "" {
		return nil
	}
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	tok, err := cfg.Tokens.BotToken(tctx, p.Facts.Install)
	if err != nil {
		return nil
	}
	return []string{tok}
}

// executionTokens lists the execution tokens of row's stored request, in
// clear (opened with the key when sealed; none when they do not open).
func executionTokens(cfg EffectConfig, row store.Row) []string {
	req := row.Request
	if req == nil {
		return nil
	}
	body := req.Body
	if !bytes.Contains(body, []byte(tokenKey)) {
		return nil // no bot_access_token, sealed or not
	}
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

// masker returns the mask of row's texts (Config.Mask); withInstall
// also masks the installation's bot token (a failure's texts, not every
// completion's: a bot token is also caught by its shape).
func (s *Sweeper) masker(ctx context.Context, row store.Row, withInstall bool) func(string) string {
	if s.cfg.Mask != nil {
		return s.cfg.Mask(ctx, row, withInstall)
	}
	return func(t string) string { return redact.Text(t) }
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
