package store_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/store"
	"github.com/pacer-go/pacer/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Peers {
		s := store.NewMemory()
		return func() store.Store { return s }
	})
}

func TestMemorySchedulesTokensExactlyAtTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := store.NewMemory()
		ctx := context.Background()
		r := store.Request{Tokens: 1, Limit: 4, Burst: 2}
		var delays []time.Duration
		for range 5 {
			g, err := s.Reserve(ctx, "k", r)
			require.NoError(t, err)
			delays = append(delays, g.Delay)
		}
		ms := time.Millisecond
		assert.Equal(t, []time.Duration{0, 0, 250 * ms, 500 * ms, 750 * ms}, delays)

		time.Sleep(2 * time.Second) // the bucket refills, to the burst and no further
		for _, want := range []time.Duration{0, 0, 250 * ms} {
			g, err := s.Reserve(ctx, "k", r)
			require.NoError(t, err)
			assert.Equal(t, want, g.Delay)
		}
	})
}

func TestMemoryWaitingOnAGrantNeverExceedsTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := store.NewMemory()
		const workers, each = 4, 50
		var (
			mu  sync.Mutex
			got []time.Duration
			wg  sync.WaitGroup
		)
		start := time.Now()
		for range workers {
			wg.Go(func() {
				for range each {
					g, err := s.Reserve(context.Background(), "k", store.Request{Tokens: 1, Limit: 10, Burst: 5})
					if !assert.NoError(t, err) {
						return
					}
					time.Sleep(g.Delay)
					mu.Lock()
					got = append(got, time.Since(start))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		require.Len(t, got, workers*each)
		// 5 at once, then one every 100 ms: the last of 200 at 19.5 s.
		assert.Equal(t, 19500*time.Millisecond, got[len(got)-1])
		for i, at := range got {
			assert.LessOrEqual(t, i+1, 5+int(at/(100*time.Millisecond)), "token %d at %v", i+1, at)
		}
	})
}

func TestMemoryForgetsIdleKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := store.NewMemory()
		ctx := context.Background()
		require.NoError(t, s.Publish(ctx, "k", store.State{Limit: 3, Burst: 1}))
		time.Sleep(store.DefaultIdleTTL / 2)
		g, err := s.Reserve(ctx, "k", store.Request{Limit: store.Unlimited})
		require.NoError(t, err)
		assert.Equal(t, 3.0, g.Shared.Limit, "still in use")
		assert.Equal(t, store.DefaultIdleTTL/2, g.Shared.Age)

		time.Sleep(store.DefaultIdleTTL + time.Minute)
		g, err = s.Reserve(ctx, "other", store.Request{Limit: store.Unlimited}) // sweeps
		require.NoError(t, err)
		g, err = s.Reserve(ctx, "k", store.Request{Limit: store.Unlimited})
		require.NoError(t, err)
		assert.Zero(t, g.Shared.Limit, "forgotten after the idle TTL")
	})
}

func TestMemoryPauseEndsWithAFullBucketNotAFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := store.NewMemory()
		ctx := context.Background()
		require.NoError(t, s.Publish(ctx, "k", store.State{Pause: 10 * time.Second}))
		// Tokens do not pile up during the pause: at its end the bucket holds
		// its burst, and further tokens come at the limit.
		var delays []time.Duration
		for range 4 {
			g, err := s.Reserve(ctx, "k", store.Request{Tokens: 1, Limit: 1, Burst: 2})
			require.NoError(t, err)
			delays = append(delays, g.Delay)
		}
		assert.Equal(t, []time.Duration{10 * time.Second, 10 * time.Second, 11 * time.Second, 12 * time.Second}, delays)
	})
}
