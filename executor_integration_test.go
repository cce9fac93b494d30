package pacer

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Integration tests: real loopback sockets and net/http's own transport, so
// the executor is checked against real response bodies and real cancellation.

func TestExecutorBoundsConcurrencyAtARealServer(t *testing.T) {
	const calls, limit = 200, 8
	var inHandler, peak atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := inHandler.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(time.Millisecond)
		// Leave before the body is complete: the client frees its slot only
		// after reading it, so the count can never run ahead of the bound.
		inHandler.Add(-1)
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	client := srv.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = limit
	e := NewExecutor(client, WithMaxConcurrency(limit))

	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
			if !assert.NoError(t, err) {
				return
			}
			resp, err := e.Do(t.Context(), req)
			if assert.NoError(t, err) {
				drainAndClose(resp)
			}
		})
	}
	wg.Wait()
	require.NoError(t, e.Close())
	assert.LessOrEqual(t, peak.Load(), int64(limit))
	assert.Greater(t, peak.Load(), int64(1), "requests did overlap")
	assert.EqualValues(t, calls, e.Stats().Done)
	requireSemaphoreFull(t, e)
}

func TestShutdownDeadlineAbortsARealResponseBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first part,")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the rest never comes
	}))
	defer srv.Close()
	e := NewExecutor(srv.Client())

	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err := e.Do(t.Context(), req)
	require.NoError(t, err)
	buf := make([]byte, len("first part,"))
	_, err = io.ReadFull(resp.Body, buf)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	err = e.Shutdown(ctx)
	var se *shutdownError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 1, se.openBodies)
	assert.Zero(t, se.running)

	_, err = resp.Body.Read(buf)
	require.Error(t, err, "reading a body Shutdown aborted fails instead of hanging")
	assert.False(t, errors.Is(err, io.EOF))
	require.NoError(t, resp.Body.Close())
	requireSemaphoreFull(t, e)
	requireIdleStats(t, e.Stats())
}
