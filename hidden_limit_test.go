package pacer

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/stretchr/testify/assert"
)

// A hidden limit (GitHub's secondary limits: a 403 whose body alone names
// it, with the primary quota far from spent) cannot be known before it
// trips, and the requests in flight then meet it. Once the server accepts
// again, pacer paces below what it admitted and does not trip it again
// while the trip is remembered (an hour), whatever the limit's window:
// shorter than GitHub's minute of waiting, as long, or longer (the server
// still refuses when the wait ends, and each look costs one refusal).
// Without a margin below the measured figure, 32 workers re-tripped 60 a
// minute at 190 s in every run; a floor of 0.5 a second paced 200 per 10
// minutes and 500 an hour into a trip every quarter hour.
func TestAHiddenLimitIsNotTrippedAgainOnceTheServerAcceptsAgain(t *testing.T) {
	for _, tc := range []struct {
		limit   int
		window  time.Duration
		workers int
		run     time.Duration
		// goodput is the least share of what the limit allows over the run.
		// Windows longer than the wait cost the looks' time (one a
		// minute, doubling) and are measured over it.
		goodput float64
	}{
		{60, time.Minute, 32, 20 * time.Minute, 0.85},
		{60, time.Minute, 4, 20 * time.Minute, 0.85},
		{900, time.Minute, 32, 20 * time.Minute, 0.80},
		{200, 10 * time.Minute, 32, time.Hour, 0.5},
		{500, time.Hour, 32, 2 * time.Hour, 0.5},
	} {
		t.Run(fmt.Sprintf("%d per %v, %d workers", tc.limit, tc.window, tc.workers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const latency = 50 * time.Millisecond
				srv := apisim.New(apisim.Config{Style: apisim.StyleGitHub, Limit: 100_000, Window: time.Hour, Latency: latency,
					SecondaryLimit: tc.limit, SecondaryWindow: tc.window})
				client := &http.Client{Transport: NewTransport(srv.Transport())}
				ctx, cancel := context.WithCancel(context.Background())
				start := time.Now()
				var wg sync.WaitGroup
				for range tc.workers {
					wg.Go(func() {
						for ctx.Err() == nil {
							req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1/x", nil)
							resp, err := client.Do(req)
							if err != nil {
								continue // the run's end
							}
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
					})
				}
				time.Sleep(tc.run)
				cancel()
				wg.Wait()
				client.CloseIdleConnections()

				var ok, trip, after int
				var reopened time.Time // the first success after the first trip
				for _, e := range srv.Events() {
					if e.At.Sub(start) >= tc.run {
						break
					}
					switch {
					case e.Status == http.StatusOK:
						ok++
						if trip > 0 && reopened.IsZero() {
							reopened = e.At
						}
					case e.Status != http.StatusForbidden:
					case reopened.IsZero():
						trip++
					default:
						after++
						t.Errorf("tripped again %v after the server accepted again", e.At.Sub(reopened))
					}
				}
				allowed := float64(tc.limit) * float64(tc.run) / float64(tc.window)
				t.Logf("first trip %d, after %d, goodput %.2f", trip, after, float64(ok)/allowed)
				assert.Positive(t, trip, "the limit is unknowable until it trips")
				assert.False(t, reopened.IsZero(), "the server accepts again")
				assert.GreaterOrEqual(t, float64(ok)/allowed, tc.goodput, "of what the limit allows")
			})
		})
	}
}
