package pacer

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/stretchr/testify/assert"
)

// Two pacer clients without a store share one quota: each sees the other as
// an unseen client (drift). They must not back each other off into a
// collapse, nor overrun the quota.
func TestTwoAdaptivesSharingAQuotaWithoutAStore(t *testing.T) {
	for _, latency := range []time.Duration{0, 20 * time.Millisecond} {
		t.Run(latency.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := apisim.New(apisim.Config{Style: apisim.StyleGitHub, Limit: 600, Window: time.Minute, Latency: latency})
				rt := srv.Transport()
				ctx, cancel := context.WithCancel(context.Background())
				start := time.Now()
				end := start.Add(10 * time.Minute)
				var wg sync.WaitGroup
				var lims []*Adaptive
				for range 2 {
					a := NewAdaptive(AdaptiveConfig{Key: "sim", SafetyFactor: 0.9})
					lims = append(lims, a)
					for range 16 {
						wg.Go(func() {
							for time.Now().Before(end) {
								p, err := a.Acquire(ctx, 0)
								if err != nil {
									return
								}
								req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1/thing", nil)
								resp, err := rt.RoundTrip(req)
								if err != nil {
									p.Done(nil)
									continue
								}
								p.Done(resp)
								resp.Body.Close()
							}
						})
					}
				}
				time.Sleep(end.Sub(start))
				cancel()
				wg.Wait()

				stats := srv.Stats()
				goodput := float64(stats.OK) / srv.Capacity(start, end)
				late := 0
				events := srv.Events()
				firstResponse := events[0].At.Add(latency)
				var firstLate time.Duration
				for _, e := range events {
					if e.Status == http.StatusTooManyRequests && !e.At.Before(firstResponse) {
						if late == 0 {
							firstLate = e.At.Sub(start)
						}
						late++
					}
				}
				t.Logf("ok=%d 429=%d late=%d (first at %v) goodput=%.3f", stats.OK, stats.Throttled, late, firstLate, goodput)
				if late > 0 {
					byWin := map[int]int{}
					for _, e := range events {
						if e.Status == http.StatusTooManyRequests {
							byWin[int(e.At.Sub(start)/time.Minute)]++
						}
					}
					t.Logf("429s by window: %v", byWin)
					for _, a := range lims {
						t.Logf("%+v", a.Stats().LastInfo)
					}
				}
				if latency == 0 {
					// With no latency one client can spend a whole window
					// in one instant, before anything of the other shows:
					// the other's look at each reset then meets an empty
					// window. At most that one 429 per window.
					assert.LessOrEqual(t, late, 10+16, "429s after the first response: one look per window, and the first window's collision")
				} else {
					// Two clients that cannot see each other's requests in
					// flight can still meet at a window's start; rare, and
					// bounded (as for many uncoordinated clients).
					assert.LessOrEqual(t, float64(late), 0.001*float64(stats.Requests), "429s after the first response")
				}
				assert.GreaterOrEqual(t, goodput, 0.7, "aggregate goodput / capacity")
			})
		})
	}
}
