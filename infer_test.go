package pacer

import (
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/pacer-go/pacer/internal/infer"
	"github.com/pacer-go/pacer/observe"
)

// A server that states no quota and answers 429 with a Retry-After when its
// fixed window is spent: after the first window (whose refusals are the
// requests in flight when it ran out), the model spends each window to the
// last request and meets at most a few refusals while it learns the
// windows' length, on minute and ten-second windows, at any latency.
func TestAdaptiveLearnsAFixedWindowFromRetryAfterAlone(t *testing.T) {
	for _, w := range []struct {
		window time.Duration
		limit  int
	}{{time.Minute, 600}, {10 * time.Second, 50}, {5 * time.Second, 100}} {
		for _, latency := range []time.Duration{0, 20 * time.Millisecond, 200 * time.Millisecond} {
			t.Run(fmt.Sprintf("window=%v/latency=%v", w.window, latency), func(t *testing.T) {
				t.Parallel()
				sc := scenario{
					server: apisim.Config{Style: apisim.StyleRetryAfter, Window: w.window, Limit: w.limit, Latency: latency},
					run:    10 * time.Minute, callers: 32,
				}
				o := drive(t, sc, AdaptiveConfig{Key: "sim"})
				t.Logf("%v", o)
				assert.LessOrEqual(t, o.throttled, sc.callers+3, "429s: the first window's requests in flight, and a few while learning")
				assert.GreaterOrEqual(t, o.goodput, 0.97, "goodput / capacity")
				assert.Equal(t, observe.ModeHeaders.String(), o.mode, "the inferred quota paces it")
			})
		}
	}
}

// Servers that free their quota as they go (a token bucket answering with
// the time to its next token, a sliding window still weighed down by the
// last one) do not fit the model: it gives up and the probe paces them,
// within the probe's targets. (The sliding window lost 0.98 -> 0.70 of its
// quota when the probe's first look after the hand-over waited a "round
// trip" estimated over the long pause before it: 40 s.)
func TestAdaptiveHandsAServerThatRefillsAsItGoesToTheProbe(t *testing.T) {
	for _, sv := range []apisim.Config{
		{Algorithm: apisim.TokenBucket, Window: 10 * time.Second, Limit: 50},
		{Algorithm: apisim.SlidingWindow, Window: time.Minute, Limit: 600},
	} {
		for _, latency := range []time.Duration{0, 20 * time.Millisecond, 200 * time.Millisecond} {
			t.Run(fmt.Sprintf("%s/window=%v/latency=%v", sv.Algorithm, sv.Window, latency), func(t *testing.T) {
				t.Parallel()
				server := sv // each subtest its own copy: they run in parallel
				server.Style, server.Latency = apisim.StyleRetryAfter, latency
				sc := scenario{server: server, run: 10 * time.Minute, callers: 32}
				o := drive(t, sc, AdaptiveConfig{Key: "sim"})
				t.Logf("%v", o)
				assert.Equal(t, observe.ModeProbing.String(), o.mode)
				assert.LessOrEqual(t, float64(o.throttled), 0.02*float64(o.requests), "share of 429s")
				assert.GreaterOrEqual(t, o.goodput, 0.9, "goodput / capacity")
			})
		}
	}
}

// A server that frees its quota slowly and says only when the next request
// will go (a daily sliding window or token bucket of 1,000: one request
// every 86 s once the first burst is spent) is paced at what its stated
// waits show it frees, at 0.95 of it or more. The probe's floor of 0.5 a
// second met one refusal per success: 45% of requests refused, from the
// second day on.
func TestAdaptivePacesASlowRefillAtWhatItsStatedWaitsShow(t *testing.T) {
	for _, alg := range []apisim.Algorithm{apisim.SlidingWindow, apisim.TokenBucket} {
		for _, callers := range []int{4, 32} {
			t.Run(fmt.Sprintf("%s/callers=%d", alg, callers), func(t *testing.T) {
				t.Parallel()
				sc := scenario{
					server: apisim.Config{Style: apisim.StyleRetryAfter, Algorithm: alg, Window: 24 * time.Hour, Limit: 1000, Latency: 50 * time.Millisecond},
					run:    4 * 24 * time.Hour, callers: callers,
				}
				// A wait of a day is this server's to ask (MaxDelay's default
				// refuses it as a caller error).
				o := drive(t, sc, AdaptiveConfig{Key: "sim", MaxDelay: 25 * time.Hour})
				t.Logf("%v", o)
				// The first burst's refusals are the requests in flight when it
				// ran out (at most one per caller); the rest are the pacing's.
				assert.LessOrEqual(t, float64(o.throttled-sc.callers), 0.01*float64(o.requests), "share of 429s beyond the first burst's")
				assert.GreaterOrEqual(t, o.goodput, 0.95, "goodput / capacity")
			})
		}
	}
}

func TestAdaptiveDropsTheInferredQuotaWhenTheServerStatesOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{Key: "k"})
		admit(t, a, 0).Done(reply(http.StatusOK))
		admit(t, a, 0).Done(reply(http.StatusTooManyRequests, retryAfter(time.Second)))
		a.mu.Lock()
		inferred := a.book.Needs(nil, 1)
		a.mu.Unlock()
		require.Len(t, inferred, 1)
		require.Equal(t, infer.Name, inferred[0].Quota, "a refusal with a Retry-After and no quota: the model's window")
		admit(t, a, 0).Done(reply(http.StatusOK, requestsLeft(10, 5, time.Minute)))
		a.mu.Lock()
		defer a.mu.Unlock()
		assert.Equal(t, 1, a.book.Len(), "a stated quota replaces it")
		assert.Equal(t, "requests", a.book.Needs(nil, 1)[0].Quota)
		assert.Nil(t, a.infer, "the model is dropped")
	})
}
