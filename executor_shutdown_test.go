package pacer

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestShutdownDuringLoadLosesNoCall(t *testing.T) {
	for _, deadline := range []time.Duration{0, 50 * time.Millisecond} {
		name := "waits for all accepted work"
		if deadline > 0 {
			name = "deadline cancels the rest"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const calls, limit = 2_000, 8
				randDur := randDurations(1, 2)
				srv := &fakeServer{delay: func() time.Duration { return randDur(10 * time.Millisecond) }}
				e := NewExecutor(&http.Client{Transport: srv}, WithMaxConcurrency(limit))

				r := shutdownMidLoad(t, e, calls, 500*time.Millisecond, deadline)
				assert.Equal(t, r.stats.Rejected, r.rejected)
				assert.Positive(t, r.rejected, "shutdown must land mid-load")
				if deadline > 0 {
					assert.ErrorIs(t, r.err, context.DeadlineExceeded)
					var se *shutdownError
					require.ErrorAs(t, r.err, &se)
					assert.LessOrEqual(t, r.aborted, int64(se.running),
						"only counted requests are aborted (one answering at the deadline may still succeed)")
					assert.Positive(t, r.aborted)
					assert.Positive(t, se.waiting, "the deadline must catch queued calls")
				}
			})
		})
	}
}

// shutdownRun is what the calls of shutdownMidLoad got, and what Shutdown
// returned.
type shutdownRun struct {
	responses, rejected, notStarted, aborted int64
	err                                      error
	stats                                    ExecutorStats
}

// shutdownMidLoad starts calls spread over a second, shuts e down after
// after (with deadline, when positive), waits for every call, and checks
// the guarantees every shutdown keeps: each call accepted or rejected, each
// accepted call returned a response or an error, no slot held; without a
// deadline every accepted call ran, with one exactly the counted waiters
// never started.
func shutdownMidLoad(t *testing.T, e *Executor, calls int, after, deadline time.Duration) shutdownRun {
	t.Helper()
	var wg sync.WaitGroup
	var responses, rejected, notStarted, aborted atomic.Int64
	randDur := randDurations(1, 2)
	for range calls {
		start := randDur(time.Second)
		wg.Go(func() {
			time.Sleep(start)
			resp, err := e.Do(t.Context(), newRequest(t))
			switch {
			case err == nil:
				responses.Add(1)
				drainAndClose(resp)
			case errors.Is(err, ErrExecutorAborted):
				assert.ErrorIs(t, err, context.Canceled)
				aborted.Add(1)
			case errors.Is(err, errNotStarted):
				notStarted.Add(1)
			case errors.Is(err, ErrExecutorClosed):
				rejected.Add(1)
			default:
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
	time.Sleep(after)
	ctx := context.Background()
	if deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, deadline)
		defer cancel()
	}
	r := shutdownRun{err: e.Shutdown(ctx)}
	wg.Wait() // a hung call would make synctest report a deadlock
	r.responses, r.rejected, r.notStarted, r.aborted = responses.Load(), rejected.Load(), notStarted.Load(), aborted.Load()
	r.stats = e.Stats()

	assert.EqualValues(t, calls, r.stats.Submitted+r.stats.Rejected, "every call is accepted or rejected")
	assert.Equal(t, r.stats.Submitted, r.responses+r.notStarted+r.aborted,
		"every accepted call returned a response or an error")
	requireIdleStats(t, r.stats)
	requireSemaphoreFull(t, e)
	if deadline == 0 {
		require.NoError(t, r.err)
		assert.Zero(t, r.notStarted+r.aborted, "without a deadline all accepted work runs")
	} else {
		var se *shutdownError
		require.ErrorAs(t, r.err, &se)
		assert.EqualValues(t, se.waiting, r.notStarted, "exactly the counted waiters never started")
	}
	return r
}

func TestShutdownDeadlineCancelsInFlightWorkAndCountsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// "/open" answers at once; everything else is held until cancelled.
		instant, held := &fakeServer{}, &fakeServer{hold: true}
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Path == "/open" {
				return instant.RoundTrip(r)
			}
			return held.RoundTrip(r)
		})
		// Slots: one open body, two requests in flight, one Go function.
		e := NewExecutor(&http.Client{Transport: rt}, WithMaxConcurrency(4))
		openReq, err := http.NewRequest(http.MethodGet, "http://api.example/open", nil)
		require.NoError(t, err)
		opened, err := e.Do(t.Context(), openReq)
		require.NoError(t, err)

		var wg sync.WaitGroup
		errs := make(chan error, 10)
		for range 2 {
			wg.Go(func() {
				_, err := e.Do(t.Context(), newRequest(t))
				errs <- err
			})
		}
		require.NoError(t, e.Go(t.Context(), func(ctx context.Context) error {
			<-ctx.Done()
			errs <- context.Cause(ctx)
			return nil
		}))
		for range 5 {
			wg.Go(func() {
				_, err := e.Do(t.Context(), newRequest(t))
				errs <- err
			})
		}
		synctest.Wait()
		s := e.Stats()
		require.Equal(t, 3, s.Running)
		require.Equal(t, 5, s.Waiting)
		require.Equal(t, 1, s.OpenBodies)

		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		err = e.Shutdown(ctx)
		assert.Equal(t, 2*time.Second, time.Since(start), "Shutdown waits until its deadline, then returns at once")

		var se *shutdownError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, shutdownError{waiting: 5, running: 3, openBodies: 1, err: context.DeadlineExceeded}, *se)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "cancelled 3 running and 5 waiting calls with 1 response bodies open")

		wg.Wait()
		var gotAborted, gotNotStarted int
		for range 8 {
			err := <-errs
			switch {
			case errors.Is(err, ErrExecutorAborted):
				gotAborted++
			case errors.Is(err, ErrExecutorClosed):
				gotNotStarted++
			default:
				t.Errorf("unexpected error: %v", err)
			}
		}
		assert.Equal(t, 3, gotAborted, "requests and the Go function see ErrExecutorAborted as their cause")
		assert.Equal(t, 5, gotNotStarted)

		require.NoError(t, opened.Body.Close())
		requireSemaphoreFull(t, e)
		requireIdleStats(t, e.Stats())
		assert.Same(t, se, errorAsShutdown(t, e.Close()), "later calls return the same result")
	})
}

func errorAsShutdown(t *testing.T, err error) *shutdownError {
	t.Helper()
	var se *shutdownError
	require.ErrorAs(t, err, &se)
	return se
}

func TestShutdownWaitsForOpenBodies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := NewExecutor(&http.Client{Transport: &fakeServer{}})
		resp, err := e.Do(t.Context(), newRequest(t))
		require.NoError(t, err)

		done := make(chan error)
		go func() { done <- e.Shutdown(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Shutdown returned %v with a body still open", err)
		default:
		}
		assert.True(t, e.Stats().Closed)

		time.Sleep(time.Minute)
		drainAndClose(resp)
		require.NoError(t, <-done)
	})
}

func TestShutdownRunsAcceptedCallsStillWaitingForASlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &fakeServer{delay: func() time.Duration { return time.Second }}
		e := NewExecutor(&http.Client{Transport: srv}, WithMaxConcurrency(1))
		var wg sync.WaitGroup
		var ok atomic.Int64
		for range 4 {
			wg.Go(func() {
				resp, err := e.Do(t.Context(), newRequest(t))
				if assert.NoError(t, err) {
					ok.Add(1)
					drainAndClose(resp)
				}
			})
		}
		synctest.Wait()
		require.Equal(t, 3, e.Stats().Waiting)
		require.NoError(t, e.Shutdown(context.Background()))
		wg.Wait()
		assert.EqualValues(t, 4, ok.Load())
		_, _, calls := srv.stats()
		assert.Equal(t, 4, calls)
	})
}

func TestConcurrentShutdownsShareOneResult(t *testing.T) {
	t.Run("graceful", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := NewExecutor(&http.Client{Transport: &fakeServer{}})
			resp, err := e.Do(t.Context(), newRequest(t))
			require.NoError(t, err)

			results := make(chan error, 20)
			for i := range 20 {
				go func() {
					if i%2 == 0 {
						results <- e.Close()
					} else {
						results <- e.Shutdown(t.Context())
					}
				}()
			}
			synctest.Wait()
			assert.Empty(t, results, "all wait for the open body")
			drainAndClose(resp)
			for range 20 {
				assert.NoError(t, <-results)
			}
			assert.NoError(t, e.Shutdown(t.Context()), "and a late call sees the same")
		})
	})
	t.Run("first deadline cancels for all", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := NewExecutor(&http.Client{Transport: &fakeServer{hold: true}})
			reqDone := make(chan error)
			go func() {
				_, err := e.Do(t.Context(), newRequest(t))
				reqDone <- err
			}()
			synctest.Wait()

			results := make(chan error, 20)
			for i := range 20 {
				go func() {
					// Deadlines of 1s..20s: the 1s one decides for all.
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i+1)*time.Second)
					defer cancel()
					results <- e.Shutdown(ctx)
				}()
			}
			start := time.Now()
			first := errorAsShutdown(t, <-results)
			assert.Equal(t, time.Second, time.Since(start))
			assert.Equal(t, 1, first.running)
			for range 19 {
				assert.Same(t, first, errorAsShutdown(t, <-results))
			}
			assert.ErrorIs(t, <-reqDone, ErrExecutorAborted)
		})
	})
}

func TestShutdownWithExpiredContextOnIdleExecutorSucceeds(t *testing.T) {
	e := NewExecutor(nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, e.Shutdown(ctx), "nothing was cancelled, so nothing is reported")
	require.NoError(t, e.Close())
}

func TestExecutorGoRunsFunctionsAsynchronouslyUnderTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 3
		e := NewExecutor(nil, WithMaxConcurrency(limit))
		var running, peak atomic.Int64
		release := make(chan struct{})
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			for range 10 {
				require.NoError(t, e.Go(t.Context(), func(context.Context) error {
					n := running.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					<-release
					running.Add(-1)
					return nil
				}))
			}
		}()
		synctest.Wait()
		assert.EqualValues(t, limit, running.Load(), "Go returned for the first %d and blocks on the next", limit)
		assert.Equal(t, limit, e.Stats().Running)
		assert.Equal(t, 1, e.Stats().Waiting, "the submitting loop waits inside Go")
		close(release)
		<-returned
		require.NoError(t, e.Close())
		assert.EqualValues(t, limit, peak.Load())
		s := e.Stats()
		assert.EqualValues(t, 10, s.Done)
		requireIdleStats(t, s)
	})
}

func TestExecutorGoReportsFunctionErrors(t *testing.T) {
	var mu sync.Mutex
	var got []error
	e := NewExecutor(nil, WithErrorHandler(func(err error) {
		mu.Lock()
		got = append(got, err)
		mu.Unlock()
	}))
	boom := errors.New("boom")
	require.NoError(t, e.Go(t.Context(), func(context.Context) error { return boom }))
	require.NoError(t, e.Go(t.Context(), func(context.Context) error { return nil }))
	require.NoError(t, e.Close())
	assert.Equal(t, []error{boom}, got)
	s := e.Stats()
	assert.EqualValues(t, 1, s.Failed)
	assert.EqualValues(t, 1, s.Done)
}

func TestExecutorGoFunctionContextFollowsTheCallersContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := NewExecutor(nil)
		ctx, cancel := context.WithCancel(context.WithValue(t.Context(), ctxKey{}, "v"))
		seen := make(chan error, 1)
		require.NoError(t, e.Go(ctx, func(ctx context.Context) error {
			assert.Equal(t, "v", ctx.Value(ctxKey{}))
			<-ctx.Done()
			seen <- ctx.Err()
			return ctx.Err()
		}))
		cancel()
		assert.ErrorIs(t, <-seen, context.Canceled)
		require.NoError(t, e.Close())
	})
}

func TestExecutorGoWaitingForASlotHonoursItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := NewExecutor(nil, WithMaxConcurrency(1))
		release := make(chan struct{})
		require.NoError(t, e.Go(t.Context(), func(context.Context) error { <-release; return nil }))
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		ran := false
		err := e.Go(ctx, func(context.Context) error { ran = true; return nil })
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.False(t, ran)
		close(release)
		require.NoError(t, e.Close())
		requireSemaphoreFull(t, e)
	})
}
