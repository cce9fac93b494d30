package pacer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jarcoal/httpmock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/observe"
	"github.com/pacer-go/pacer/retry"
)

const mockURL = "https://api.example.com/v1/items"

// closingMock is an httpmock transport that also closes request spyBodies, as
// the http.RoundTripper contract requires of a real transport (httpmock
// leaves them open).
type closingMock struct{ *httpmock.MockTransport }

func (m closingMock) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := m.MockTransport.RoundTrip(r)
	closeRequestBody(r)
	return resp, err
}

// respondInTurn answers with the given responses in turn, the last one forever.
// retryEveryResponse is a retry policy that asks to retry every error
// response and no transport error.
func retryEveryResponse(_ context.Context, resp *http.Response, _ error) (bool, error) {
	return resp != nil && resp.StatusCode >= 400, nil
}

func respondInTurn(resps ...func() *http.Response) httpmock.Responder {
	var n atomic.Int32
	return func(r *http.Request) (*http.Response, error) {
		i := min(int(n.Add(1))-1, len(resps)-1)
		resp := resps[i]()
		resp.Request = r
		return resp, nil
	}
}

func respond(code int, kv ...string) func() *http.Response {
	return respondBody(code, http.StatusText(code), kv...)
}

// respondBody is respond with a body.
func respondBody(code int, body string, kv ...string) func() *http.Response {
	return func() *http.Response {
		resp := httpmock.NewStringResponse(code, body)
		for i := 0; i+1 < len(kv); i += 2 {
			resp.Header.Add(kv[i], kv[i+1])
		}
		return resp
	}
}

func newMock(responder httpmock.Responder) closingMock {
	m := httpmock.NewMockTransport()
	m.RegisterNoResponder(responder)
	return closingMock{m}
}

func TestThrottledIdempotentRequestIsRetriedAfterRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMock(respondInTurn(respond(429, "Retry-After", "2"), respond(200)))
		tr := NewTransport(m)
		start := time.Now()
		resp := mustGet(t, tr, mockURL)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, 2, m.GetTotalCallCount())
		assert.GreaterOrEqual(t, time.Since(start), 2*time.Second, "the retry waits Retry-After")
	})
}

func TestBareThrottleIsRetriedAfterAJitteredBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var at []time.Time
		var mu sync.Mutex
		m := newMock(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			at = append(at, time.Now())
			mu.Unlock()
			return respond(503)(), nil
		})
		tr := NewTransport(m, WithRetry(retry.Policy{Max: 3}))
		resp := mustGet(t, tr, mockURL)
		assert.Equal(t, 503, resp.StatusCode, "the last response is returned when retries run out")
		require.Len(t, at, 4)
		for i, lo := range []time.Duration{minRetryBackoff / 2, minRetryBackoff, 2 * minRetryBackoff} {
			gap := at[i+1].Sub(at[i])
			assert.GreaterOrEqual(t, gap, lo, "gap %d", i)
			assert.Less(t, gap, 2*lo+time.Second, "gap %d", i)
		}
	})
}

func TestRetryDecision(t *testing.T) {
	type req struct {
		method string
		header http.Header
		body   string
		noGet  bool // body without GetBody: not replayable
	}
	get := req{method: http.MethodGet}
	post := req{method: http.MethodPost, body: `{"a":1}`}
	for _, tc := range []struct {
		name  string
		req   req
		resp  func() *http.Response
		opts  []Option
		calls int
	}{
		{"GET 429 is retried", get, respond(429), nil, 2},
		{"HEAD 429 is retried", req{method: http.MethodHead}, respond(429), nil, 2},
		{"PUT with replayable body is retried", req{method: http.MethodPut, body: "x"}, respond(429), nil, 2},
		{"DELETE 503 is retried", req{method: http.MethodDelete}, respond(503), nil, 2},
		{"GET 500 is not retried", get, respond(500), nil, 1},
		{"GET 403 without rate-limit signs is not retried", get, respond(403, "X-RateLimit-Remaining", "12"), nil, 1},
		{"GET 403 with exhausted quota is retried", get, respond(403, "X-RateLimit-Remaining", "0"), nil, 2},
		{"GET 403 with Retry-After is retried", get, respond(403, "Retry-After", "1"), nil, 2},
		{"POST 429 is retried: the limiter refused it before any work", post, respond(429), nil, 2},
		{"POST 529 is retried: Anthropic refused it before any work", post, respond(529), nil, 2},
		{"POST rate-limited 403 is retried", post, respond(403, "X-RateLimit-Remaining", "0"), nil, 2},
		{"POST 503 is not retried: the work may have begun", post, respond(503), nil, 1},
		{"POST 503 is retried when the server says x-should-retry: true", post, respond(503, "X-Should-Retry", "true"), nil, 2},
		{"POST 429 is not retried when the server says x-should-retry: false", post, respond(429, "X-Should-Retry", "false"), nil, 1},
		{"POST 503 with Idempotency-Key is retried", req{method: http.MethodPost, body: "x", header: http.Header{"Idempotency-Key": {"k1"}}}, respond(503), nil, 2},
		{"POST 503 with X-Idempotency-Key is retried", req{method: http.MethodPost, body: "x", header: http.Header{"X-Idempotency-Key": {"k1"}}}, respond(503), nil, 2},
		{"POST 503 is retried when the server says Stripe-Should-Retry: true", post, respond(503, "Stripe-Should-Retry", "true"), nil, 2},
		{"GET is not retried when the server says x-should-retry: false", get, respond(429, "x-should-retry", "false"), nil, 1},
		{"GET is not retried when the server says Stripe-Should-Retry: false", get, respond(503, "Stripe-Should-Retry", "False"), nil, 1},
		{"POST 503 is retried when the policy says so", post, respond(503), []Option{WithRetry(retry.Policy{Check: retryEveryResponse})}, 2},
		{"body without GetBody is never retried", req{method: http.MethodPut, body: "x", noGet: true}, respond(429, "X-Should-Retry", "true"), []Option{WithRetry(retry.Policy{Check: retryEveryResponse})}, 1},
		{"WithRetry(retry.Policy{Max: retry.None}) disables retries", get, respond(429), []Option{WithRetry(retry.Policy{Max: retry.None})}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newMock(respondInTurn(tc.resp, respond(200)))
				tr := NewTransport(m, tc.opts...)
				var body io.Reader
				if tc.req.body != "" {
					body = strings.NewReader(tc.req.body)
				}
				r, err := http.NewRequest(tc.req.method, mockURL, body)
				require.NoError(t, err)
				for k, v := range tc.req.header {
					r.Header[k] = v
				}
				if tc.req.noGet {
					r.GetBody = nil
				}
				resp, err := tr.RoundTrip(r)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, tc.calls, m.GetTotalCallCount())
			})
		})
	}
}

// spyReqBody records whether it was closed.
type spyReqBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *spyReqBody) Close() error { b.closed.Store(true); return nil }

type spyBodies struct {
	mu  sync.Mutex
	all []*spyReqBody
}

func (bs *spyBodies) new(s string) *spyReqBody {
	b := &spyReqBody{Reader: strings.NewReader(s)}
	bs.mu.Lock()
	bs.all = append(bs.all, b)
	bs.mu.Unlock()
	return b
}

func (bs *spyBodies) allClosed(t *testing.T) {
	t.Helper()
	bs.mu.Lock()
	defer bs.mu.Unlock()
	require.NotEmpty(t, bs.all)
	for i, b := range bs.all {
		assert.True(t, b.closed.Load(), "body %d of %d left open", i+1, len(bs.all))
	}
}

// spyRequest is a replayable PUT whose every body is tracked.
func spyRequest(t *testing.T, ctx context.Context, bs *spyBodies) *http.Request {
	r, err := http.NewRequestWithContext(ctx, http.MethodPut, mockURL, nil)
	require.NoError(t, err)
	r.Body = bs.new("payload")
	r.GetBody = func() (io.ReadCloser, error) { return bs.new("payload"), nil }
	return r
}

func TestRequestBodyIsClosedOnEveryPath(t *testing.T) {
	for _, tc := range []struct {
		name string
		base http.RoundTripper
		opts []Option
		ctx  func(context.Context) (context.Context, context.CancelFunc)
	}{
		{name: "success", base: newMock(respondInTurn(respond(200)))},
		{name: "retried then success", base: newMock(respondInTurn(respond(429), respond(429), respond(200)))},
		{name: "retries exhausted", base: newMock(respondInTurn(respond(429)))},
		{name: "refused by MaxWait on retry", base: newMock(respondInTurn(respond(429, "Retry-After", "60"))), opts: []Option{WithMaxWait(time.Second)}},
		{name: "base transport error", base: newMock(httpmock.NewErrorResponder(errors.New("connection reset")))},
		{name: "context already cancelled", base: newMock(respondInTurn(respond(200))),
			ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(ctx)
				cancel()
				return ctx, cancel
			}},
		{name: "deadline before Retry-After", base: newMock(respondInTurn(respond(429, "Retry-After", "60"))),
			ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
				return context.WithTimeout(ctx, 10*time.Second)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if tc.ctx != nil {
					ctx, cancel = tc.ctx(ctx)
				}
				defer cancel()
				var bs spyBodies
				tr := NewTransport(tc.base, tc.opts...)
				resp, err := tr.RoundTrip(spyRequest(t, ctx, &bs))
				if err == nil {
					resp.Body.Close()
				}
				bs.allClosed(t)
			})
		})
	}
}

func TestRequestBodyIsClosedWhenTheLimiterRefusesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(newMock(respondInTurn(respond(429, "Retry-After", "60"), respond(200))), WithRetry(retry.Policy{Max: retry.None}), WithMaxWait(time.Second))
		resp := mustGet(t, tr, mockURL) // the 429 pauses the endpoint for 60 s
		require.Equal(t, 429, resp.StatusCode)
		var bs spyBodies
		_, err := tr.RoundTrip(spyRequest(t, context.Background(), &bs))
		var rle *RateLimitError
		require.ErrorAs(t, err, &rle)
		bs.allClosed(t)
	})
}

func TestReplayLeavesTheCallersRequestUntouched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		var seen []*http.Request
		m := newMock(func(r *http.Request) (*http.Response, error) {
			b, _ := io.ReadAll(r.Body)
			got = append(got, string(b))
			seen = append(seen, r)
			if len(got) < 3 {
				return respond(429)(), nil
			}
			return respond(200)(), nil
		})
		tr := NewTransport(m)
		r, err := http.NewRequest(http.MethodPut, mockURL+"?q=1", bytes.NewReader([]byte("payload")))
		require.NoError(t, err)
		r.Header.Set("X-Custom", "v")
		origBody, origURL, origHeader := r.Body, *r.URL, r.Header.Clone()
		resp, err := tr.RoundTrip(r)
		require.NoError(t, err)
		resp.Body.Close()

		assert.Equal(t, []string{"payload", "payload", "payload"}, got, "every attempt sends the whole body")
		assert.Same(t, r, seen[0], "the first attempt is the caller's request")
		assert.NotSame(t, r, seen[1], "retries are clones")
		assert.NotSame(t, seen[1], seen[2])
		assert.True(t, origBody == r.Body, "the caller's body is not replaced")
		assert.Equal(t, origURL, *r.URL)
		assert.Equal(t, origHeader, r.Header)
	})
}

// spyRespBody records how much was read and whether it was closed.
type spyRespBody struct {
	r      io.Reader
	read   atomic.Int64
	closed atomic.Bool
}

func (b *spyRespBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}
func (b *spyRespBody) Close() error { b.closed.Store(true); return nil }

func TestThrottledResponseBodyIsDrainedBoundedAndClosedBeforeARetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		small := &spyRespBody{r: strings.NewReader(`{"error":"slow down"}`)}
		large := &spyRespBody{r: bytes.NewReader(make([]byte, 1<<20))}
		var n atomic.Int32
		m := newMock(func(r *http.Request) (*http.Response, error) {
			switch n.Add(1) {
			case 1:
				return &http.Response{StatusCode: 429, Header: http.Header{}, Body: small, Request: r}, nil
			case 2:
				return &http.Response{StatusCode: 429, Header: http.Header{}, Body: large, Request: r}, nil
			}
			return respond(200)(), nil
		})
		resp := mustGet(t, NewTransport(m), mockURL)
		assert.Equal(t, 200, resp.StatusCode)
		assert.True(t, small.closed.Load())
		assert.EqualValues(t, len(`{"error":"slow down"}`), small.read.Load(), "a small body is read to the end")
		assert.True(t, large.closed.Load())
		assert.EqualValues(t, maxDrain, large.read.Load(), "a large body is read only up to the bound")
	})
}

// A retry that would wait past MaxWait is not made: the RoundTripper
// returns the throttled response it obtained, at once and body intact, and
// the endpoint stays paused, so the next request is refused before sending.
func TestRetryThatWouldExceedMaxWaitReturnsTheResponseAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMock(respondInTurn(respond(429, "Retry-After", "120"), respond(200)))
		tr := NewTransport(m, WithMaxWait(10*time.Second))
		start := time.Now()
		r, err := http.NewRequest(http.MethodGet, mockURL, nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(r)
		require.NoError(t, err)
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusText(429), string(body), "the body, intact")
		assert.Zero(t, time.Since(start), "nothing slept")
		assert.Equal(t, 1, m.GetTotalCallCount())

		_, err = tr.RoundTrip(r.Clone(context.Background()))
		var rle *RateLimitError
		require.ErrorAs(t, err, &rle, "the endpoint stays paused: the next request is refused by the limiter")
		assert.Equal(t, "https://api.example.com", rle.Endpoint)
		assert.WithinRange(t, rle.RetryAt, start.Add(120*time.Second), start.Add(121*time.Second))
		assert.Equal(t, 120*time.Second, rle.Info.RetryAfter)
		assert.Equal(t, 1, m.GetTotalCallCount())
	})
}

func TestRetryBeyondTheContextDeadlineReturnsTheResponseAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMock(respondInTurn(respond(429, "Retry-After", "60"), respond(200)))
		tr := NewTransport(m)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		r, err := http.NewRequestWithContext(ctx, http.MethodGet, mockURL, nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(r)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Zero(t, time.Since(start))
		assert.Equal(t, 1, m.GetTotalCallCount())
	})
}

func TestCancellingDuringARetryBackoffReturnsPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMock(respondInTurn(respond(429, "Retry-After", "60"), respond(200)))
		tr := NewTransport(m)
		ctx, cancel := context.WithCancel(context.Background())
		r, err := http.NewRequestWithContext(ctx, http.MethodGet, mockURL, nil)
		require.NoError(t, err)
		time.AfterFunc(3*time.Second, cancel)
		start := time.Now()
		_, err = tr.RoundTrip(r)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 3*time.Second, time.Since(start))
		assert.Equal(t, 1, m.GetTotalCallCount())
	})
}

func TestEveryAdmittedAttemptIsObservedExactlyOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		m := newMock(func(r *http.Request) (*http.Response, error) {
			switch n.Add(1) % 4 {
			case 0:
				return nil, errors.New("connection reset")
			case 1:
				return respond(429)(), nil
			}
			return respond(200)(), nil
		})
		tr := NewTransport(m)
		var attempts int
		tr.observer = func(observe.Attempt) { attempts++ }
		for range 20 {
			r, err := http.NewRequest(http.MethodGet, mockURL, nil)
			require.NoError(t, err)
			if resp, err := tr.RoundTrip(r); err == nil {
				resp.Body.Close()
			}
		}
		st := tr.Stats()
		require.Len(t, st, 1)
		assert.Zero(t, st[0].InFlight)
		// Requests counts responses; Errors the attempts that got none.
		assert.EqualValues(t, m.GetTotalCallCount(), st[0].Requests+st[0].Errors, "one Observe per attempt sent")
		assert.Equal(t, m.GetTotalCallCount(), attempts)
		assert.Positive(t, st[0].Errors)
		assert.Positive(t, st[0].Retries)
	})
}

func TestRequestWithoutURLIsAnErrorNotAPanic(t *testing.T) {
	var bs spyBodies
	r := &http.Request{Method: http.MethodPost, Header: http.Header{}, Body: bs.new("x")}
	_, err := NewTransport(okTransport{}).RoundTrip(r)
	assert.ErrorContains(t, err, "nil Request.URL")
	bs.allClosed(t)
}

// Many RoundTrippers (mostly test doubles) answer with a nil Body to mean an
// empty one, and http.Client accepts that: so does the Transport, also when
// it must drain a throttled response before retrying.
func TestNilResponseBodyFromTheBaseCountsAsEmpty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		tr := NewTransport(transportFunc(func(r *http.Request) (*http.Response, error) {
			if n.Add(1) == 1 {
				return &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}, Request: r}, nil
			}
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Request: r}, nil
		}))
		req, err := http.NewRequest(http.MethodGet, mockURL, nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		require.NotNil(t, resp.Body)
		require.NoError(t, resp.Body.Close())
	})
}

func TestNilResponseWithoutErrorFromTheBaseIsAnError(t *testing.T) {
	tr := NewTransport(transportFunc(func(*http.Request) (*http.Response, error) { return nil, nil }))
	for range 2 { // the first failure must leave the endpoint usable
		req, err := http.NewRequest(http.MethodGet, mockURL, nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.ErrorContains(t, err, "nil *Response")
		assert.Nil(t, resp)
	}
}

// A server shedding load (bare 503s while its quota shows room) is retried
// while the shedding is light, but the retries of shed requests stay within
// a tenth of the traffic (and a burst of ten): a server shedding everything
// is not sent four times its load.
func TestOverloadRetriesStayWithinTheRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMock(func(r *http.Request) (*http.Response, error) {
			return respond(503, "X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4000")(), nil
		})
		tr := NewTransport(m, WithRetry(retry.Policy{Max: 3}))
		const calls = 200
		for range calls {
			resp := mustGet(t, tr, mockURL)
			assert.Equal(t, 503, resp.StatusCode)
		}
		sent := m.GetTotalCallCount()
		t.Logf("%d calls, %d requests", calls, sent)
		assert.LessOrEqual(t, sent, calls+int(retryBudgetRatio*calls)+retryBudgetMax, "retries within the budget")
		assert.Greater(t, sent, calls, "some shed requests are retried")
	})
}
