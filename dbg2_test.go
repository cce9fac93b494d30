package pacer

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-go/pacer/internal/apisim"
)

func TestDbg2(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := apisim.New(apisim.Config{Style: apisim.StyleGitHub, Limit: 50, Window: 10 * time.Second})
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
					a.mu.Lock()
					var pre string
					for _, w := range a.windows {
						pre = fmt.Sprintf("budget=%.1f kind=%d probing=%v rolled=%v reset=%v low=%v limit=%v", w.units(), w.kind, w.probing, w.rolled, w.reset.Sub(t0), w.low, w.limit)
					}
					a.mu.Unlock()
					req, _ := http.NewRequest("GET", "http://x/v1/thing", nil)
					resp, _ := rt.RoundTrip(req)
					info, _ := parseHeaders(resp.Header, time.Now(), 0)
					resp.Body.Close()
					if resp.StatusCode == 429 && time.Since(t0) > 5*time.Minute {
						t.Logf("429 at %v rem=%v limit=%v reset=%v; at admission %s", time.Since(t0), info.Quotas[0].Remaining, info.Quotas[0].Limit, info.Quotas[0].Reset.Sub(t0), pre)
					}
					a.Observe(resp.StatusCode, info)
				}
			})
		}
		time.Sleep(5 * time.Minute)
		srv.SetLimit(25)
		time.Sleep(5 * time.Minute)
		cancel()
		wg.Wait()
	})
}
