package pacer_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/store"
)

func TestAPauseOneLimiterLearnsStopsEveryLimiterOfTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := store.NewMemory()
		a := pacer.NewAdaptive(pacer.AdaptiveConfig{Key: "k", Store: mem})
		b := pacer.NewAdaptive(pacer.AdaptiveConfig{Key: "k", Store: mem})
		other := pacer.NewAdaptive(pacer.AdaptiveConfig{Key: "other", Store: mem})
		ctx := context.Background()

		p, err := a.Acquire(ctx, 0)
		require.NoError(t, err)
		p.Done(response(http.StatusTooManyRequests, "Retry-After", "3"))

		start := time.Now()
		_, err = other.Acquire(ctx, 0)
		require.NoError(t, err)
		assert.Zero(t, time.Since(start), "other keys are not paused")
		_, err = b.Acquire(ctx, 0)
		require.NoError(t, err)
		assert.Equal(t, 3*time.Second, time.Since(start), "b waited out a's Retry-After")
	})
}

// Two limiters sharing a Store spend one budget: what is left goes at
// once, to whichever asks, and nothing beyond it; the next window's quota
// after its reset.
func TestLimitersSharingAStoreSpendOneBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := store.NewMemory()
		reset := time.Now().Add(10 * time.Second)
		var mu sync.Mutex
		left := 60
		respond := func(p *pacer.Permit) {
			mu.Lock()
			status := http.StatusOK
			if left > 0 {
				left--
			} else {
				status = http.StatusTooManyRequests
			}
			rem := left
			mu.Unlock()
			p.Done(response(status, "X-Ratelimit-Limit", "100", "X-Ratelimit-Remaining", strconv.Itoa(rem),
				"X-Ratelimit-Reset", strconv.FormatInt(reset.Unix(), 10)))
		}
		ctx := context.Background()
		a := pacer.NewAdaptive(pacer.AdaptiveConfig{Key: "k", Store: mem, SlowStart: 1})
		b := pacer.NewAdaptive(pacer.AdaptiveConfig{Key: "k", Store: mem, SlowStart: 1})
		start := time.Now()
		for i := range 60 {
			lim := a
			if i%2 == 1 {
				lim = b
			}
			p, err := lim.Acquire(ctx, 0)
			require.NoError(t, err)
			respond(&p)
		}
		assert.Zero(t, time.Since(start), "what is left goes at once")
		assert.Zero(t, left, "and all of it")

		// The budget is spent: the next request waits for the reset.
		p, err := b.Acquire(ctx, 0)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Since(start), reset.Sub(start)-time.Second, "the next waited for the reset")
		p.Abandon()
	})
}

func TestCancelledWaitReturnsItsStoreToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := store.NewMemory()
		a := pacer.NewAdaptive(pacer.AdaptiveConfig{Key: "k", Store: mem, Ceiling: 1, CeilingBurst: 1, SlowStart: 10})
		start := time.Now()
		_, err := a.Acquire(context.Background(), 0)
		require.NoError(t, err)

		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		_, err = a.Acquire(ctx, 0)
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 300*time.Millisecond, time.Since(start), "returned when cancelled")

		_, err = a.Acquire(context.Background(), 0)
		require.NoError(t, err)
		assert.Equal(t, time.Second, time.Since(start), "the cancelled wait's slot was free again")

		ctx, cancel = context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err = a.Acquire(ctx, 0)
		var rle *pacer.RateLimitError
		require.ErrorAs(t, err, &rle, "a wait past the deadline fails at once")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, "k", rle.Endpoint)
		assert.Equal(t, time.Second, time.Since(start))
	})
}

// failingStore fails every reservation as a fail-closed store does.
type failingStore struct{ store.Memory }

var errStoreDown = errors.New("store down")

func (*failingStore) Reserve(_ context.Context, key string, _ store.Request) (store.Grant, error) {
	return store.Grant{}, &pacer.RateLimitError{Endpoint: key, RetryAt: time.Now().Add(time.Second), Err: errStoreDown}
}

func TestStoreFailureIsARateLimitErrorOfTheEndpoint(t *testing.T) {
	a := pacer.NewAdaptive(pacer.AdaptiveConfig{Key: "https://api.example.com", Store: &failingStore{}})
	_, err := a.Acquire(context.Background(), 0)
	var rle *pacer.RateLimitError
	require.ErrorAs(t, err, &rle)
	assert.Equal(t, "https://api.example.com", rle.Endpoint)
	assert.ErrorIs(t, err, errStoreDown)
}

// limitRecorder is a store.Memory that records the limits it is asked for.
type limitRecorder struct {
	*store.Memory
	mu     sync.Mutex
	limits []float64
}

func (s *limitRecorder) Reserve(ctx context.Context, key string, r store.Request) (store.Grant, error) {
	s.mu.Lock()
	s.limits = append(s.limits, r.Limit)
	s.mu.Unlock()
	return s.Memory.Reserve(ctx, key, r)
}

func TestLimitsReachTheStoreUnchanged(t *testing.T) {
	assert.Equal(t, store.Unlimited, float64(pacer.Inf), "Inf is store.Unlimited")
	for _, ceiling := range []pacer.Limit{0, 2.5} {
		synctest.Test(t, func(t *testing.T) {
			rec := &limitRecorder{Memory: store.NewMemory()}
			a := pacer.NewAdaptive(pacer.AdaptiveConfig{Key: "k", Store: rec, Ceiling: ceiling, CeilingBurst: 1})
			p, err := a.Acquire(context.Background(), 0)
			require.NoError(t, err)
			p.Done(response(http.StatusOK))
			want := store.Unlimited // no ceiling and nothing learned
			if ceiling > 0 {
				want = float64(ceiling)
			}
			require.NotEmpty(t, rec.limits)
			assert.Equal(t, want, rec.limits[0], "ceiling %v", ceiling)
		})
	}
}

// response is a response with status and header key/value pairs, as a
// server would send it.
func response(status int, kv ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return &http.Response{StatusCode: status, Header: h, Body: http.NoBody}
}
