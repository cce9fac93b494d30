// Package storetest is the conformance suite every pacer.Store
// implementation passes: pacer.MemoryStore defines the semantics, and
// redisstore must behave the same against a real Redis.
//
// The suite runs in real time (a store backed by a server has the server's
// clock, which a synctest bubble cannot fake), so it uses rates of about one
// token per second and compares delays with a tolerance far above any
// scheduling noise.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer"
)

// Tolerance is how far a measured delay may be from the computed one.
const Tolerance = 150 * time.Millisecond

// Peers returns a new handle on one shared backend each time it is called:
// the same MemoryStore, or a new redisstore.Store on the same Redis and key
// prefix, as another process would have. The suite calls it afresh per test
// and expects a clean backend each time.
type Peers func() pacer.Store

// Flusher is implemented by stores that apply Cancel and Publish in the
// background; the suite flushes them before checking the effect.
type Flusher interface {
	Flush(ctx context.Context) error
}

// Run runs the conformance suite. newPeers is called once per subtest and
// must register its own cleanup with t.
func Run(t *testing.T, newPeers func(t *testing.T) Peers) {
	tests := []struct {
		name string
		fn   func(t *testing.T, peers Peers)
	}{
		{"BurstIsGrantedAtOnceThenTokensComeAtTheLimit", testBurstThenLimit},
		{"RefusalBeyondMaxWaitBooksNothing", testMaxWaitRefusal},
		{"ContextDeadlineBoundsTheWait", testContextDeadline},
		{"EndedContextFailsAtOnce", testEndedContext},
		{"CancelReturnsTokensToTheBucket", testCancel},
		{"InfiniteLimitBooksNothing", testInfiniteLimit},
		{"FractionalTokensAreBooked", testFractionalTokens},
		{"EachBookingIsSpacedAtItsOwnLimit", testLimitChange},
		{"RefusalsDoNotCompoundDebt", testRefusalsDoNotCompoundDebt},
		{"PauseDelaysEveryReservation", testPause},
		{"PauseIsExtendedButNeverShortened", testPauseExtends},
		{"PauseBeyondMaxWaitRefuses", testPauseMaxWait},
		{"LearnedLimitIsSharedBetweenPeers", testLearnedShared},
		{"BucketIsSharedBetweenPeers", testBucketShared},
		{"KeysAreIndependent", testKeysIndependent},
		{"ConcurrentReservationsNeverExceedTheLimit", testConcurrent},
		{"InvalidRequestsAreErrorsOrClampedNeverPanics", testInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newPeers(t))
		})
	}
}

func flush(t *testing.T, s pacer.Store) {
	t.Helper()
	if f, ok := s.(Flusher); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, f.Flush(ctx))
	}
}

func reserve(t *testing.T, s pacer.Store, key string, r pacer.StoreRequest) pacer.StoreGrant {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r.MaxWait == 0 {
		r.MaxWait = time.Hour // the 5 s context above must not bound the wait
	}
	g, err := s.Reserve(ctx, key, r)
	require.NoError(t, err)
	return g
}

func assertDelay(t *testing.T, want time.Duration, g pacer.StoreGrant) {
	t.Helper()
	assert.InDelta(t, want.Seconds(), g.Delay.Seconds(), Tolerance.Seconds(), "delay %v, want %v", g.Delay, want)
}

func req(tokens float64, limit pacer.Limit, burst int) pacer.StoreRequest {
	return pacer.StoreRequest{Tokens: tokens, Limit: limit, Burst: burst}
}

func testBurstThenLimit(t *testing.T, peers Peers) {
	s := peers()
	for i := range 3 {
		g := reserve(t, s, "k", req(1, 1, 3))
		require.True(t, g.OK)
		assert.Zero(t, g.Delay, "token %d of the burst", i+1)
	}
	assertDelay(t, time.Second, reserve(t, s, "k", req(1, 1, 3)))
	assertDelay(t, 2*time.Second, reserve(t, s, "k", req(1, 1, 3)))
}

func testMaxWaitRefusal(t *testing.T, peers Peers) {
	s := peers()
	require.True(t, reserve(t, s, "k", req(1, 1, 1)).OK)

	r := req(1, 1, 1)
	r.MaxWait = 300 * time.Millisecond
	g := reserve(t, s, "k", r)
	assert.False(t, g.OK)
	assertDelay(t, time.Second, g)

	// Nothing was booked: the next token still comes after one second, not two.
	g = reserve(t, s, "k", req(1, 1, 1))
	assert.True(t, g.OK)
	assertDelay(t, time.Second, g)
}

func testContextDeadline(t *testing.T, peers Peers) {
	s := peers()
	require.True(t, reserve(t, s, "k", req(1, 1, 1)).OK)

	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	g, err := s.Reserve(ctx, "k", req(1, 1, 1)) // no MaxWait: the deadline bounds it
	require.NoError(t, err)
	assert.False(t, g.OK)

	g = reserve(t, s, "k", req(1, 1, 1))
	assertDelay(t, time.Second, g)
}

func testEndedContext(t *testing.T, peers Peers) {
	s := peers()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Reserve(ctx, "k", req(1, 1, 1))
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, reserve(t, s, "k", req(1, 1, 1)).Delay, "the failed call booked nothing")
}

func testCancel(t *testing.T, peers Peers) {
	s := peers()
	require.Zero(t, reserve(t, s, "k", req(2, 1, 2)).Delay)
	assertDelay(t, time.Second, reserve(t, s, "k", req(1, 1, 2)))
	s.Cancel("k", req(1, 1, 2))
	flush(t, s)
	assertDelay(t, time.Second, reserve(t, s, "k", req(1, 1, 2)))

	// Returning more than was taken fills the bucket, but never beyond the burst.
	s.Cancel("k", req(10, 1, 2))
	flush(t, s)
	assert.Zero(t, reserve(t, s, "k", req(2, 1, 2)).Delay)
	assertDelay(t, time.Second, reserve(t, s, "k", req(1, 1, 2)))
}

func testInfiniteLimit(t *testing.T, peers Peers) {
	s := peers()
	for range 5 {
		g := reserve(t, s, "k", req(100, pacer.Inf, 1))
		assert.True(t, g.OK)
		assert.Zero(t, g.Delay)
	}
	assert.Zero(t, reserve(t, s, "k", req(1, 1, 1)).Delay, "Inf booked nothing")
}

func testFractionalTokens(t *testing.T, peers Peers) {
	s := peers()
	assert.Zero(t, reserve(t, s, "k", req(2.5, 1, 3)).Delay)
	assertDelay(t, 500*time.Millisecond, reserve(t, s, "k", req(1, 1, 3)))
}

func testLimitChange(t *testing.T, peers Peers) {
	s := peers()
	require.Zero(t, reserve(t, s, "k", req(1, 1, 1)).Delay)
	// The booked token keeps its time (the bucket is full again in 1 s); the
	// next, at half the rate, comes 2 s after it was full.
	assertDelay(t, time.Second, reserve(t, s, "k", req(1, 0.5, 1)))
	// At 4 per second (a burst of 1) the next comes once those are spent,
	// 3 s in, and the one after a quarter second later.
	assertDelay(t, 3*time.Second, reserve(t, s, "k", req(1, 4, 1)))
	// A very slow limit, refused, changes nothing for the faster one.
	r := req(1, 0.01, 1)
	r.MaxWait = time.Millisecond
	require.False(t, reserve(t, s, "k", r).OK)
	assertDelay(t, 3250*time.Millisecond, reserve(t, s, "k", req(1, 4, 1)))
}

func testRefusalsDoNotCompoundDebt(t *testing.T, peers Peers) {
	s := peers()
	require.Zero(t, reserve(t, s, "k", req(1, 1, 1)).Delay)
	// Refused reservations at another limit change nothing.
	for range 5 {
		r := req(1, 0.5, 1)
		r.MaxWait = time.Millisecond
		g := reserve(t, s, "k", r)
		require.False(t, g.OK)
		assertDelay(t, time.Second, g)
	}
	assertDelay(t, time.Second, reserve(t, s, "k", req(1, 1, 1)))
}

func testPause(t *testing.T, peers Peers) {
	a, b := peers(), peers()
	require.NoError(t, a.Publish(context.Background(), "k", pacer.SharedState{Pause: 2 * time.Second}))
	g := reserve(t, a, "k", req(1, 10, 1))
	assert.True(t, g.OK)
	assertDelay(t, 2*time.Second, g)
	assert.InDelta(t, 2, g.Shared.Pause.Seconds(), Tolerance.Seconds())

	flush(t, a)
	g = reserve(t, b, "k", req(1, 10, 1))
	assertDelay(t, 2100*time.Millisecond, g) // after a's token, at 10 per second
	g = reserve(t, b, "k", req(1, pacer.Inf, 1))
	assertDelay(t, 2*time.Second, g)
	assert.True(t, g.OK)
}

func testPauseExtends(t *testing.T, peers Peers) {
	s := peers()
	ctx := context.Background()
	require.NoError(t, s.Publish(ctx, "k", pacer.SharedState{Pause: 2 * time.Second}))
	require.NoError(t, s.Publish(ctx, "k", pacer.SharedState{Pause: time.Second}))
	flush(t, s)
	assertDelay(t, 2*time.Second, reserve(t, s, "k", req(1, pacer.Inf, 1)))
	require.NoError(t, s.Publish(ctx, "k", pacer.SharedState{Pause: 3 * time.Second}))
	flush(t, s)
	assertDelay(t, 3*time.Second, reserve(t, s, "k", req(1, pacer.Inf, 1)))
}

func testPauseMaxWait(t *testing.T, peers Peers) {
	s := peers()
	require.NoError(t, s.Publish(context.Background(), "k", pacer.SharedState{Pause: 2 * time.Second}))
	flush(t, s)
	for _, limit := range []pacer.Limit{1, pacer.Inf} {
		r := req(1, limit, 1)
		r.MaxWait = time.Second
		g := reserve(t, s, "k", r)
		assert.False(t, g.OK, "limit %v", limit)
		assertDelay(t, 2*time.Second, g)
	}
	assert.Zero(t, reserve(t, s, "other", req(1, 1, 1)).Delay)
}

func testLearnedShared(t *testing.T, peers Peers) {
	a, b := peers(), peers()
	ctx := context.Background()
	assert.Zero(t, reserve(t, b, "k", req(1, pacer.Inf, 1)).Shared.Limit, "nothing learned yet")

	require.NoError(t, a.Publish(ctx, "k", pacer.SharedState{Limit: 4.5, Burst: 3}))
	flush(t, a)
	sh := reserve(t, b, "k", req(1, 2, 1)).Shared
	assert.Equal(t, pacer.Limit(4.5), sh.Limit)
	assert.Equal(t, 3, sh.Burst)
	assert.Less(t, sh.Age, Tolerance)
	assert.GreaterOrEqual(t, sh.Age, time.Duration(0))

	require.NoError(t, b.Publish(ctx, "k", pacer.SharedState{Limit: 0.25, Burst: 1}))
	flush(t, b)
	sh = reserve(t, a, "k", req(1, pacer.Inf, 1)).Shared
	assert.Equal(t, pacer.Limit(0.25), sh.Limit, "the newest learned limit wins")
	assert.Equal(t, 1, sh.Burst)

	// A pause alone leaves the learned limit alone.
	require.NoError(t, a.Publish(ctx, "k", pacer.SharedState{Pause: time.Millisecond}))
	flush(t, a)
	assert.Equal(t, pacer.Limit(0.25), reserve(t, b, "k", req(1, pacer.Inf, 1)).Shared.Limit)
	assert.Zero(t, reserve(t, b, "other", req(1, pacer.Inf, 1)).Shared.Limit)
}

func testBucketShared(t *testing.T, peers Peers) {
	a, b := peers(), peers()
	assert.Zero(t, reserve(t, a, "k", req(2, 1, 2)).Delay)
	assertDelay(t, time.Second, reserve(t, b, "k", req(1, 1, 2)))
	assertDelay(t, 2*time.Second, reserve(t, a, "k", req(1, 1, 2)))
}

func testKeysIndependent(t *testing.T, peers Peers) {
	s := peers()
	assert.Zero(t, reserve(t, s, "a", req(1, 1, 1)).Delay)
	assert.Zero(t, reserve(t, s, "b", req(1, 1, 1)).Delay)
	assertDelay(t, time.Second, reserve(t, s, "a", req(1, 1, 1)))
}

// testConcurrent books from several goroutines on two peers and checks the
// resulting schedule is a valid token bucket schedule: no window holds more
// than burst + window×limit tokens, and the schedule is not longer than
// needed.
func testConcurrent(t *testing.T, peers Peers) {
	const (
		limit      = 100
		burst      = 10
		goroutines = 8
		each       = 25
		n          = goroutines * each
	)
	stores := []pacer.Store{peers(), peers()}
	var (
		mu    sync.Mutex
		slots []time.Time
		fails atomic.Int32
		wg    sync.WaitGroup
	)
	start := time.Now()
	for i := range goroutines {
		wg.Go(func() {
			s := stores[i%len(stores)]
			for range each {
				g, err := s.Reserve(context.Background(), "k", req(1, limit, burst))
				if err != nil || !g.OK {
					fails.Add(1)
					continue
				}
				at := time.Now().Add(g.Delay)
				mu.Lock()
				slots = append(slots, at)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Zero(t, fails.Load())
	require.Len(t, slots, n)
	slices.SortFunc(slots, func(a, b time.Time) int { return a.Compare(b) })

	interval := time.Second / limit
	for _, window := range []time.Duration{100 * time.Millisecond, 500 * time.Millisecond} {
		allowed := burst + int(window/interval) + 1
		maxIn := 0
		for i, j := 0, 0; j < len(slots); j++ {
			for slots[j].Sub(slots[i]) >= window-Tolerance/10 {
				i++
			}
			maxIn = max(maxIn, j-i+1)
		}
		assert.LessOrEqual(t, maxIn, allowed+1, "tokens within %v", window)
	}
	span := slots[n-1].Sub(start)
	want := time.Duration(n-burst) * interval
	assert.InDelta(t, want.Seconds(), span.Seconds(), Tolerance.Seconds()*2, "schedule length")
}

func testInvalid(t *testing.T, peers Peers) {
	s := peers()
	for _, limit := range []pacer.Limit{0, -1, pacer.Limit(math.NaN())} {
		_, err := s.Reserve(context.Background(), "k", req(1, limit, 1))
		assert.Error(t, err, "limit %v", limit)
		var rle *pacer.RateLimitError
		assert.False(t, errors.As(err, &rle), "an invalid request is not a rate limit")
	}
	for _, r := range []pacer.StoreRequest{
		req(math.NaN(), 1, 1), req(-3, 1, 1), req(math.Inf(1), 1, 1), req(1, 1, -5), req(1, 1e300, 0),
		req(1, 1e-300, 1),
	} {
		name := fmt.Sprintf("%+v", r)
		g := reserve(t, s, "hostile", r)
		assert.GreaterOrEqual(t, g.Delay, time.Duration(0), name)
	}
	s.Cancel("hostile", req(math.NaN(), 1, 1))
	s.Cancel("hostile", req(math.Inf(1), 1, 1))
	s.Cancel("never-used", req(1, 1, 1))
	ctx := context.Background()
	require.NoError(t, s.Publish(ctx, "hostile", pacer.SharedState{Limit: pacer.Limit(math.NaN()), Pause: -time.Second}))
	require.NoError(t, s.Publish(ctx, "hostile", pacer.SharedState{Limit: -1, Burst: -1}))
	flush(t, s)
	sh := reserve(t, s, "fresh", req(1, pacer.Inf, 1)).Shared
	assert.Zero(t, sh.Limit)
	assert.Zero(t, sh.Pause)
}
