package ingress

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// Outcomes of a Slack request, as logged and in ackd_ack_latency_seconds.
const (
	outcomeFirst     = "first"     // intent committed by this delivery
	outcomeDuplicate = "duplicate" // receipt already there: acked, nothing added
	outcomeIgnored   = "ignored"   // authenticated, deliberately not acted on
	outcomeChallenge = "challenge" // url_verification
	outcomeRejected  = "rejected"  // not authenticated, or not a Slack request
	outcomeFailed    = "failed"    // intent not durable within the ack budget: nothing was written
	// The intent's COMMIT got no answer and the database could not say in
	// time whether it committed (store.ErrCommitUnknown): it may be
	// recorded. Answered like a failure where Slack's retry is safe (it is
	// deduplicated), and with an honest text to a slash command.
	outcomeUnknown = "unknown"
)

// slackDeadline is how long Slack waits for an answer; answerMargin is
// kept of it for writing the answer. Whatever ackd still does for a
// request (asking what became of a COMMIT, an inline attempt's
// completion) ends by start + slackDeadline - answerMargin (answerBy).
const (
	slackDeadline = 3 * time.Second
	answerMargin  = 250 * time.Millisecond
)

// answerBy is when everything done for a request that started at start
// must be over.
func answerBy(start time.Time) time.Time { return start.Add(slackDeadline - answerMargin) }

// Headers on every answer to a Slack request: the outcome above, and for an
// ignored request why (unhandled_subtype, bot_message, unrouted, …).
const (
	HeaderOutcome = "X-Ackd-Outcome"
	HeaderReason  = "X-Ackd-Reason"
)

// request is one Slack request after the body was read and verified.
type request struct {
	r     *http.Request
	body  []byte
	start time.Time
}

// answer is what a Slack handler decided. The wrapper writes it, logs one
// line and records metrics: the one place errors become status codes.
type answer struct {
	status  int
	body    []byte
	ctype   string
	outcome string
	id      string // event_id or operation id
	typ     string // event / command / interaction type
	reason  string // why ignored or rejected
	routes  int
	err     error
	trigger bool   // a first delivery: sweep right after the answer is written
	install string // the installation the request is for (counted when unknown, with [oauth])
	// unauth: given before the signature was verified, so to anyone; its
	// log line is short and rate limited (refusals.go).
	unauth bool
}

func ephemeral(text string) []byte {
	b, _ := json.Marshal(map[string]string{"response_type": "ephemeral", "text": text})
	return b
}

// slackHandler wraps a Slack endpoint: POST only, Slack's signature headers
// and a fresh timestamp before the body is read, a bounded body read, the
// signature check before any parsing, then h under the ack budget.
func (s *Server) slackHandler(endpoint string, h func(ctx context.Context, req request) answer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var a answer
		switch {
		case r.Method != http.MethodPost:
			w.Header().Set("Allow", http.MethodPost)
			a = answer{status: http.StatusMethodNotAllowed, outcome: outcomeRejected, reason: "method " + clip(r.Method, 16), unauth: true}
		default:
			var release func()
			a, release = s.readAndVerify(w, r, endpoint, start, h)
			if release != nil {
				defer release()
			}
		}
		if a.status == 0 {
			a.status = http.StatusOK
		}
		if len(a.body) > 0 {
			w.Header().Set("Content-Type", a.ctype)
		}
		// What ackd decided, for `ackd send` and anyone debugging with curl;
		// Slack ignores it.
		w.Header().Set(HeaderOutcome, a.outcome)
		if a.outcome == outcomeIgnored && a.reason != "" {
			w.Header().Set(HeaderReason, a.reason)
		}
		if a.status >= 400 && len(a.body) == 0 {
			http.Error(w, http.StatusText(a.status), a.status)
		} else {
			// With the length known, the Flush below sends the whole answer
			// in one write instead of switching to chunked encoding.
			w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
			w.WriteHeader(a.status)
			_, _ = w.Write(a.body)
		}
		took := time.Since(start)
		if a.trigger {
			// Only after the answer: nothing that talks to a third party
			// may run before the ack (DESIGN §1.1).
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			s.Trigger()
		}
		s.logAnswer(endpoint, r, a, took)
		s.countUnknownTeam(a)
	})
}

// readAndVerify reads and verifies a Slack request and runs h on it. A
// request without Slack's signature headers, or with a timestamp outside the
// window, is refused before its body is read; the one exception is Slack's
// unsigned ssl_check of a command URL, for which a few bytes are read. The
// release function, when not nil, returns the body's bytes to the budget.
func (s *Server) readAndVerify(w http.ResponseWriter, r *http.Request, endpoint string, start time.Time,
	h func(ctx context.Context, req request) answer) (answer, func()) {
	a, body, release := s.readVerified(w, r, endpoint, start)
	if body == nil {
		a.unauth = true
		return a, release
	}
	ctx, cancel := context.WithDeadline(r.Context(), start.Add(s.cfg.Ack.Budget.Duration))
	defer cancel()
	return h(ctx, request{r: r, body: body, start: start}), release
}

// readVerified reads a request's body and verifies its signature. It
// returns the body (not nil) when the request is Slack's, or else the
// answer, given before anything could be authenticated.
func (s *Server) readVerified(w http.ResponseWriter, r *http.Request, endpoint string, start time.Time) (answer, []byte, func()) {
	if herr := s.verify.CheckHeaders(r.Header); herr != nil {
		reject := answer{status: http.StatusUnauthorized, outcome: outcomeRejected, reason: herr.Error()}
		if endpoint != "commands" || r.ContentLength > sslCheckMax {
			return s.refuse(w, reject), nil, nil
		}
		body, release, ra := s.readBody(w, r, sslCheckMax, start)
		if ra != nil {
			return *ra, nil, nil
		}
		release() // held no longer than this check
		if sslCheck(body) {
			return answer{outcome: outcomeIgnored, reason: "ssl_check", typ: "ssl_check"}, nil, nil
		}
		return reject, nil, nil
	}
	body, release, ra := s.readBody(w, r, MaxBody, start)
	if ra != nil {
		return *ra, nil, nil
	}
	if verr := s.verify.Verify(r.Header, body); verr != nil {
		if endpoint == "commands" && sslCheck(body) {
			// Slack's SSL check of a command URL: answered 200 whether or
			// not it is signed; nothing is read from it and nothing is
			// written.
			return answer{outcome: outcomeIgnored, reason: "ssl_check", typ: "ssl_check"}, nil, release
		}
		return answer{status: http.StatusUnauthorized, outcome: outcomeRejected, reason: verr.Error()}, nil, release
	}
	if body == nil {
		body = []byte{} // an empty body, verified
	}
	return answer{}, body, release
}

// logAttrs appends what both ingresses log of an answer: its id, type,
// reason and route count, each when set.
func (a answer) logAttrs(attrs []slog.Attr) []slog.Attr {
	if a.id != "" {
		attrs = append(attrs, slog.String("event_id", a.id))
	}
	if a.typ != "" {
		attrs = append(attrs, slog.String("type", a.typ))
	}
	if a.reason != "" {
		attrs = append(attrs, slog.String("reason", a.reason))
	}
	if a.routes > 0 {
		attrs = append(attrs, slog.Int("routes", a.routes))
	}
	return attrs
}

func (s *Server) logAnswer(endpoint string, r *http.Request, a answer, took time.Duration) {
	s.metrics.Requests.WithLabelValues(endpoint, strconv.Itoa(a.status)).Inc()
	s.metrics.AckLatency.WithLabelValues(endpoint, a.outcome).Observe(took.Seconds())
	attrs := []slog.Attr{
		slog.String("endpoint", endpoint), slog.Int("status", a.status), slog.String("outcome", a.outcome),
		slog.Float64("latency_ms", float64(took.Microseconds())/1000),
		slog.String("client", clientAddr(s.cfg.Proxies(), r)),
	}
	if a.unauth {
		// Nothing of the request but validated or clipped values.
		a.reason = clip(a.reason, maxLoggedReason)
	}
	attrs = a.logAttrs(attrs)
	// Slack's retry headers are logged for the operator; they never decide.
	attrs = retryAttrs(r.Header, attrs)
	if a.err != nil {
		attrs = append(attrs, slog.String("err", a.err.Error()))
	}
	level, msg := slog.LevelInfo, "ack"
	switch a.outcome {
	case outcomeRejected:
		level, msg = slog.LevelWarn, "rejected"
	case outcomeFailed:
		level, msg = slog.LevelError, "intent not recorded: nothing was written"
	case outcomeUnknown:
		level, msg = slog.LevelError, "intent outcome unknown: its commit got no answer and the database could not say in time whether it was recorded"
	}
	if a.unauth {
		s.refused.record(level, msg, attrs, a.status, a.reason)
		return
	}
	s.log.LogAttrs(context.Background(), level, msg, attrs...)
}

// sslCheck reports whether a form body is Slack's SSL check of a slash
// command URL (ssl_check=1, with a token and no command).
func sslCheck(body []byte) bool {
	form, err := url.ParseQuery(string(body))
	return err == nil && form.Get("ssl_check") == "1" && form.Get("command") == ""
}

// record commits an intent and maps the result onto the answer: the one
// place a store error becomes "recorded", "not recorded" or "unknown". A
// COMMIT without an answer is asked about until Slack's deadline nears
// (answerBy), past the ack budget.
func (s *Server) record(ctx context.Context, req request, a answer, in store.Intent) answer {
	return s.recordWith(ctx, req, a, in, s.store.RecordIntent)
}

// recordWith is record with the commit of the intent given (RecordIntent,
// or a RecordInstallEnd that carries more with it).
func (s *Server) recordWith(ctx context.Context, req request, a answer, in store.Intent,
	commit func(context.Context, store.Intent) (bool, error)) answer {
	a.routes = len(in.Rows)
	in.ResolveBy = answerBy(req.start)
	in, err := s.sealRequest(in)
	if err != nil {
		a.status, a.outcome, a.err = http.StatusInternalServerError, outcomeFailed, err
		a.reason = "the request's execution token could not be sealed"
		return a
	}
	first, err := commit(ctx, in)
	switch {
	case errors.Is(err, store.ErrCommitUnknown):
		a.status, a.outcome, a.err = http.StatusInternalServerError, outcomeUnknown, err
		a.reason = "commit outcome unknown at Slack's deadline; a retry is deduplicated if it was recorded"
	case err != nil:
		a.status, a.outcome, a.err = http.StatusInternalServerError, outcomeFailed, err
		switch {
		case store.IsReadOnly(err):
			a.reason = "database is read-only"
		case errors.Is(err, store.ErrUnavailable):
			a.reason = "database cannot write (disk full or I/O error)"
			if s.store.Engine() == "postgres" {
				a.reason = "database unreachable within the ack budget"
			}
		case store.IsBusy(err) || errors.Is(err, context.DeadlineExceeded):
			a.reason = "database busy past the ack budget"
		case errors.Is(err, context.Canceled):
			a.reason = "client went away before the intent was recorded"
		default:
			a.reason = "database error"
		}
	case first:
		a.outcome = outcomeFirst
		a.trigger = s.cfg.Sweep.Immediate
	default:
		a.outcome = outcomeDuplicate
	}
	return a
}

func (s *Server) handleEvents(ctx context.Context, req request) answer {
	env, err := ParseEnvelope(req.body)
	if err != nil {
		return answer{status: http.StatusBadRequest, outcome: outcomeRejected, reason: err.Error()}
	}
	a := answer{typ: env.Type, id: env.EventID}
	switch env.Type {
	case "url_verification":
		b, _ := json.Marshal(map[string]string{"challenge": env.Challenge})
		a.outcome, a.body, a.ctype = outcomeChallenge, b, "application/json"
		return a
	case "event_callback":
		a.typ = env.Inner.Type
		if t := env.Inner.Type; t != "app_uninstalled" && t != "tokens_revoked" {
			a.install = env.Install // counted when unknown; these end an installation
		}
		end, ends := s.installEnd(env, req.body)
		rows, ignored, err := eventRows(&s.cfg, env)
		if err != nil {
			a.status, a.outcome, a.err = http.StatusInternalServerError, outcomeFailed, err
			return a
		}
		if ignored != "" && !ends {
			a.outcome, a.reason = outcomeIgnored, ignored
			s.marks.saw(env.Inner)
			return a
		}
		in := withRequest(store.Intent{EventID: env.EventID, EventType: env.Inner.Type, Rows: rows}, sweep.ContentTypeJSON, req.body)
		if ends {
			// Through the receipt like every event: its change commits with
			// it, and Slack's retry of it is a duplicate.
			return s.recordEnd(ctx, req, a, in, end)
		}
		a = s.record(ctx, req, a, in)
		if a.outcome != outcomeFailed && a.outcome != outcomeUnknown {
			// Recorded (now or before): catch-up's mark may move past it;
			// not past one that may not be recorded.
			s.marks.saw(env.Inner)
		}
		return a
	case "app_rate_limited":
		// Slack is dropping our events for a minute: worth an operator's look,
		// but the answer is still 200.
		a.outcome, a.reason = outcomeIgnored, "Slack reports this app is over its event rate limit; events in that minute are lost"
		if c := s.metrics.AppRateLimited; c != nil {
			c.Inc()
		}
		var rl struct {
			TeamID            string `json:"team_id"`
			MinuteRateLimited int64  `json:"minute_rate_limited"`
		}
		_ = json.Unmarshal(req.body, &rl) // best effort: the envelope parsed already
		s.log.Warn("app_rate_limited: Slack dropped this app's events for a minute", "team_id", rl.TeamID,
			"minute_rate_limited", time.Unix(rl.MinuteRateLimited, 0).UTC().Format(time.RFC3339))
		return a
	default:
		a.outcome, a.reason = outcomeIgnored, "unhandled envelope type"
		return a
	}
}

func (s *Server) handleCommand(ctx context.Context, req request) answer {
	cmd, err := ParseCommand(req.body)
	if err != nil {
		return answer{status: http.StatusBadRequest, outcome: outcomeRejected, reason: err.Error()}
	}
	if cmd.Form.Get("ssl_check") != "" {
		return answer{outcome: outcomeIgnored, reason: "ssl_check", typ: "ssl_check"}
	}
	opID := cmd.OperationID(req.body)
	a := answer{id: opID, typ: cmd.Command}
	routes := s.cfg.CommandRoutes(cmd.Command, cmd.Form.Get("channel_id"))
	if len(routes) == 0 {
		a.outcome, a.reason = outcomeIgnored, ignoredUnrouted
		a.body, a.ctype = ephemeral(s.cfg.Commands.UnhandledText), "application/json"
		return a
	}
	ent, install := cmd.Install()
	facts := s.cfg.InstallFacts(cmd.Facts(opID), ent, install)
	a.install = install
	in := store.Intent{EventID: opID, EventType: "command " + cmd.Command}
	ackText := ""
	for _, r := range routes {
		row, err := r.RowFor(opID+":"+r.Name, sweep.SourceCommand, facts)
		if err != nil {
			a.outcome, a.err = outcomeFailed, err
			break
		}
		in.Rows = append(in.Rows, row)
		if ackText == "" {
			ackText = r.RenderAckText(facts, s.log)
		}
	}
	if a.err == nil {
		a = s.record(ctx, req, a, withRequest(in, sweep.ContentTypeForm, req.body))
	}
	switch a.outcome {
	case outcomeFailed:
		// Slack never retries a slash command, so a 500 gains nothing: tell
		// the user instead, and leave the error for the operator.
		a.status = http.StatusOK
		a.body, a.ctype = ephemeral(s.cfg.Commands.FailedText), "application/json"
		return a
	case outcomeUnknown:
		// "Try again" could run it twice, "done" could be false: say so.
		a.status = http.StatusOK
		a.body, a.ctype = ephemeral(s.cfg.Commands.UnknownText), "application/json"
		return a
	}
	if ackText != "" {
		a.body, a.ctype = ephemeral(ackText), "application/json"
	}
	return a
}

func (s *Server) handleInteraction(ctx context.Context, req request) answer {
	ix, err := ParseInteraction(req.body)
	if err != nil {
		return answer{status: http.StatusBadRequest, outcome: outcomeRejected, reason: err.Error()}
	}
	opID := ix.OperationID()
	if ix.Type == sweep.TypeBlockSuggestion {
		// Every keystroke in an external select is its own request, and
		// Slack never retries one: the same text typed again must get its
		// options again, not a duplicate's empty answer.
		opID += ":" + sweep.NewToken()[:12]
	}
	_, ixInstall := ix.Install()
	a := answer{id: opID, typ: ix.Type, install: ixInstall}
	routes, actions := interactionRoutes(&s.cfg, ix)
	if len(routes) == 0 {
		a.outcome, a.reason = outcomeIgnored, ignoredUnrouted
		return a
	}
	in := store.Intent{EventID: opID, EventType: "interaction " + ix.Type}
	inline := -1 // the row whose first attempt runs before the answer
	for i, r := range routes {
		ent, install := ix.Install()
		row, err := r.RowFor(opID+":"+r.Name, sweep.SourceInteraction, s.cfg.InstallFacts(ix.Facts(opID, actions[i]), ent, install))
		if err != nil {
			a.status, a.outcome, a.err = http.StatusInternalServerError, outcomeFailed, err
			return a
		}
		in.Rows = append(in.Rows, row)
		if inline < 0 && r.Effect == "redeliver" && sweep.Synchronous(ix.Type) {
			inline = len(in.Rows) - 1
		}
	}
	in = withRequest(in, sweep.ContentTypeForm, req.body)
	if inline >= 0 && s.inlinePaused(ctx, routes[inline].Name) { // pauses.go
		inline = -1
	}
	if inline < 0 {
		// An empty 200 closes a view_submission's modal; a 500 shows the
		// user that the action failed.
		return s.record(ctx, req, a, in)
	}
	// The app's answer must be ackd's answer, so its first attempt runs
	// now. The row is written already claimed by this attempt, so no sweep
	// can take it first; the lease ends just after the ack budget, so if
	// the app is late the sweep retries it soon, and never while this
	// attempt can still be running.
	//
	// The intent's other rows are written under the same lease: nothing
	// else of this request may reach a third party before the answer
	// (DESIGN §1.1). They become claimable when it ends, after the answer.
	token := sweep.NewToken()
	// The lease outlasts everything done for this request (answerBy: the
	// attempt, its completion, asking what became of a COMMIT), so no
	// other replica re-delivers the row while this one may still record it.
	by := answerBy(req.start)
	lease := max(time.Until(by), s.cfg.Ack.Budget.Duration) + inlineLeaseMargin
	for i := range in.Rows {
		in.Rows[i].ClaimToken, in.Rows[i].ClaimLease = token, lease
	}
	key := in.Rows[inline].Key
	leaseEnd := s.store.Now().Round(0).Add(lease) // never later than the expiry the store stamps
	a = s.record(ctx, req, a, in)
	if a.outcome != outcomeFirst {
		return a
	}
	return s.performInline(ctx, a, key, token, leaseEnd, by, in.Request)
}

// inlineLeaseMargin is how long an inline attempt's lease lasts past the
// moment its result must be recorded (answerBy): clocks and the stamp's
// own delay, before a sweep may take the row.
const inlineLeaseMargin = time.Second

// performInline runs the first attempt of a synchronous interaction's
// redeliver row, bounded by what is left of the ack budget, and answers
// Slack with the app's body. Anything but a 2xx in time answers 200 empty
// and leaves the row to the sweep. The attempt's result is recorded by
// writeBy, before its lease (leaseEnd) ends.
func (s *Server) performInline(ctx context.Context, a answer, key, token string, leaseEnd, writeBy time.Time, req *store.Request) answer {
	row, err := s.store.GetByKey(ctx, key)
	if err != nil || row.ClaimToken != token {
		a.reason = "inline attempt could not read its row; left to the sweep"
		a.err = err
		return a
	}
	row.Request = req
	deadline, _ := ctx.Deadline()
	left := time.Until(deadline)
	if left < minInlineAttempt {
		a.reason = "no time left in the ack budget for the inline attempt; left to the sweep"
		return a
	}
	// The server's context, not the request's: a client that goes away
	// must not leave the attempt half recorded (the budget still bounds
	// the attempt, and writeBy its completion).
	att, err := s.sweeper.PerformClaimed(s.ctx, token, leaseEnd, row, left, writeBy)
	switch {
	case errors.Is(err, store.ErrCommitUnknown):
		a.err = err
		a.reason = "inline attempt's result may not be recorded (its commit got no answer); if not, the row is retried after its lease"
	case err != nil:
		a.err = err
		a.reason = "inline attempt not recorded; the row is retried after its lease"
	case att.Outcome != sweep.OutcomeDone:
		a.reason = "inline attempt " + att.Outcome + "; the app's answer did not come in time, the row is left to the sweep"
	case len(att.Reply) > 0:
		a.body, a.ctype = att.Reply, cmp.Or(att.ReplyType, "application/json")
		a.reason = "answered with the app's reply"
	}
	return a
}

// minInlineAttempt: with less of the budget left, an inline attempt is not
// started (the app could not answer in time anyway).
const minInlineAttempt = 50 * time.Millisecond
