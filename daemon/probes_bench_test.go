package daemon_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/daemon"
)

// BenchmarkAckUnderProbes measures the ack of a signed event (one op) with
// and without 1,000 probes a second (half /healthz, half /metrics) on the
// Slack listener, and reports the p50 and p99 ack latency seen by the
// client. Run:
//
//	go test -run '^$' -bench AckUnderProbes -benchtime 2000x ./daemon/
func BenchmarkAckUnderProbes(b *testing.B) {
	for _, rate := range []int{0, 1000} {
		b.Run(fmt.Sprintf("probes=%d/s", rate), func(b *testing.B) {
			s := startServer(b, configFor(b, "[sweep]\ninterval = \"1h\"\nimmediate = false\n"), daemon.Options{})
			stop := make(chan struct{})
			var wg sync.WaitGroup
			const workers = 10
			for w := range workers {
				if rate == 0 {
					break
				}
				path := "/healthz"
				if w%2 == 1 {
					path = "/metrics"
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					t := time.NewTicker(time.Second * workers / time.Duration(rate))
					defer t.Stop()
					for {
						select {
						case <-stop:
							return
						case <-t.C:
							if resp, err := http.Get(s.URL + path); err == nil {
								_, _ = io.Copy(io.Discard, resp.Body) // so the connection is reused
								resp.Body.Close()
							}
						}
					}
				}()
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				if r := s.postEvent(eventBody(fmt.Sprintf("EvBench%d", i), mention("C1", "1.1", "hi"))); r.Status != http.StatusOK {
					b.Fatalf("status %d", r.Status)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
		})
	}
}
