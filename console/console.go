// Package console is ackd's operator console: server-rendered pages
// (html/template, assets embedded, no script) that read the database
// through the store contract and act on it through the same calls as the
// CLI verbs. It is an http.Handler; the daemon serves it on a listener of
// its own ([console] listen) and nowhere else.
//
//	GET  /                     overview: counts, paused routes, daemons, catch-up marks, installations, search
//	GET  /search?q=            rows an id, key, event/trigger id, channel, ts or route names
//	GET  /rows/{id}            one row: receipt, row, payload (redacted), attempts, actions
//	POST /rows/{id}/{action}   retry | discard | replay
//	GET  /routes               configured routes, paused or not
//	POST /routes/{action}      pause | resume (form field route)
//	GET  /bulk                 a filter's count and sample (retry, discard, replay), then
//	POST /bulk                 the change
//
// Access is HTTP Basic auth (user ackd, one password). Every POST carries
// a token the pages embed (an HMAC, under a key made at start, of the
// identity and password): a page of another site cannot read it, so it
// cannot make the operator's browser change anything; without it the
// answer is 403 and nothing changes. Every change is logged with who made
// it (the remote address) and what it changed.
//
// Limits: one user; the token lives as long as the process (a restart
// makes open pages stale: their next POST is refused, a reload fixes it).
package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/ackd/ackd/store"
)

// User is the Basic auth user name.
const User = "ackd"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Route is one configured route, as /routes lists it.
type Route struct {
	Name   string
	Match  string // what it matches ("event app_mention", "command /deploy", …)
	Effect string
}

// Options are a Console's dependencies.
type Options struct {
	Store    store.Store
	Routes   []Route
	Password string // required
	Logger   *slog.Logger
	// Describe says what an instance reported of itself (Socket Mode
	// connections, version); nil: nothing.
	Describe func(in store.Instance, now time.Time) string
	// Queue, when set, reads the queue's counts for the overview instead
	// of the store (the daemon shares one read per second among the
	// console's pages).
	Queue func(ctx context.Context) (store.Queue, error)
	// InstanceFresh is how recent a heartbeat must be for an instance to
	// be listed (default 1m).
	InstanceFresh time.Duration
}

// Console is the operator console's handler.
type Console struct {
	opts  Options
	log   *slog.Logger
	tmpl  map[string]*template.Template
	csrf  string // the token every POST must carry
	mux   *http.ServeMux
	known map[string]Route
}

// New makes the console. It refuses an empty password.
func New(opts Options) (*Console, error) {
	if opts.Password == "" {
		return nil, errors.New("console: no password (ACKD_CONSOLE_PASSWORD)")
	}
	if opts.Store == nil {
		return nil, errors.New("console: no store")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Queue == nil {
		opts.Queue = opts.Store.Queue
	}
	if opts.InstanceFresh <= 0 {
		opts.InstanceFresh = time.Minute
	}
	c := &Console{opts: opts, log: opts.Logger.With("component", "console"), known: map[string]Route{}}
	for _, r := range opts.Routes {
		c.known[r.Name] = r
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("ackd console csrf\x00" + User + "\x00" + opts.Password))
	c.csrf = hex.EncodeToString(m.Sum(nil))
	var err error
	if c.tmpl, err = parseTemplates(); err != nil {
		return nil, err
	}
	static, _ := fs.Sub(staticFS, "static")
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", c.overview)
	mux.HandleFunc("GET /search", c.search)
	mux.HandleFunc("GET /rows/{id}", c.row)
	mux.HandleFunc("POST /rows/{id}/{action}", c.post(c.rowAction))
	mux.HandleFunc("GET /routes", c.routes)
	mux.HandleFunc("POST /routes/{action}", c.post(c.routeAction))
	mux.HandleFunc("GET /bulk", c.bulkPreview)
	mux.HandleFunc("POST /bulk", c.post(c.bulkAction))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { c.notFound(w, r, "no such page") })
	c.mux = mux
	return c, nil
}

// ServeHTTP checks the password, sets the headers every page has, and
// serves the page.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// No script at all, nothing from elsewhere, never in a frame, forms
	// only to the console itself.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	user, pass, ok := r.BasicAuth()
	if !ok || !c.authorized(user, pass) {
		h.Set("WWW-Authenticate", `Basic realm="ackd console", charset="UTF-8"`)
		http.Error(w, "401 unauthorized: the console needs user ackd and ACKD_CONSOLE_PASSWORD", http.StatusUnauthorized)
		return
	}
	c.mux.ServeHTTP(w, r)
}

// authorized compares both in constant time (each compare's time depends
// only on the lengths).
func (c *Console) authorized(user, pass string) bool {
	u := subtle.ConstantTimeCompare([]byte(user), []byte(User))
	p := subtle.ConstantTimeCompare([]byte(pass), []byte(c.opts.Password))
	return u&p == 1
}

// post wraps a POST handler: the form must carry the page's token, or the
// answer is 403 and the handler never runs.
func (c *Console) post(fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			c.fail(w, r, http.StatusBadRequest, "the form does not parse: "+err.Error())
			return
		}
		if t := r.PostForm.Get("csrf"); subtle.ConstantTimeCompare([]byte(t), []byte(c.csrf)) != 1 {
			c.log.Warn("console: a POST without a valid CSRF token refused", "remote", remote(r), "path", r.URL.Path)
			c.fail(w, r, http.StatusForbidden, "this form has no valid token (a page from before a restart, or another site): reload the page and try again; nothing was changed")
			return
		}
		fn(w, r)
	}
}

// remote is who acted: the peer's address, and what a proxy in front
// says the client was (as given: informative, not trusted).
func remote(r *http.Request) string {
	if f := r.Header.Get("X-Forwarded-For"); f != "" {
		return r.RemoteAddr + " (for " + f + ")"
	}
	return r.RemoteAddr
}
