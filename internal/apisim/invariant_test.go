package apisim

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Random bursty traffic (seeded, so failures reproduce) must never get more
// through than each algorithm's quota allows, unseen client included.
func TestNoAlgorithmAdmitsMoreThanItsQuota(t *testing.T) {
	const (
		limit  = 20
		burst  = 30
		window = 10 * time.Second
	)
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket} {
		for seed := range uint64(5) {
			t.Run(fmt.Sprintf("%s/seed=%d", alg, seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					rng := rand.New(rand.NewPCG(seed, 42))
					// Odd seeds add an unseen client; even ones keep the bounds tight.
					share := 0.25 * float64(seed%2)
					s := New(Config{Style: StyleBare, Algorithm: alg, Limit: limit, Burst: burst, Window: window, UnseenShare: share})
					start := time.Now()
					for range 2000 {
						for range rng.IntN(4) {
							get(t, s, "/", 0)
						}
						time.Sleep(time.Duration(rng.ExpFloat64() * float64(200*time.Millisecond)))
					}
					var ok []time.Duration
					for _, e := range s.Events() {
						if e.Status == http.StatusOK {
							ok = append(ok, e.At.Sub(start))
						}
					}
					require.NotEmpty(t, ok)
					st := s.Stats()
					require.Positive(t, st.Throttled, "the traffic must press on the quota")
					elapsed := time.Since(start)

					switch alg {
					case FixedWindow, SlidingWindow:
						// Neither admits more than the limit within one fixed window.
						perWindow := map[int64]int{}
						for _, at := range ok {
							perWindow[int64(at/window)]++
						}
						for w, n := range perWindow {
							assert.LessOrEqual(t, n, limit, "window %d", w)
						}
					case TokenBucket:
						// Over any interval [a, b]: at most burst + rate·(b-a).
						worst := 0.0 // largest excess of admissions over the allowance
						for i := range ok {
							for j := i; j < len(ok); j++ {
								allowed := burst + float64(limit)*float64(ok[j]-ok[i])/float64(window)
								worst = max(worst, float64(j-i+1)-allowed)
							}
						}
						assert.LessOrEqual(t, worst, 1e-9)
					}
					// Everyone together never beats the long-run quota (plus one burst).
					total := float64(st.OK + st.UnseenOK)
					assert.LessOrEqual(t, total, float64(limit)*float64(elapsed)/float64(window)+burst+limit)
				})
			})
		}
	}
}

// A client that believes the headers — sends while Remaining > 0, otherwise
// sleeps until the reported reset — is never throttled after its first
// response: Remaining is exact and resets are rounded up, never early. (Not
// so for SlidingWindow, whose reset is the current window's end as httprate
// reports it, while the previous window still weighs on the next.)
func TestAClientBelievingTheHeadersIsNeverThrottled(t *testing.T) {
	for _, alg := range []Algorithm{FixedWindow, TokenBucket} {
		for _, window := range []time.Duration{time.Second, 7 * time.Second, time.Minute} {
			t.Run(fmt.Sprintf("%s/%v", alg, window), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s := New(Config{Style: StyleIETF07, Algorithm: alg, Limit: 13, Window: window})
					time.Sleep(window / 3) // off the whole-second grid
					for range 500 {
						resp := get(t, s, "/", 0)
						require.Equal(t, http.StatusOK, resp.StatusCode, "at %v", time.Now())
						var limit, remaining, reset int
						_, err := fmt.Sscanf(resp.Header.Get("RateLimit"), "limit=%d, remaining=%d, reset=%d", &limit, &remaining, &reset)
						require.NoError(t, err)
						if remaining == 0 {
							time.Sleep(time.Duration(reset) * time.Second)
						}
					}
					st := s.Stats()
					got := float64(st.OK) / (13 + s.Capacity(st.FirstRequest, st.LastRequest))
					assert.Greater(t, got, 0.9, "and it still gets nearly the whole quota")
				})
			})
		}
	}
}

// The same of the styles whose resets are late as their APIs' are
// (Reddit's delta seconds, Mastodon's instants carrying the request's
// fraction of a second) or restated a window away (GitLab's): a client that
// waits for them is never early, whatever its phase within a second.
func TestLateResetsAreNeverEarly(t *testing.T) {
	for _, style := range []Style{StyleReddit, StyleMastodon, StyleGitLab} {
		t.Run(string(style), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{Style: style, Limit: 13, Window: 7 * time.Second})
				time.Sleep(2333 * time.Millisecond) // off the whole-second grid
				for range 300 {
					resp := get(t, s, "/", 0)
					require.Equal(t, http.StatusOK, resp.StatusCode, "at %v", time.Now())
					if until := waitFor(t, style, resp.Header); until > 0 {
						time.Sleep(until)
					}
					time.Sleep(37 * time.Millisecond) // a new phase each request
				}
			})
		})
	}
}

// waitFor is how long a client believing h waits: nothing while quota
// remains, else until the stated reset.
func waitFor(t *testing.T, style Style, h http.Header) time.Duration {
	switch style {
	case StyleReddit:
		remaining, err := strconv.ParseFloat(h.Get("X-Ratelimit-Remaining"), 64)
		require.NoError(t, err)
		reset, err := strconv.Atoi(h.Get("X-Ratelimit-Reset"))
		require.NoError(t, err)
		if remaining > 0 {
			return 0
		}
		return time.Duration(reset) * time.Second
	case StyleMastodon:
		reset, err := time.Parse(time.RFC3339Nano, h.Get("X-Ratelimit-Reset"))
		require.NoError(t, err)
		if h.Get("X-Ratelimit-Remaining") != "0" {
			return 0
		}
		return time.Until(reset)
	default:
		reset, err := strconv.ParseInt(h.Get("Ratelimit-Reset"), 10, 64)
		require.NoError(t, err)
		if h.Get("Ratelimit-Remaining") != "0" {
			return 0
		}
		return time.Until(time.Unix(reset, 0))
	}
}
