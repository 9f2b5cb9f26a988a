package daemon

import (
	"fmt"
	"slices"
	"strings"
)

// slackEventTypes are the Events API event types Slack documents
// (https://docs.slack.dev/reference/events), the values of an event's
// "type" that a route's event names. A route naming something else is
// refused when it is a typo of one of these, and warned about otherwise
// (Slack may have added a type since this list was made).
var slackEventTypes = []string{
	"app_home_opened", "app_mention", "app_rate_limited", "app_requested", "app_uninstalled",
	"app_uninstalled_team", "assistant_thread_context_changed", "assistant_thread_started",
	"call_rejected", "channel_archive", "channel_created", "channel_deleted",
	"channel_history_changed", "channel_id_changed", "channel_left", "channel_rename",
	"channel_shared", "channel_unarchive", "channel_unshared", "dnd_updated", "dnd_updated_user",
	"email_domain_changed", "emoji_changed", "file_change", "file_comment_added",
	"file_comment_deleted", "file_comment_edited", "file_created", "file_deleted", "file_public",
	"file_shared", "file_unshared", "function_executed", "grid_migration_finished",
	"grid_migration_started", "group_archive", "group_close", "group_deleted",
	"group_history_changed", "group_left", "group_open", "group_rename", "group_unarchive",
	"im_close", "im_created", "im_history_changed", "im_open", "invite_requested", "link_shared",
	"member_joined_channel", "member_left_channel", "message", "message_metadata_deleted",
	"message_metadata_posted", "message_metadata_updated", "pin_added", "pin_removed",
	"reaction_added", "reaction_removed", "resources_added", "resources_removed", "scope_denied",
	"scope_granted", "shared_channel_invite_accepted", "shared_channel_invite_approved",
	"shared_channel_invite_declined", "shared_channel_invite_received",
	"shared_channel_invite_requested", "star_added", "star_removed", "subteam_created",
	"subteam_members_changed", "subteam_self_added", "subteam_self_removed", "subteam_updated",
	"team_access_granted", "team_access_revoked", "team_domain_change", "team_join", "team_rename",
	"tokens_revoked", "user_change", "user_huddle_changed", "user_profile_changed",
	"user_resource_denied", "user_resource_granted", "user_resource_removed",
	"user_status_changed", "workflow_deleted", "workflow_published", "workflow_step_deleted",
	"workflow_step_execute", "workflow_unpublished",
}

// checkEventType says what is wrong with a route's event type: refused
// (err) when it is a subscription name or a typo of a known type, a
// warning when it is merely unknown.
func checkEventType(ev string) (refuse, warn string) {
	if ev == "*" || slices.Contains(slackEventTypes, ev) {
		return "", ""
	}
	if strings.HasPrefix(ev, "message.") {
		return fmt.Sprintf("event %q is the name of a subscription in the Slack app settings; the events it delivers have type \"message\" (use event = \"message\", and channel or [filter] to narrow it)", ev), ""
	}
	if s := nearest(ev, slackEventTypes); s != "" {
		return fmt.Sprintf("event %q is not a Slack event type: did you mean %q?", ev, s), ""
	}
	return "", fmt.Sprintf("event %q is not a Slack event type ackd knows (https://docs.slack.dev/reference/events); if Slack added it, this warning is harmless, otherwise the route never matches", ev)
}

// checkChannel refuses a channel filter that is not a channel ID (channelID,
// backfill.go: C0123ABCD public, G… private, D… a DM; never a name).
func checkChannel(key, ch string) string {
	if channelID.MatchString(ch) {
		return ""
	}
	what := "is not a channel ID"
	if strings.HasPrefix(ch, "#") || strings.ToLower(ch) == ch {
		what = "is a channel name, not its ID"
	}
	return fmt.Sprintf("%s %q %s: Slack's events carry the channel's ID, such as C0123ABCD (in Slack: open the channel's details; the ID is at the bottom of About)", key, ch, what)
}
