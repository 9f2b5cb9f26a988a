package sweep

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/slack-go/slack"
)

// MetadataEventType marks messages ackd posts: their metadata carries
// {"idempotency_key": …}, so a duplicate left by a retry after an unknown
// outcome can be found in conversations.history.
const MetadataEventType = "ackd_effect"

// post sends chat.postMessage: Params.Channel (default the event's), the
// rendered text, Blocks, and a thread (an explicit ThreadTS, or with Thread
// the event's thread or message). Result: {"channel","ts"}. When an earlier
// attempt may have posted (Row.OutcomeUnknown), it first looks for that
// post by its metadata and, found, is done with it (confirmPost).
func (e *effects) post(ctx context.Context, job Job) (Outcome, error) {
	api, token, err := e.client(ctx, job)
	if err != nil {
		return Outcome{}, err
	}
	p := job.Payload
	channel, err := render(p, "to_channel", p.Params.Channel, p.Facts.Channel)
	if err != nil {
		return Outcome{}, err
	}
	if channel == "" {
		return Outcome{}, permanent("no_channel", "post: no channel in the route or the event")
	}
	opts, err := messageOptions(p)
	if err != nil {
		return Outcome{}, err
	}
	opts = append(opts, slack.MsgOptionMetadata(slack.SlackMetadata{
		EventType:    MetadataEventType,
		EventPayload: map[string]any{"idempotency_key": job.Row.Key},
	}))
	thread := p.Params.ThreadTS
	if thread == "" && p.Params.Thread {
		thread = cmp.Or(p.Facts.ThreadTS, p.Facts.TS)
	}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
	}

	// An earlier attempt may have posted: look for it first (confirm.go).
	note := ""
	if job.Row.OutcomeUnknown && !e.cfg.NoConfirm {
		found, n, err := e.confirmPost(ctx, api, token, job, channel, thread)
		if err != nil {
			return Outcome{}, err
		}
		if found != nil {
			o := result(map[string]string{"channel": found.channel, "ts": found.ts})
			o.Note = n
			return o, nil
		}
		note = n
	}

	e.log.DebugContext(ctx, "slack call", "method", "chat.postMessage", "key", job.Row.Key, "channel", channel, "thread_ts", thread)
	ch, ts, err := api.PostMessageContext(ctx, channel, opts...)
	if err != nil {
		return Outcome{}, slackFailure("chat.postMessage", channel, err)
	}
	o := result(map[string]string{"channel": ch, "ts": ts})
	o.Note = note
	return o, nil
}

// react sends reactions.add to the event's message. already_reacted is
// success: the reaction is there, which is all the effect promises.
// Result: {"channel","ts","reaction"}.
func (e *effects) react(ctx context.Context, job Job) (Outcome, error) {
	api, err := e.webAPI(ctx, job)
	if err != nil {
		return Outcome{}, err
	}
	p := job.Payload
	name := strings.Trim(p.Params.Reaction, ":") // accept ":eyes:" as well as "eyes"
	switch {
	case name == "":
		return Outcome{}, permanent("no_reaction", "react: the route names no reaction")
	case p.Facts.Channel == "" || p.Facts.TS == "":
		return Outcome{}, permanent("no_message", "react: the event names no message (channel %q, ts %q)", p.Facts.Channel, p.Facts.TS)
	}

	e.log.DebugContext(ctx, "slack call", "method", "reactions.add", "key", job.Row.Key, "channel", p.Facts.Channel, "ts", p.Facts.TS, "reaction", name)
	err = api.AddReactionContext(ctx, name, slack.NewRefToMessage(p.Facts.Channel, p.Facts.TS))
	var ser slack.SlackErrorResponse
	if err != nil && !(errors.As(err, &ser) && ser.Err == "already_reacted") {
		return Outcome{}, slackFailure("reactions.add", p.Facts.Channel, err)
	}
	return result(map[string]string{"channel": p.Facts.Channel, "ts": p.Facts.TS, "reaction": name}), nil
}

// update sends chat.update to Params.Channel/Params.TS (defaults: the
// event's message) with the rendered text and Blocks. Result: {"channel","ts"}.
func (e *effects) update(ctx context.Context, job Job) (Outcome, error) {
	api, err := e.webAPI(ctx, job)
	if err != nil {
		return Outcome{}, err
	}
	p := job.Payload
	channel, err := render(p, "to_channel", p.Params.Channel, p.Facts.Channel)
	if err != nil {
		return Outcome{}, err
	}
	ts, err := render(p, "ts", p.Params.TS, p.Facts.TS)
	if err != nil {
		return Outcome{}, err
	}
	if channel == "" || ts == "" {
		return Outcome{}, permanent("no_message", "update: no message to update (channel %q, ts %q)", channel, ts)
	}
	opts, err := messageOptions(p)
	if err != nil {
		return Outcome{}, err
	}

	e.log.DebugContext(ctx, "slack call", "method", "chat.update", "key", job.Row.Key, "channel", channel, "ts", ts)
	ch, newTS, _, err := api.UpdateMessageContext(ctx, channel, ts, opts...)
	if err != nil {
		return Outcome{}, slackFailure("chat.update", channel, err)
	}
	return result(map[string]string{"channel": ch, "ts": newTS}), nil
}

// messageOptions are the rendered text and the blocks of a post or update.
// Text is sent unescaped so that templates can write <@U123> mentions.
func messageOptions(p Payload) ([]slack.MsgOption, error) {
	text, err := render(p, "text", p.Params.Text, "")
	if err != nil {
		return nil, err
	}
	opts := []slack.MsgOption{slack.MsgOptionText(text, false)}
	if present(p.Params.Blocks) {
		var b slack.Blocks
		if err := json.Unmarshal(p.Params.Blocks, &b); err != nil {
			return nil, permanent("invalid_blocks", "blocks are not a Block Kit array: %w", err)
		}
		opts = append(opts, slack.MsgOptionBlocks(b.BlockSet...))
	}
	return opts, nil
}

// slackFailure classifies a Web API error and says which call and channel
// it came from, for last_error.
func slackFailure(method, channel string, err error) *Failure {
	f := Classify(err)
	f.Err = fmt.Errorf("%s %s: %w", method, channel, f.Err)
	return f
}
