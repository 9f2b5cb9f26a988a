package slacksim

import (
	"errors"
	"io"
	"net/http"
	"time"
)

// maxBody is the receiver's request body cap, the same 1 MiB a real
// receiver applies before it looks at the signature.
const maxBody = 1 << 20

// CeilingHandler returns a handler that does what a real receiver does
// before touching a database, and nothing more: POST only (405), body read
// with a 1 MiB cap (413), signature and 5-minute timestamp window verified
// with a constant-time compare (401). A verified request gets 200 with an
// empty body. Benchmarking it gives the no-database ceiling of the ack path.
func CeilingHandler(secret string) http.Handler {
	return ceilingHandler(secret, time.Now)
}

func ceilingHandler(secret string, now func() time.Time) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				w.WriteHeader(http.StatusRequestEntityTooLarge)
				return
			}
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if err := verify(r.Header, body, secret, now()); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}
