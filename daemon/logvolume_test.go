package daemon_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/ackd/ackd/daemon"
)

// At info, an event costs one log line of its own (the ack): journald drops
// lines beyond its rate limit, and at 2,000 events/s three lines per event
// were over it. Rows done and immediate sweeps are logged at debug.
func TestInfoLogVolume(t *testing.T) {
	t.Run("one info line per acked event; rows done and immediate sweeps only at debug", func(t *testing.T) {
		logs := &logBuffer{}
		// The ticker (which logs its sweeps at info) stays out of the way.
		cfg := configFor(t, "[sweep]\ninterval = \"1h\"\n\n[[route]]\nname = \"dry\"\nevent = \"message\"\neffect = \"log\"\n")
		s := startServer(t, cfg, daemon.Options{
			Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		})
		const n = 20
		for i := range n {
			r := s.postEvent(eventBody(fmt.Sprintf("EvLog%d", i), message("C1", fmt.Sprintf("1700000000.%06d", i), "hi")))
			if r.Status != http.StatusOK {
				t.Fatalf("event %d: status %d", i, r.Status)
			}
		}
		waitFor(t, "every row done", 10*time.Second, func() bool {
			return s.count(`SELECT count(*) FROM outbox WHERE status = 'done'`) == n
		})
		byMsg := map[string]int{}
		for _, m := range logs.Lines() {
			if m["level"] == "INFO" {
				byMsg[fmt.Sprint(m["msg"])]++
			}
		}
		if byMsg["ack"] != n {
			t.Errorf("%d ack lines for %d events; lines by message: %v", byMsg["ack"], n, byMsg)
		}
		// The dry-run route's own line is its effect, one per row.
		if byMsg["effect done"] != 0 || byMsg["sweep"] != 0 {
			t.Errorf("per-row or per-sweep lines at info: %v", byMsg)
		}
	})
}
