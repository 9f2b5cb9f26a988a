package console_test

import (
	"context"
	"fmt"
	"html"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// done records eventID on route and completes its row.
func done(t *testing.T, st store.Store, eventID, route string) store.Row {
	t.Helper()
	record(t, st, eventID, "x", route)
	r := rowByKey(t, st, eventID+":"+route)
	complete(t, st, r.ID)
	return rowByKey(t, st, r.Key)
}

// complete claims every due row and completes id (the others stay leased
// to the same token, which the next complete claims again).
func complete(t *testing.T, st store.Store, id int64) {
	t.Helper()
	claimed, err := st.Claim(context.Background(), "done", 100, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		if c.ID == id {
			if held, err := st.Complete(context.Background(), c.ID, "done", "", nil); err != nil || !held {
				t.Fatal(held, err)
			}
			return
		}
	}
	t.Fatalf("row %d was not claimed", id)
}

// formOn is the form of page whose action is action, as a browser would
// send it: its hidden fields (the token, the nonce, the filter).
func formOn(t *testing.T, s *site, page, action string) url.Values {
	t.Helper()
	_, body := s.get(page)
	m := regexp.MustCompile(`(?s)<form method="post" action="` + regexp.QuoteMeta(action) + `">(.*?)</form>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no form to %s on %s:\n%s", action, page, body)
	}
	v := url.Values{}
	for _, in := range regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)">`).FindAllStringSubmatch(m[1], -1) {
		v.Set(in[1], html.UnescapeString(in[2]))
	}
	if v.Get("nonce") == "" {
		t.Fatalf("the form to %s on %s has no nonce:\n%s", action, page, m[1])
	}
	return v
}

func TestConsoleFormActsOnce(t *testing.T) {
	engines(t, func(t *testing.T, st store.Store) {
		s := newSite(t, st)
		orig := done(t, st, "EvONCE", "greet")
		page, action := fmt.Sprintf("/rows/%d", orig.ID), fmt.Sprintf("/rows/%d/replay", orig.ID)

		t.Run("the same replay form posted twice replays once; the second POST says so", func(t *testing.T) {
			form := formOn(t, s, page, action)
			resp, _ := s.post(action, form)
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("first POST: %d", resp.StatusCode)
			}
			resp, body := s.post(action, form)
			if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "this form was already submitted") || !strings.Contains(body, "nothing more was changed") {
				t.Fatalf("second POST of the same form: %d\n%s", resp.StatusCode, body)
			}
			if _, err := st.GetByKey(context.Background(), "EvONCE:greet#r2"); err == nil {
				t.Fatal("the second POST made a second replay")
			}
			rowByKey(t, st, "EvONCE:greet#r1")
		})

		t.Run("a page rendered again can replay again", func(t *testing.T) {
			resp, _ := s.post(action, formOn(t, s, page, action))
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("POST of a fresh page's form: %d", resp.StatusCode)
			}
			rowByKey(t, st, "EvONCE:greet#r2")
		})

		t.Run("two tabs of one page: each form is its own", func(t *testing.T) {
			a, b := formOn(t, s, "/routes", "/routes/pause"), formOn(t, s, "/routes", "/routes/pause")
			if a.Get("nonce") == b.Get("nonce") {
				t.Fatal("two renderings gave the same nonce")
			}
			a.Set("route", "greet")
			if resp, _ := s.post("/routes/pause", a); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("pause: %d", resp.StatusCode)
			}
			if resp, _ := s.post("/routes/pause", a); resp.StatusCode != http.StatusConflict {
				t.Fatalf("the same pause form again: %d, want 409", resp.StatusCode)
			}
			resume := formOn(t, s, "/routes", "/routes/resume")
			resume.Set("route", "greet")
			if resp, _ := s.post("/routes/resume", resume); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("resume: %d", resp.StatusCode)
			}
		})

		t.Run("a nonce made for another form, or made up, is refused: 403, nothing changed", func(t *testing.T) {
			pause := formOn(t, s, "/routes", "/routes/pause")
			replay := formOn(t, s, page, action)
			for name, nonce := range map[string]string{
				"another form's":   pause.Get("nonce"),
				"made up":          strings.Repeat("a", 32) + ".1.00",
				"none":             "",
				"its MAC modified": replay.Get("nonce") + "0",
			} {
				f := url.Values{"csrf": {s.csrf}, "nonce": {nonce}}
				if resp, _ := s.post(action, f); resp.StatusCode != http.StatusForbidden {
					t.Errorf("%s nonce: %d, want 403", name, resp.StatusCode)
				}
			}
			if _, err := st.GetByKey(context.Background(), "EvONCE:greet#r3"); err == nil {
				t.Fatal("a refused POST replayed")
			}
		})
	})
}

func TestConsoleBulkActsOnItsPreview(t *testing.T) {
	engines(t, func(t *testing.T, st store.Store) {
		s := newSite(t, st)
		done(t, st, "EvA", "greet")
		record(t, st, "EvB", "x", "greet") // pending at the preview
		b := rowByKey(t, st, "EvB:greet")
		const query = "verb=replay&route=greet&status=done&since=1h"
		form := previewed(t, s, query)
		from, err := time.Parse(time.RFC3339Nano, form.Get("from"))
		if err != nil || form.Get("expect") != "1" || form.Get("until") == "" {
			t.Fatalf("the preview's form %v: want an absolute window and the count 1 (%v)", form, err)
		}
		if d := st.Now().Sub(from); d < 59*time.Minute || d > 61*time.Minute {
			t.Fatalf("from %s is not 1h before now (%s)", from, st.Now())
		}

		t.Run("a POST without the previewed window or count is refused", func(t *testing.T) {
			for _, drop := range []string{"from", "until", "expect"} {
				f := url.Values{}
				for k, v := range form {
					if k != drop && k != "nonce" {
						f[k] = v
					}
				}
				resp, body := s.post("/bulk", f)
				if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "nothing was changed") {
					t.Errorf("without %s: %d\n%s", drop, resp.StatusCode, body)
				}
			}
		})

		t.Run("rows made after the preview are not in its window", func(t *testing.T) {
			done(t, st, "EvLATE", "greet")
			f := maps.Clone(form)
			resp, _ := s.post("/bulk", f)
			if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "changed=1") {
				t.Fatalf("bulk replay of the previewed 1: %d %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			rowByKey(t, st, "EvA:greet#r1")
			if _, err := st.GetByKey(context.Background(), "EvLATE:greet#r1"); err == nil {
				t.Fatal("a row created after the preview was replayed")
			}
		})

		t.Run("a selection that changed since the preview is refused with both numbers", func(t *testing.T) {
			complete(t, st, b.ID) // EvB:greet is done now, in the window
			f := maps.Clone(form)
			f.Del("nonce")
			resp, body := s.post("/bulk", f)
			if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "counted 1 row,") || !strings.Contains(body, "selects 2 now") {
				t.Fatalf("bulk replay of a changed selection: %d\n%s", resp.StatusCode, body)
			}
			if _, err := st.GetByKey(context.Background(), "EvB:greet#r1"); err == nil {
				t.Fatal("a refused bulk replay replayed")
			}
			// Counted again: the window's originals only, the replay of the
			// last POST left out.
			again := previewed(t, s, query)
			if again.Get("expect") != "3" {
				t.Fatalf("a new preview counts %s, want 3 originals (EvA, EvB, EvLATE)", again.Get("expect"))
			}
		})

		t.Run("a bulk discard previewed at 1 and then facing 2 parked rows changes nothing", func(t *testing.T) {
			record(t, st, "EvP1", "x", "audit")
			park(t, st)
			f := previewed(t, s, "verb=discard&route=audit&status=parked")
			record(t, st, "EvP2", "x", "audit")
			park(t, st)
			resp, body := s.post("/bulk", f)
			if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "selects 2 now") {
				t.Fatalf("bulk discard: %d\n%s", resp.StatusCode, body)
			}
			if r := rowByKey(t, st, "EvP1:audit"); r.Status != store.StatusParked {
				t.Fatalf("EvP1:audit is %s", r.Status)
			}
		})
	})
}
