package apisim

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFixedWindowAdmitsLimitPerWindowThenRollsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleGitHub, Limit: 3, Window: time.Minute})
		for range 3 {
			require.Equal(t, http.StatusOK, get(t, s, "/", 0).StatusCode)
		}
		require.Equal(t, http.StatusTooManyRequests, get(t, s, "/", 0).StatusCode)
		time.Sleep(time.Minute)
		require.Equal(t, http.StatusOK, get(t, s, "/", 0).StatusCode)

		st := s.Stats()
		assert.Equal(t, 5, st.Requests)
		assert.Equal(t, 4, st.OK)
		assert.Equal(t, 1, st.Throttled)
		assert.Equal(t, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), st.FirstRequest.UTC())
		assert.Equal(t, time.Minute, st.LastRequest.Sub(st.FirstRequest))
	})
}

func TestRetryAfterIsTheExactWaitUntilTheRequestFits(t *testing.T) {
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket} {
		t.Run(string(alg), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Whole-second Retry-After needs a slot boundary on whole seconds: 6 per 12 s.
				s := New(Config{Style: StyleRetryAfter, Algorithm: alg, Limit: 6, Window: 12 * time.Second})
				throttled := 0
				for range 200 {
					resp := get(t, s, "/", 0)
					if resp.StatusCode == http.StatusOK {
						time.Sleep(300 * time.Millisecond)
						continue
					}
					throttled++
					wait, err := strconv.Atoi(resp.Header.Get("Retry-After"))
					require.NoError(t, err)
					require.Positive(t, wait)
					time.Sleep(time.Duration(wait) * time.Second)
					require.Equal(t, http.StatusOK, get(t, s, "/", 0).StatusCode, "a client honouring Retry-After succeeds")
				}
				require.Positive(t, throttled, "the workload must hit the limit to test anything")
			})
		})
	}
}

func TestUnseenClientTakesItsShareEvenlyInEveryWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 30% of 100/min: one unseen request every 2 s, at 1 s, 3 s, …, 59 s.
		s := New(Config{Style: StyleIETF07, Limit: 100, Window: time.Minute, UnseenShare: 0.3})
		time.Sleep(30500 * time.Millisecond)
		assert.Equal(t, "limit=100, remaining=84, reset=30", get(t, s, "/", 0).Header.Get("RateLimit"),
			"15 unseen requests so far, plus this one")
		time.Sleep(29 * time.Second)
		assert.Equal(t, "limit=100, remaining=68, reset=1", get(t, s, "/", 0).Header.Get("RateLimit"))
		time.Sleep(time.Minute)
		assert.Equal(t, "limit=100, remaining=69, reset=1", get(t, s, "/", 0).Header.Get("RateLimit"),
			"a fresh window holds 30 unseen requests by its end")
		st := s.Stats()
		assert.Equal(t, 60, st.UnseenOK)
		assert.Zero(t, st.UnseenThrottled)
		assert.Equal(t, 3, st.Requests, "unseen requests are not the visible client's")
	})
}

func TestUnseenClientIsThrottledWhenTheVisibleClientSpendsTheQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleBare, Limit: 100, Window: time.Minute, UnseenShare: 0.3})
		for range 100 {
			get(t, s, "/", 0)
		}
		time.Sleep(59500 * time.Millisecond)
		get(t, s, "/", 0)
		st := s.Stats()
		assert.Equal(t, 100, st.OK)
		assert.Zero(t, st.UnseenOK)
		assert.Equal(t, 30, st.UnseenThrottled)
	})
}

func TestUnseenClientCatchesUpCheaplyAfterALongIdleStretch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleIETF07, Limit: 100, Window: time.Minute, UnseenShare: 0.3})
		time.Sleep(1000*time.Hour + 59500*time.Millisecond)
		assert.Equal(t, "limit=100, remaining=69, reset=1", get(t, s, "/", 0).Header.Get("RateLimit"))
		assert.Less(t, s.Stats().UnseenOK, 1000, "old windows were skipped, not replayed")
	})
}

func TestClientSendingEvenlyAtTheVisibleShareIsNeverThrottled(t *testing.T) {
	tests := []struct {
		alg      Algorithm
		perMin   int
		goodput  float64
		comments string
	}{
		{FixedWindow, 70, 1, "exactly the 70% left by the unseen client"},
		{TokenBucket, 70, 1, "exactly the refill left by the unseen client"},
		// The sliding-window counter still weighs a full previous window at
		// the start of the next one, so exactly-full pacing collides at
		// boundaries (as with Cloudflare's counter); 2% under is clean.
		{SlidingWindow, 68, 68.0 / 70, "just under the visible share"},
	}
	for _, tt := range tests {
		t.Run(string(tt.alg), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{Style: StyleBare, Algorithm: tt.alg, Limit: 100, Window: time.Minute, UnseenShare: 0.3})
				start := time.Now()
				gap := time.Minute/time.Duration(tt.perMin) + 1 // none spilling into the next window
				for range 10 * tt.perMin {
					require.Equal(t, http.StatusOK, get(t, s, "/", 0).StatusCode, "at %v", time.Since(start))
					time.Sleep(gap)
				}
				st := s.Stats()
				assert.InDelta(t, tt.goodput, float64(st.OK)/s.Capacity(start, time.Now()), 0.01, tt.comments)
				assert.Equal(t, 300, st.UnseenOK, "the unseen client got its 30%% too")
				assert.Zero(t, st.UnseenThrottled)
			})
		})
	}
}

func TestCapacityFollowsSetLimitAndSubtractsTheUnseenShare(t *testing.T) {
	tests := []struct {
		alg   Algorithm
		share float64
		want  float64
	}{
		// SetLimit(30) at 30 s of a 60/min quota, over two minutes:
		{FixedWindow, 0, 60 + 30},             // from the next window
		{TokenBucket, 0, 30 + 15 + 30},        // at once
		{SlidingWindow, 0, 30 + 15 + 30},      // at once
		{FixedWindow, 0.5, (60 + 30) * 0.5},   // half belongs to the unseen client
		{TokenBucket, 0.25, (30 + 45) * 0.75}, // quarter belongs to the unseen client
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%v", tt.alg, tt.share), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{Style: StyleBare, Algorithm: tt.alg, Limit: 60, Window: time.Minute, UnseenShare: tt.share})
				start := time.Now()
				get(t, s, "/", 0)
				time.Sleep(30 * time.Second)
				s.SetLimit(30)
				time.Sleep(90 * time.Second)
				assert.InDelta(t, tt.want, s.Capacity(start, time.Now()), 1e-9)
				assert.InDelta(t, 30*(1-tt.share), s.Capacity(start, start.Add(30*time.Second)), 1e-9, "before the change")
			})
		})
	}
}

func TestCapacityOnlyCountsBucketsTheClientUsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleGitHub, Limit: 60, Window: time.Minute, Routes: map[string]int{"/search/": 10}})
		start := time.Now()
		end := start.Add(time.Minute)
		assert.Zero(t, s.Capacity(start, end), "nothing used yet")
		get(t, s, "/search/code", 0)
		assert.InDelta(t, 10, s.Capacity(start, end), 1e-9)
		get(t, s, "/repos", 0)
		assert.InDelta(t, 70, s.Capacity(start, end), 1e-9)
		assert.InDelta(t, 60, s.BucketCapacity("default", start, end), 1e-9)
		assert.InDelta(t, 5, s.BucketCapacity("search", start, start.Add(30*time.Second)), 1e-9)
		assert.Zero(t, s.BucketCapacity("nope", start, end))
		assert.InDelta(t, 10, s.Capacity(start.Add(-time.Hour), start.Add(time.Minute/7)), 1e-9,
			"time before the server started holds no quota")
		assert.Zero(t, s.Capacity(end, start), "an empty interval")
	})
}

func TestCapacityKeepsOnlyTheLastOfSeveralChangesInOneWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleBare, Limit: 60, Window: time.Minute})
		start := time.Now()
		get(t, s, "/", 0)
		s.SetLimit(10)
		time.Sleep(time.Second)
		s.SetLimit(20)
		assert.InDelta(t, 60+20, s.Capacity(start, start.Add(2*time.Minute)), 1e-9)
		time.Sleep(time.Minute)
		assert.Equal(t, 20, countOK(t, s, 100), "the window opened with the last limit set")
	})
}

func TestTokenQuotaThrottlesRequestsItCannotCover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleOpenAI, Limit: 100, Window: time.Minute, TokenLimit: 1000})
		require.Equal(t, http.StatusOK, get(t, s, "/v1/chat", 400).StatusCode)
		require.Equal(t, http.StatusOK, get(t, s, "/v1/chat", 400).StatusCode)
		time.Sleep(15 * time.Second)
		resp := get(t, s, "/v1/chat", 400)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "200 tokens left, 400 asked")
		assert.Equal(t, "98", resp.Header.Get("X-Ratelimit-Remaining-Requests"), "requests remain")
		assert.Equal(t, "200", resp.Header.Get("X-Ratelimit-Remaining-Tokens"))
		assert.Equal(t, "45", resp.Header.Get("Retry-After"), "until the token window resets")
		require.Equal(t, http.StatusOK, get(t, s, "/v1/chat", 200).StatusCode, "a smaller request still fits")

		tooBig := get(t, s, "/v1/chat", 1001)
		require.Equal(t, http.StatusTooManyRequests, tooBig.StatusCode, "more than the whole quota never fits")
		assert.Equal(t, "45", tooBig.Header.Get("Retry-After"))

		st := s.Stats()
		assert.Equal(t, 1000, st.TokensUsed, "only admitted requests use tokens")
		assert.Equal(t, 3, st.OK)
		assert.Equal(t, 2, st.Throttled)
		assert.InDelta(t, 1000, s.TokenCapacity(time.Now().Add(-15*time.Second), time.Now().Add(45*time.Second)), 1e-9)
	})
}

func TestTokenBucketTokenQuotaRefillsLikeTheRequestQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleOpenAI, Algorithm: TokenBucket, Limit: 60, Window: time.Minute, TokenLimit: 6000})
		resp := get(t, s, "/", 6000)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "0", resp.Header.Get("X-Ratelimit-Remaining-Tokens"))
		assert.Equal(t, "1m0s", resp.Header.Get("X-Ratelimit-Reset-Tokens"))
		assert.Equal(t, "1s", resp.Header.Get("X-Ratelimit-Reset-Requests"))
		time.Sleep(10 * time.Second)
		resp = get(t, s, "/", 1500)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Equal(t, "5", resp.Header.Get("Retry-After"), "1000 refilled, 500 more take 5 s")
	})
}

func TestSetTokenLimitChangesEveryBucketsTokenQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleOpenAI, Limit: 100, Window: time.Minute, TokenLimit: 1000,
			Routes: map[string]int{"/v1/embeddings": 100}})
		start := time.Now()
		get(t, s, "/v1/chat", 100)
		get(t, s, "/v1/embeddings", 100)
		time.Sleep(30 * time.Second)
		s.SetTokenLimit(500)
		assert.Equal(t, "1000", get(t, s, "/v1/chat", 0).Header.Get("X-Ratelimit-Limit-Tokens"), "a fixed window keeps its quota")
		time.Sleep(30 * time.Second)
		for _, path := range []string{"/v1/chat", "/v1/embeddings"} {
			resp := get(t, s, path, 500)
			assert.Equal(t, "500", resp.Header.Get("X-Ratelimit-Limit-Tokens"), path)
			assert.Equal(t, "0", resp.Header.Get("X-Ratelimit-Remaining-Tokens"), path)
		}
		assert.InDelta(t, 2*(1000+500), s.TokenCapacity(start, start.Add(2*time.Minute)), 1e-9)
	})
}

func TestSetTokenLimitPanicsWithoutATokenQuotaOrOnANonPositiveLimit(t *testing.T) {
	assert.PanicsWithValue(t, "apisim: invalid SetTokenLimit: Config.TokenLimit is 0 (no token quota)", func() {
		New(Config{Style: StyleOpenAI, Limit: 1, Window: time.Second}).SetTokenLimit(10)
	})
	assert.PanicsWithValue(t, "apisim: invalid SetTokenLimit 0: must be > 0", func() {
		New(Config{Style: StyleOpenAI, Limit: 1, Window: time.Second, TokenLimit: 5}).SetTokenLimit(0)
	})
	assert.Zero(t, New(Config{Style: StyleOpenAI, Limit: 1, Window: time.Second}).TokenCapacity(time.Now(), time.Now().Add(time.Hour)))
}

func TestMalformedTokenHeadersCountAsZero(t *testing.T) {
	for _, v := range []string{"", "abc", "-5", "1e9", "3.5", "99999999999999999999999"} {
		assert.Zero(t, parseTokens(v), "%q", v)
	}
	assert.Equal(t, 42, parseTokens(" 42 "))
}

func TestSetLimitHalvingMidRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleGitHub, Limit: 10, Window: time.Minute})
		assert.Equal(t, 4, countOK(t, s, 4))
		s.SetLimit(5)
		assert.Equal(t, 6, countOK(t, s, 100), "the current window keeps its quota of 10")
		time.Sleep(time.Minute)
		resp := get(t, s, "/", 0)
		assert.Equal(t, "5", resp.Header.Get("X-Ratelimit-Limit"))
		assert.Equal(t, 4, countOK(t, s, 100))
	})
}

func TestSetLimitPanicsOnANonPositiveLimit(t *testing.T) {
	s := New(Config{Style: StyleBare, Limit: 10, Window: time.Minute, Routes: map[string]int{"/a/": 1}})
	assert.PanicsWithValue(t, "apisim: invalid SetLimit 0: must be > 0", func() { s.SetLimit(0) })
	assert.PanicsWithValue(t, "apisim: invalid SetRouteLimit -1: must be > 0", func() { s.SetRouteLimit("/a/", -1) })
	assert.PanicsWithValue(t, `apisim: invalid SetRouteLimit prefix "/b/": not in Config.Routes`, func() { s.SetRouteLimit("/b/", 1) })
}

func TestRoutesHaveTheirOwnBucketsAndTheLongestPrefixWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleGitHub, Limit: 3, Window: time.Minute,
			Routes: map[string]int{"/search/": 2, "/search/code/": 1}})
		assert.Equal(t, 2, countOKAt(t, s, "/search/issues", 10))
		assert.Equal(t, 1, countOKAt(t, s, "/search/code/x", 10))
		assert.Equal(t, 3, countOKAt(t, s, "/repos/a/b", 10))
		assert.Equal(t, "search-code", get(t, s, "/search/code/y", 0).Header.Get("X-Ratelimit-Resource"))

		s.SetRouteLimit("/search/", 4)
		time.Sleep(time.Minute)
		assert.Equal(t, 4, countOKAt(t, s, "/search/issues", 10))
		assert.Equal(t, 3, countOKAt(t, s, "/", 10), "the shared bucket is unaffected")

		keys := map[string]int{}
		for _, e := range s.Events() {
			keys[e.Key]++
		}
		assert.Equal(t, map[string]int{"search": 20, "search-code": 11, "default": 20}, keys)
	})
}

func TestRouteBucketsAndTokenQuotasKeepTheBurstRatio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleOpenAI, Algorithm: TokenBucket, Limit: 10, Burst: 20, Window: time.Minute,
			TokenLimit: 100, Routes: map[string]int{"/small/": 5}})
		assert.Equal(t, 20, countOKAt(t, s, "/", 30))
		resp := get(t, s, "/small/x", 150)
		require.Equal(t, http.StatusOK, resp.StatusCode, "token capacity is 2 × 100")
		assert.Equal(t, "50", resp.Header.Get("X-Ratelimit-Remaining-Tokens"))
		assert.Equal(t, 9, countOKAt(t, s, "/small/x", 30), "request capacity is 2 × the route's 5")
	})
}

func TestEventsRecordEveryRequestInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleBare, Limit: 1, Window: time.Minute})
		start := time.Now()
		get(t, s, "/a", 5)
		time.Sleep(time.Second)
		get(t, s, "/b", 0)
		assert.Equal(t, []Event{
			{At: start, Status: 200, Key: "default", Path: "/a", Tokens: 5},
			{At: start.Add(time.Second), Status: 429, Key: "default", Path: "/b", Tokens: 0},
		}, s.Events())
		events := s.Events()
		events[0].Status = 0
		assert.Equal(t, 200, s.Events()[0].Status, "Events returns a copy")
	})
}

func TestResetStartsAfreshWithTheConfiguredLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleIETF, Limit: 5, Window: time.Minute, UnseenShare: 0.2})
		countOK(t, s, 10)
		s.SetLimit(2)
		time.Sleep(90 * time.Second)
		s.Reset()
		assert.Zero(t, s.Stats())
		assert.Empty(t, s.Events())
		resp := get(t, s, "/", 0)
		assert.Equal(t, `"default";r=4;t=60`, resp.Header.Get("RateLimit"), "a full quota, a window starting now")
		assert.Equal(t, `"default";q=5;w=60`, resp.Header.Get("RateLimit-Policy"))
	})
}

func TestAClockGoingBackwardsCannotRewindTheQuota(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(t time.Time) { mu.Lock(); defer mu.Unlock(); now = t }
	s := New(Config{Style: StyleBare, Limit: 2, Window: time.Minute, Now: clock})
	set(now.Add(90 * time.Second))
	assert.Equal(t, 2, countOK(t, s, 10))
	set(now.Add(-time.Hour))
	assert.Zero(t, countOK(t, s, 10), "still the second window")
}

func TestServerIsSafeForConcurrentUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleOpenAI, Limit: 100, Window: time.Minute, TokenLimit: 1 << 20,
			UnseenShare: 0.1, Latency: 50 * time.Millisecond, Routes: map[string]int{"/b/": 50}})
		var wg sync.WaitGroup
		for w := range 32 {
			wg.Go(func() {
				for i := range 20 {
					get(t, s, fmt.Sprintf("/%c/%d", 'a'+w%2, i), 10)
					time.Sleep(time.Second)
				}
			})
			wg.Go(func() { s.Stats(); s.Events(); s.Capacity(time.Now(), time.Now().Add(time.Minute)) })
		}
		wg.Wait()
		st := s.Stats()
		assert.Equal(t, 640, st.Requests)
		assert.Equal(t, st.Requests, st.OK+st.Throttled)
		assert.LessOrEqual(t, st.OK, 100+50, "both buckets' quotas hold within one window")
		assert.Equal(t, 10*st.OK, st.TokensUsed)
		assert.Len(t, s.Events(), 640)
	})
}

func TestNewPanicsNamingTheInvalidField(t *testing.T) {
	valid := Config{Style: StyleGitHub, Limit: 1, Window: time.Second}
	tests := []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.Style = "" }, `apisim: invalid Config.Style "": want one of Styles()`},
		{func(c *Config) { c.Style = "bitbucket" }, `apisim: invalid Config.Style "bitbucket": want one of Styles()`},
		{func(c *Config) { c.Algorithm = "leaky" }, `apisim: invalid Config.Algorithm "leaky": want FixedWindow, SlidingWindow or TokenBucket`},
		{func(c *Config) { c.Limit = 0 }, "apisim: invalid Config.Limit 0: must be > 0"},
		{func(c *Config) { c.Window = -time.Second }, "apisim: invalid Config.Window -1s: must be > 0"},
		{func(c *Config) { c.Burst = -1 }, "apisim: invalid Config.Burst -1: must be ≥ 0"},
		{func(c *Config) { c.TokenLimit = -1 }, "apisim: invalid Config.TokenLimit -1: must be ≥ 0"},
		{func(c *Config) { c.UnseenShare = 1 }, "apisim: invalid Config.UnseenShare 1: must be in [0, 1)"},
		{func(c *Config) { c.UnseenShare = nan() }, "apisim: invalid Config.UnseenShare NaN: must be in [0, 1)"},
		{func(c *Config) { c.Latency = -1 }, "apisim: invalid Config.Latency -1ns: must be ≥ 0"},
		{func(c *Config) { c.RetryAfterOnSuccess = -time.Second }, "apisim: invalid Config.RetryAfterOnSuccess -1s: must be ≥ 0"},
		{func(c *Config) { c.Routes = map[string]int{"search": 1} }, `apisim: invalid Config.Routes "search": prefix must start with "/"`},
		{func(c *Config) { c.Routes = map[string]int{"/a/": 0} }, `apisim: invalid Config.Routes "/a/": 0: limit must be > 0`},
		{func(c *Config) { c.Routes = map[string]int{"/default": 1} }, `apisim: invalid Config.Routes "/default": its bucket name "default" collides with the shared bucket`},
	}
	for _, tt := range tests {
		cfg := valid
		tt.mutate(&cfg)
		assert.PanicsWithValue(t, tt.want, func() { New(cfg) })
	}
}

func TestDefaultAlgorithmIsFixedWindowExceptForShopify(t *testing.T) {
	assert.Equal(t, FixedWindow, New(Config{Style: StyleGitHub, Limit: 1, Window: time.Second}).cfg.Algorithm)
	assert.Equal(t, TokenBucket, New(Config{Style: StyleShopify, Limit: 1, Window: time.Second}).cfg.Algorithm)
	assert.Equal(t, FixedWindow, New(Config{Style: StyleShopify, Algorithm: FixedWindow, Limit: 1, Window: time.Second}).cfg.Algorithm)
}

func TestNewCopiesRoutesSoTheCallerCannotChangeThemLater(t *testing.T) {
	routes := map[string]int{"/a/": 1}
	s := New(Config{Style: StyleBare, Limit: 5, Window: time.Minute, Routes: routes})
	routes["/a/"] = 100
	s.Reset()
	assert.Equal(t, 1, countOKAt(t, s, "/a/x", 10))
}

// countOK sends n requests to "/" at the current instant and counts the 200s.
func countOK(t *testing.T, s *Server, n int) int { return countOKAt(t, s, "/", n) }

func countOKAt(t *testing.T, s *Server, path string, n int) int {
	t.Helper()
	ok := 0
	for range n {
		if get(t, s, path, 0).StatusCode == http.StatusOK {
			ok++
		}
	}
	return ok
}

// An app quota (Config.AppLimit) is counted by every request of every route,
// beside its bucket's, and StyleX states it as X does its app quota.
func TestAppLimitCountsEveryRoute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleX, Limit: 10, Window: time.Minute, Routes: map[string]int{"/2/lists/": 10}, AppLimit: 3})
		r1 := get(t, s, "/2/lists/1", 0)
		assert.Equal(t, "10", r1.Header.Get("X-Rate-Limit-Limit"))
		assert.Equal(t, "9", r1.Header.Get("X-Rate-Limit-Remaining"))
		assert.Equal(t, "3", r1.Header.Get("X-App-Rate-Limit-Limit"))
		assert.Equal(t, "2", r1.Header.Get("X-App-Rate-Limit-Remaining"))
		assert.Equal(t, "946684860", r1.Header.Get("X-App-Rate-Limit-Reset"))
		get(t, s, "/2/users/1", 0)
		r3 := get(t, s, "/2/users/2", 0)
		assert.Equal(t, http.StatusOK, r3.StatusCode)
		assert.Equal(t, "0", r3.Header.Get("X-App-Rate-Limit-Remaining"), "two routes spent it")
		r4 := get(t, s, "/2/lists/2", 0)
		assert.Equal(t, http.StatusTooManyRequests, r4.StatusCode, "a route with room in its own quota is refused by the app's")
		assert.Equal(t, "9", r4.Header.Get("X-Rate-Limit-Remaining"))
	})
}
