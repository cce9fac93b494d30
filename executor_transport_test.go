package pacer

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Executor over pacer's own Transport: the slot bounds concurrency, the
// Transport paces, and neither undoes the other.

func TestExecutorOverThePacerTransportKeepsBothTheBoundAndTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const calls, limit = 40, 4
		srv := &fakeServer{delay: func() time.Duration { return 50 * time.Millisecond }}
		tr := NewTransport(srv, WithEndpoint("api.example/", 10, 1))
		e := NewExecutor(&http.Client{Transport: tr}, WithMaxConcurrency(limit))

		start := time.Now()
		var wg sync.WaitGroup
		for range calls {
			wg.Go(func() {
				resp, err := e.Do(t.Context(), newRequest(t))
				if assert.NoError(t, err) {
					drainAndClose(resp)
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)

		open, peak, served := srv.stats()
		assert.Equal(t, calls, served)
		assert.Zero(t, open)
		assert.LessOrEqual(t, peak, limit)
		// 40 requests at 10/s with a burst of 1: the last may start at 3.9s.
		assert.GreaterOrEqual(t, elapsed, 3900*time.Millisecond, "the Transport's rate still applies")
		assert.Less(t, elapsed, 5*time.Second, "and the executor adds no pacing of its own")
		requireSemaphoreFull(t, e)
		require.NoError(t, e.Close())
	})
}

func TestExecutorCountsTransportRetriesAgainstTheSameSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var attempts, open, peak atomic.Int64
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			n := open.Add(1)
			defer open.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(10 * time.Millisecond)
			if attempts.Add(1)%2 == 1 { // every first attempt is throttled
				h := http.Header{"Retry-After": {"1"}}
				return &http.Response{StatusCode: http.StatusTooManyRequests, Header: h,
					Body: http.NoBody, Request: r}, nil
			}
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{},
				Body: &fakeBody{r: strings.NewReader("ok"), leave: func() {}}, Request: r}, nil
		})
		e := NewExecutor(&http.Client{Transport: NewTransport(rt)}, WithMaxConcurrency(1))

		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				resp, err := e.Do(t.Context(), newRequest(t))
				if assert.NoError(t, err) {
					assert.Equal(t, http.StatusOK, resp.StatusCode, "the Transport retried the 429")
					drainAndClose(resp)
				}
			})
		}
		wg.Wait()
		assert.EqualValues(t, 6, attempts.Load())
		assert.EqualValues(t, 1, peak.Load(), "a retry happens inside its call's slot, never beside another call")
		s := e.Stats()
		assert.EqualValues(t, 3, s.Done)
		requireIdleStats(t, s)
		require.NoError(t, e.Close())
	})
}
