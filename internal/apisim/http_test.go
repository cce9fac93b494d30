package apisim

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// trackedBody records whether it was read to the end and closed.
type trackedBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *trackedBody) Close() error { b.closed.Store(true); return nil }

func TestTransportAnswersWithACompleteResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleIETF, Limit: 5, Window: time.Minute})
		body := &trackedBody{Reader: strings.NewReader(`{"q":1}`)}
		req, err := http.NewRequest(http.MethodPost, "http://api.test/items", body)
		require.NoError(t, err)
		resp, err := s.Transport().RoundTrip(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.True(t, body.closed.Load(), "the request body is closed")
		assert.Equal(t, "200 OK", resp.Status)
		assert.Equal(t, "HTTP/1.1", resp.Proto)
		assert.Same(t, req, resp.Request)
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.JSONEq(t, `{"ok":true,"bucket":"default"}`, string(got))
		assert.Equal(t, int64(len(got)), resp.ContentLength)
	})
}

func TestTransportReturnsTheContextErrorWithoutCountingACancelledRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleBare, Limit: 5, Window: time.Minute})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		body := &trackedBody{Reader: strings.NewReader("x")}
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://api.test/", body)
		require.NoError(t, err)
		resp, err := s.Transport().RoundTrip(req)
		assert.Nil(t, resp)
		assert.ErrorIs(t, err, context.Canceled)
		assert.True(t, body.closed.Load(), "the body is closed on errors too")
		assert.Zero(t, s.Stats().Requests)
	})
}

func TestTransportReturnsPromptlyWhenTheContextEndsDuringLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleBare, Limit: 5, Window: time.Minute, Latency: time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
		require.NoError(t, err)
		start := time.Now()
		resp, err := s.Transport().RoundTrip(req)
		assert.Nil(t, resp)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 100*time.Millisecond, time.Since(start))
		assert.Equal(t, 1, s.Stats().OK, "the server had already admitted it")
	})
}

func TestLatencyDelaysTheResponseButNotAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleIETF, Limit: 5, Window: 10 * time.Second, Latency: 3 * time.Second})
		start := time.Now()
		resp := get(t, s, "/", 0)
		assert.Equal(t, 3*time.Second, time.Since(start))
		assert.Equal(t, `"default";r=4;t=10`, resp.Header.Get("RateLimit"), "figures as of admission")
		assert.Equal(t, start, s.Events()[0].At)
	})
}

func TestServeHTTPOverLoopback(t *testing.T) {
	s := New(Config{Style: StyleGitHub, Limit: 2, Window: time.Hour, Routes: map[string]int{"/search/": 1}})
	srv := httptest.NewServer(s)
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()

	do := func(path, tokens string) (*http.Response, string) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader("payload"))
		require.NoError(t, err)
		req.Header.Set(TokensHeader, tokens)
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(b)
	}
	for i, want := range []int{200, 200, 429} {
		resp, body := do("/repos/a/b", "7")
		require.Equal(t, want, resp.StatusCode, "request %d", i)
		assert.Equal(t, "core", resp.Header.Get("X-RateLimit-Resource"))
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		if want == 429 {
			assert.Equal(t, "0", resp.Header.Get("X-RateLimit-Remaining"))
			assert.Contains(t, body, "API rate limit exceeded")
		}
	}
	resp, _ := do("/search/code", "0")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "search", resp.Header.Get("X-RateLimit-Resource"))

	st := s.Stats()
	assert.Equal(t, 4, st.Requests)
	assert.Equal(t, 1, st.Throttled)
	assert.Equal(t, 14, st.TokensUsed)
}

func TestServeHTTPWritesNothingWhenTheClientLeavesDuringLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleBare, Limit: 5, Window: time.Minute, Latency: time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil))
		assert.Empty(t, rec.Header())
		assert.Zero(t, rec.Body.Len())
	})
}
