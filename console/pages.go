package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ackd/ackd/internal/buildinfo"
	"github.com/ackd/ackd/internal/redact"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// pages are the templates, each rendered inside layout.html.
var pages = []string{"overview", "search", "row", "routes", "bulk", "error"}

func parseTemplates(nonce func(action string) string) (map[string]*template.Template, error) {
	fns := template.FuncMap{
		"nonce": nonce,
		"age":   age,
		"when":  when,
		"route": routeOf,
		"text":  textOf,
		"short": func(s string, n int) string { return short(redact.Text(s), n) },
	}
	out := map[string]*template.Template{}
	for _, p := range pages {
		t, err := template.New("layout.html").Funcs(fns).ParseFS(templateFS, "templates/layout.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("console templates: %w", err)
		}
		out[p] = t
	}
	return out, nil
}

// page is what every page's layout reads.
type page struct {
	Title   string
	CSRF    string
	Version string
	Flash   string
	// OwnSearch: the page has its search box in its content (the
	// overview, the search page); the header then has none (one box).
	OwnSearch bool
	// Problems are the parts of the page that could not be read (the
	// page shows the rest).
	Problems []string
	Data     any
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any, problems []string) {
	var b bytes.Buffer
	p := page{Title: title, CSRF: c.csrf, Version: buildinfo.Read().Version, Flash: flash(r), Problems: problems, Data: data,
		OwnSearch: name == "overview" || name == "search"}
	if err := c.tmpl[name].Execute(&b, p); err != nil {
		c.log.Error("console: page does not render", "page", name, "err", err)
		http.Error(w, "500: the page does not render (see the log)", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// fail renders the error page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "error", http.StatusText(status), msg, nil)
}

func (c *Console) notFound(w http.ResponseWriter, r *http.Request, msg string) {
	c.fail(w, r, http.StatusNotFound, msg)
}

// flashes are the messages an action's 303 names (?done=…): fixed texts,
// so that a link cannot put words on the page.
var flashes = map[string]string{
	"retry":    "Retried: the row is pending again, due now.",
	"discard":  "Discarded: no sweep performs it again (retry undoes it while the row exists).",
	"replay":   "Replayed: a new pending row was made; side effects repeat.",
	"pause":    "Paused: its rows are recorded and acked, and stay pending until resumed.",
	"resume":   "Resumed: its rows are due as they were.",
	"nochange": "Nothing changed: the row or route was already in that state.",
	"bulk":     "Done: see the count below.",
}

func flash(r *http.Request) string { return flashes[r.URL.Query().Get("done")] }

// overviewData is GET /.
type overviewData struct {
	Queue         store.Queue
	Statuses      []statusCount
	Routes        []routeCounts
	Paused        []store.RoutePause
	Instances     []instance
	Marks         []store.Mark
	Installations []store.Installation
	Now           time.Time
}

type statusCount struct {
	Status string
	Rows   int64
}

type routeCounts struct {
	Route                      string
	Pending, Parked, Discarded int64
	Paused                     bool
}

type instance struct {
	store.Instance
	Says string
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	st := c.opts.Store
	var d overviewData
	var problems []string
	note := func(what string, err error) bool {
		if err != nil {
			problems = append(problems, what+": "+err.Error())
			return false
		}
		return true
	}
	d.Now = st.Now()
	var err error
	// The queue's counts, as /metrics reads them (each status from its
	// index); `ackd status` adds receipts and due rows, which read more.
	if d.Queue, err = c.opts.Queue(ctx); note("counts", err) {
		d.Statuses = []statusCount{{store.StatusPending, d.Queue.Pending}, {store.StatusDone, d.Queue.Done},
			{store.StatusParked, d.Queue.Parked}, {store.StatusDiscarded, d.Queue.Discarded}}
	}
	counts, err := st.RouteCounts(ctx)
	note("counts by route", err)
	pending, err := st.PendingByRoute(ctx)
	note("pending rows by route", err)
	d.Paused, err = st.PausedRoutes(ctx)
	note("paused routes", err)
	d.Routes = byRoute(counts, pending, d.Paused)
	if ins, err := st.Instances(ctx, c.opts.InstanceFresh); note("daemons", err) {
		for _, in := range ins {
			says := ""
			if c.opts.Describe != nil {
				says = c.opts.Describe(in, d.Now)
			}
			d.Instances = append(d.Instances, instance{Instance: in, Says: says})
		}
	}
	d.Marks, err = st.Marks(ctx)
	note("catch-up marks", err)
	d.Installations, err = st.ListInstallations(ctx)
	note("installations", err)
	for i := range d.Installations {
		d.Installations[i].Secret = nil // never on a page, not even sealed
	}
	c.render(w, r, http.StatusOK, "overview", "Overview", d, problems)
}

// byRoute folds RouteCounts and the pending rows of each route into one
// line per route, and marks the paused ones.
func byRoute(counts []store.RouteCount, pending map[string]int64, paused []store.RoutePause) []routeCounts {
	var out []routeCounts
	line := func(route string) *routeCounts {
		i := slices.IndexFunc(out, func(x routeCounts) bool { return x.Route == route })
		if i < 0 {
			out = append(out, routeCounts{Route: route})
			i = len(out) - 1
		}
		return &out[i]
	}
	for _, rc := range counts {
		switch rc.Status {
		case store.StatusParked:
			line(rc.Route).Parked = rc.Rows
		case store.StatusDiscarded:
			line(rc.Route).Discarded = rc.Rows
		}
	}
	for route, n := range pending {
		line(route).Pending = n
	}
	for _, p := range paused {
		line(p.Route).Paused = true
	}
	slices.SortFunc(out, func(a, b routeCounts) int { return strings.Compare(a.Route, b.Route) })
	return out
}

// searchData is GET /search.
type searchData struct {
	Q      string
	Rows   []store.Row
	Limit  int
	Window int // store.SearchWindow
}

const searchLimit = 100

func (c *Console) search(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	d := searchData{Q: q, Limit: searchLimit, Window: store.SearchWindow}
	if q == "" {
		c.render(w, r, http.StatusOK, "search", "Search", d, nil)
		return
	}
	rows, err := c.opts.Store.Search(r.Context(), q, searchLimit)
	if err != nil {
		c.log.Warn("console: search failed", "err", err)
		c.render(w, r, http.StatusOK, "search", "Search", d, []string{"search: " + err.Error()})
		return
	}
	d.Rows = rows
	c.render(w, r, http.StatusOK, "search", "Search: "+q, d, nil)
}

// rowData is GET /rows/{id}.
type rowData struct {
	Row      store.Row
	Route    string
	Receipt  *store.Receipt
	EventID  string
	Payload  string // pretty, redacted
	Request  string // the stored request, pretty, redacted; "" when none
	Attempts []store.Attempt
	Leased   bool // under a live lease now
	Actions  []string
	// Paused is the pause its route is under, for a pending row no sweep
	// holds: it waits for the resume, not for a sweep.
	Paused *store.RoutePause
	// Effect is what a row marked outcome-unknown may have done, said
	// for its status and last attempt (see mayHaveTakenEffect).
	Effect string
}

func (c *Console) row(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		c.notFound(w, r, fmt.Sprintf("%q is not a row id", r.PathValue("id")))
		return
	}
	ctx := r.Context()
	st := c.opts.Store
	row, err := st.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		c.notFound(w, r, fmt.Sprintf("no outbox row %d (done and discarded rows are pruned after [retention] done)", id))
		return
	}
	if err != nil {
		c.fail(w, r, http.StatusServiceUnavailable, "the row cannot be read: "+err.Error())
		return
	}
	var problems []string
	now := st.Now()
	d := rowData{Row: row, Route: routeOf(row)}
	var p sweep.Payload
	_ = json.Unmarshal([]byte(row.Payload), &p)
	d.EventID = p.Facts.EventID
	if d.EventID == "" {
		d.EventID = row.RequestID
	}
	if d.EventID != "" {
		rc, err := st.Receipt(ctx, d.EventID)
		switch {
		case err == nil:
			d.Receipt = &rc
		case !errors.Is(err, store.ErrNotFound):
			problems = append(problems, "receipt: "+err.Error())
		}
	}
	d.Payload = pretty([]byte(row.Payload))
	if row.Request != nil {
		if raw := sweep.RequestRaw(p.Source, row.Request); raw != nil {
			d.Request = pretty(raw)
		} else {
			d.Request = "(not shown: it does not parse)"
		}
	}
	if d.Attempts, err = st.Attempts(ctx, id); err != nil {
		problems = append(problems, "attempts: "+err.Error())
	}
	// An older ackd stored these texts unmasked: what looks like a token
	// is masked here too.
	redact.Texts(&d.Row.LastError, &d.Row.Result, &d.Row.Note)
	for i := range d.Attempts {
		redact.Texts(&d.Attempts[i].Error, &d.Attempts[i].Status, &d.Attempts[i].Result)
	}
	d.Leased = row.Status == store.StatusPending && row.ClaimToken != "" && row.ClaimExpiresAt.After(now)
	d.Actions = actions(row, d.Leased)
	if row.Status == store.StatusPending && !d.Leased && d.Route != "" {
		paused, err := st.PausedRoutes(ctx)
		if err != nil {
			problems = append(problems, "paused routes: "+err.Error())
		}
		for i := range paused {
			if paused[i].Route == d.Route {
				d.Paused = &paused[i]
			}
		}
	}
	d.Effect = mayHaveTakenEffect(row, d.Attempts)
	c.render(w, r, http.StatusOK, "row", fmt.Sprintf("Row %d", id), d, problems)
}

// mayHaveTakenEffect words Row.OutcomeUnknown for the row page: an
// earlier attempt got no definite answer and may have taken effect (a post
// is then confirmed before it is made again). When the row is over and its
// last attempt had a definite answer (a parked 404, a done post), that
// answer is what decided the row: the page says so instead of reading as
// if the row's outcome were unknown. "" when the flag is not set.
func mayHaveTakenEffect(r store.Row, attempts []store.Attempt) string {
	if !r.OutcomeUnknown {
		return ""
	}
	first := when(r.FirstClaimedAt)
	if n := len(attempts); n > 0 && r.Status != store.StatusPending {
		last := attempts[n-1]
		if last.Outcome != store.AttemptUnknown && last.Status != "" {
			return fmt.Sprintf("%s after a definite answer (%s) to attempt %d; an earlier attempt got none and may have taken effect (first claimed %s)",
				r.Status, last.Status, last.N, first)
		}
	}
	return "an earlier attempt got no definite answer and may have taken effect (first claimed " + first + "); a post is confirmed before it is made again"
}

// actions are the verbs that apply to a row: retry a parked or discarded
// one, discard a parked one or a pending one no live lease holds, replay
// one that is over (done, parked, discarded).
func actions(r store.Row, leased bool) []string {
	var out []string
	switch r.Status {
	case store.StatusParked:
		out = []string{"retry", "discard", "replay"}
	case store.StatusDiscarded:
		out = []string{"retry", "replay"}
	case store.StatusDone:
		out = []string{"replay"}
	case store.StatusPending:
		if !leased {
			out = []string{"discard"}
		}
	}
	return out
}

// routesData is GET /routes.
type routesData struct {
	Routes []routeLine
}

type routeLine struct {
	Route
	Configured bool
	Paused     *store.RoutePause
}

func (c *Console) routes(w http.ResponseWriter, r *http.Request) {
	var problems []string
	paused, err := c.opts.Store.PausedRoutes(r.Context())
	if err != nil {
		problems = append(problems, "paused routes: "+err.Error())
	}
	var d routesData
	for _, rt := range c.opts.Routes {
		line := routeLine{Route: rt, Configured: true}
		for i := range paused {
			if paused[i].Route == rt.Name {
				line.Paused = &paused[i]
			}
		}
		d.Routes = append(d.Routes, line)
	}
	for i := range paused {
		if _, ok := c.known[paused[i].Route]; !ok {
			// Paused, and no longer in the configuration: it can be resumed.
			d.Routes = append(d.Routes, routeLine{Route: Route{Name: paused[i].Route}, Paused: &paused[i]})
		}
	}
	c.render(w, r, http.StatusOK, "routes", "Routes", d, problems)
}

// pretty is a JSON document indented and redacted like `ackd outbox show`.
func pretty(doc []byte) string {
	if out, ok := redact.Pretty(doc); ok {
		return string(out)
	}
	return string(doc)
}

// routeOf is the route that made a row (its payload's "route").
func routeOf(r store.Row) string {
	var p struct {
		Route string `json:"route"`
	}
	_ = json.Unmarshal([]byte(r.Payload), &p)
	return p.Route
}

// textOf is the Slack message text a row was made from, if any.
func textOf(r store.Row) string {
	var p struct {
		Facts struct {
			Text string `json:"text"`
		} `json:"facts"`
	}
	_ = json.Unmarshal([]byte(r.Payload), &p)
	return short(p.Facts.Text, 120)
}

func short(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// when is a time in UTC, or "-".
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

// ctxTimeout bounds a console write (the store has its own bounds too).
func ctxTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 30*time.Second)
}

// age is a duration rounded for a reader: "54 s", "12 min", "3 h 5 min",
// "2 d 4 h".
func age(d time.Duration) string {
	switch {
	case d < time.Second:
		return "under 1 s"
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Round(time.Second)/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Round(time.Minute)/time.Minute))
	case d < 48*time.Hour:
		d = d.Round(time.Minute)
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%d h", h)
		}
		return fmt.Sprintf("%d h %d min", h, m)
	default:
		d = d.Round(time.Hour)
		days, h := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour)
		if h == 0 {
			return fmt.Sprintf("%d d", days)
		}
		return fmt.Sprintf("%d d %d h", days, h)
	}
}
