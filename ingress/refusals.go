package ingress

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Logging what anyone can send. An answer given before the request's
// signature was verified (405, a 401 on the headers or the signature, a
// 408/413/503 while its body was read, an unsigned ssl_check) is an answer
// to whoever connected, at whatever rate they like, with whatever headers:
// one log line per request would let them fill the disk. So those lines are
// short (every value that came from the request is validated or clipped)
// and rate limited: the first of each interval is logged as it happens, the
// rest are counted and summarized in one line when the interval ends. They
// are all counted in ackd_requests_total.

// DefaultRefusedLogEvery is the default for Options.RefusedLogEvery.
const DefaultRefusedLogEvery = 10 * time.Second

// refusedKeys bounds the distinct (status, reason) pairs a summary lists;
// the rest are counted under "other".
const refusedKeys = 4

// maxLoggedReason clips an unauthenticated answer's reason (which may quote
// the request, e.g. its method).
const maxLoggedReason = 120

// refusalLog is the rate limiter of unauthenticated answers' log lines.
type RefusalLog struct {
	log   *slog.Logger
	every time.Duration

	mu      sync.Mutex
	logged  bool             // this interval's first line was written
	count   int              // answers not logged one by one this interval
	byKey   map[string]int   // count by "status reason"
	order   []string         // keys in first-seen order
	other   int              // answers over refusedKeys distinct keys
	started time.Time        // when this interval's first answer came
	now     func() time.Time // monotonic
}

func NewRefusalLog(log *slog.Logger, every time.Duration) *RefusalLog {
	if every <= 0 {
		every = DefaultRefusedLogEvery
	}
	return &RefusalLog{log: log, every: every, byKey: map[string]int{}, now: time.Now}
}

// record logs the answer's line if it is the first of the interval, and
// counts it otherwise.
func (l *RefusalLog) record(level slog.Level, msg string, attrs []slog.Attr, status int, reason string) {
	l.mu.Lock()
	if !l.logged {
		l.logged = true
		l.started = l.now()
		l.mu.Unlock()
		l.log.LogAttrs(context.Background(), level, msg, attrs...)
		return
	}
	l.count++
	key := strconv.Itoa(status) + " " + reason
	switch _, ok := l.byKey[key]; {
	case ok || len(l.order) < refusedKeys:
		if !ok {
			l.order = append(l.order, key)
		}
		l.byKey[key]++
	default:
		l.other++
	}
	l.mu.Unlock()
}

// Record is record, for package oauth's install redirect (oauth.Refusals).
func (l *RefusalLog) Record(level slog.Level, msg string, attrs []slog.Attr, status int, reason string) {
	l.record(level, msg, attrs, status, reason)
}

// flush writes the summary of the interval that ended, if any answer went
// unlogged, and starts the next interval.
func (l *RefusalLog) Flush() {
	l.mu.Lock()
	count, order, byKey, other, started := l.count, l.order, l.byKey, l.other, l.started
	l.logged, l.count, l.order, l.byKey, l.other = false, 0, nil, map[string]int{}, 0
	l.mu.Unlock()
	if count == 0 {
		return
	}
	parts := make([]string, 0, len(order)+1)
	slices.SortStableFunc(order, func(a, b string) int { return byKey[b] - byKey[a] })
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%d× %s", byKey[k], k))
	}
	if other > 0 {
		parts = append(parts, fmt.Sprintf("%d× other", other))
	}
	l.log.LogAttrs(context.Background(), slog.LevelWarn, "unauthenticated requests answered without a line each",
		slog.Int("count", count), slog.String("since", started.UTC().Format(time.RFC3339)),
		slog.String("answers", strings.Join(parts, "; ")))
}

// clip shortens s to at most n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Slack's retry headers as Slack sends them: a retry number of 1 to 3 (a
// few digits allowed) and a short reason such as http_timeout.
const (
	maxRetryNumDigits = 3
	maxRetryReason    = 32
	maxInvalidShown   = 16
)

// retryAttrs appends Slack's retry headers, validated: retry_num (a small
// integer) and retry_reason (a short [a-z_] word) when they are what Slack
// sends; anything else is logged as retry_num_invalid / retry_reason_invalid,
// quoted, clipped to a few bytes and with its length, since the headers come
// from whoever sent the request.
func retryAttrs(h http.Header, attrs []slog.Attr) []slog.Attr {
	if v, ok := h["X-Slack-Retry-Num"]; ok && len(v) > 0 {
		if n, err := strconv.Atoi(v[0]); err == nil && n >= 0 && len(v[0]) <= maxRetryNumDigits && len(v) == 1 {
			attrs = append(attrs, slog.Int("retry_num", n))
		} else {
			attrs = append(attrs, slog.String("retry_num_invalid", invalidHeader(v)))
		}
	}
	if v, ok := h["X-Slack-Retry-Reason"]; ok && len(v) > 0 {
		if len(v) == 1 && retryReason(v[0]) {
			attrs = append(attrs, slog.String("retry_reason", v[0]))
		} else {
			attrs = append(attrs, slog.String("retry_reason_invalid", invalidHeader(v)))
		}
	}
	return attrs
}

func retryReason(s string) bool {
	if s == "" || len(s) > maxRetryReason {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}

// invalidHeader is a header's values fit for a log line: the first,
// quoted and clipped, with the total size.
func invalidHeader(v []string) string {
	size := 0
	for _, s := range v {
		size += len(s)
	}
	out := strconv.Quote(clip(v[0], maxInvalidShown))
	if len(v) > 1 {
		return fmt.Sprintf("%s (%d values, %d bytes)", out, len(v), size)
	}
	return fmt.Sprintf("%s (%d bytes)", out, size)
}

// Every is the interval of the log's summary lines (Flush).
func (l *RefusalLog) Every() time.Duration { return l.every }
