package pacerotel_test

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/internal/apisim"
	pacerotel "github.com/pacer-go/pacer/otel"
)

// A fan-out of 320 calls from 16 goroutines onto an API that only answers
// 429 with Retry-After (so pacer must infer its quota, is throttled and
// retries): the metrics agree with what the server counted and with
// Transport.Stats, and mid-run the gauges show the requests queued at that instant.
func TestMetricsAgreeWithServerAndStatsUnderLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const workers, perWorker = 16, 20
		h := newHarness(t)
		api := apisim.New(apisim.Config{Style: apisim.StyleRetryAfter, Limit: 20, Window: time.Second, Latency: 20 * time.Millisecond})
		tr := pacer.NewTransport(api.Transport(), pacer.WithObserver(h.obs.Record))
		reg, err := h.obs.Watch(tr)
		require.NoError(t, err)
		defer reg.Unregister()
		client := &http.Client{Transport: tr}

		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			status = map[int]int{}
			failed int
		)
		for range workers {
			wg.Go(func() {
				for range perWorker {
					resp, err := get(t, client, t.Context())
					mu.Lock()
					if err != nil {
						failed++
					} else {
						status[resp.StatusCode]++
					}
					mu.Unlock()
				}
			})
		}

		// Mid-run, with every goroutine blocked (the bubble's clock stands
		// still), the gauges show the state Stats shows.
		time.Sleep(3 * time.Second)
		synctest.Wait()
		mid := h.collect(t)
		st := tr.Stats()
		require.Len(t, st, 1)
		require.Positive(t, st[0].Waiting, "16 workers onto 20 req/s: some must be waiting")
		assert.Equal(t, map[string]int64{series(ep): int64(st[0].Waiting)}, mid.ints(pacerotel.MetricQueuedRequests))
		assert.Equal(t, map[string]int64{series(ep): int64(st[0].InFlight)}, mid.ints(pacerotel.MetricActiveRequests))
		// The limiter paces this server by the window it inferred from the
		// refusals (a budget per window, the rate unlimited inside it) or,
		// had the model not fit, by the probe's rate: the gauge shows the
		// rate Stats shows, and is absent while that is unlimited.
		if st[0].Limit == pacer.Inf {
			assert.Empty(t, mid.gauge(pacerotel.MetricRateLimit), "no rate gauge while the rate is unlimited")
		} else {
			assert.Equal(t, map[string]float64{series(ep): float64(st[0].Limit)}, mid.gauge(pacerotel.MetricRateLimit))
		}
		assert.Empty(t, mid.gauge(pacerotel.MetricQuotaRemaining), "Retry-After alone states no quota")

		wg.Wait()
		c := h.collect(t)
		srv := api.Stats()
		st = tr.Stats()
		require.Zero(t, failed)
		require.Equal(t, workers*perWorker, status[http.StatusOK]+status[http.StatusTooManyRequests])

		get := pacerotel.AttrMethod.String("GET")
		assert.Equal(t, map[string]int64{
			series(ep, cls, get, pacerotel.AttrStatus.Int(200)): int64(srv.OK),
			series(ep, cls, get, pacerotel.AttrStatus.Int(429)): int64(srv.Throttled),
		}, c.ints(pacerotel.MetricRequests))
		assert.Equal(t, map[string]int64{series(ep, cls, get, pacerotel.AttrStatus.Int(429)): int64(srv.Throttled)},
			c.ints(pacerotel.MetricThrottledResponses))
		require.Positive(t, st[0].Retries, "the API throttled, pacer retried")
		assert.Equal(t, map[string]int64{series(ep, cls, get): st[0].Retries}, c.ints(pacerotel.MetricRetries))
		assert.Equal(t, st[0].Refused, total(c.ints(pacerotel.MetricRefusals)))
		// Every call was sent and every retry too: one wait each.
		waits := c.hist(pacerotel.MetricWaitDuration)
		require.Len(t, waits, 1)
		admitted := waits[series(ep, cls, pacerotel.AttrWaitResult.String(pacerotel.WaitAdmitted))]
		assert.Equal(t, uint64(workers*perWorker)+uint64(st[0].Retries), admitted.Count)
		assert.Equal(t, int64(srv.Requests), int64(admitted.Count))
		// 320 calls at ≤ 20/s: the waits add up to minutes, not nothing.
		assert.Greater(t, admitted.Sum, 60.0)
		assert.Equal(t, map[string]int64{series(ep): 0}, c.ints(pacerotel.MetricQueuedRequests))
	})
}

// Watch observes every endpoint of the Transport, an unlimited one without a
// rate, and nothing once unregistered.
func TestWatchObservesEachEndpointUntilUnregistered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		base := &responder{fn: func(_ int64, req *http.Request) (*http.Response, error) {
			if req.URL.Host == "quota.test" {
				return reply(req, http.StatusOK,
					"X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4999",
					"X-RateLimit-Reset", "3600", "X-RateLimit-Resource", "core"), nil
			}
			return reply(req, http.StatusOK), nil
		}}
		tr := pacer.NewTransport(base)
		client := &http.Client{Transport: tr}
		for _, u := range []string{"https://quota.test/a", "https://free.test/a"} {
			resp, err := client.Get(u)
			require.NoError(t, err)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		reg, err := h.obs.Watch(tr)
		require.NoError(t, err)

		c := h.collect(t)
		// The host's limiter and the bucket GitHub's resource header names
		// ("core") both learnt the quota; the other host sent no quota.
		// With 4,999 of 5,000 left nothing is paced: no endpoint has a rate.
		remaining, queued := map[string]float64{}, map[string]int64{}
		for _, s := range tr.Stats() {
			e := pacerotel.AttrEndpoint.String(s.Key)
			queued[series(e)] = 0
			require.Equal(t, pacer.Inf, s.Limit, "the quota affords the work: unpaced")
			if len(s.LastInfo.Quotas) == 0 {
				continue
			}
			require.Len(t, s.LastInfo.Quotas, 1)
			require.Empty(t, s.LastInfo.Quotas[0].Name, "X-RateLimit-* names no quota")
			remaining[series(e, pacerotel.AttrQuotaName.String("default"))] = 4999
		}
		require.Len(t, remaining, 2, "https://quota.test and https://quota.test#core")
		assert.Empty(t, c.gauge(pacerotel.MetricRateLimit), "an unpaced endpoint has no rate")
		assert.Equal(t, remaining, c.gauge(pacerotel.MetricQuotaRemaining))
		assert.Len(t, c.gauge(pacerotel.MetricQuotaLimit), 2)
		assert.Equal(t, queued, c.ints(pacerotel.MetricQueuedRequests), "every endpoint is observed")

		require.NoError(t, reg.Unregister())
		c = h.collect(t)
		assert.Empty(t, c.gauge(pacerotel.MetricRateLimit))
		assert.Empty(t, c.ints(pacerotel.MetricQueuedRequests))
	})
}
