package sweep

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// A POST that carries an Idempotency-Key is one Go's http.Transport deems
// replayable: when a reused keep-alive connection breaks after the request
// was written, it sends the request again on its own. The handler may have
// acted on the first copy, so that second delivery is a repeat the sweep
// never counted (one attempt, two deliveries, the same attempt number).
// The sweep is the only one that retries: a broken connection fails the
// attempt, and the handler sees the request once.
func TestForwardIsNotReplayedByTheTransport(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 2 {
			// The second request arrives on the first one's connection:
			// read it, then drop the connection without an answer.
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()

	reg := newEffects(t, nil, withSecret)
	job := func(key string) Job {
		p := eventPayload(Params{URL: srv.URL})
		return newJob(key, "forward", p)
	}
	succeed(t, reg, job("Ev1:fwd"))
	if _, err := perform(t, reg, job("Ev2:fwd")); err == nil {
		t.Fatal("the forward whose connection broke succeeded")
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("the handler got %d requests, want 2: the transport replayed the broken one itself", n)
	}
}
