package pacer

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/retry"
)

// The method value must be assignable to retryablehttp.Backoff without the
// root package importing retryablehttp.
var _ retryablehttp.Backoff = (*Transport)(nil).Backoff

func TestBackoffIsExponentialAndCappedWithoutKnowledge(t *testing.T) {
	tr := NewTransport(okTransport{})
	for _, tc := range []struct {
		min, max time.Duration
		attempt  int
		want     time.Duration
	}{
		{time.Second, 30 * time.Second, 0, time.Second},
		{time.Second, 30 * time.Second, 3, 8 * time.Second},
		{time.Second, 30 * time.Second, 10, 30 * time.Second},
		{time.Second, 30 * time.Second, 5000, 30 * time.Second}, // no overflow
		{time.Second, 0, 10, defaultBackoffMax},                 // no max: still capped
		{time.Minute, time.Second, 0, time.Second},              // min above max
		{-time.Second, time.Second, 2, 0},
		{time.Second, 30 * time.Second, -1, time.Second},
	} {
		assert.Equal(t, tc.want, tr.Backoff(tc.min, tc.max, tc.attempt, nil), "%+v", tc)
	}
}

func TestBackoffWaitsForTheEndpointsNextAllowedTimeButNeverPastMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(newMock(respondInTurn(respond(429, "Retry-After", "20"))), WithRetry(retry.Policy{Max: retry.None}))
		resp := mustGet(t, tr, mockURL) // pauses the endpoint for 20 s
		// The limiter may add its own pacing interval after the pause.
		assert.InDelta(t, 20*time.Second, tr.Backoff(time.Second, time.Minute, 0, resp), float64(time.Second))
		assert.Equal(t, 5*time.Second, tr.Backoff(time.Second, 5*time.Second, 0, resp), "capped by max")
		time.Sleep(15 * time.Second)
		// A later response without Retry-After, to the same endpoint: the
		// limiter still knows the pause ends in 5 s.
		later := &http.Response{StatusCode: 503, Header: http.Header{}, Request: resp.Request}
		assert.InDelta(t, 5*time.Second, tr.Backoff(time.Second, time.Minute, 0, later), float64(time.Second))
	})
}

func TestBackoffHonoursARetryAfterItsLimiterHasNotSeen(t *testing.T) {
	tr := NewTransport(okTransport{})
	resp := &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"7"}}}
	assert.Equal(t, 7*time.Second, tr.Backoff(time.Second, time.Minute, 0, resp))
	resp.Header.Set("Retry-After", "1000000") // retryablehttp#247: would sleep 277 h
	assert.Equal(t, time.Minute, tr.Backoff(time.Second, time.Minute, 0, resp))
}

// TestRetryableHTTPClientOverPacer runs go-retryablehttp with a pacer
// Transport underneath and pacer's Backoff: retryablehttp owns the retries,
// pacer the pacing, and the server's Retry-After is honoured once, capped.
func TestRetryableHTTPClientOverPacer(t *testing.T) {
	var n atomic.Int32
	var first, second time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			first = time.Now()
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			second = time.Now()
			io.WriteString(w, "ok")
		}
	}))
	defer srv.Close()

	pt := NewTransport(nil, WithRetry(retry.Policy{Max: retry.None}))
	client := retryablehttp.NewClient()
	client.Logger = nil
	client.HTTPClient.Transport = pt
	client.RetryWaitMin = 10 * time.Millisecond
	client.RetryWaitMax = 2 * time.Second
	client.Backoff = pt.Backoff
	defer client.HTTPClient.CloseIdleConnections()

	resp, err := client.Get(srv.URL + "/x")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, "ok", string(body))
	assert.EqualValues(t, 2, n.Load())
	assert.GreaterOrEqual(t, second.Sub(first), 900*time.Millisecond, "Retry-After honoured")
	st := pt.Stats()
	require.Len(t, st, 1)
	assert.EqualValues(t, 2, st[0].Requests, "both attempts went through pacer's limiter")
}

// A request that matches a pattern is paced by the pattern's endpoint only:
// while that endpoint is untracked, the pause of its host's endpoint is not
// its business.
func TestBackoffOfAPatternRequestIgnoresItsHostsEndpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(newMock(respondInTurn(respond(429, "Retry-After", "20"))),
			WithRetry(retry.Policy{Max: retry.None}), WithEndpoint("api.example.com/search/", Inf, 0))
		mustGet(t, tr, "https://api.example.com/other") // pauses the host's endpoint for 20 s
		req, err := http.NewRequest(http.MethodGet, "https://api.example.com/search/x", nil)
		require.NoError(t, err)
		resp := &http.Response{StatusCode: 503, Header: http.Header{}, Request: req}
		assert.Equal(t, time.Second, tr.Backoff(time.Second, time.Minute, 0, resp))
	})
}
