package pacer

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/pacer-go/pacer/internal/mark"
	"github.com/pacer-go/pacer/observe"
)

func TestWithAdaptiveConcurrencyPanicsNamingTheOptionAndValues(t *testing.T) {
	assert.PanicsWithValue(t, "pacer: WithAdaptiveConcurrency(0, 10): min must be ≥ 1", func() { WithAdaptiveConcurrency(0, 10) })
	assert.PanicsWithValue(t, "pacer: WithAdaptiveConcurrency(8, 4): max must be ≥ min", func() { WithAdaptiveConcurrency(8, 4) })
}

func TestAnAdaptiveBoundStartsAtTheDefaultWithinItsRange(t *testing.T) {
	for _, tc := range []struct {
		min, max, want int
	}{
		{1, 256, DefaultMaxConcurrency},
		{32, 64, 32},
		{1, 8, 8},
	} {
		e := NewExecutor(nil, WithAdaptiveConcurrency(tc.min, tc.max))
		s := e.Stats()
		assert.True(t, s.Adaptive)
		assert.Equal(t, tc.want, s.MaxConcurrency, "WithAdaptiveConcurrency(%d, %d)", tc.min, tc.max)
		assert.Equal(t, observe.BoundUnmoved, s.LastMove)
		require.NoError(t, e.Close())
	}
	e := NewExecutor(nil, WithAdaptiveConcurrency(1, 256), WithMaxConcurrency(3))
	assert.Equal(t, ExecutorStats{MaxConcurrency: 3}, e.Stats(), "the last option wins: fixed")
	require.NoError(t, e.Close())
}

// loop runs workers callers of e.Do against "http://api.test/" for d, each
// backing off a second after a refusal, and returns the statuses counted.
func loop(t *testing.T, e *Executor, workers int, d time.Duration) map[int]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
				resp, err := e.Do(ctx, req)
				if err != nil {
					continue // the run's end
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
				if resp.StatusCode != http.StatusOK {
					time.Sleep(time.Second)
				}
			}
		})
	}
	wg.Wait()
	return statuses
}

// A server that serves 8 at once and queues the rest: the bound falls from
// 16 to about 8, where latency is at its floor and the throughput the same.
func TestAnAdaptiveBoundFindsTheKneeOfAQueueingServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := apisim.NewConcurrency(apisim.ConcurrencyConfig{Latency: 100 * time.Millisecond, Knee: 8, Jitter: 0.1, Seed: 1}, nil)
		e := NewExecutor(&http.Client{Transport: srv.Transport()}, WithAdaptiveConcurrency(1, 64))
		statuses := loop(t, e, 64, 30*time.Second)
		s := e.Stats()
		assert.GreaterOrEqual(t, s.MaxConcurrency, 7)
		assert.LessOrEqual(t, s.MaxConcurrency, 11, "near the knee, not at 16: %+v", s)
		assert.Positive(t, s.Moves.Latency)
		// 8 per 100 ms is the server's most; the first rounds run above it.
		assert.Greater(t, statuses[http.StatusOK], 8*10*30*95/100, "throughput within 5%% of the server's")
		require.NoError(t, e.Close())
	})
}

// A server that sheds above 12 in progress, and queues nothing below: the
// bound rises from 16 only until the first 503s, and stays under the
// ceiling after.
func TestAnAdaptiveBoundFallsBelowACeilingThatSheds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := apisim.NewConcurrency(apisim.ConcurrencyConfig{Latency: 100 * time.Millisecond, Knee: 100, Ceiling: 12, Seed: 1, ShedLatency: 10 * time.Millisecond}, nil)
		e := NewExecutor(&http.Client{Transport: srv.Transport()}, WithAdaptiveConcurrency(1, 64))
		statuses := loop(t, e, 64, time.Minute)
		s := e.Stats()
		assert.LessOrEqual(t, s.MaxConcurrency, 13, "%+v", s)
		assert.Positive(t, s.Moves.Overload)
		shed := statuses[http.StatusServiceUnavailable]
		assert.Positive(t, shed)
		assert.Less(t, shed, statuses[http.StatusOK]/100, "under 1%% shed: %v", statuses)
		require.NoError(t, e.Close())
	})
}

func TestAnAdaptiveBoundKeepsToAStatedConcurrencyQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := apisim.NewConcurrency(apisim.ConcurrencyConfig{Latency: 100 * time.Millisecond, Knee: 100, Ceiling: 6, StateCeiling: true}, nil)
		e := NewExecutor(&http.Client{Transport: srv.Transport()}, WithAdaptiveConcurrency(1, 64))
		statuses := loop(t, e, 64, 10*time.Second)
		s := e.Stats()
		assert.Equal(t, 6, s.MaxConcurrency)
		assert.Positive(t, s.Moves.Quota)
		// Only the first round, sent before any answer stated the quota,
		// met the ceiling: 16 at once, 10 of them shed.
		assert.LessOrEqual(t, statuses[http.StatusServiceUnavailable], 10, "%v", statuses)
		require.NoError(t, e.Close())
	})
}

// pacing holds every request for hold before sending it, as a pacer
// Transport holds requests for their rate limit, and tells the call's
// probe, as the Transport does.
type pacing struct {
	base http.RoundTripper
	hold time.Duration
}

func (p pacing) RoundTrip(r *http.Request) (*http.Response, error) {
	time.Sleep(p.hold)
	mark.Of(r.Context()).Probe.(*sendProbe).sent(time.Now())
	return p.base.RoundTrip(r)
}

// Time a rate limiter held a request is not server latency: the bound does
// not fall for it as for a queue, and it does not rise for slots that would
// only wait in the rate limiter.
func TestARateLimitersHoldIsNotServerLatency(t *testing.T) {
	for _, hold := range []time.Duration{0, time.Second} {
		synctest.Test(t, func(t *testing.T) {
			srv := apisim.NewConcurrency(apisim.ConcurrencyConfig{Latency: 100 * time.Millisecond, Knee: 1000}, nil)
			e := NewExecutor(&http.Client{Transport: pacing{base: srv.Transport(), hold: hold}}, WithAdaptiveConcurrency(1, 256))
			loop(t, e, 300, 30*time.Second)
			s := e.Stats()
			assert.Zero(t, s.Moves.Latency, "hold %v: %+v", hold, s)
			if hold == 0 {
				assert.Equal(t, 256, s.MaxConcurrency, "nothing held: it rises to max")
			} else {
				assert.Less(t, s.MaxConcurrency, 16, "held ten times as long as served: %+v", s)
				assert.Positive(t, s.Moves.Rate)
			}
			require.NoError(t, e.Close())
		})
	}
}

// The shutdown guarantees hold while the bound moves: every accepted call
// returns a response or an error, none is lost, no slot leaks, whether the
// bound shrinks under waiting calls or grows to grant them.
func TestShutdownWithAMovingAdaptiveBoundLosesNoCall(t *testing.T) {
	for _, deadline := range []time.Duration{0, 50 * time.Millisecond} {
		synctest.Test(t, func(t *testing.T) {
			srv := apisim.NewConcurrency(apisim.ConcurrencyConfig{Latency: 20 * time.Millisecond, Knee: 24, Ceiling: 30, Jitter: 0.1, Seed: 3}, nil)
			e := NewExecutor(&http.Client{Transport: srv.Transport()}, WithAdaptiveConcurrency(1, 32))
			r := shutdownMidLoad(t, e, 3000, 700*time.Millisecond, deadline)
			assert.Positive(t, r.stats.Moves.Latency+r.stats.Moves.Overload, "the bound fell during the run: %+v", r.stats)
			assert.Positive(t, r.stats.Moves.Headroom, "and rose: %+v", r.stats)
		})
	}
}

// The FIFO slots: a lower limit takes no slot back and loses no waiter; a
// higher one grants waiters at once, in order.
func TestSlotsResizeWithoutLosingWaiters(t *testing.T) {
	var s slots
	s.limit = 2
	require.True(t, s.tryTake())
	require.True(t, s.tryTake())
	require.False(t, s.tryTake())
	ws := make([]slotWaiter, 3)
	for i := range ws {
		s.enqueue(&ws[i])
	}
	s.setLimit(1)
	assert.Equal(t, 2, s.held, "a fall takes no slot back")
	s.release()
	assert.False(t, ws[0].granted, "held 1 of a limit of 1: nobody is granted")
	s.setLimit(3)
	assert.True(t, ws[0].granted && ws[1].granted, "a rise grants the oldest at once")
	assert.False(t, ws[2].granted)
	assert.Equal(t, 3, ws[1].inUse)
	s.leave(&ws[2])
	assert.Nil(t, s.head, "a waiter whose context ended leaves the queue")
	s.leave(&ws[1])
	assert.Equal(t, 2, s.held, "a waiter granted as its context ended hands the slot back")
}
