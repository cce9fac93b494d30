package pacer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Peers {
		s := pacer.NewMemoryStore()
		return func() pacer.Store { return s }
	})
}

func TestMemoryStoreSchedulesTokensExactlyAtTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := pacer.NewMemoryStore()
		ctx := context.Background()
		r := pacer.StoreRequest{Tokens: 1, Limit: 4, Burst: 2}
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

func TestMemoryStoreWaitingOnAGrantNeverExceedsTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := pacer.NewMemoryStore()
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
					g, err := s.Reserve(context.Background(), "k", pacer.StoreRequest{Tokens: 1, Limit: 10, Burst: 5})
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

func TestMemoryStoreForgetsIdleKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := pacer.NewMemoryStore()
		ctx := context.Background()
		require.NoError(t, s.Publish(ctx, "k", pacer.SharedState{Limit: 3, Burst: 1}))
		time.Sleep(pacer.DefaultStoreIdleTTL / 2)
		g, err := s.Reserve(ctx, "k", pacer.StoreRequest{Limit: pacer.Inf})
		require.NoError(t, err)
		assert.Equal(t, pacer.Limit(3), g.Shared.Limit, "still in use")
		assert.Equal(t, pacer.DefaultStoreIdleTTL/2, g.Shared.Age)

		time.Sleep(pacer.DefaultStoreIdleTTL + time.Minute)
		g, err = s.Reserve(ctx, "other", pacer.StoreRequest{Limit: pacer.Inf}) // sweeps
		require.NoError(t, err)
		g, err = s.Reserve(ctx, "k", pacer.StoreRequest{Limit: pacer.Inf})
		require.NoError(t, err)
		assert.Zero(t, g.Shared.Limit, "forgotten after the idle TTL")
	})
}

func TestMemoryStorePauseEndsWithAFullBucketNotAFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := pacer.NewMemoryStore()
		ctx := context.Background()
		require.NoError(t, s.Publish(ctx, "k", pacer.SharedState{Pause: 10 * time.Second}))
		// Tokens do not pile up during the pause: at its end the bucket holds
		// its burst, and further tokens come at the limit.
		var delays []time.Duration
		for range 4 {
			g, err := s.Reserve(ctx, "k", pacer.StoreRequest{Tokens: 1, Limit: 1, Burst: 2})
			require.NoError(t, err)
			delays = append(delays, g.Delay)
		}
		assert.Equal(t, []time.Duration{10 * time.Second, 10 * time.Second, 11 * time.Second, 12 * time.Second}, delays)
	})
}

func ExampleNewMemoryStore() {
	// Two limiters (for example two Transports) that use one MemoryStore share
	// one bucket per key: here 2 requests per second with a burst of 2.
	store := pacer.NewMemoryStore()
	ctx := context.Background()
	for range 3 {
		g, err := store.Reserve(ctx, "https://api.example.com", pacer.StoreRequest{Tokens: 1, Limit: 2, Burst: 2})
		if err != nil {
			panic(err)
		}
		fmt.Println(g.OK, g.Delay.Round(100*time.Millisecond))
	}
	// Output:
	// true 0s
	// true 0s
	// true 500ms
}
