package redisstore_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/redisstore"
	"github.com/pacer-go/pacer/redisstore/internal/redistest"
	"github.com/pacer-go/pacer/store"
)

// hammer makes n reservations of one token from g goroutines and returns how
// many were granted.
func hammer(t *testing.T, s store.Store, key string, r store.Request, g, n int) int {
	t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted int
	)
	for range g {
		wg.Go(func() {
			for range n / g {
				gr, err := s.Reserve(context.Background(), key, r)
				if !assert.NoError(t, err) {
					return
				}
				if gr.OK {
					mu.Lock()
					granted++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return granted
}

func TestLeasesCutRedisCallsAtHighRates(t *testing.T) {
	srv := redistest.Start(t)
	r := store.Request{Tokens: 1, Limit: 20000, Burst: 100}
	const n = 4000

	leased := newStore(t, srv, redisstore.WithPrefix(uniquePrefix()))
	require.Equal(t, n, hammer(t, leased, "k", r, 8, n))
	ls := leased.Stats()

	unleased := newStore(t, srv, redisstore.WithPrefix(uniquePrefix()), redisstore.WithLeaseWindow(0))
	require.Equal(t, n, hammer(t, unleased, "k", r, 8, n))
	us := unleased.Stats()

	t.Logf("redis calls for %d reservations: leased %d, unleased %d", n, ls.Calls, us.Calls)
	require.Zero(t, ls.Fallbacks+us.Fallbacks, "Redis failed: %+v %+v", ls, us)
	assert.EqualValues(t, n, us.Calls, "one call per reservation without leases")
	assert.LessOrEqual(t, ls.Calls*5, int64(n), "leases cut calls at least 5-fold")
	assert.Greater(t, ls.Leased, int64(n/2))
}

func TestLeasesStayWithinTheSharedLimit(t *testing.T) {
	// Two processes with leases book 3 s of tokens between them; the union of
	// their schedules is a valid token-bucket schedule.
	srv := redistest.Start(t)
	prefix := uniquePrefix()
	a := newStore(t, srv, redisstore.WithPrefix(prefix))
	b := newStore(t, srv, redisstore.WithPrefix(prefix))
	const limit, burst = 200, 20
	r := store.Request{Tokens: 1, Limit: limit, Burst: burst}
	var (
		mu    sync.Mutex
		slots []time.Duration
		wg    sync.WaitGroup
	)
	start := time.Now()
	for i := range 8 {
		s := []*redisstore.Store{a, b}[i%2]
		wg.Go(func() {
			for range 75 {
				g, err := s.Reserve(context.Background(), "k", r)
				if !assert.NoError(t, err) || !assert.True(t, g.OK) {
					return
				}
				mu.Lock()
				slots = append(slots, time.Since(start)+g.Delay)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, slots, 600)
	// By any time x, at most burst + x×limit tokens may have been used.
	for _, at := range slots {
		n := 0
		for _, other := range slots {
			if other <= at {
				n++
			}
		}
		allowed := burst + int(at.Seconds()*limit) + 2
		require.LessOrEqual(t, n, allowed, "tokens due by %v", at)
	}
	assert.Less(t, a.Stats().Calls+b.Stats().Calls, int64(600/5))
}

// booked reads how far ahead key's bucket is booked, in seconds, from Redis
// itself.
func booked(t *testing.T, c *redis.Client, key string) float64 {
	t.Helper()
	ctx := context.Background()
	v, err := c.HGet(ctx, key, "tat").Result()
	require.NoError(t, err)
	now, err := c.Time(ctx).Result()
	require.NoError(t, err)
	tat, err := strconv.ParseFloat(v, 64)
	require.NoError(t, err)
	return max(tat-float64(now.UnixMicro()), 0) / 1e6
}

func TestUnusedLeasedTokensGoBackToRedis(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	for _, how := range []string{"AtTheLeaseDeadline", "OnClose"} {
		t.Run(how, func(t *testing.T) {
			prefix := uniquePrefix()
			s := redisstore.New(srv.Client(t), redisstore.WithPrefix(prefix), redisstore.WithLogger(quiet),
				redisstore.WithLeaseWindow(time.Second))
			defer s.Close()
			// 10 per second, a burst of 100: 30 tokens come at once and the
			// refill during the test is about one token per 100 ms.
			r := store.Request{Tokens: 1, Limit: 10, Burst: 100}
			start := time.Now()
			require.Equal(t, 30, hammer(t, s, "k", r, 1, 30))
			held := s.Stats().Held
			require.GreaterOrEqual(t, held, 2.0, "the test needs unused leased tokens")
			require.InDelta(t, 30+held, 10*(booked(t, c, prefix+"k")+time.Since(start).Seconds()), 1)

			if how == "OnClose" {
				require.NoError(t, s.Close())
			} else {
				require.Eventually(t, func() bool { return s.Stats().Held == 0 }, 5*time.Second, 10*time.Millisecond)
				require.NoError(t, s.Flush(context.Background()))
			}
			elapsed := time.Since(start).Seconds()
			assert.InDelta(t, max(30-10*elapsed, 0), 10*booked(t, c, prefix+"k"), 1,
				"only the 30 tokens used stay booked (%.1f leased were returned)", held)
		})
	}
}

func TestLeaseIsRebookedWhenTheLimitChanges(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	prefix := uniquePrefix()
	s := newStore(t, srv, redisstore.WithPrefix(prefix), redisstore.WithLeaseWindow(500*time.Millisecond))
	ctx := context.Background()
	fast := store.Request{Tokens: 1, Limit: 1000, Burst: 1}
	for i := 0; s.Stats().Held < 20; i++ {
		require.Less(t, i, 5000, "no lease of 20 tokens")
		_, err := s.Reserve(ctx, "k", fast)
		require.NoError(t, err)
	}
	held := s.Stats().Held
	before := booked(t, c, prefix+"k") // includes the held tokens: they are booked
	t0 := time.Now()

	// A tenfold slower limit must not be served from tokens booked at the
	// fast one: the old lease goes back (1 ms per token), in the same call
	// that books the next token at the new limit (10 ms).
	slow := store.Request{Tokens: 1, Limit: 100, Burst: 1}
	calls := s.Stats().Calls
	g, err := s.Reserve(ctx, "k", slow)
	require.NoError(t, err)
	assert.Equal(t, calls+1, s.Stats().Calls, "rebooked in one call")
	assert.True(t, g.OK)
	after := booked(t, c, prefix+"k")
	elapsed := time.Since(t0).Seconds()
	assert.InDelta(t, before-held/1000-elapsed+0.01*s.Stats().Held+0.01, after, 0.005,
		"%.0f leased tokens should have been returned", held)
	assert.LessOrEqual(t, s.Stats().Held, 50.0, "a new lease is sized for the slower limit: 500 ms of it")
}

func TestPublishedPauseStopsLeasedTokensAtOnce(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, redisstore.WithPrefix(uniquePrefix()))
	r := store.Request{Tokens: 1, Limit: 1000, Burst: 100}
	require.Equal(t, 200, hammer(t, s, "k", r, 2, 200))
	// The last lease may have been used up to its last token (how the 200
	// fell into leases depends on timing): book until one is held, as the
	// pause must stop leased tokens.
	for i := 0; s.Stats().Held == 0; i++ {
		require.Less(t, i, 1000, "no lease held")
		_, err := s.Reserve(context.Background(), "k", r)
		require.NoError(t, err)
	}

	require.NoError(t, s.Publish(context.Background(), "k", store.State{Pause: 2 * time.Second}))
	g, err := s.Reserve(context.Background(), "k", r)
	require.NoError(t, err)
	assert.InDelta(t, 2, g.Delay.Seconds(), 0.1)
	assert.InDelta(t, 2, g.Shared.Pause.Seconds(), 0.1)
}

func TestKeysExpireOnceIdle(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	prefix := uniquePrefix()
	s := newStore(t, srv, redisstore.WithPrefix(prefix), redisstore.WithIdleTTL(time.Minute), redisstore.WithLeaseWindow(0))
	ctx := context.Background()

	// Two tokens from a bucket of one at 1 per second: it is full again in
	// two seconds, and kept for the TTL after that.
	_, err := s.Reserve(ctx, "k", store.Request{Tokens: 2, Limit: 1, Burst: 1})
	require.NoError(t, err)
	ttl, err := c.PTTL(ctx, prefix+"k").Result()
	require.NoError(t, err)
	assert.InDelta(t, (time.Minute + 2*time.Second).Seconds(), ttl.Seconds(), 0.1)

	// A pause outlives the bucket.
	require.NoError(t, s.Publish(ctx, "k", store.State{Pause: time.Hour}))
	require.NoError(t, s.Flush(ctx))
	ttl, err = c.PTTL(ctx, prefix+"k").Result()
	require.NoError(t, err)
	assert.InDelta(t, (time.Hour + time.Minute).Seconds(), ttl.Seconds(), 0.1)

	// A store whose keys expire quickly: an idle key vanishes.
	short := newStore(t, srv, redisstore.WithPrefix(prefix), redisstore.WithIdleTTL(50*time.Millisecond), redisstore.WithLeaseWindow(0))
	_, err = short.Reserve(ctx, "idle", store.Request{Tokens: 1, Limit: 1000, Burst: 1})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n, err := c.Exists(ctx, prefix+"idle").Result()
		return err == nil && n == 0
	}, 5*time.Second, 10*time.Millisecond)
	// Reads of a key that does not exist do not create it.
	_, err = short.Reserve(ctx, "idle", store.Request{Tokens: 1, Limit: store.Unlimited})
	require.NoError(t, err)
	n, err := c.Exists(ctx, prefix+"idle").Result()
	require.NoError(t, err)
	assert.Zero(t, n)
}

func TestScriptIsReloadedWhenRedisForgetsIt(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	s := newStore(t, srv, redisstore.WithPrefix(uniquePrefix()), redisstore.WithLeaseWindow(0))
	ctx := context.Background()
	r := store.Request{Tokens: 1, Limit: 10, Burst: 10}
	_, err := s.Reserve(ctx, "k", r)
	require.NoError(t, err)
	require.NoError(t, c.ScriptFlush(ctx).Err())
	g, err := s.Reserve(ctx, "k", r)
	require.NoError(t, err)
	assert.True(t, g.OK)
	assert.Zero(t, s.Stats().Failures)
	assert.Zero(t, s.Stats().Fallbacks)
}

// Redis calls per request at the request rates of one replica (issue 25:
// at most 0.1 a request at 1,000 a second), with the default lease window,
// each rate for two seconds of real time, well under the shared limit.
func TestRedisCallsPerRequestByRate(t *testing.T) {
	srv := redistest.Start(t)
	for _, rate := range []int{10, 100, 1000} {
		s := newStore(t, srv, redisstore.WithPrefix(uniquePrefix()))
		r := store.Request{Tokens: 1, Limit: 2 * float64(rate), Burst: max(1, rate/5)}
		const span = 2 * time.Second
		n := rate * int(span/time.Second)
		tick := time.NewTicker(time.Second / time.Duration(rate))
		granted := 0
		for range n {
			<-tick.C
			gr, err := s.Reserve(context.Background(), "k", r)
			require.NoError(t, err)
			if gr.OK {
				granted++
			}
		}
		tick.Stop()
		st := s.Stats()
		require.Zero(t, st.Fallbacks, "Redis failed: %+v", st)
		perRequest := float64(st.Calls) / float64(n)
		t.Logf("%4d requests/s: %d reservations, %d granted, %d Redis calls: %.3f a request", rate, n, granted, st.Calls, perRequest)
		if rate >= 1000 {
			assert.LessOrEqual(t, perRequest, 0.1, "Redis calls per request at %d/s", rate)
		}
	}
}
