package pacer

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-go/pacer/internal/apisim"
)

func TestDbg2(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := apisim.New(apisim.Config{Style: apisim.StyleGitHub, Algorithm: apisim.SlidingWindow, Limit: 50, Window: 10 * time.Second, Latency: 20 * time.Millisecond})
		rt := srv.Transport()
		t0 := time.Now()
		a := NewAdaptive(AdaptiveConfig{Key: "k"})
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				for {
					if err := a.Wait(ctx, 0); err != nil {
						return
					}
					req, _ := http.NewRequest("GET", "http://x/v1/thing", nil)
					resp, _ := rt.RoundTrip(req)
					info, _ := parseHeaders(resp.Header, time.Now(), 0)
					resp.Body.Close()
					a.Observe(resp.StatusCode, info)
				}
			})
		}
		for range 40 {
			time.Sleep(2 * time.Second)
			a.mu.Lock()
			st := srv.Stats()
			for _, w := range a.windows {
				t.Logf("%v ok=%d 429=%d budget=%.1f kind=%d drift=%.3f probing=%v rolled=%v reset=%v wake=%v probeAt=%v window=%v inflight=%d keep=%d low=%v gated=%v", time.Since(t0), st.OK, st.Throttled, w.units(), w.kind, w.drift, w.probing, w.rolled, w.reset.Sub(t0), w.wakeAt.Sub(t0), w.probeAt.Sub(t0), w.window, a.inflight.Load(), w.keep.Load(), w.low, a.gated.Load())
			}
			a.mu.Unlock()
		}
		cancel()
		wg.Wait()
	})
}
