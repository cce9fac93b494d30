package pacer

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/retry"
)

// What the Transport does with the signals a response states outside its
// rate-limit headers (internal/response reads them; these tests hold the
// Transport to acting on them).

// A success's Retry-After asks for no wait (RFC 9110 section 10.2.3):
// Hugging Face's router and Anthropic send one on 200s, and every request
// still goes at once.
func TestARetryAfterOnASuccessHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMock(func(r *http.Request) (*http.Response, error) {
			return respond(200, "Retry-After", "30")(), nil
		})
		tr := NewTransport(m)
		start := time.Now()
		for range 5 {
			drainAndClose(mustGet(t, tr, mockURL))
		}
		assert.Zero(t, time.Since(start), "no wait")
		assert.Equal(t, 5, m.GetTotalCallCount())
	})
}

// A request larger than the whole limit that refused it never fits (Groq's
// "Requested ~9000" against "Limit 6000"): it is returned at once, body
// intact, not retried, and the endpoint neither pauses for the wait the
// refusal names nor slows down; the next request goes at once.
func TestARequestLargerThanTheLimitIsReturnedAtOnce(t *testing.T) {
	const tooLarge = `{"error":{"message":"Rate limit reached for model ` + "`llama-3.3-70b-versatile`" + ` in organization ` + "`org_01`" +
		` on tokens per minute (TPM): Limit 6000, Used 0, Requested ~9000. Please try again in 30s. Visit https://console.groq.com/docs/rate-limits for more information.","type":"tokens","code":"rate_limit_exceeded"}}`
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		m := newMock(func(r *http.Request) (*http.Response, error) {
			if n.Add(1) == 1 {
				return respondBody(429, tooLarge, "Retry-After", "30")(), nil
			}
			return respond(200)(), nil
		})
		tr := NewTransport(m)
		start := time.Now()
		resp := mustGet(t, tr, mockURL)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Equal(t, tooLarge, string(got), "the body, byte for byte")
		assert.Equal(t, 1, m.GetTotalCallCount(), "not retried")
		drainAndClose(mustGet(t, tr, mockURL))
		assert.Zero(t, time.Since(start), "no wait, then or after")
		assert.Equal(t, 2, m.GetTotalCallCount())
		st := tr.Stats()
		require.Len(t, st, 1)
		assert.Zero(t, st[0].PausedUntil, "no pause")
	})
}

// A 429 inside a 200 stream (Vertex AI's RESOURCE_EXHAUSTED as the first
// event) reaches the caller at once and byte for byte; as the caller reads
// it, the endpoint learns the throttle, and its next request waits at least
// the retryDelay it states: as long as after a 200 and then the same
// refusal sent as a 429, which is what the limiter was told (the stream's
// 200, then its refusal).
func TestARefusalInAStreamTeachesTheEndpoint(t *testing.T) {
	const refusal = `{"error": {"code": 429, "message": "Resource exhausted.", "status": "RESOURCE_EXHAUSTED", ` +
		`"details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}]}}`
	const event = "data: " + refusal + "\n\n"
	// next is how long the request after the refusal waits, the refusal a
	// 200 stream's first event or a 429 after a 200.
	next := func(t *testing.T, inStream bool) time.Duration {
		var wait time.Duration
		synctest.Test(t, func(t *testing.T) {
			var mu sync.Mutex
			var at []time.Time
			refuse := 1
			if !inStream {
				refuse = 2
			}
			m := transportFunc(func(r *http.Request) (*http.Response, error) {
				mu.Lock()
				at = append(at, time.Now())
				n := len(at)
				mu.Unlock()
				switch {
				case n == refuse && inStream:
					return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, ContentLength: -1,
						Body: io.NopCloser(strings.NewReader(event)), Request: r}, nil
				case n == refuse:
					return &http.Response{StatusCode: 429, Header: http.Header{"Content-Type": {"application/json"}}, ContentLength: int64(len(refusal)),
						Body: io.NopCloser(strings.NewReader(refusal)), Request: r}, nil
				}
				return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: http.NoBody, Request: r}, nil
			})
			tr := NewTransport(m, WithRetry(retry.Policy{Max: retry.None}))
			if !inStream {
				drainAndClose(mustGet(t, tr, mockURL))
			}
			resp := mustGet(t, tr, mockURL)
			require.Len(t, tr.Stats(), 1)
			if inStream {
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Zero(t, tr.Stats()[0].Throttled, "nothing read before the caller reads")
			}
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			if inStream {
				assert.Equal(t, event, string(got), "the stream, byte for byte")
				assert.Equal(t, int64(1), tr.Stats()[0].Requests, "one request, answered once")
			}
			assert.Equal(t, int64(1), tr.Stats()[0].Throttled, "the endpoint learnt the throttle")
			read := time.Now()
			drainAndClose(mustGet(t, tr, mockURL))
			require.Len(t, at, refuse+1)
			wait = at[refuse].Sub(read)
		})
		return wait
	}
	inStream, asStatus := next(t, true), next(t, false)
	assert.GreaterOrEqual(t, inStream, 7*time.Second, "the event's retryDelay")
	assert.Equal(t, asStatus, inStream, "as after a 200 and a 429")
}

// A spent per-day Gemini quota holds its endpoint until midnight Pacific
// time, when Google resets it, not for the seconds its RetryInfo names: the
// next request is refused at once, naming that midnight.
func TestASpentDailyQuotaHoldsUntilMidnightPacific(t *testing.T) {
	const daily = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED",` +
		`"details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests",` +
		`"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"},"quotaValue":"250"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"47s"}]}}`
	synctest.Test(t, func(t *testing.T) {
		m := newMock(func(r *http.Request) (*http.Response, error) {
			return respondBody(429, daily, "Content-Type", "application/json; charset=UTF-8")(), nil
		})
		tr := NewTransport(m, WithRetry(retry.Policy{Max: retry.None}))
		drainAndClose(mustGet(t, tr, mockURL))
		// synctest's clock starts at midnight UTC on 1 January 2000: 16:00
		// PST on 31 December, eight hours before Pacific midnight.
		midnight := time.Date(2000, 1, 1, 8, 0, 0, 0, time.UTC)
		req, _ := http.NewRequest(http.MethodGet, mockURL, nil)
		_, err := tr.RoundTrip(req)
		var rle *RateLimitError
		require.True(t, errors.As(err, &rle), "refused at once: %v", err)
		assert.WithinDuration(t, midnight, rle.RetryAt, time.Second)
		assert.Equal(t, 1, m.GetTotalCallCount())
	})
}

// A gateway's relay of its upstream's refusal (OpenRouter's "Provider
// returned error") is load shed, not a quota of the caller's: its retries
// draw on the retry budget, so a provider that keeps refusing does not have
// every request sent three times.
func TestAnUpstreamsRefusalIsRetriedWithinTheBudget(t *testing.T) {
	const upstream = `{"error":{"code":429,"message":"Provider returned error","metadata":{"provider_name":"Example","raw":"vendor/model:free is temporarily rate-limited upstream. Please retry shortly."}}}`
	synctest.Test(t, func(t *testing.T) {
		m := newMock(func(r *http.Request) (*http.Response, error) {
			return respondBody(429, upstream)(), nil
		})
		tr := NewTransport(m, WithRetry(retry.Policy{Max: 2}))
		const requests = 40
		for range requests {
			drainAndClose(mustGet(t, tr, mockURL))
		}
		// The budget: 10 retries at first, then a tenth of one a request
		// (without it, 2 retries of each: 120 calls).
		assert.LessOrEqual(t, m.GetTotalCallCount(), requests+10+requests/10+1)
	})
}
