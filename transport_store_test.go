package pacer_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/pacer-go/pacer/retry"
	"github.com/pacer-go/pacer/store"
)

// runClients sends requests through each transport from workers goroutines
// until d has passed, and returns the simulated API's statistics and the
// interval its capacity is measured over.
func runClients(t *testing.T, api *apisim.Server, transports []*pacer.Transport, workers int, d time.Duration) (apisim.Stats, time.Time, time.Time) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for _, tr := range transports {
		client := &http.Client{Transport: tr}
		for range workers {
			wg.Go(func() {
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/v1/items", nil)
					resp, err := client.Do(req)
					var rle *pacer.RateLimitError
					switch {
					case errors.As(err, &rle):
						if errors.Is(err, context.DeadlineExceeded) {
							<-ctx.Done() // the next request would start after the run
							return
						}
						time.Sleep(time.Until(rle.RetryAt))
						continue
					case err != nil:
						if ctx.Err() == nil {
							t.Errorf("request: %v", err)
						}
						continue
					}
					resp.Body.Close()
				}
			})
		}
	}
	wg.Wait()
	return api.Stats(), start, time.Now()
}

// TestTransportsSharingAStoreShareOneQuota runs four Transports, as four
// replicas would, against one API quota. Sharing a store.Memory they pace as
// one client: no 429 and most of the quota used. Without it each sees the
// others only as drops in Remaining it did not cause and must estimate their
// spending (the drift model); that estimate once compounded into a collapse
// (goodput 0.1–0.5), so the independent run guards against it: no 429 and at
// least half the quota used even without sharing.
func TestTransportsSharingAStoreShareOneQuota(t *testing.T) {
	for _, shared := range []bool{true, false} {
		name := "Shared"
		if !shared {
			name = "Independent"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := apisim.New(apisim.Config{Style: apisim.StyleOpenAI, Limit: 100, Window: time.Second, Latency: 20 * time.Millisecond})
				mem := store.NewMemory()
				var transports []*pacer.Transport
				for range 4 {
					opts := []pacer.Option{pacer.WithRetry(retry.Policy{Max: retry.None})}
					if shared {
						opts = append(opts, pacer.WithStore(mem))
					}
					transports = append(transports, pacer.NewTransport(api.Transport(), opts...))
				}
				st, from, to := runClients(t, api, transports, 8, 10*time.Second)
				goodput := float64(st.OK) / api.Capacity(from, to)
				t.Logf("ok %d, throttled %d, goodput %.3f of capacity", st.OK, st.Throttled, goodput)
				if shared {
					assert.Zero(t, st.Throttled, "no 429 when the quota is shared")
					assert.GreaterOrEqual(t, goodput, 0.85)
				} else {
					// Without a Store each limiter sees the others only in
					// the figures of its own responses: at a window's start
					// two may both read room for the same last request. The
					// uncoordinated-clients target is at most 2% 429s; here
					// 0 in most runs, up to 6 of ~1,000 (0.6%) in about one
					// run in fifteen under the race detector.
					assert.LessOrEqual(t, float64(st.Throttled), 0.01*float64(st.Requests), "independent limiters back off from each other's spending")
					assert.GreaterOrEqual(t, goodput, 0.5, "independent limiters must not starve one another")
				}
			})
		})
	}
}

func ExampleWithStore() {
	// Transports that share a Store pace against one quota per endpoint: here
	// two in one process. For many processes, use redisstore instead:
	//
	//	shared := redisstore.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	shared := store.NewMemory()
	reports := &http.Client{Transport: pacer.NewTransport(nil, pacer.WithStore(shared))}
	exports := &http.Client{Transport: pacer.NewTransport(nil, pacer.WithStore(shared))}
	_, _ = reports, exports
}
