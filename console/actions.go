package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ackd/ackd/store"
)

// rowAction is POST /rows/{id}/{retry|discard|replay}.
func (c *Console) rowAction(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		c.notFound(w, r, fmt.Sprintf("%q is not a row id", r.PathValue("id")))
		return
	}
	action := r.PathValue("action")
	ctx, cancel := ctxTimeout(r.Context())
	defer cancel()
	st := c.opts.Store
	row, err := st.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		c.notFound(w, r, fmt.Sprintf("no outbox row %d", id))
		return
	}
	if err != nil {
		c.fail(w, r, http.StatusServiceUnavailable, "the row cannot be read: "+err.Error())
		return
	}
	leased := row.Status == store.StatusPending && row.ClaimToken != "" && row.ClaimExpiresAt.After(st.Now())
	if !slices.Contains([]string{"retry", "discard", "replay"}, action) {
		c.notFound(w, r, fmt.Sprintf("%q is not an action on a row (retry, discard, replay)", action))
		return
	}
	if !slices.Contains(actions(row, leased), action) {
		why := fmt.Sprintf("row %d is %s", id, row.Status)
		if leased {
			why += fmt.Sprintf(", leased by a sweep until %s", when(row.ClaimExpiresAt))
		}
		c.fail(w, r, http.StatusConflict, fmt.Sprintf("%s does not apply: %s; nothing was changed", action, why))
		return
	}
	back := fmt.Sprintf("/rows/%d", id)
	log := c.log.With("remote", remote(r), "action", action, "row", id, "key", row.Key, "was", row.Status)
	switch action {
	case "retry":
		err = st.Requeue(ctx, id)
		if err == nil {
			log.Info("console: row retried", "now", store.StatusPending)
		}
	case "discard":
		err = st.Discard(ctx, id)
		if err == nil {
			log.Info("console: row discarded", "now", store.StatusDiscarded)
		}
	case "replay":
		var made []store.Replayed
		made, err = st.Replay(ctx, store.ReplayFilter{IDs: []int64{id}})
		if err == nil && len(made) == 1 {
			log.Info("console: row replayed", "new_row", made[0].ID, "new_key", made[0].Key)
			http.Redirect(w, r, fmt.Sprintf("/rows/%d?done=replay", made[0].ID), http.StatusSeeOther)
			return
		}
		if err == nil {
			err = fmt.Errorf("replay made %d rows, not one", len(made))
		}
	}
	var refused *store.ReplayRefused
	switch {
	case errors.Is(err, store.ErrNotFound):
		// It moved on between the read and the write (a sweep took it).
		c.fail(w, r, http.StatusConflict, fmt.Sprintf("%s does not apply any more: row %d changed meanwhile; nothing was changed", action, id))
		return
	case errors.As(err, &refused), errors.Is(err, store.ErrFilter):
		c.fail(w, r, http.StatusConflict, fmt.Sprintf("%s refused: %v; nothing was changed", action, err))
		return
	}
	if err != nil {
		log.Warn("console: action failed", "err", err)
		c.fail(w, r, http.StatusServiceUnavailable, action+" failed: "+err.Error())
		return
	}
	http.Redirect(w, r, back+"?done="+action, http.StatusSeeOther)
}

// routeAction is POST /routes/{pause|resume} with the form field route.
func (c *Console) routeAction(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	name := r.PostForm.Get("route")
	if action != "pause" && action != "resume" {
		c.notFound(w, r, fmt.Sprintf("%q is not an action on a route (pause, resume)", action))
		return
	}
	if strings.TrimSpace(name) == "" {
		c.fail(w, r, http.StatusBadRequest, "no route named: nothing was changed")
		return
	}
	ctx, cancel := ctxTimeout(r.Context())
	defer cancel()
	st := c.opts.Store
	var changed bool
	var err error
	if action == "pause" {
		if _, ok := c.known[name]; !ok {
			c.fail(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not a configured route: nothing was changed", name))
			return
		}
		changed, err = st.PauseRoute(ctx, name, "console "+remote(r))
	} else {
		changed, err = st.ResumeRoute(ctx, name)
	}
	if err != nil {
		c.log.Warn("console: action failed", "remote", remote(r), "action", action, "route", name, "err", err)
		c.fail(w, r, http.StatusServiceUnavailable, action+" failed: "+err.Error())
		return
	}
	done := action
	if changed {
		c.log.Info("console: route "+action+"d", "remote", remote(r), "action", action, "route", name)
	} else {
		done = "nochange"
	}
	http.Redirect(w, r, "/routes?done="+done, http.StatusSeeOther)
}

// bulk is a filter over rows for a bulk retry, discard or replay.
//
// Bulk actions act on what they previewed: the preview resolves since
// once (a relative "2h" becomes the time it names at the preview) and, for
// a replay, ends the window at the preview's time, so the POST's form
// carries an absolute window (From, Until) and the count the preview
// showed (Expect). The POST refuses a relative since, and the store makes
// the change only if the filter still selects that many rows
// (*store.SelectionChanged otherwise: 409, nothing changed).
type bulk struct {
	Verb, Route, Status, Since string
	From, Until                string // the absolute window (RFC 3339, UTC); From is since resolved
	Expect                     int64  // the preview's count (a POST)
	since, until               time.Time
}

// bulkData is GET /bulk.
type bulkData struct {
	Filter  bulk
	Routes  []string // for the form
	Error   string   // why the filter is refused
	Counted bool
	Total   int64
	Sample  []store.Row
	Changed int64 // after a POST (done=bulk)
	Done    bool
}

// parseBulk validates a bulk filter: empty values and unknown names are
// refused (nothing irreversible from an empty filter). A preview resolves
// since and fixes the window's end (now, for a replay); a POST (post) must
// carry the absolute window and the count its preview fixed.
func (c *Console) parseBulk(ctx context.Context, v url.Values, post bool) (bulk, error) {
	b := bulk{Verb: v.Get("verb"), Route: strings.TrimSpace(v.Get("route")), Status: v.Get("status"), Since: strings.TrimSpace(v.Get("since"))}
	def := map[string]string{"retry": store.StatusParked, "discard": store.StatusParked, "replay": store.StatusDone}
	allowed := map[string][]string{
		"retry":   {store.StatusParked, store.StatusDiscarded},
		"discard": {store.StatusParked},
		"replay":  {store.StatusDone, store.StatusParked, store.StatusDiscarded},
	}
	if _, ok := def[b.Verb]; !ok {
		return b, fmt.Errorf("choose what to do: retry, discard or replay (not %q)", b.Verb)
	}
	if b.Status == "" {
		b.Status = def[b.Verb]
	}
	if !slices.Contains(allowed[b.Verb], b.Status) {
		return b, fmt.Errorf("%s applies to rows that are %s, not %q", b.Verb, strings.Join(allowed[b.Verb], " or "), b.Status)
	}
	if b.Route == "" {
		return b, errors.New("name a route: a bulk change without one is refused")
	}
	if _, ok := c.known[b.Route]; !ok {
		routes, _, err := c.opts.Store.FilterNames(ctx, b.Status)
		if err != nil {
			return b, err
		}
		if !slices.Contains(routes, b.Route) {
			return b, fmt.Errorf("%q is neither a configured route nor the route of any %s row", b.Route, b.Status)
		}
	}
	now := c.opts.Store.Now()
	if post {
		// The window and the count the preview fixed, never resolved again.
		var err error
		if b.Since != "" {
			if b.since, err = parseTime(v.Get("from")); err != nil {
				return b, errors.New("this form carries no absolute start of its window (from): count again, then act")
			}
		}
		if b.Verb == "replay" {
			if b.until, err = parseTime(v.Get("until")); err != nil {
				return b, errors.New("this form carries no absolute end of its window (until): count again, then act")
			}
		}
		if b.Expect, err = strconv.ParseInt(v.Get("expect"), 10, 64); err != nil || b.Expect <= 0 {
			return b, errors.New("this form carries no previewed count (expect): count first, then act on what was counted")
		}
	} else if b.Since != "" {
		t, err := parseSince(b.Since, now)
		if err != nil {
			return b, err
		}
		b.since = t
		if b.Verb == "replay" {
			b.until = now
		}
	}
	if !b.since.IsZero() {
		b.From = b.since.UTC().Format(time.RFC3339Nano)
	}
	if !b.until.IsZero() {
		b.Until = b.until.UTC().Format(time.RFC3339Nano)
	}
	switch {
	case b.Verb == "replay" && b.since.IsZero():
		return b, errors.New("replay needs since: the rows created since then are replayed")
	case b.Verb == "replay" && !b.until.After(b.since):
		return b, fmt.Errorf("since %s is not before now: the window is empty", b.From)
	case b.Verb == "discard" && !b.since.IsZero():
		return b, errors.New("discard takes no since: it discards every parked row of the route")
	case b.Verb == "retry" && b.Status == store.StatusParked && !b.since.IsZero():
		return b, errors.New("since applies to a retry of discarded rows (those discarded since then, the undo of a bulk discard)")
	}
	return b, nil
}

// parseTime reads an absolute time a preview wrote (RFC 3339).
func parseTime(s string) (time.Time, error) {
	return time.Parse(time.RFC3339Nano, s)
}

func (b bulk) parked() store.ParkedFilter {
	return store.ParkedFilter{Route: b.Route, Discarded: b.Status == store.StatusDiscarded, DiscardedSince: b.since, Expect: b.Expect}
}

func (b bulk) replay() store.ReplayFilter {
	return store.ReplayFilter{Route: b.Route, Since: b.since, Until: b.until, Statuses: []string{b.Status}, Expect: b.Expect}
}

func (b bulk) query() url.Values {
	return url.Values{"verb": {b.Verb}, "route": {b.Route}, "status": {b.Status}, "since": {b.From}}
}

// parseSince reads an RFC 3339 time, a browser's datetime-local (UTC), a
// date (UTC midnight), or a duration back from now ("2h").
func parseSince(s string, now time.Time) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("since %q is neither a time (2026-12-02T10:00:00Z, 2026-12-02T10:00) nor a duration back from now (2h)", s)
}

const bulkSample = 10

// bulkPreview is GET /bulk: the form, and for a filter its count and a
// sample, with the button that makes the change.
func (c *Console) bulkPreview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	d := bulkData{Filter: bulk{Verb: q.Get("verb"), Route: q.Get("route"), Status: q.Get("status"), Since: q.Get("since")}}
	for _, rt := range c.opts.Routes {
		d.Routes = append(d.Routes, rt.Name)
	}
	if q.Get("done") == "bulk" {
		d.Done = true
		d.Changed, _ = strconv.ParseInt(q.Get("changed"), 10, 64)
	}
	if d.Filter.Verb == "" || d.Done {
		c.render(w, r, http.StatusOK, "bulk", "Bulk change", d, nil)
		return
	}
	b, err := c.parseBulk(ctx, q, false)
	d.Filter = b
	if err != nil {
		d.Error = err.Error()
		c.render(w, r, http.StatusBadRequest, "bulk", "Bulk change", d, nil)
		return
	}
	if b.Verb == "replay" {
		d.Sample, d.Total, err = c.opts.Store.ReplayMatching(ctx, b.replay(), bulkSample)
	} else {
		d.Sample, d.Total, err = c.opts.Store.Matching(ctx, b.parked(), bulkSample)
	}
	if err != nil {
		c.render(w, r, http.StatusOK, "bulk", "Bulk change", d, []string{"count: " + err.Error()})
		return
	}
	d.Counted = true
	c.render(w, r, http.StatusOK, "bulk", "Bulk "+b.Verb, d, nil)
}

// bulkAction is POST /bulk: the change the preview counted.
func (c *Console) bulkAction(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := ctxTimeout(r.Context())
	defer cancel()
	b, err := c.parseBulk(ctx, r.PostForm, true)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error()+"; nothing was changed")
		return
	}
	st := c.opts.Store
	var n int64
	switch b.Verb {
	case "retry":
		n, err = st.RequeueParked(ctx, b.parked())
	case "discard":
		n, err = st.DiscardParked(ctx, b.parked())
	case "replay":
		var made []store.Replayed
		made, err = st.Replay(ctx, b.replay())
		n = int64(len(made))
	}
	log := c.log.With("remote", remote(r), "action", "bulk "+b.Verb, "route", b.Route, "status", b.Status, "since", b.From,
		"until", b.Until, "previewed", b.Expect)
	var refused *store.ReplayRefused
	var changed *store.SelectionChanged
	if errors.As(err, &changed) {
		log.Info("console: bulk action refused: the selection changed since the preview", "selects", changed.Now)
		c.fail(w, r, http.StatusConflict, fmt.Sprintf("bulk %s refused: the preview counted %d row%s, the same filter selects %d now (rows changed meanwhile); nothing was changed. Count again to see what it selects now.",
			b.Verb, changed.Previewed, plural(changed.Previewed), changed.Now))
		return
	}
	if errors.As(err, &refused) || errors.Is(err, store.ErrFilter) {
		c.fail(w, r, http.StatusConflict, fmt.Sprintf("bulk %s refused: %v; nothing was changed", b.Verb, err))
		return
	}
	if err != nil {
		log.Warn("console: bulk action failed", "err", err)
		c.fail(w, r, http.StatusServiceUnavailable, "bulk "+b.Verb+" failed: "+err.Error())
		return
	}
	log.Info("console: bulk action", "rows", n)
	v := b.query()
	v.Set("done", "bulk")
	v.Set("changed", strconv.FormatInt(n, 10))
	http.Redirect(w, r, "/bulk?"+v.Encode(), http.StatusSeeOther)
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}
