package pacer

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/pacer-go/pacer/internal/apisim"
)

// TestFirstContactWithANamedBucketMeetsNo429 runs sixteen workers for two
// minutes onto a Discord-style bucket of 10 per 8 s that nobody has told
// the Transport of: the first request goes alone, its answer names the
// bucket and states what is left, and no request sent after it is refused.
func TestFirstContactWithANamedBucketMeetsNo429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := apisim.New(apisim.Config{Style: apisim.StyleDiscord, Limit: 10, Window: 8 * time.Second, Latency: 50 * time.Millisecond})
		var mu sync.Mutex
		var first time.Time // when the first response arrived
		late, ok := 0, 0
		tap := transportFunc(func(r *http.Request) (*http.Response, error) {
			sent := time.Now()
			resp, err := srv.Transport().RoundTrip(r)
			mu.Lock()
			defer mu.Unlock()
			if err == nil && resp.StatusCode == http.StatusTooManyRequests && !first.IsZero() && !sent.Before(first) {
				late++
			}
			if first.IsZero() {
				first = time.Now()
			}
			return resp, err
		})
		tr := NewTransport(tap)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for ctx.Err() == nil {
					r, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://discord.test/api/channels/1/messages", nil)
					resp, err := tr.RoundTrip(r)
					if err != nil {
						time.Sleep(time.Second) // refused without sending: let time pass
						continue
					}
					mu.Lock()
					if resp.StatusCode < 300 {
						ok++
					}
					mu.Unlock()
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		assert.Zero(t, late, "429s to requests sent after the first response")
		// 10 per 8 s for 120 s: 150 at most, 10 of them from the first window.
		assert.GreaterOrEqual(t, ok, 140, "requests served")
	})
}

// TestFirstContactWithAnExhaustedQuotaCostsOneLook fans 200 calls out at
// once onto a quota someone else has already spent, through a Transport
// that has never seen the server: the first request goes alone, its 429
// states the reset, and the other 199 wait for it rather than meeting a 429
// each. Every call completes once the quota comes back, within its window:
// a server that states nothing but Retry-After too (its refusal measured no
// capacity, so the probe lets go once the server accepts again).
func TestFirstContactWithAnExhaustedQuotaCostsOneLook(t *testing.T) {
	for _, style := range []apisim.Style{apisim.StyleGitHub, apisim.StyleIETF, apisim.StyleOpenAI, apisim.StyleAnthropic, apisim.StyleDiscord, apisim.StyleRetryAfter} {
		t.Run(string(style), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const limit, fanout = 300, 200
				srv := apisim.New(apisim.Config{Style: style, Limit: limit, Window: time.Minute, Latency: 50 * time.Millisecond})
				// Someone else spends the whole window first.
				for range limit {
					r, _ := http.NewRequest(http.MethodGet, "https://api.test/v1/x", nil)
					resp, err := srv.Transport().RoundTrip(r)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
				}
				before := srv.Stats()
				tr := NewTransport(srv.Transport())
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				var wg sync.WaitGroup
				var mu sync.Mutex
				ok := 0
				for range fanout {
					wg.Go(func() {
						r, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.test/v1/x", nil)
						resp, err := tr.RoundTrip(r)
						if err != nil {
							t.Errorf("RoundTrip: %v", err)
							return
						}
						resp.Body.Close()
						mu.Lock()
						if resp.StatusCode == http.StatusOK {
							ok++
						}
						mu.Unlock()
					})
				}
				wg.Wait()
				after := srv.Stats()
				refused := after.Throttled - before.Throttled
				t.Logf("%d 429s, %d of %d calls served, the last at %v", refused, ok, fanout, after.LastRequest.Sub(before.LastRequest))
				assert.LessOrEqual(t, refused, 3, "429s to the fan-out (issue 24: at most 3)")
				assert.Equal(t, fanout, ok, "calls that succeeded once the quota came back")
			})
		})
	}
}
