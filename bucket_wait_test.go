package pacer

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests in this file use testing/synctest: time is virtual, so they
// assert exact grant times.

// testWaiter runs WaitN in a goroutine and records when and how it returned.
type testWaiter struct {
	done   chan struct{}
	err    error
	at     time.Duration // since the test's start
	cancel context.CancelFunc
}

// startWaiter starts WaitN(ctx, n) and returns once it is blocked (or done),
// so waiters started one after another arrive in that order.
func startWaiter(ctx context.Context, b *Bucket, n int, start time.Time) *testWaiter {
	ctx, cancel := context.WithCancel(ctx)
	w := &testWaiter{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(w.done)
		w.err = b.WaitN(ctx, n)
		w.at = time.Since(start)
	}()
	synctest.Wait()
	return w
}

func (w *testWaiter) result() (time.Duration, error) {
	<-w.done
	w.cancel()
	return w.at, w.err
}

// 10 000 events at 100/s with a burst of 10, taken by 64 goroutines: exactly
// the expected grants per simulated second, each at its exact time, in
// arrival order.
func TestWaitPacesManyGoroutinesExactlyAndInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const total, workers = 10_000, 64
		b := NewBucket(100, 10)
		start := time.Now()

		var mu sync.Mutex
		arrivals := 0
		var grants []int // arrival number of each grant, in grant order
		var times []time.Duration
		remaining := atomic.Int64{}
		remaining.Store(total)
		var wg sync.WaitGroup
		worker := func() {
			defer wg.Done()
			for remaining.Add(-1) >= 0 {
				mu.Lock()
				ticket := arrivals
				arrivals++
				mu.Unlock()
				if !assert.NoError(t, b.Wait(context.Background())) {
					return
				}
				mu.Lock()
				grants = append(grants, ticket)
				times = append(times, time.Since(start))
				mu.Unlock()
			}
		}
		for range workers {
			wg.Add(1)
			go worker()
			synctest.Wait() // the next worker arrives after this one queued
		}
		wg.Wait()

		require.Len(t, grants, total)
		for i, ticket := range grants {
			require.Equal(t, i, ticket, "grant %d went to arrival %d", i, ticket)
		}
		perSecond := make(map[int]int)
		for i, d := range times {
			want := time.Duration(max(0, i-9)) * 10 * time.Millisecond
			require.Equal(t, want, d, "grant %d", i)
			perSecond[int(d/time.Second)]++
		}
		assert.Equal(t, 109, perSecond[0], "burst 10 at once, then one every 10ms")
		for s := 1; s < 99; s++ {
			assert.Equal(t, 100, perSecond[s], "second %d", s)
		}
		assert.Equal(t, 91, perSecond[99])
	})
}

// A WaitN for the whole burst sets its tokens aside when it arrives, so a
// stream of single-token waits cannot starve it.
func TestWaitLargeRequestIsNotStarvedBySmallOnes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(10, 10)
		start := time.Now()
		ctx, stop := context.WithCancel(context.Background())
		var small atomic.Int64
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for b.Wait(ctx) == nil {
					small.Add(1)
				}
			})
		}
		time.Sleep(2 * time.Second) // the small ones drain the bucket and queue up
		synctest.Wait()
		arrived := time.Since(start)

		big := startWaiter(context.Background(), b, 10, start)
		got, err := big.result()
		require.NoError(t, err)
		// Ahead of it: at most the 4 small waiters already queued (400ms);
		// then the 10 tokens take 1s to refill.
		assert.LessOrEqual(t, got-arrived, 1400*time.Millisecond)
		stop()
		wg.Wait()
		assert.Positive(t, small.Load())
	})
}

func TestWaitFailsAtOnceWhenTheDeadlineComesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(1, 1)
		require.True(t, b.Allow())
		start := time.Now()

		for _, timeout := range []time.Duration{500 * time.Millisecond, time.Second} {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			err := b.Wait(ctx)
			cancel()
			var rle *RateLimitError
			require.ErrorAs(t, err, &rle, "timeout %v", timeout)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.True(t, rle.RetryAt.Equal(start.Add(time.Second)), "RetryAt %v", rle.RetryAt.Sub(start))
			assert.Zero(t, time.Since(start), "returned at once, no sleeping")
		}

		// Nothing was consumed: a wait with a deadline past the grant gets
		// the token at 1s.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second+time.Nanosecond)
		defer cancel()
		require.NoError(t, b.Wait(ctx))
		assert.Equal(t, time.Second, time.Since(start))
	})
}

func TestWaitFailsAtOnceForRequestsThatCanNeverBeGranted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		start := time.Now()

		err := NewBucket(10, 3).WaitN(ctx, 4)
		assert.ErrorContains(t, err, "exceeds the bucket's burst of 3")
		assert.ErrorContains(t, NewBucket(0, 0).Wait(ctx), "exceeds the bucket's burst of 0")
		assert.ErrorContains(t, NewBucket(10, 3).WaitN(ctx, -1), "negative")

		zero := NewBucket(0, 2)
		require.NoError(t, zero.WaitN(ctx, 2), "limit 0 grants what is left")
		assert.ErrorContains(t, zero.Wait(ctx), "never")

		assert.NoError(t, NewBucket(Inf, 0).WaitN(ctx, 1_000_000), "Inf ignores the burst")
		assert.NoError(t, NewBucket(0, 0).WaitN(ctx, 0), "n = 0 always succeeds")
		assert.Zero(t, time.Since(start))
	})
}

func TestWaitWithADoneContextTakesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(10, 1)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		assert.ErrorIs(t, b.Wait(ctx), context.Canceled)
		assert.ErrorIs(t, b.WaitN(ctx, 0), context.Canceled)
		assert.True(t, b.Allow(), "the token is still there")
	})
}

// A testWaiter that gives up returns at once with its context's error, and the
// waiters behind it move up into its slot.
func TestWaitCancelledReturnsPromptlyAndRefunds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(10, 1)
		require.True(t, b.Allow())
		start := time.Now()
		ctx := context.Background()
		a := startWaiter(ctx, b, 1, start) // 100ms
		c := startWaiter(ctx, b, 1, start) // 200ms
		d := startWaiter(ctx, b, 1, start) // 300ms

		time.Sleep(50 * time.Millisecond)
		c.cancel()
		got, err := c.result()
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 50*time.Millisecond, got, "returns promptly")

		got, err = a.result()
		require.NoError(t, err)
		assert.Equal(t, 100*time.Millisecond, got)
		got, err = d.result()
		require.NoError(t, err)
		assert.Equal(t, 200*time.Millisecond, got, "moved up into the cancelled slot")

		time.Sleep(100 * time.Millisecond)
		assert.True(t, b.Allow(), "nothing left owed at 300ms")
	})
}

// A testWaiter whose grant time came but that gave up without acting returns
// its tokens if no later grant depends on them.
func TestWaitCancelledAfterItsGrantRefundsWhenLast(t *testing.T) {
	b := NewBucket(10, 1)
	require.True(t, b.Allow())
	e, _, err := b.enqueue(context.Background(), 1, 0)
	require.NoError(t, err)
	require.NotNil(t, e)
	e.wake.Stop()
	b.mu.Lock()
	b.withdrawLocked(&e.entry, e.at) // at its grant time: granted, then withdrawn
	b.mu.Unlock()
	assert.True(t, b.AllowNAt(time.Now().Add(100*time.Millisecond), 1))
}

// SetLimit while many wait: the queued waiters are re-planned at the new
// rate, in order; none is lost or served twice.
func TestWaitReplansOnSetLimit(t *testing.T) {
	tests := []struct {
		name     string
		limit    Limit
		first    time.Duration // grant of the 6th testWaiter
		interval time.Duration
	}{
		// At 550ms the bucket holds half a token; at 100/s the rest of it
		// refills in 5ms.
		{"faster", 100, 555 * time.Millisecond, 10 * time.Millisecond},
		{"slower", 1, 1050 * time.Millisecond, time.Second},
		{"Inf", Inf, 550 * time.Millisecond, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := NewBucket(10, 1)
				require.True(t, b.Allow())
				start := time.Now()
				ws := make([]*testWaiter, 20)
				for i := range ws {
					ws[i] = startWaiter(context.Background(), b, 1, start) // (i+1)·100ms
				}
				time.Sleep(550 * time.Millisecond)
				b.SetLimit(tt.limit)
				for i, w := range ws {
					got, err := w.result()
					require.NoError(t, err, "testWaiter %d", i)
					want := time.Duration(i+1) * 100 * time.Millisecond
					if i >= 5 {
						want = tt.first + time.Duration(i-5)*tt.interval
					}
					assert.Equal(t, want, got, "testWaiter %d", i)
				}
			})
		})
	}
}

func TestWaitReplansOnSetBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(10, 5)
		require.True(t, b.AllowN(5))
		start := time.Now()
		ctx := context.Background()
		w1 := startWaiter(ctx, b, 2, start) // 200ms
		w2 := startWaiter(ctx, b, 5, start) // 700ms
		w3 := startWaiter(ctx, b, 1, start) // 800ms

		time.Sleep(100 * time.Millisecond)
		b.SetBurst(2)
		got, err := w2.result()
		assert.ErrorContains(t, err, "exceeds the bucket's burst of 2", "can never be served now: fails at once")
		assert.Equal(t, 100*time.Millisecond, got)

		got, err = w1.result()
		require.NoError(t, err)
		assert.Equal(t, 200*time.Millisecond, got)
		got, err = w3.result()
		require.NoError(t, err)
		assert.Equal(t, 300*time.Millisecond, got, "moved up past the failed testWaiter")
	})
}

// PauseUntil while waiters queue: nothing before the pause ends, the bucket
// is empty then, and the waiters are paced at the limit after it.
func TestWaitReplansOnPauseUntil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(10, 1)
		require.True(t, b.Allow())
		start := time.Now()
		ws := make([]*testWaiter, 5)
		for i := range ws {
			ws[i] = startWaiter(context.Background(), b, 1, start)
		}
		time.Sleep(150 * time.Millisecond)
		b.PauseUntil(time.Now().Add(time.Second))
		b.PauseUntil(time.Now().Add(time.Millisecond)) // earlier: ignored
		want := []time.Duration{100, 1250, 1350, 1450, 1550}
		for i, w := range ws {
			got, err := w.result()
			require.NoError(t, err)
			assert.Equal(t, want[i]*time.Millisecond, got, "testWaiter %d", i)
		}
	})
}

func TestWaitOnAnInfiniteBucketIsHeldByAPauseOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(Inf, 0)
		start := time.Now()
		b.PauseUntil(start.Add(time.Second))
		ws := make([]*testWaiter, 3)
		for i := range ws {
			ws[i] = startWaiter(context.Background(), b, 1000, start)
		}
		for _, w := range ws {
			got, err := w.result()
			require.NoError(t, err)
			assert.Equal(t, time.Second, got)
		}
		assert.True(t, b.Allow())
	})
}

func TestWaitersFailWhenTheLimitDropsToZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(10, 1)
		require.True(t, b.Allow())
		start := time.Now()
		w := startWaiter(context.Background(), b, 1, start)
		b.SetLimit(0)
		got, err := w.result()
		assert.ErrorContains(t, err, "never")
		assert.Zero(t, got)
	})
}

func TestWaitNWithMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(1, 1)
		require.True(t, b.Allow())
		start := time.Now()
		ctx := context.Background()

		_, err := b.waitN(ctx, 1, 500*time.Millisecond)
		var rle *RateLimitError
		require.ErrorAs(t, err, &rle)
		assert.NoError(t, rle.Err, "maxWait, not a deadline, was the reason")
		assert.True(t, rle.RetryAt.Equal(start.Add(time.Second)))
		assert.Empty(t, rle.Endpoint)
		assert.Zero(t, time.Since(start))
		assert.True(t, b.nextAt(1).Equal(start.Add(time.Second)), "nothing consumed")

		dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err = b.waitN(dctx, 1, time.Hour)
		assert.ErrorIs(t, err, context.DeadlineExceeded)

		granted, err := b.waitN(ctx, 1, 2*time.Second)
		require.NoError(t, err)
		assert.True(t, granted.Equal(start.Add(time.Second)), "returns the grant time")
		assert.Equal(t, time.Second, time.Since(start))

		granted, err = NewBucket(10, 1).waitN(ctx, 1, time.Nanosecond)
		require.NoError(t, err)
		assert.True(t, granted.Equal(time.Now()), "granted at once")
	})
}

// A re-plan that pushes a testWaiter past its deadline or its maxWait fails it
// at once instead of letting it sleep into the deadline.
func TestWaitReplannedPastItsBoundFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(10, 1)
		require.True(t, b.Allow())
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		dl := startWaiter(ctx, b, 1, start) // 100ms, deadline 1s

		type res struct {
			at  time.Time
			err error
		}
		mw := make(chan res, 1)
		go func() {
			at, err := b.waitN(context.Background(), 1, time.Second) // 200ms, maxWait 1s
			mw <- res{at, err}
		}()
		synctest.Wait()

		b.PauseUntil(start.Add(5 * time.Second))
		got, err := dl.result()
		var rle *RateLimitError
		require.ErrorAs(t, err, &rle)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.True(t, rle.RetryAt.Equal(start.Add(5100*time.Millisecond)), "RetryAt %v", rle.RetryAt.Sub(start))
		assert.Zero(t, got)

		r := <-mw
		require.ErrorAs(t, r.err, &rle)
		assert.NoError(t, rle.Err)
		assert.Zero(t, time.Since(start))
	})
}

// Many goroutines waiting, cancelling and changing the limit at once: every
// wait ends (granted or with its context's error) and the grants never
// exceed what the bucket allows. Run with -race.
func TestWaitUnderConcurrentChurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const burst = 5
		b := NewBucket(50, burst)
		start := time.Now()
		var mu sync.Mutex
		var grants []time.Duration
		var ended atomic.Int64
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 1))
				for i := 0; i < 40; i++ {
					ctx, cancel := context.WithTimeout(context.Background(),
						time.Duration(rng.IntN(2000))*time.Millisecond)
					n := 1 + rng.IntN(3)
					err := b.WaitN(ctx, n)
					cancel()
					ended.Add(1)
					if err == nil {
						mu.Lock()
						for range n {
							grants = append(grants, time.Since(start))
						}
						mu.Unlock()
					} else if !errors.Is(err, context.DeadlineExceeded) {
						assert.Fail(t, "unexpected error", "%v", err)
					}
					if rng.IntN(4) == 0 {
						r := b.Reserve()
						time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
						r.Cancel()
					}
				}
			})
		}
		wg.Go(func() {
			for i := range 40 {
				time.Sleep(100 * time.Millisecond)
				b.SetLimit(Limit(25 + 25*(i%3))) // 25, 50, 75
				if i%10 == 0 {
					b.PauseUntil(time.Now().Add(50 * time.Millisecond))
				}
			}
		})
		wg.Wait()
		assert.Equal(t, int64(16*40), ended.Load(), "every wait ended")
		// In any window of length w, grants <= burst + 75·w (+1 for the
		// reservations the goroutines took and cancelled mid-way).
		for i := range grants {
			for j := i; j < len(grants); j++ {
				w := grants[j] - grants[i]
				bound := float64(burst) + 75*w.Seconds() + 3 + 1e-9
				require.LessOrEqual(t, float64(j-i+1), bound, "window %v..%v", grants[i], grants[j])
			}
		}
	})
}

// waitN is WaitN with maxWait, returning the grant as a time.Time: the
// bucket's wait as the adaptive limiter uses it, for these tests.
func (b *Bucket) waitN(ctx context.Context, n int, maxWait time.Duration) (time.Time, error) {
	at, err := b.wait(ctx, n, maxWait, useClock)
	if err != nil {
		return time.Time{}, err
	}
	t := time.Now()
	return clockTime(at, t, clockOf(t)), nil
}
