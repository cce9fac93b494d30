package pacer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeServer is an in-memory RoundTripper that measures concurrency the way a
// server does: a request is open from the start of RoundTrip until its
// response body is closed or read to the end.
type fakeServer struct {
	// delay, if set, is how long each request takes; the request ends early
	// with its context's error if the context ends first.
	delay func() time.Duration
	// hold, if set, keeps every request waiting until its context ends.
	hold bool

	mu    sync.Mutex
	open  int
	peak  int
	calls int
}

func (s *fakeServer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close() // as the RoundTripper contract demands
	}
	s.mu.Lock()
	s.calls++
	s.open++
	s.peak = max(s.peak, s.open)
	s.mu.Unlock()

	ctx := req.Context()
	var wait <-chan time.Time
	if s.delay != nil {
		wait = time.After(s.delay())
	}
	if s.hold || wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			s.leave()
			return nil, ctx.Err()
		}
	}
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{},
		Body:       &fakeBody{r: strings.NewReader("ok"), leave: s.leave},
		Request:    req,
	}, nil
}

func (s *fakeServer) leave() {
	s.mu.Lock()
	s.open--
	s.mu.Unlock()
}

func (s *fakeServer) stats() (open, peak, calls int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open, s.peak, s.calls
}

type fakeBody struct {
	r     io.Reader
	leave func()
	once  sync.Once
}

func (b *fakeBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil {
		b.once.Do(b.leave)
	}
	return n, err
}

func (b *fakeBody) Close() error {
	b.once.Do(b.leave)
	return nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func newRequest(t testing.TB) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://api.example/items", nil)
	require.NoError(t, err)
	return req
}

// requireSemaphoreFull asserts that every slot is free and nobody waits.
func requireSemaphoreFull(t *testing.T, e *Executor) {
	t.Helper()
	e.mu.Lock()
	held, queued := e.slots.held, e.slots.head != nil
	e.mu.Unlock()
	require.True(t, held == 0 && !queued, "all slots must be free (%d held), none queued (%v)", held, queued)
}

// requireBalanced asserts the stats invariant and that nothing is in flight.
func requireIdleStats(t *testing.T, s ExecutorStats) {
	t.Helper()
	assert.Equal(t, s.Submitted, s.Done+s.Failed, "every accepted call is done or failed: %+v", s)
	assert.Zero(t, s.Waiting, "waiting")
	assert.Zero(t, s.Running, "running")
	assert.Zero(t, s.OpenBodies, "open bodies")
}

func drainAndClose(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

func TestExecutorOptionsPanicWhenCreatedNamingTheOption(t *testing.T) {
	for _, n := range []int{0, -1, -1 << 40} {
		assert.PanicsWithValue(t, fmt.Sprintf("pacer: WithMaxConcurrency(%d): n must be at least 1", n),
			func() { WithMaxConcurrency(n) })
	}
	assert.PanicsWithValue(t, "pacer: WithErrorHandler(nil)", func() { WithErrorHandler(nil) })
}

func TestNewExecutorPanicsOnANilOptionLikeNewTransport(t *testing.T) {
	assert.PanicsWithValue(t, "pacer: NewExecutor: nil ExecutorOption",
		func() { NewExecutor(nil, WithMaxConcurrency(2), nil) })
	assert.PanicsWithValue(t, "pacer: NewTransport: nil Option",
		func() { NewTransport(nil, WithMaxWait(time.Second), nil) }, "the message NewExecutor's mirrors")
}

func TestNewExecutorDefaults(t *testing.T) {
	e := NewExecutor(nil)
	assert.Same(t, http.DefaultClient, e.client)
	assert.Equal(t, DefaultMaxConcurrency, e.Stats().MaxConcurrency)
	require.NoError(t, e.Close())
}

func TestExecutorDoNeverExceedsMaxConcurrencyAtTheServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const calls, limit = 10_000, 8
		srv := &fakeServer{delay: func() time.Duration { return time.Millisecond }}
		e := NewExecutor(&http.Client{Transport: srv}, WithMaxConcurrency(limit))

		var wg sync.WaitGroup
		var failures atomic.Int64
		for range calls {
			wg.Go(func() {
				resp, err := e.Do(t.Context(), newRequest(t))
				if err != nil {
					failures.Add(1)
					return
				}
				// Hold the body open a while: the bound is on open
				// responses, not on header arrival.
				time.Sleep(time.Millisecond)
				drainAndClose(resp)
			})
		}
		wg.Wait()

		open, peak, served := srv.stats()
		assert.Zero(t, failures.Load())
		assert.Equal(t, calls, served)
		assert.Equal(t, limit, peak, "the bound must be reached but never exceeded")
		assert.Zero(t, open)
		s := e.Stats()
		assert.EqualValues(t, calls, s.Submitted)
		assert.EqualValues(t, calls, s.Done)
		requireIdleStats(t, s)
		requireSemaphoreFull(t, e)
		require.NoError(t, e.Close())
	})
}

func TestExecutorSlotIsHeldUntilTheBodyEnds(t *testing.T) {
	tests := []struct {
		name string
		end  func(t *testing.T, body io.ReadCloser)
	}{
		{"closed unread", func(t *testing.T, b io.ReadCloser) { require.NoError(t, b.Close()) }},
		{"read to EOF", func(t *testing.T, b io.ReadCloser) {
			got, err := io.ReadAll(b)
			require.NoError(t, err)
			assert.Equal(t, "ok", string(got))
		}},
		{"read to EOF then closed", func(t *testing.T, b io.ReadCloser) {
			_, _ = io.ReadAll(b)
			require.NoError(t, b.Close())
		}},
		{"closed twice", func(t *testing.T, b io.ReadCloser) {
			require.NoError(t, b.Close())
			require.NoError(t, b.Close())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewExecutor(&http.Client{Transport: &fakeServer{}}, WithMaxConcurrency(1))
			resp, err := e.Do(t.Context(), newRequest(t))
			require.NoError(t, err)

			s := e.Stats()
			assert.Equal(t, 1, s.OpenBodies)
			assert.Zero(t, s.Running)
			e.mu.Lock()
			held := e.slots.held
			e.mu.Unlock()
			assert.Equal(t, 1, held, "an open body holds its slot")

			tt.end(t, resp.Body)
			assert.Zero(t, e.Stats().OpenBodies)
			requireSemaphoreFull(t, e) // also proves the slot was released once only
			require.NoError(t, e.Close())
		})
	}
}

func TestExecutorSlotIsReleasedWhenTheBodyFailsToRead(t *testing.T) {
	broken := errors.New("connection reset")
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: io.NopCloser(iotest.ErrReader(broken)), Request: r}, nil
	})
	e := NewExecutor(&http.Client{Transport: rt}, WithMaxConcurrency(1))
	resp, err := e.Do(t.Context(), newRequest(t))
	require.NoError(t, err)
	_, err = io.ReadAll(resp.Body)
	require.ErrorIs(t, err, broken)
	requireSemaphoreFull(t, e)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, e.Close())
}

func TestExecutorReleasesTheSlotAtOnceForBodilessResponses(t *testing.T) {
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Request: r}, nil
	})
	e := NewExecutor(&http.Client{Transport: rt}, WithMaxConcurrency(1))
	resp, err := e.Do(t.Context(), newRequest(t))
	require.NoError(t, err)
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	requireSemaphoreFull(t, e)
	require.NoError(t, e.Close(), "a body-less response must not keep Close waiting")
}

func TestExecutorReleasesTheSlotAtOnceWhenTheRequestFails(t *testing.T) {
	refused := errors.New("connection refused")
	rt := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, refused })
	e := NewExecutor(&http.Client{Transport: rt}, WithMaxConcurrency(1))
	_, err := e.Do(t.Context(), newRequest(t))
	require.ErrorIs(t, err, refused)
	requireSemaphoreFull(t, e)
	s := e.Stats()
	assert.EqualValues(t, 1, s.Failed)
	requireIdleStats(t, s)
	require.NoError(t, e.Close())
}

func TestExecutorDoCancelledWhileWaitingReturnsPromptlyAndTakesNoSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &fakeServer{}
		e := NewExecutor(&http.Client{Transport: srv}, WithMaxConcurrency(1))
		held, err := e.Do(t.Context(), newRequest(t))
		require.NoError(t, err)

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		_, err = e.Do(ctx, newRequest(t))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start), "returns when ctx ends, not later")
		_, _, calls := srv.stats()
		assert.Equal(t, 1, calls, "the waiting call never reached the transport")

		require.NoError(t, held.Body.Close())
		requireSemaphoreFull(t, e)
		requireIdleStats(t, e.Stats())
		require.NoError(t, e.Close())
	})
}

func TestExecutorTakesTheSlotBeforeTheTransportSeesTheRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A rate-limiting transport spends its token inside RoundTrip; a
		// queued call must not have reached it yet.
		srv := &fakeServer{hold: true}
		e := NewExecutor(&http.Client{Transport: srv}, WithMaxConcurrency(2))
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() { _, _ = e.Do(ctx, newRequest(t)) })
		}
		synctest.Wait()
		_, _, calls := srv.stats()
		assert.Equal(t, 2, calls)
		s := e.Stats()
		assert.Equal(t, 3, s.Waiting)
		assert.Equal(t, 2, s.Running)
		cancel()
		wg.Wait()
		requireSemaphoreFull(t, e)
		require.NoError(t, e.Close())
	})
}

func TestExecutorSpendsNoRateTokenWhileACallIsQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A transport that takes a token from a pacer Bucket, as the pacer
		// Transport does, before sending. Two tokens, none refilled soon.
		bucket := NewBucket(Every(time.Hour), 2)
		var spent atomic.Int64
		held := &fakeServer{hold: true}
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if err := bucket.Wait(r.Context()); err != nil {
				return nil, err
			}
			spent.Add(1)
			return held.RoundTrip(r)
		})
		e := NewExecutor(&http.Client{Transport: rt}, WithMaxConcurrency(2))

		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() { _, _ = e.Do(ctx, newRequest(t)) })
		}
		synctest.Wait()
		assert.EqualValues(t, 2, spent.Load())
		assert.Equal(t, 4, e.Stats().Waiting)
		assert.InDelta(t, 0, bucket.Tokens(), 1e-6, "queued calls hold no token and owe none")

		cancel()
		wg.Wait()
		assert.EqualValues(t, 2, spent.Load(), "cancelled queued calls never reached the limiter")
		requireSemaphoreFull(t, e)
		require.NoError(t, e.Close())
	})
}

func TestExecutorDoHonoursTheRequestsOwnContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := NewExecutor(&http.Client{Transport: &fakeServer{hold: true}}, WithMaxConcurrency(1))
		reqCtx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, "http://api.example/", nil)
		require.NoError(t, err)
		_, err = e.Do(context.Background(), req)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		requireSemaphoreFull(t, e)
		require.NoError(t, e.Close())
	})
}

type ctxKey struct{}

func TestExecutorDoRunsTheRequestWithTheCallersContextValues(t *testing.T) {
	var got any
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Context().Value(ctxKey{})
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	})
	e := NewExecutor(&http.Client{Transport: rt})
	ctx := context.WithValue(t.Context(), ctxKey{}, "trace-42")
	resp, err := e.Do(ctx, newRequest(t))
	require.NoError(t, err)
	drainAndClose(resp)
	assert.Equal(t, "trace-42", got)
	require.NoError(t, e.Close())
}

func TestExecutorRejectsNewWorkAfterShutdownAndClosesTheRequestBody(t *testing.T) {
	e := NewExecutor(&http.Client{Transport: &fakeServer{}})
	require.NoError(t, e.Shutdown(t.Context()))

	body := &closeRecorder{Reader: strings.NewReader("payload")}
	req, err := http.NewRequest(http.MethodPost, "http://api.example/", body)
	require.NoError(t, err)
	_, err = e.Do(t.Context(), req)
	require.ErrorIs(t, err, ErrExecutorClosed)
	assert.True(t, body.closed.Load(), "Do closes the request body even when it does not send it")

	ran := false
	err = e.Go(t.Context(), func(context.Context) error { ran = true; return nil })
	require.ErrorIs(t, err, ErrExecutorClosed)
	assert.False(t, ran)

	s := e.Stats()
	assert.True(t, s.Closed)
	assert.EqualValues(t, 2, s.Rejected)
	assert.Zero(t, s.Submitted)
}

type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeRecorder) Close() error { c.closed.Store(true); return nil }

func TestExecutorRejectsNilInputsWithoutPanicking(t *testing.T) {
	e := NewExecutor(nil)
	_, err := e.Do(t.Context(), nil)
	require.Error(t, err)
	require.Error(t, e.Go(t.Context(), nil))
	requireSemaphoreFull(t, e)
	require.NoError(t, e.Close())
}

func TestExecutorReportsTheAgeOfTheOldestOpenBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := NewExecutor(&http.Client{Transport: &fakeServer{}})
		first, err := e.Do(t.Context(), newRequest(t))
		require.NoError(t, err)
		time.Sleep(3 * time.Second)
		second, err := e.Do(t.Context(), newRequest(t))
		require.NoError(t, err)
		time.Sleep(2 * time.Second)

		s := e.Stats()
		assert.Equal(t, 2, s.OpenBodies)
		assert.Equal(t, 5*time.Second, s.OldestOpenBody)

		require.NoError(t, first.Body.Close())
		assert.Equal(t, 2*time.Second, e.Stats().OldestOpenBody)
		require.NoError(t, second.Body.Close())
		assert.Zero(t, e.Stats().OldestOpenBody)
		require.NoError(t, e.Close())
	})
}

func TestExecutorKeepsUpgradedConnectionsWritable(t *testing.T) {
	conn := &rwConn{}
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusSwitchingProtocols, Body: conn, Request: r}, nil
	})
	e := NewExecutor(&http.Client{Transport: rt})
	resp, err := e.Do(t.Context(), newRequest(t))
	require.NoError(t, err)
	w, ok := resp.Body.(io.Writer)
	require.True(t, ok, "a 101 response body must stay an io.ReadWriteCloser")
	_, err = w.Write([]byte("ping"))
	require.NoError(t, err)
	assert.Equal(t, "ping", conn.written.String())
	require.NoError(t, resp.Body.Close())
	require.NoError(t, e.Close())
}

type rwConn struct {
	written strings.Builder
}

func (c *rwConn) Read([]byte) (int, error)    { return 0, io.EOF }
func (c *rwConn) Write(p []byte) (int, error) { return c.written.Write(p) }
func (c *rwConn) Close() error                { return nil }

// randDurations returns a deterministic source of random durations in
// [0, max), safe for the many goroutines of a load test.
func randDurations(seed1, seed2 uint64) func(max time.Duration) time.Duration {
	rng := rand.New(rand.NewPCG(seed1, seed2))
	var mu sync.Mutex
	return func(max time.Duration) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return time.Duration(rng.Int64N(int64(max)))
	}
}

func TestExecutorCancellationStormLeavesTheSemaphoreFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const calls, limit = 2_000, 8
		randDur := randDurations(6, 6)
		srv := &fakeServer{delay: func() time.Duration { return randDur(20 * time.Millisecond) }}
		e := NewExecutor(&http.Client{Transport: srv}, WithMaxConcurrency(limit))

		var wg sync.WaitGroup
		var ok, cancelled atomic.Int64
		for i := range calls {
			ctx, cancel := context.WithCancel(t.Context())
			if i%2 == 0 {
				// Cancel at a random moment: while waiting for a slot, in
				// flight, or while the body is open.
				time.AfterFunc(randDur(time.Second), cancel)
			}
			hold := randDur(5 * time.Millisecond)
			wg.Go(func() {
				defer cancel()
				resp, err := e.Do(ctx, newRequest(t))
				if err != nil {
					assert.ErrorIs(t, err, context.Canceled)
					cancelled.Add(1)
					return
				}
				ok.Add(1)
				time.Sleep(hold)
				drainAndClose(resp)
			})
		}
		wg.Wait()

		assert.EqualValues(t, calls, ok.Load()+cancelled.Load())
		assert.Positive(t, cancelled.Load(), "the storm must cancel some calls")
		assert.Positive(t, ok.Load())
		open, peak, _ := srv.stats()
		assert.Zero(t, open)
		assert.LessOrEqual(t, peak, limit)
		s := e.Stats()
		assert.Equal(t, cancelled.Load(), s.Failed)
		requireIdleStats(t, s)
		requireSemaphoreFull(t, e)
		require.NoError(t, e.Close())
	})
}
