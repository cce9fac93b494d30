package pacer

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/stretchr/testify/assert"
)

// Replicas without a Store: n clients of 4 workers each, each its own
// Transport, share one 1,200/min quota for 10 minutes. Together they use
// most of it, few of their requests meet a 429, and the quota is shared
// fairly (Jain's index over their successes).
func TestUncoordinatedClientsShareAQuotaFairly(t *testing.T) {
	sizes := []int{10, 50}
	if raceEnabled {
		sizes = sizes[:1] // the race detector is slow; the mechanism is the same
	}
	for _, n := range sizes {
		synctest.Test(t, func(t *testing.T) {
			srv := apisim.New(apisim.Config{Style: apisim.StyleGitHub, Limit: 1200, Window: time.Minute, Latency: 50 * time.Millisecond})
			rt := srv.Transport()
			ctx, cancel := context.WithCancel(context.Background())
			start := time.Now()
			end := start.Add(10 * time.Minute)
			oks := make([]atomic.Int64, n)
			var refusals atomic.Int64
			var wg sync.WaitGroup
			for c := range n {
				client := &http.Client{Transport: NewTransport(rt)}
				for range 4 {
					wg.Go(func() {
						for time.Now().Before(end) {
							req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.test/v1/x", nil)
							resp, err := client.Do(req)
							if err != nil {
								refusals.Add(1)
								if ctx.Err() == nil {
									time.Sleep(time.Second)
								}
								continue
							}
							if resp.StatusCode == 200 {
								oks[c].Add(1)
							}
							resp.Body.Close()
						}
					})
				}
			}
			time.Sleep(end.Sub(start))
			cancel()
			wg.Wait()
			var sum, sq float64
			for i := range oks {
				x := float64(oks[i].Load())
				sum += x
				sq += x * x
			}
			st := srv.Stats()
			goodput, jain := float64(st.OK)/srv.Capacity(start, end), sum*sum/(float64(n)*sq)
			t.Logf("n=%d goodput %.3f 429s %d (%.2f%%) refusals %d jain %.2f", n, goodput, st.Throttled, 100*float64(st.Throttled)/float64(st.Requests), refusals.Load(), jain)
			assert.GreaterOrEqual(t, goodput, 0.80, "of the quota, together")
			assert.LessOrEqual(t, float64(st.Throttled), 0.02*float64(st.Requests), "429s")
			assert.GreaterOrEqual(t, jain, 0.90, "fairness (Jain's index)")
		})
	}
}
