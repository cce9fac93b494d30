package pacer

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/observe"
)

// The per-response shortcuts of issue 13 keep their promises: a response's
// quotas cost no allocation on their way from the headers to the limiter,
// and the reading they travel in (response.Meaning) is never what a
// caller is handed; a decision retune skips as already applied is one it made.

// githubResponder answers like GitHub: a quota of 5,000 counting down from
// 4,000 (so that both figures always take strconv.Itoa an allocation),
// resetting in an hour, in the "core" resource.
func githubResponder() (http.RoundTripper, func() int) {
	left := 4000
	reset := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	h := http.Header{
		"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {""}, "X-Ratelimit-Reset": {reset},
		"X-Ratelimit-Used": {""}, "X-Ratelimit-Resource": {"core"},
	}
	return transportFunc(func(r *http.Request) (*http.Response, error) {
		left--
		h["X-Ratelimit-Remaining"][0] = strconv.Itoa(left)
		h["X-Ratelimit-Used"][0] = strconv.Itoa(5000 - left)
		return &http.Response{StatusCode: http.StatusOK, Header: h, Body: http.NoBody, Request: r}, nil
	}), func() int { return left }
}

// A GitHub-style response costs the Transport no allocation: its quota is
// parsed into the attempt's reading (response.Meaning) and copied into the
// limiter's own.
func TestTransportAllocatesNothingForAResponsesQuotas(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	canned, _ := githubResponder()
	tr := NewTransport(canned)
	// The bare requests go to a server of their own: counted against the
	// Transport's quota, they would be another client's spending, which a
	// slow (loaded) machine measures as a drain and paces against.
	bareServer, _ := githubResponder()
	req, err := http.NewRequest(http.MethodGet, "https://api.example.com/repos/a/b", nil)
	require.NoError(t, err)
	send := func(rt http.RoundTripper) func() {
		return func() {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				panic(err)
			}
			_ = resp.Body.Close()
		}
	}
	send(tr)() // the endpoints, the bucket binding, the quota's window
	send(tr)()
	bare := testing.AllocsPerRun(200, send(bareServer))
	paced := testing.AllocsPerRun(200, send(tr))
	assert.Equal(t, bare, paced, "allocations per request: bare %v, through the Transport %v", bare, paced)
	require.Len(t, tr.Stats(), 2)
	for _, st := range tr.Stats() {
		if st.Key == "https://api.example.com#core" {
			require.Len(t, st.LastInfo.Quotas, 1)
			assert.Equal(t, 5000.0, st.LastInfo.Quotas[0].Limit)
			return
		}
	}
	t.Fatal("no limiter for the core bucket")
}

// What a caller is given (Stats' LastInfo, a *RateLimitError's Info) is a
// copy: later responses, parsed into the same buffers, do not change it.
func TestTransportKeptQuotasAreNotOverwrittenByLaterResponses(t *testing.T) {
	canned, left := githubResponder()
	tr := NewTransport(canned)
	get := func() {
		req, err := http.NewRequest(http.MethodGet, "https://api.example.com/repos/a/b", nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	get()
	get()
	core := func() Stats {
		for _, st := range tr.Stats() {
			if st.Key == "https://api.example.com#core" {
				return st
			}
		}
		t.Fatal("no limiter for the core bucket")
		return Stats{}
	}
	before := core()
	require.Len(t, before.LastInfo.Quotas, 1)
	was := before.LastInfo.Quotas[0].Remaining
	assert.Equal(t, float64(left()), was)
	// Responses that rewrite the limiter's quotas.
	for range 32 {
		get()
	}
	assert.Equal(t, was, before.LastInfo.Quotas[0].Remaining, "a snapshot taken earlier")
	assert.Equal(t, float64(left()), core().LastInfo.Quotas[0].Remaining, "the newest")

	lim := tr.peekLimiter(newGet(t, "https://api.example.com/repos/a/b"))
	require.NotNil(t, lim)
	var rle *RateLimitError
	require.True(t, errors.As(lim.lim.rateLimitError(time.Now(), nil), &rle))
	require.Len(t, rle.Info.Quotas, 1)
	was = rle.Info.Quotas[0].Remaining
	for range 32 {
		get()
	}
	assert.Equal(t, was, rle.Info.Quotas[0].Remaining, "a *RateLimitError's Info")
}

// A response stating more quotas than the attempt's reading holds inline
// (Anthropic's four) reaches the limiter whole, through the Transport.
func TestTransportPassesEveryQuotaOfAResponse(t *testing.T) {
	reset := time.Now().Add(time.Minute).UTC().Format(time.RFC3339)
	h := http.Header{}
	for i, q := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		h.Set("anthropic-ratelimit-"+q+"-limit", strconv.Itoa(1000*(i+1)))
		h.Set("anthropic-ratelimit-"+q+"-remaining", strconv.Itoa(1000*(i+1)-1))
		h.Set("anthropic-ratelimit-"+q+"-reset", reset)
	}
	tr := NewTransport(transportFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: h, Body: http.NoBody, Request: r}, nil
	}))
	resp, err := tr.RoundTrip(newGet(t, "https://api.anthropic.com/v1/messages"))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	st := tr.Stats()
	require.Len(t, st, 1)
	var names []string
	for _, q := range st[0].LastInfo.Quotas {
		names = append(names, q.Name)
	}
	assert.Equal(t, []string{"requests", "tokens", "input-tokens", "output-tokens"}, names)
	assert.Equal(t, 3999.0, st[0].LastInfo.Quotas[3].Remaining)
}

func newGet(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	return req
}

// retune skips deciding when the input is the one it last decided on and
// applied; a response that changes the input is applied, also after
// responses that changed nothing.
func TestRetuneAppliesAChangedDecisionAfterUnchangedOnes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{})
		for range 3 {
			admit(t, a, 0).Done(reply(http.StatusOK, requestsLeft(1000, 900, time.Minute)))
		}
		require.True(t, a.decided)
		assert.Equal(t, Inf, a.Stats().Limit, "a quota that affords the work leaves the rate unlimited")
		in := a.lastDecision
		a.mu.Lock()
		a.retune(time.Now())
		a.unlock()
		assert.Equal(t, in, a.lastDecision, "nothing changed: the same input")

		// 100 gone that we did not spend: another client shares the
		// quota, which is then spread to its reset.
		admit(t, a, 0).Done(reply(http.StatusOK, requestsLeft(1000, 800, time.Minute)))
		assert.NotEqual(t, in, a.lastDecision)
		lim := a.Stats().Limit
		assert.False(t, math.IsInf(float64(lim), 1), "spread: a finite rate, got %v", lim)
		assert.Greater(t, float64(lim), 0.0)
		admit(t, a, 0)
	})
}

// A retry refused as too late reports what the throttled response said,
// its quotas included, though they were parsed into the attempt's reading.
func TestTransportRefusedRetryKeepsTheResponsesQuotas(t *testing.T) {
	reset := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	var errs []error
	tr := NewTransport(transportFunc(func(r *http.Request) (*http.Response, error) {
		h := http.Header{"X-Ratelimit-Limit": {"60"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {reset}}
		return &http.Response{StatusCode: http.StatusTooManyRequests, Header: h, Body: http.NoBody, Request: r}, nil
	}), WithMaxWait(time.Second), WithObserver(func(at observe.Attempt) { errs = append(errs, at.Err) }))
	resp, err := tr.RoundTrip(newGet(t, "https://api.example.com/x"))
	require.NoError(t, err, "the throttled response is returned")
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Len(t, errs, 2, "the attempt, then the retry refused")
	var rle *RateLimitError
	require.True(t, errors.As(errs[1], &rle), "got %v", errs[1])
	require.Len(t, rle.Info.Quotas, 1)
	assert.Equal(t, 60.0, rle.Info.Quotas[0].Limit)
	assert.Equal(t, 0.0, rle.Info.Quotas[0].Remaining)
}

// Stats may be read while responses come in: what it hands out is copied
// under the limiter's lock, which every response's learning takes to reuse
// the limiter's slice of quotas (run with -race).
func TestTransportStatsWhileResponsesArrive(t *testing.T) {
	canned, _ := githubResponder()
	var mu sync.Mutex // the responder counts down: one request at a time
	tr := NewTransport(transportFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		resp, err := canned.RoundTrip(r)
		if err == nil {
			resp.Header = resp.Header.Clone() // the caller's, as a real response's
		}
		return resp, err
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 300 {
			resp, err := tr.RoundTrip(newGet(t, "https://api.example.com/repos/a/b"))
			if err != nil {
				t.Error(err)
				return
			}
			_ = resp.Body.Close()
		}
	}()
	for {
		select {
		case <-done:
			return
		default:
		}
		for _, st := range tr.Stats() {
			for _, q := range st.LastInfo.Quotas {
				assert.Equal(t, 5000.0, q.Limit)
			}
		}
	}
}
