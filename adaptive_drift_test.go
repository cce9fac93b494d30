package pacer

import (
	"context"
	"math"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The ordering that collapsed scenario f: 25 requests of a fresh 600/min
// window all counted by the server, and the oldest response (Remaining 599)
// applied first, with none of the others counted as unseen. A quarter second
// later the server's figure is 28 below it after only 3 more admissions. Read
// as others' spending that is 96 units a second, ten times what the whole
// quota allows; extrapolated to the reset, it spent every later window.
func TestDriftFromASkewedBaselineIsBoundedByTheQuotasRate(t *testing.T) {
	epoch := time.Now()
	w := newQuotaWindow("requests", 0.9, DefaultMaxDelay)
	reset := epoch.Add(time.Minute)
	q := func(rem float64) Quota { return Quota{Name: "requests", Limit: 600, Remaining: rem, Reset: reset} }

	w.observe(q(599), epoch, 0, 0, 25, 10*time.Millisecond, 0)
	now := epoch.Add(260 * time.Millisecond)
	w.observe(q(571), now, 0, 0, 28, 10*time.Millisecond, 0)

	// Others can spend at most what a window leaves us: (600 − 3) / 60 s.
	require.Less(t, w.drift, 0.0, "a fall beyond our own spending is others' spending")
	assert.GreaterOrEqual(t, w.drift, -(600.0-3)/60, "others' spending rate, units per second")
}

// A consistent drift within the bound is kept as measured.
func TestDriftWithinTheQuotasRateIsKept(t *testing.T) {
	epoch := time.Now()
	w := newQuotaWindow("requests", 0.9, DefaultMaxDelay)
	w.window, w.stated = time.Minute, true
	reset := epoch.Add(time.Minute)
	q := func(rem float64) Quota { return Quota{Name: "requests", Limit: 600, Remaining: rem, Reset: reset} }

	w.observe(q(600), epoch, 0, 0, 0, 10*time.Millisecond, 0)
	// 10 s later: we spent 50, others 30 (3 a second).
	w.observe(q(520), epoch.Add(10*time.Second), 0, 0, 50, 10*time.Millisecond, 0)
	assert.InDelta(t, -3.0, w.drift, 1e-9)
}

func TestMaxDrainIsTheLongRunRateLeftToOthers(t *testing.T) {
	w := newQuotaWindow("requests", 0.9, DefaultMaxDelay)
	w.limit, w.window = 600, time.Minute
	assert.InDelta(t, 590.0/60, w.maxDrain(time.Second, 10), 1e-9, "within a window: limit − ours per window")
	assert.InDelta(t, (1200.0-900)/120, w.maxDrain(2*time.Minute, 900), 1e-9, "over two windows")
	assert.Zero(t, w.maxDrain(time.Second, 700), "we spent the whole quota: nothing is left to others")
	w.window = 0
	assert.Equal(t, math.Inf(1), w.maxDrain(time.Second, 10), "no window, no reset: unbounded")
}

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
								if err := a.wait(ctx, 0); err != nil {
									return
								}
								req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1/thing", nil)
								resp, err := rt.RoundTrip(req)
								if err != nil {
									a.observe(0, Info{})
									continue
								}
								info, _ := parseHeaders(resp.Header, time.Now(), 0)
								resp.Body.Close()
								a.observe(resp.StatusCode, info)
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
						for _, w := range a.windows {
							t.Logf("kind=%d shared=%v drift=%.3f budget=%.1f window=%v probing=%v", w.kind, w.shared, w.drift, w.units(), w.window, w.probing)
						}
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
