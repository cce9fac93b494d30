package pacer

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Do whose contexts can never end runs under the executor's shared abort
// context (callCtx) rather than a cancel context of its own: the caller's
// values still reach the transport, and a Shutdown deadline still cancels the
// request, and what the transport derived from its context, with cause
// ErrExecutorAborted.
func TestDoWithAContextThatCannotEndIsStillAbortedByShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type key struct{}
		seen := make(chan error, 2)
		e := NewExecutor(&http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			assert.Equal(t, "v", r.Context().Value(key{}), "the caller's values")
			derived, cancel := context.WithCancel(r.Context())
			defer cancel()
			<-derived.Done()
			seen <- context.Cause(r.Context())
			seen <- context.Cause(derived)
			return nil, r.Context().Err()
		})})
		ctx := context.WithValue(context.Background(), key{}, "v")
		require.Nil(t, ctx.Done(), "a context that cannot end")
		errc := make(chan error, 1)
		go func() {
			_, err := e.Do(ctx, mustRequest(t))
			errc <- err
		}()
		synctest.Wait()

		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var se *shutdownError
		require.ErrorAs(t, e.Shutdown(sctx), &se)
		assert.Equal(t, 1, se.running)
		assert.ErrorIs(t, <-errc, ErrExecutorAborted)
		assert.Equal(t, ErrExecutorAborted, <-seen, "the request's context")
		assert.Equal(t, ErrExecutorAborted, <-seen, "a context the transport derived")
	})
}

func mustRequest(t *testing.T) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://api.example/", nil)
	require.NoError(t, err)
	return req
}

// Executor.Do's own allocations, on top of what client.Do allocates: the
// call (which holds the request copy and, for a context that cannot end, its
// context), plus a cancel context (two allocations) when the caller's context
// can end.
func TestExecutorDoAllocatesAtMostTheCallAndACancelContext(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	transport := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: &fakeBody{r: strings.NewReader("ok"), leave: func() {}}, Request: r}, nil
	})
	client := &http.Client{Transport: transport}
	e := NewExecutor(client)
	defer e.Close()
	req := mustRequest(t)
	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()

	do := func(send func() (*http.Response, error)) func() {
		return func() {
			resp, err := send()
			if err != nil {
				panic(err)
			}
			_ = resp.Body.Close()
		}
	}
	base := testing.AllocsPerRun(200, do(func() (*http.Response, error) { return client.Do(req) }))
	plain := testing.AllocsPerRun(200, do(func() (*http.Response, error) { return e.Do(context.Background(), req) }))
	withCancel := testing.AllocsPerRun(200, do(func() (*http.Response, error) { return e.Do(cancellable, req) }))
	adaptive := NewExecutor(client, WithAdaptiveConcurrency(1, 64))
	defer adaptive.Close()
	adapt := testing.AllocsPerRun(200, do(func() (*http.Response, error) { return adaptive.Do(context.Background(), req) }))
	t.Logf("client.Do %v allocs; Executor.Do %v (context.Background), %v (a context that can end), %v (adaptive)", base, plain, withCancel, adapt)
	// The trace (its hooks, their closure, its context) and the probe in
	// the context's marks (the context and the boxed marks).
	assert.LessOrEqual(t, adapt-plain, 5.0, "an adaptive bound: the trace and the probe")
	assert.LessOrEqual(t, plain-base, 1.0, "a context that cannot end: the call only")
	assert.LessOrEqual(t, withCancel-base, 3.0, "a context that can end: the call and a cancel context")
}
