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
