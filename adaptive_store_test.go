package pacer_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer"
)

func TestAPauseOneLimiterLearnsStopsEveryLimiterOfTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := pacer.NewMemoryStore()
		a := pacer.NewAdaptive(pacer.AdaptiveConfig{Key: "k", Store: store})
		b := pacer.NewAdaptive(pacer.AdaptiveConfig{Key: "k", Store: store})
		other := pacer.NewAdaptive(pacer.AdaptiveConfig{Key: "other", Store: store})
		ctx := context.Background()

		require.NoError(t, a.Wait(ctx, 0))
		a.Observe(http.StatusTooManyRequests, pacer.Info{RetryAfter: 3 * time.Second})

		start := time.Now()
		require.NoError(t, other.Wait(ctx, 0))
		assert.Zero(t, time.Since(start), "other keys are not paused")
		require.NoError(t, b.Wait(ctx, 0))
		assert.Equal(t, 3*time.Second, time.Since(start), "b waited out a's Retry-After")
		assert.WithinDuration(t, start.Add(3*time.Second), b.NextAllowed(), 0)
	})
}

func TestALimitOneLimiterLearnsPacesTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := pacer.NewMemoryStore()
		a := pacer.NewAdaptive(pacer.AdaptiveConfig{Key: "k", Store: store})
		ctx := context.Background()
		require.NoError(t, a.Wait(ctx, 0))
		now := time.Now()
		a.Observe(http.StatusOK, pacer.Info{Quotas: []pacer.Quota{{Name: "requests", Limit: 100, Remaining: 60, Reset: now.Add(10 * time.Second)}}})
		learned := a.Stats()
		require.NotEqual(t, pacer.Inf, learned.Limit)

		// b has seen no response of its own, yet paces at a's limit: its
		// burst at once, then one request per interval.
		b := pacer.NewAdaptive(pacer.AdaptiveConfig{Key: "k", Store: store, SlowStart: 100})
		start := time.Now()
		for range learned.Burst + 3 {
			require.NoError(t, b.Wait(ctx, 0))
		}
		interval := time.Duration(float64(time.Second) / float64(learned.Limit))
		assert.InDelta(t, (3 * interval).Seconds(), time.Since(start).Seconds(), 0.01,
			"limit %v, burst %d", learned.Limit, learned.Burst)
	})
}

func TestCancelledWaitReturnsItsStoreToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := pacer.NewMemoryStore()
		a := pacer.NewAdaptive(pacer.AdaptiveConfig{Key: "k", Store: store, Ceiling: 1, CeilingBurst: 1, SlowStart: 10})
		start := time.Now()
		require.NoError(t, a.Wait(context.Background(), 0))

		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		require.ErrorIs(t, a.Wait(ctx, 0), context.Canceled)
		assert.Equal(t, 300*time.Millisecond, time.Since(start), "returned when cancelled")

		require.NoError(t, a.Wait(context.Background(), 0))
		assert.Equal(t, time.Second, time.Since(start), "the cancelled wait's slot was free again")

		ctx, cancel = context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		err := a.Wait(ctx, 0)
		var rle *pacer.RateLimitError
		require.ErrorAs(t, err, &rle, "a wait past the deadline fails at once")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, "k", rle.Endpoint)
		assert.Equal(t, time.Second, time.Since(start))
	})
}

// failingStore fails every reservation as a fail-closed store does.
type failingStore struct{ pacer.MemoryStore }

var errStoreDown = errors.New("store down")

func (*failingStore) Reserve(_ context.Context, key string, _ pacer.StoreRequest) (pacer.StoreGrant, error) {
	return pacer.StoreGrant{}, &pacer.RateLimitError{Endpoint: key, RetryAt: time.Now().Add(time.Second), Err: errStoreDown}
}

func TestStoreFailureIsARateLimitErrorOfTheEndpoint(t *testing.T) {
	a := pacer.NewAdaptive(pacer.AdaptiveConfig{Key: "https://api.example.com", Store: &failingStore{}})
	err := a.Wait(context.Background(), 0)
	var rle *pacer.RateLimitError
	require.ErrorAs(t, err, &rle)
	assert.Equal(t, "https://api.example.com", rle.Endpoint)
	assert.ErrorIs(t, err, errStoreDown)
}
