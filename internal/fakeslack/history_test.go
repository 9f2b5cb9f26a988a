package fakeslack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/slack-go/slack"
)

func TestHistory(t *testing.T) {
	ctx := context.Background()
	newClient := func(t *testing.T) (*Server, *slack.Client) {
		fs := New(t, "xoxb-test")
		return fs, slack.New("xoxb-test", slack.OptionAPIURL(fs.URL()))
	}

	t.Run("history pages newest first with cursor and has_more", func(t *testing.T) {
		fs, api := newClient(t)
		var want []string
		for i := range 7 {
			want = append(want, fs.AddMessage("C1", Message{User: "U1", Text: fmt.Sprint("m", i)}))
		}
		var got []string
		cursor, pages := "", 0
		for {
			resp, err := api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: "C1", Limit: 3, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, m := range resp.Messages {
				got = append(got, m.Timestamp)
			}
			if !resp.HasMore {
				break
			}
			cursor = resp.ResponseMetaData.NextCursor
		}
		if pages != 3 || len(got) != 7 {
			t.Fatalf("pages %d, messages %d", pages, len(got))
		}
		for i := range got {
			if got[i] != want[len(want)-1-i] {
				t.Fatalf("order: got %v want reverse of %v", got, want)
			}
		}
	})

	t.Run("oldest and latest bound the page, inclusive includes the ends", func(t *testing.T) {
		fs, api := newClient(t)
		a := fs.AddMessage("C1", Message{User: "U1", Text: "a"})
		b := fs.AddMessage("C1", Message{User: "U1", Text: "b"})
		c := fs.AddMessage("C1", Message{User: "U1", Text: "c"})
		resp, err := api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: "C1", Oldest: a, Latest: c})
		if err != nil || len(resp.Messages) != 1 || resp.Messages[0].Timestamp != b {
			t.Fatalf("exclusive: %+v %v", resp, err)
		}
		resp, err = api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: "C1", Oldest: a, Latest: c, Inclusive: true})
		if err != nil || len(resp.Messages) != 3 {
			t.Fatalf("inclusive: %d messages, %v", len(resp.Messages), err)
		}
	})

	t.Run("posted messages keep metadata, shown only with include_all_metadata", func(t *testing.T) {
		fs, api := newClient(t)
		_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("hi", false),
			slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "ackd_effect", EventPayload: map[string]any{"idempotency_key": "k1"}}))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: "C1"})
		if err != nil || len(resp.Messages) != 1 || resp.Messages[0].Metadata.EventType != "" {
			t.Fatalf("without include_all_metadata: %+v %v", resp, err)
		}
		resp, err = api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: "C1", IncludeAllMetadata: true})
		if err != nil || len(resp.Messages) != 1 {
			t.Fatalf("%+v %v", resp, err)
		}
		m := resp.Messages[0]
		if m.Timestamp != ts || m.Metadata.EventType != "ackd_effect" || m.Metadata.EventPayload["idempotency_key"] != "k1" {
			t.Fatalf("message %+v", m.Msg)
		}
		if n := len(fs.MessagesWithKey("C1", "k1")); n != 1 {
			t.Fatalf("MessagesWithKey = %d", n)
		}
	})

	t.Run("replies live in their thread and update the parent", func(t *testing.T) {
		fs, api := newClient(t)
		parent := fs.AddMessage("C1", Message{User: "U1", Text: "parent"})
		r1 := fs.AddMessage("C1", Message{User: "U2", Text: "r1", ThreadTS: parent})
		_, r2, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("r2", false), slack.MsgOptionTS(parent))
		if err != nil {
			t.Fatal(err)
		}
		hist, err := api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: "C1"})
		if err != nil || len(hist.Messages) != 1 {
			t.Fatalf("history holds only the parent: %+v %v", hist, err)
		}
		p := hist.Messages[0]
		if p.ReplyCount != 2 || p.LatestReply != r2 || p.ThreadTimestamp != parent {
			t.Fatalf("parent %+v", p.Msg)
		}
		msgs, more, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: parent})
		if err != nil || more || len(msgs) != 3 || msgs[0].Timestamp != parent || msgs[1].Timestamp != r1 || msgs[2].Timestamp != r2 {
			t.Fatalf("replies %d more=%v err=%v", len(msgs), more, err)
		}
		msgs, _, _, err = api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: parent, Oldest: r1})
		if err != nil || len(msgs) != 2 || msgs[1].Timestamp != r2 {
			t.Fatalf("replies after r1: %d %v", len(msgs), err)
		}
	})

	t.Run("a post stored and then answered 500 is in the history", func(t *testing.T) {
		fs, api := newClient(t)
		fs.Script("chat.postMessage", Response{Store: true, Status: 500, Body: "oops"})
		if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("x", false)); err == nil {
			t.Fatal("want an error")
		}
		if n := len(fs.Messages("C1")); n != 1 {
			t.Fatalf("stored %d", n)
		}
	})

	t.Run("a post stored and then dropped is in the history", func(t *testing.T) {
		fs, api := newClient(t)
		fs.Script("chat.postMessage", Response{Store: true, Drop: true})
		if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("x", false)); err == nil {
			t.Fatal("want an error")
		}
		if n := len(fs.Messages("C1")); n != 1 {
			t.Fatalf("stored %d", n)
		}
	})

	t.Run("a post stored and then hanging is in the history", func(t *testing.T) {
		fs, api := newClient(t)
		fs.Script("chat.postMessage", Response{Store: true, Delay: time.Hour})
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if _, _, err := api.PostMessageContext(cctx, "C1", slack.MsgOptionText("x", false)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		if n := len(fs.Messages("C1")); n != 1 {
			t.Fatalf("stored %d", n)
		}
	})

	t.Run("a scripted 500 without Store posts nothing", func(t *testing.T) {
		fs, api := newClient(t)
		fs.Script("chat.postMessage", Status(500))
		_, _, _ = api.PostMessageContext(ctx, "C1", slack.MsgOptionText("x", false))
		if n := len(fs.Messages("C1")); n != 0 {
			t.Fatalf("stored %d", n)
		}
	})

	t.Run("auth.test names the bot", func(t *testing.T) {
		fs, api := newClient(t)
		fs.SetBot("UBOT", "BBOT", "T1")
		r, err := api.AuthTestContext(ctx)
		if err != nil || r.UserID != "UBOT" || r.BotID != "BBOT" || r.TeamID != "T1" {
			t.Fatalf("%+v %v", r, err)
		}
	})

	t.Run("each token posts as its own bot; auth.test answers per token", func(t *testing.T) {
		fs, api := newClient(t)
		fs.AddToken("xoxb-other", Bot{UserID: "U2", BotID: "B2", AppID: "A2", TeamID: "T1"})
		other := slack.New("xoxb-other", slack.OptionAPIURL(fs.URL()))
		if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("mine", false)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := other.PostMessageContext(ctx, "C1", slack.MsgOptionText("theirs", false)); err != nil {
			t.Fatal(err)
		}
		resp, err := api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: "C1"})
		if err != nil || len(resp.Messages) != 2 {
			t.Fatalf("%+v %v", resp, err)
		}
		theirs, mine := resp.Messages[0], resp.Messages[1]
		if mine.BotID != "B0FAKEBOT" || mine.User != "U0FAKEBOT" || mine.BotProfile == nil || mine.BotProfile.AppID != "A0FAKEAPP" ||
			theirs.BotID != "B2" || theirs.User != "U2" || theirs.BotProfile == nil || theirs.BotProfile.AppID != "A2" {
			t.Fatalf("mine %+v, theirs %+v", mine.Msg, theirs.Msg)
		}
		r, err := other.AuthTestContext(ctx)
		if err != nil || r.UserID != "U2" || r.BotID != "B2" || r.TeamID != "T1" {
			t.Fatalf("auth.test with the other token: %+v %v", r, err)
		}
		if r, err := api.AuthTestContext(ctx); err != nil || r.BotID != "B0FAKEBOT" {
			t.Fatalf("auth.test with the fake's token: %+v %v", r, err)
		}
	})

	t.Run("a clock offset moves the ts it mints and its Date header", func(t *testing.T) {
		for _, off := range []time.Duration{-10 * time.Minute, 10 * time.Minute} {
			fs, api := newClient(t)
			fs.SetClockOffset(off)
			before := time.Now()
			_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("x", false))
			after := time.Now()
			if err != nil {
				t.Fatal(err)
			}
			us, _ := tsMicros(ts)
			got := time.UnixMicro(us)
			if got.Before(before.Add(off)) || got.After(after.Add(off)) {
				t.Fatalf("offset %s: ts %s (%s), want between %s and %s", off, ts, got, before.Add(off), after.Add(off))
			}
			at, err := api.AuthTestContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			date, err := http.ParseTime(at.Header.Get("Date"))
			if err != nil || date.Before(before.Add(off).Add(-time.Second)) || date.After(time.Now().Add(off)) {
				t.Fatalf("offset %s: Date %q (%v)", off, at.Header.Get("Date"), err)
			}
		}
	})
}
