package pacer

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProgressReportsEveryFinalStateWithoutConcurrentCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var last ExecutorStats
		var inCall, overlapped atomic.Bool
		var reports atomic.Int64
		var e *Executor
		e = NewExecutor(&http.Client{Transport: &fakeServer{delay: func() time.Duration { return time.Millisecond }}},
			WithMaxConcurrency(4),
			WithProgress(func(s ExecutorStats) {
				if !inCall.CompareAndSwap(false, true) {
					overlapped.Store(true)
				}
				_ = e.Stats() // calling back into the executor must not deadlock
				mu.Lock()
				last = s
				mu.Unlock()
				reports.Add(1)
				inCall.Store(false)
			}))
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				resp, err := e.Do(t.Context(), newRequest(t))
				if assert.NoError(t, err) {
					drainAndClose(resp)
				}
			})
		}
		wg.Wait()
		synctest.Wait() // let the reporter goroutine deliver and exit

		assert.False(t, overlapped.Load(), "the callback is never called concurrently")
		assert.Positive(t, reports.Load())
		mu.Lock()
		final := last
		mu.Unlock()
		assert.EqualValues(t, 200, final.Done, "the last report shows the final state")
		assert.Zero(t, final.OpenBodies)
		require.NoError(t, e.Close())
	})
}

// TestShutdownReturnsOnlyAfterTheLastProgressReport: a slow progress function
// is still reporting when the work finishes. Shutdown must wait for it and
// for the report of the final state, and nothing may be reported after
// Shutdown returned: the reporter goroutine must not outlive its owner.
func TestShutdownReturnsOnlyAfterTheLastProgressReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu      sync.Mutex
			reports []ExecutorStats
			ended   []time.Time // when each call of the function returned
		)
		e := NewExecutor(nil, WithProgress(func(s ExecutorStats) {
			time.Sleep(time.Second) // a slow consumer, say a terminal redraw
			mu.Lock()
			reports = append(reports, s)
			ended = append(ended, time.Now())
			mu.Unlock()
		}))
		release := make(chan struct{})
		require.NoError(t, e.Go(t.Context(), func(context.Context) error { <-release; return nil }))
		synctest.Wait() // the function is reporting the Go call as running
		close(release)
		require.NoError(t, e.Close())
		returned := time.Now()
		time.Sleep(time.Minute) // give anything still pending time to show

		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, reports)
		for i, at := range ended {
			assert.False(t, at.After(returned), "report %d (%+v) ended %v after Shutdown returned", i, reports[i], at.Sub(returned))
		}
		want := ExecutorStats{MaxConcurrency: DefaultMaxConcurrency, Submitted: 1, Done: 1, Closed: true}
		assert.Equal(t, want, reports[len(reports)-1], "the last report is the final state")
		for i := 1; i < len(reports); i++ {
			assert.NotEqual(t, reports[i-1], reports[i], "report %d repeats the one before", i)
		}
	})
}

// TestShutdownReportsTheFinalStateWhenOnlyAnOlderOneWasReported: the work
// finishes while the progress function is stuck on an older state; Close
// must not return until the function is free and has the final state.
func TestShutdownReportsTheFinalStateWhenOnlyAnOlderOneWasReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var last atomic.Pointer[ExecutorStats]
		busy := make(chan struct{})
		e := NewExecutor(nil, WithProgress(func(s ExecutorStats) {
			<-busy // blocks the first report until the work is done
			last.Store(&s)
		}))
		release := make(chan struct{})
		require.NoError(t, e.Go(t.Context(), func(context.Context) error { <-release; return nil }))
		synctest.Wait()
		close(release)
		synctest.Wait() // the Go call finished while the first report is stuck
		done := make(chan error)
		go func() { done <- e.Close() }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Close returned (%v) while the progress function was still reporting", err)
		default:
		}
		close(busy)
		require.NoError(t, <-done)
		require.NotNil(t, last.Load())
		assert.Equal(t, ExecutorStats{MaxConcurrency: DefaultMaxConcurrency, Submitted: 1, Done: 1, Closed: true}, *last.Load())
	})
}

// TestShutdownDeadlineDoesNotWaitForAStuckProgressFunction: a progress
// function that blocks must not hold Shutdown past its deadline, and nothing
// is reported once Shutdown returned, even after the function unblocks.
func TestShutdownDeadlineDoesNotWaitForAStuckProgressFunction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		unblock := make(chan struct{})
		var calls atomic.Int32
		e := NewExecutor(nil, WithProgress(func(ExecutorStats) {
			calls.Add(1)
			<-unblock
		}))
		require.NoError(t, e.Go(t.Context(), func(context.Context) error { return nil }))
		synctest.Wait() // the first report is stuck; the Go call has finished

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		require.NoError(t, e.Shutdown(ctx), "all work finished: nothing was cancelled")
		assert.Equal(t, time.Second, time.Since(start), "Shutdown waited for the report until its deadline")

		close(unblock)
		synctest.Wait()
		assert.EqualValues(t, 1, calls.Load(), "no report started after Shutdown returned")
		require.NoError(t, e.Close(), "the same result, at once")
	})
}
