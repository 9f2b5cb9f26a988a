package config

import (
	"fmt"
	"slices"
	"strings"
)

// slackEventTypes are the Events API event types ackd knows, the values of
// an event's "type" that a route's event names: every inner event type of
// slack-go's slackevents.EventsAPIInnerEventMapping (the version in go.mod;
// TestEventTypesCoverSlackGo fails when a newer slack-go knows one this list
// lacks), and those Slack documents (https://docs.slack.dev/reference/events)
// that slack-go has no struct for. Slack adds types (app_context_changed
// arrived in 2026): a route naming one this list lacks is a warning, never a
// refusal, so a config keeps starting whatever this list says.
var slackEventTypes = []string{
	"agent_session_stopped", "agent_session_title_changed", "app_context_changed", "app_deleted",
	"app_home_opened", "app_installed", "app_mention", "app_rate_limited", "app_requested",
	"app_uninstalled", "app_uninstalled_team", "assistant_thread_context_changed",
	"assistant_thread_started", "call_rejected", "channel_archive", "channel_created",
	"channel_deleted", "channel_history_changed", "channel_id_changed", "channel_left",
	"channel_rename", "channel_shared", "channel_unarchive", "channel_unshared", "commands_changed",
	"dnd_updated", "dnd_updated_user", "email_domain_changed", "emoji_changed",
	"entity_details_requested", "file_change", "file_comment_added", "file_comment_deleted",
	"file_comment_edited", "file_created", "file_deleted", "file_public", "file_shared",
	"file_unshared", "function_executed", "grid_migration_finished", "grid_migration_started",
	"group_archive", "group_close", "group_deleted", "group_history_changed", "group_left",
	"group_open", "group_rename", "group_unarchive", "im_close", "im_created", "im_history_changed",
	"im_open", "invite_requested", "link_shared", "member_joined_channel", "member_left_channel",
	"message", "message_metadata_deleted", "message_metadata_posted", "message_metadata_updated",
	"pin_added", "pin_removed", "reaction_added", "reaction_removed", "resources_added",
	"resources_removed", "scope_denied", "scope_granted", "shared_channel_invite_accepted",
	"shared_channel_invite_approved", "shared_channel_invite_declined",
	"shared_channel_invite_received", "shared_channel_invite_requested", "star_added",
	"star_removed", "subteam_created", "subteam_members_changed", "subteam_self_added",
	"subteam_self_removed", "subteam_updated", "team_access_granted", "team_access_revoked",
	"team_domain_change", "team_join", "team_rename", "tokens_revoked", "user_change",
	"user_connection", "user_connection_status_requested", "user_huddle_changed",
	"user_profile_changed", "user_resource_denied", "user_resource_granted",
	"user_resource_removed", "user_status_changed", "workflow_deleted", "workflow_published",
	"workflow_step_deleted", "workflow_step_execute", "workflow_unpublished",
}

// checkEventType says what may be wrong with a route's event type: a
// subscription name, a near miss of a known type (with the suggestion), or a
// type ackd does not know. It is only ever a warning: 0.1.0 accepted any
// type, and Slack adds new ones; the route then simply never matches.
func checkEventType(ev string) (warn string) {
	if ev == "*" || slices.Contains(slackEventTypes, ev) {
		return ""
	}
	if strings.HasPrefix(ev, "message.") {
		return fmt.Sprintf("event %q is the name of a subscription in the Slack app settings; the events it delivers have type \"message\", so this route never matches (use event = \"message\", and channel or [filter] to narrow it)", ev)
	}
	if s := nearest(ev, slackEventTypes); s != "" {
		return fmt.Sprintf("event %q is not a Slack event type ackd knows: did you mean %q? If Slack added %q since (https://docs.slack.dev/reference/events), this warning is harmless; otherwise the route never matches", ev, s, ev)
	}
	return fmt.Sprintf("event %q is not a Slack event type ackd knows (https://docs.slack.dev/reference/events); if Slack added it, this warning is harmless, otherwise the route never matches", ev)
}

// checkChannel says what is wrong with a channel filter that is not a
// channel ID (channelID, backfill.go: C0123ABCD public, G… private, D… a
// DM; never a name). A warning, not a refusal: 0.1.0 accepted any string,
// and such a filter only ever matched nothing.
func checkChannel(key, ch string) string {
	if channelID.MatchString(ch) {
		return ""
	}
	what := "is not a channel ID"
	if strings.HasPrefix(ch, "#") || strings.ToLower(ch) == ch {
		what = "is a channel name, not its ID"
	}
	return fmt.Sprintf("%s %q %s, so it matches no event: Slack's events carry the channel's ID, such as C0123ABCD (in Slack: open the channel's details; the ID is at the bottom of About)", key, ch, what)
}

// channelless are event types that name no conversation of their own (no
// event.channel string, no assistant thread, no reaction's item): a
// workspace, a user, an installation or a workflow step. An effect that
// acts in the event's conversation has nowhere to act on them.
var channelless = []string{
	"app_installed", "app_requested", "app_uninstalled", "app_uninstalled_team", "channel_created",
	"channel_rename", "dnd_updated", "dnd_updated_user", "email_domain_changed", "emoji_changed",
	"function_executed", "grid_migration_finished", "grid_migration_started", "group_rename",
	"invite_requested", "resources_added", "resources_removed", "scope_denied", "scope_granted",
	"subteam_created", "subteam_members_changed", "subteam_self_added", "subteam_self_removed",
	"subteam_updated", "team_access_granted", "team_access_revoked", "team_domain_change",
	"team_join", "team_rename", "tokens_revoked", "user_change", "user_huddle_changed",
	"user_profile_changed", "user_status_changed",
}

// channelMissing says when the route's effect acts in the event's
// conversation (a post or update without to_channel, a reaction) and its
// event type carries none: its rows would park with no_channel.
func (r *Route) channelMissing() string {
	needs := (r.Effect == "post" || r.Effect == "update") && r.ToChannel == "" || r.Effect == "react"
	if !needs {
		return ""
	}
	for _, ev := range append([]string{r.Event}, r.Events...) {
		if slices.Contains(channelless, ev) {
			fix := "set to_channel to the channel to post in"
			if r.Effect == "react" {
				fix = "react to message-like events (message, app_mention, reaction_added) instead"
			}
			return fmt.Sprintf("effect %q acts in the event's conversation, and a %s event names none: its rows would park with no_channel; %s", r.Effect, ev, fix)
		}
	}
	return ""
}
