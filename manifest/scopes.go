package manifest

import "github.com/ackd/ackd/sweep"

// Slack's facts behind the manifest: which bot scope each Web API method an
// effect calls needs, and which scope each Events API subscription needs.
// Each entry names its source; [read] marks a page whose stored copy was
// read while the table was written (2026-12). The other entries follow the
// same reference pages (docs.slack.dev/reference/events/<type>, "Required
// scopes"; docs.slack.dev/reference/scopes/<scope>, "Compatible events")
// but were not re-read for this table [unchecked]: when Slack's app
// settings name another scope for an event, that page wins — fix the entry.

// Slack's conversation types, as the manifest's message.* subscriptions and
// *:history scopes name them. A channel ID does not tell public from
// private: "Private channels created before March 2021 have a G prefix.
// Both public and private channels created after March 2021 have a C
// prefix." — docs.slack.dev/reference/events/member_joined_channel [read].
// So the types are an input (--channel-types), all four by default.
const (
	Public  = "public"  // public channels: message.channels, channels:*
	Private = "private" // private channels: message.groups, groups:*
	IM      = "im"      // direct messages with the app: message.im, im:*
	MPIM    = "mpim"    // group direct messages: message.mpim, mpim:*
)

// ChannelTypes are all four, in Slack's order.
var ChannelTypes = []string{Public, Private, IM, MPIM}

// perType is what each conversation type brings: the message.* subscription
// Slack delivers its messages by, the scope that subscription and
// conversations.history/.replies need, and the scope of its membership
// events.
//   - message.channels ↔ channels:history: docs.slack.dev/reference/scopes/channels.history
//     ("Compatible events": message, message.channels; "Compatible API
//     methods": conversations.history, conversations.replies) [read].
//   - message.groups ↔ groups:history, message.im ↔ im:history,
//     message.mpim ↔ mpim:history: docs.slack.dev/reference/events/message.groups,
//     message.im, message.mpim; conversations.history takes "channels:history /
//     groups:history / im:history / mpim:history" by type (SLACK_FACTS §10 1.3).
//   - member_joined_channel: "if your bot or app has the channels:read scope,
//     it will receive events for public channels. If it has groups:read, it
//     will receive events for private channels." —
//     docs.slack.dev/reference/events/member_joined_channel [read].
var perType = map[string]struct{ subscription, history, read string }{
	Public:  {"message.channels", "channels:history", "channels:read"},
	Private: {"message.groups", "groups:history", "groups:read"},
	IM:      {"message.im", "im:history", "im:read"},
	MPIM:    {"message.mpim", "mpim:history", "mpim:read"},
}

// historyScope stands, in methodScopes, for the *:history scope of each
// conversation type the manifest covers (perType), not one fixed scope.
const historyScope = "*:history"

// methodScopes is the bot scope of each Web API method an effect (or
// catch-up) calls with the bot token.
//   - chat.postMessage, chat.update, assistant.threads.setStatus: chat:write —
//     docs.slack.dev/reference/scopes/chat.write ("Compatible API methods") [read].
//   - reactions.add: reactions:write — docs.slack.dev/reference/methods/reactions.add.
//   - conversations.history, conversations.replies: the *:history scope of the
//     conversation's type — docs.slack.dev/reference/methods/conversations.history,
//     docs.slack.dev/reference/scopes/channels.history [read].
//   - auth.test: no scope — docs.slack.dev/reference/methods/auth.test.
//   - chat.startStream, chat.appendStream, chat.stopStream: chat:write —
//     docs.slack.dev/reference/methods/chat.startStream (changelog 2025-10-07,
//     SLACK_FACTS §11 "Streaming messages") [unchecked].
//   - chat.delete: chat:write (an app deletes its own messages) —
//     docs.slack.dev/reference/methods/chat.delete [unchecked].
//   - assistant.threads.setStatus takes chat:write or assistant:write
//     (SLACK_FACTS §11 "Agents", changelog 2026-03-05; slack-go's
//     SetAssistantThreadsStatus says assistant:write is being deprecated in
//     favour of chat:write). assistant:write comes with the
//     assistant_thread_started subscription (eventScopes).
//   - agents.sessions.setStatus: assistant:write — it answers not_authorized
//     "unless the app is an agent with assistant:write" (SLACK_FACTS §12,
//     Slack changelog 2026-08-20).
//
// A new effect adds its methods here and in effectMethods.
var methodScopes = map[string][]string{
	"chat.postMessage":            {"chat:write"},
	"chat.update":                 {"chat:write"},
	"assistant.threads.setStatus": {"chat:write"},
	"reactions.add":               {"reactions:write"},
	"conversations.history":       {historyScope},
	"conversations.replies":       {historyScope},
	"auth.test":                   nil,
	// A workflow step's calls are made with the execution's own token
	// (bot_access_token), which needs no scope of the app's.
	"functions.completeSuccess": nil,
	"functions.completeError":   nil,
	"chat.startStream":          {"chat:write"},
	"chat.appendStream":         {"chat:write"},
	"chat.stopStream":           {"chat:write"},
	"chat.delete":               {"chat:write"},
	"agents.sessions.setStatus": {"assistant:write"},
}

// effectMethods says which Web API methods a route's rows call with the bot
// token. It is the one place an effect declares what it needs from Slack:
// a new effect adds a case here and its methods to methodScopes.
//   - post: chat.postMessage; before a repeat after an unknown outcome,
//     conversations.history or .replies look for the earlier post
//     ([slack] confirm_posts, sweep/confirm.go).
//   - update: chat.update. react: reactions.add.
//   - forward from an event: the handler's {"text"} reply is a post row in
//     the event's thread (sweep/forward.go); from a command or interaction
//     it is a respond to the response_url, which needs no scope.
//   - respond (response_url), log, redeliver (HTTP to the team's app): no
//     Web API call by ackd.
//   - step, step_deadline: functions.completeSuccess / completeError with
//     the execution's own token, which needs no scope.
//   - stream (sweep/stream.go): assistant.threads.setStatus; the streaming
//     methods; chat.update and chat.delete to finish an answer in the
//     messages an earlier attempt started; chat.postMessage for a JSON
//     answer (a post row, with its confirmation) and for what a recovered
//     answer adds; agents.sessions.setStatus, the session's status
//     following the answer (DESIGN §12 "Agent sessions").
func effectMethods(effect, source string, confirm bool) (methods []string, known bool) {
	post := []string{"chat.postMessage"}
	if confirm {
		post = append(post, "conversations.history", "conversations.replies")
	}
	switch effect {
	case "post":
		return post, true
	case "update":
		return []string{"chat.update"}, true
	case "react":
		return []string{"reactions.add"}, true
	case "forward":
		if source == sourceEvent {
			return post, true
		}
		return nil, true
	case "respond", "log", "redeliver":
		return nil, true
	case sweep.EffectStep, sweep.EffectStepDeadline:
		// functions.completeSuccess / completeError, with the execution's
		// token (methodScopes: no bot scope).
		return []string{"functions.completeSuccess", "functions.completeError"}, true
	case "stream":
		return append([]string{"assistant.threads.setStatus", "chat.startStream", "chat.appendStream",
			"chat.stopStream", "chat.update", "chat.delete", "agents.sessions.setStatus"}, post...), true
	case sweep.EffectStreamStop:
		// A user's Stop: the session set active (or, where the app is no
		// agent, the thread's status cleared).
		return []string{"agents.sessions.setStatus", "assistant.threads.setStatus"}, true
	}
	return nil, false
}

// eventScopes is the bot scope Slack requires before an app subscribes to an
// Events API type (docs.slack.dev/reference/events/<type>, "Required
// scopes"). message is not here: it subscribes per conversation type
// (perType). An empty list: no scope needed. Types Slack delivers to bot
// subscriptions only through other means are in notBotEvents.
//   - app_mention: app_mentions:read — docs.slack.dev/reference/scopes/app_mentions.read [read].
//   - reaction_added, reaction_removed: reactions:read —
//     docs.slack.dev/reference/scopes/reactions.read ("events": reaction_added,
//     reaction_removed) [read].
//   - app_uninstalled, tokens_revoked: "No scope needed" —
//     docs.slack.dev/reference/events/tokens_revoked (SLACK_FACTS §10 3.4).
//   - app_home_opened, function_executed, grid_migration_*: no scope.
//   - agent_session_stopped, agent_session_title_changed: chat:write;
//     app_context_changed: assistant:write — slack-ruby/slack-api-ref
//     events/<type>.json ("scopes"), its mirror of Slack's reference [read].
//   - channel_*, group_*, im_*: channels:read, groups:read, im:read (their
//     *_history_changed: the *:history scope).
//   - member_joined_channel, member_left_channel: channels:read or groups:read
//     by the channel's type (perType.read) [read].
//   - team_join, user_change, user_status_changed, user_huddle_changed,
//     user_profile_changed: users:read.
var eventScopes = map[string][]string{
	"agent_session_stopped":            {"chat:write"},
	"agent_session_title_changed":      {"chat:write"},
	"app_context_changed":              {"assistant:write"},
	"app_home_opened":                  {},
	"app_mention":                      {"app_mentions:read"},
	"app_uninstalled":                  {},
	"assistant_thread_context_changed": {"assistant:write"},
	"assistant_thread_started":         {"assistant:write"},
	"call_rejected":                    {"calls:read"},
	"channel_archive":                  {"channels:read"},
	"channel_created":                  {"channels:read"},
	"channel_deleted":                  {"channels:read"},
	"channel_history_changed":          {"channels:history"},
	"channel_id_changed":               {"channels:read"},
	"channel_left":                     {"channels:read"},
	"channel_rename":                   {"channels:read"},
	"channel_shared":                   {"channels:read", "groups:read"},
	"channel_unarchive":                {"channels:read"},
	"channel_unshared":                 {"channels:read", "groups:read"},
	"dnd_updated_user":                 {"dnd:read"},
	"email_domain_changed":             {"team:read"},
	"emoji_changed":                    {"emoji:read"},
	"file_change":                      {"files:read"},
	"file_comment_added":               {"files:read"},
	"file_comment_deleted":             {"files:read"},
	"file_comment_edited":              {"files:read"},
	"file_created":                     {"files:read"},
	"file_deleted":                     {"files:read"},
	"file_public":                      {"files:read"},
	"file_shared":                      {"files:read"},
	"file_unshared":                    {"files:read"},
	"function_executed":                {},
	"grid_migration_finished":          {},
	"grid_migration_started":           {},
	"group_archive":                    {"groups:read"},
	"group_close":                      {"groups:read"},
	"group_deleted":                    {"groups:read"},
	"group_history_changed":            {"groups:history"},
	"group_left":                       {"groups:read"},
	"group_open":                       {"groups:read"},
	"group_rename":                     {"groups:read"},
	"group_unarchive":                  {"groups:read"},
	"im_close":                         {"im:read"},
	"im_created":                       {"im:read"},
	"im_history_changed":               {"im:history"},
	"im_open":                          {"im:read"},
	"link_shared":                      {"links:read"},
	"member_joined_channel":            nil, // perType.read of the channel types
	"member_left_channel":              nil, // likewise
	"message_metadata_deleted":         {"metadata.message:read"},
	"message_metadata_posted":          {"metadata.message:read"},
	"message_metadata_updated":         {"metadata.message:read"},
	"pin_added":                        {"pins:read"},
	"pin_removed":                      {"pins:read"},
	"reaction_added":                   {"reactions:read"},
	"reaction_removed":                 {"reactions:read"},
	"shared_channel_invite_accepted":   {"conversations.connect:read"},
	"shared_channel_invite_approved":   {"conversations.connect:read"},
	"shared_channel_invite_declined":   {"conversations.connect:read"},
	"shared_channel_invite_received":   {"conversations.connect:read"},
	"shared_channel_invite_requested":  {"conversations.connect:read"},
	"subteam_created":                  {"usergroups:read"},
	"subteam_members_changed":          {"usergroups:read"},
	"subteam_self_added":               {"usergroups:read"},
	"subteam_self_removed":             {"usergroups:read"},
	"subteam_updated":                  {"usergroups:read"},
	"team_access_granted":              {},
	"team_access_revoked":              {},
	"team_domain_change":               {"team:read"},
	"team_join":                        {"users:read"},
	"team_rename":                      {"team:read"},
	"tokens_revoked":                   {},
	"user_change":                      {"users:read"},
	"user_huddle_changed":              {"users:read"},
	"user_profile_changed":             {"users:read"},
	"user_status_changed":              {"users:read"},
	"workflow_deleted":                 {"workflow.steps:execute"},
	"workflow_published":               {"workflow.steps:execute"},
	"workflow_step_deleted":            {"workflow.steps:execute"},
	"workflow_step_execute":            {"workflow.steps:execute"},
	"workflow_unpublished":             {"workflow.steps:execute"},
}

// notBotEvents are event types a route may name but a manifest cannot
// subscribe a bot to, with why.
//   - app_rate_limited: "You'll automatically receive it" —
//     docs.slack.dev/reference/events/app_rate_limited (SLACK_FACTS §10 5).
//   - dnd_updated, star_added, star_removed: user-token events (dnd:read,
//     stars:read are user scopes for them).
//   - app_requested, app_uninstalled_team, invite_requested: admin events
//     (admin.* user scopes) — docs.slack.dev/reference/events/app_uninstalled_team.
//   - resources_*, scope_*, user_resource_*: workspace apps, retired.
var notBotEvents = map[string]string{
	"app_rate_limited":      "Slack sends it without a subscription",
	"dnd_updated":           "a user-token event (dnd:read as a user scope)",
	"star_added":            "a user-token event (stars:read as a user scope)",
	"star_removed":          "a user-token event (stars:read as a user scope)",
	"app_requested":         "an admin event (admin.apps:read, a user scope)",
	"app_uninstalled_team":  "an admin event (admin.apps:read, a user scope)",
	"invite_requested":      "an admin event (admin.invites:read, a user scope)",
	"resources_added":       "an event of retired workspace apps",
	"resources_removed":     "an event of retired workspace apps",
	"scope_denied":          "an event of retired workspace apps",
	"scope_granted":         "an event of retired workspace apps",
	"user_resource_denied":  "an event of retired workspace apps",
	"user_resource_granted": "an event of retired workspace apps",
	"user_resource_removed": "an event of retired workspace apps",
}

// The scope slash commands need: "commands" — docs.slack.dev/reference/scopes/commands.
const commandsScope = "commands"
