package slacksim

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestCeilingHandler(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	h := ceilingHandler("s3cret", func() time.Time { return now })
	body := []byte(`{"type":"event_callback","event_id":"Ev1"}`)

	do := func(method string, body []byte, sign func(*http.Request)) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "/slack/events", bytes.NewReader(body))
		if sign != nil {
			sign(req)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	signedAt := func(secret string, ts time.Time, signed []byte) func(*http.Request) {
		return func(r *http.Request) { SignRequest(r, secret, ts, signed) }
	}

	tests := []struct {
		name   string
		method string
		body   []byte
		sign   func(*http.Request)
		want   int
	}{
		{"a signed request gets 200", http.MethodPost, body, signedAt("s3cret", now, body), http.StatusOK},
		{"a bad signature gets 401", http.MethodPost, body, signedAt("wrong", now, body), http.StatusUnauthorized},
		{"a signature over another body gets 401", http.MethodPost, body, signedAt("s3cret", now, []byte("{}")), http.StatusUnauthorized},
		{"a stale timestamp gets 401", http.MethodPost, body, signedAt("s3cret", now.Add(-6*time.Minute), body), http.StatusUnauthorized},
		{"a future timestamp gets 401", http.MethodPost, body, signedAt("s3cret", now.Add(6*time.Minute), body), http.StatusUnauthorized},
		{"an unsigned request gets 401", http.MethodPost, body, nil, http.StatusUnauthorized},
		{"GET gets 405", http.MethodGet, nil, nil, http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := do(tt.method, tt.body, tt.sign)
			if w.Code != tt.want {
				t.Fatalf("status = %d, want %d", w.Code, tt.want)
			}
			if w.Body.Len() != 0 {
				t.Errorf("body = %q, want empty", w.Body)
			}
		})
	}

	t.Run("a body over 1 MiB gets 413", func(t *testing.T) {
		big := []byte(strings.Repeat("x", maxBody+1))
		if w := do(http.MethodPost, big, signedAt("s3cret", now, big)); w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("status = %d, want 413", w.Code)
		}
	})
}
