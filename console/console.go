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
// Every form also carries a one-use nonce (forms.go): a second POST of the
// same form (a double click, two tabs) changes nothing and says so (409);
// a page rendered again can act again. A bulk POST carries the window and
// the count its preview showed, and is refused (409) when the same filter
// selects another number of rows.
//
// Guessing is slowed (guard.go): an address that gave a wrong password
// several times is answered 429 with Retry-After before its password is
// checked, other addresses are not slowed; failed logins are logged,
// rate-limited, with the address.
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
	"fmt"
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
	// FormLifetime is how long a rendered form can be submitted (its
	// nonce is refused after it, and the page says to reload). It must
	// not be longer than receipts are kept ([retention] receipts): a
	// spent nonce is a receipt. Default 10m, the shortest retention.
	FormLifetime time.Duration
	// Now is the clock of the login guard and the nonces (default
	// time.Now).
	Now func() time.Time
}

// Console is the operator console's handler.
type Console struct {
	opts    Options
	log     *slog.Logger
	tmpl    map[string]*template.Template
	csrf    string // the token every POST must carry
	formKey []byte // the key of the forms' nonces
	guard   *guard
	mux     *http.ServeMux
	known   map[string]Route
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
	if opts.FormLifetime <= 0 {
		opts.FormLifetime = 10 * time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Console{opts: opts, log: opts.Logger.With("component", "console"), known: map[string]Route{},
		guard: &guard{by: map[string]*strikes{}}, formKey: make([]byte, 32)}
	if _, err := rand.Read(c.formKey); err != nil {
		return nil, err
	}
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
	if c.tmpl, err = parseTemplates(c.nonce); err != nil {
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
	key, now := clientKey(r), c.now()
	// An address that guessed wrong too often waits, and its password is
	// not even looked at meanwhile (see guard).
	if wait := c.guard.refused(key, now); wait > 0 {
		if log, suppressed := c.guard.refusedLog(key, now); log {
			c.log.Warn("console: login refused: too many failed logins from this address", "remote", remote(r), "client", key,
				"retry_after_s", retryAfter(wait), "suppressed", suppressed)
		}
		h.Set("Retry-After", retryAfter(wait))
		http.Error(w, "429 too many failed logins from this address: wait "+retryAfter(wait)+" s before trying again (the wait doubles with each wrong password)", http.StatusTooManyRequests)
		return
	}
	user, pass, ok := r.BasicAuth()
	if !ok || !c.authorized(user, pass) {
		if ok { // a browser's first request carries no password: not a guess
			failures, log, suppressed := c.guard.failed(key, now)
			if log {
				// Not the user name: a password typed into it would be logged.
				c.log.Warn("console: failed login", "remote", remote(r), "client", key,
					"failures", failures, "suppressed", suppressed)
			}
		}
		h.Set("WWW-Authenticate", `Basic realm="ackd console", charset="UTF-8"`)
		http.Error(w, "401 unauthorized: the console needs user ackd and ACKD_CONSOLE_PASSWORD", http.StatusUnauthorized)
		return
	}
	c.guard.succeeded(key)
	c.mux.ServeHTTP(w, r)
}

func (c *Console) now() time.Time { return c.opts.Now() }

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
		random, err := c.checkNonce(r.URL.Path, r.PostForm.Get("nonce"))
		switch {
		case errors.Is(err, errStaleForm):
			c.fail(w, r, http.StatusConflict, fmt.Sprintf("this form is older than %s, so it is no longer accepted: reload the page and try again; nothing was changed", c.opts.FormLifetime))
			return
		case err != nil:
			c.log.Warn("console: a POST without a valid form nonce refused", "remote", remote(r), "path", r.URL.Path)
			c.fail(w, r, http.StatusForbidden, "this form has no valid one-use token (a page from before a restart, or a form made elsewhere): reload the page and try again; nothing was changed")
			return
		}
		if !c.spend(w, r, random) {
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
