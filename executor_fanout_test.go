package pacer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// indexedRequests returns n GET requests for http://api.example/<i>.
func indexedRequests(t *testing.T, n int) []*http.Request {
	t.Helper()
	reqs := make([]*http.Request, n)
	for i := range reqs {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://api.example/%d", i), nil)
		require.NoError(t, err)
		reqs[i] = req
	}
	return reqs
}

func requestIndex(r *http.Request) int {
	i, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
	return i
}

func TestDoAllYieldsResultsInInputOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 50
		srv := &fakeServer{}
		// Later requests answer sooner, so completion order is the reverse.
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(time.Duration(n-requestIndex(r)) * time.Millisecond)
			return srv.RoundTrip(r)
		})
		e := NewExecutor(&http.Client{Transport: rt}, WithMaxConcurrency(4))

		var got []int
		for i, r := range e.DoAll(t.Context(), indexedRequests(t, n)) {
			require.NoError(t, r.Err)
			assert.Equal(t, i, requestIndex(r.Response.Request), "result %d belongs to request %d", i, i)
			got = append(got, i)
			drainAndClose(r.Response)
		}
		require.Len(t, got, n)
		for i, g := range got {
			require.Equal(t, i, g)
		}
		_, peak, _ := srv.stats()
		assert.LessOrEqual(t, peak, 4)
		requireSemaphoreFull(t, e)
		require.NoError(t, e.Close())
	})
}

func TestDoAllOfNothingYieldsNothing(t *testing.T) {
	e := NewExecutor(nil)
	for range e.DoAll(t.Context(), nil) {
		t.Fatal("yielded a result for no requests")
	}
	require.NoError(t, e.Close())
}

func TestDoAllStoppedEarlyCancelsTheRestAndClosesTheirBodies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 100
		srv := &fakeServer{delay: func() time.Duration { return 10 * time.Millisecond }}
		e := NewExecutor(&http.Client{Transport: srv}, WithMaxConcurrency(8))
		reqs := indexedRequests(t, n)
		bodies := make([]*closeRecorder, n)
		for i, req := range reqs {
			bodies[i] = &closeRecorder{Reader: strings.NewReader("")}
			req.Body = bodies[i]
		}

		var kept *http.Response
		yielded := 0
		for i, r := range e.DoAll(t.Context(), reqs) {
			require.NoError(t, r.Err)
			yielded++
			if i == 9 {
				kept = r.Response // handed to the caller, so left alone
				break
			}
			drainAndClose(r.Response)
		}
		assert.Equal(t, 10, yielded)

		// Back from the loop: everything DoAll started has ended and every
		// body except the kept one is closed.
		open, _, calls := srv.stats()
		assert.Equal(t, 1, open, "only the kept response is open at the server")
		assert.Less(t, calls, n, "the rest was never sent")
		s := e.Stats()
		assert.Equal(t, 1, s.OpenBodies)
		assert.Zero(t, s.Waiting)
		assert.Zero(t, s.Running)
		for i, b := range bodies {
			assert.True(t, b.closed.Load(), "request body %d closed, sent or not", i)
		}

		got, err := io.ReadAll(kept.Body)
		require.NoError(t, err, "a yielded response survives the loop's end")
		assert.Equal(t, "ok", string(got))
		require.NoError(t, kept.Body.Close())
		requireSemaphoreFull(t, e)
		requireIdleStats(t, e.Stats())
		require.NoError(t, e.Close())
	})
}

func TestDoAllEndsWithTheContextsErrorWhenCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 1000
		srv := &fakeServer{delay: func() time.Duration { return 10 * time.Millisecond }}
		e := NewExecutor(&http.Client{Transport: srv}, WithMaxConcurrency(8))
		ctx, cancel := context.WithTimeout(t.Context(), 55*time.Millisecond)
		defer cancel()

		var last DoResult
		lastIndex, count := -1, 0
		for i, r := range e.DoAll(ctx, indexedRequests(t, n)) {
			assert.Equal(t, lastIndex+1, i, "indexes are consecutive")
			lastIndex, last = i, r
			count++
			if r.Err == nil {
				drainAndClose(r.Response)
			}
		}
		require.ErrorIs(t, last.Err, context.DeadlineExceeded, "the last result carries ctx's error")
		assert.Less(t, count, n)
		assert.Greater(t, count, 8, "results that arrived before the deadline were yielded")
		open, _, _ := srv.stats()
		assert.Zero(t, open)
		requireSemaphoreFull(t, e)
		requireIdleStats(t, e.Stats())
		require.NoError(t, e.Close())
	})
}

func TestDoAllStartsAtMostTwiceMaxConcurrencyAheadOfTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 3
		var calls atomic.Int64
		release := make(chan struct{})
		failed := errors.New("failed fast")
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			calls.Add(1)
			if requestIndex(r) == 0 {
				<-release // the head of the line is slow
				return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
			}
			return nil, failed // failures hold no slot, so only the window bounds them
		})
		e := NewExecutor(&http.Client{Transport: rt}, WithMaxConcurrency(limit))
		done := make(chan int)
		go func() {
			n := 0
			for range e.DoAll(t.Context(), indexedRequests(t, 100)) {
				n++
			}
			done <- n
		}()
		synctest.Wait()
		assert.EqualValues(t, 2*limit, calls.Load())
		close(release)
		assert.Equal(t, 100, <-done)
		assert.EqualValues(t, 100, calls.Load())
		require.NoError(t, e.Close())
	})
}

func TestDoAllAfterShutdownYieldsErrExecutorClosed(t *testing.T) {
	e := NewExecutor(&http.Client{Transport: &fakeServer{}})
	require.NoError(t, e.Close())
	n := 0
	for _, r := range e.DoAll(t.Context(), indexedRequests(t, 5)) {
		require.ErrorIs(t, r.Err, ErrExecutorClosed)
		n++
	}
	assert.Equal(t, 5, n)
}

func TestDoAllReportsANilRequestAsThatIndexsError(t *testing.T) {
	e := NewExecutor(&http.Client{Transport: &fakeServer{}})
	reqs := indexedRequests(t, 3)
	reqs[1] = nil
	var errs []bool
	for _, r := range e.DoAll(t.Context(), reqs) {
		errs = append(errs, r.Err != nil)
		if r.Err == nil {
			drainAndClose(r.Response)
		}
	}
	assert.Equal(t, []bool{false, true, false}, errs)
	require.NoError(t, e.Close())
}

func TestDoAllShutdownMidwayYieldsEveryIndexOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 200
		srv := &fakeServer{delay: func() time.Duration { return 10 * time.Millisecond }}
		e := NewExecutor(&http.Client{Transport: srv}, WithMaxConcurrency(4))
		go func() {
			time.Sleep(100 * time.Millisecond)
			assert.NoError(t, e.Close(), "the loop keeps closing bodies, so Close completes")
		}()
		var ok, closed int
		next := 0
		for i, r := range e.DoAll(t.Context(), indexedRequests(t, n)) {
			require.Equal(t, next, i)
			next++
			if r.Err != nil {
				require.ErrorIs(t, r.Err, ErrExecutorClosed)
				closed++
				continue
			}
			ok++
			drainAndClose(r.Response)
		}
		assert.Equal(t, n, ok+closed, "every request yields exactly one result")
		assert.Positive(t, ok)
		assert.Positive(t, closed)
		_, _, calls := srv.stats()
		assert.Equal(t, ok, calls, "rejected requests were never sent")
		requireSemaphoreFull(t, e)
	})
}
