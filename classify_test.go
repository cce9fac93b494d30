package pacer

import (
	"context"
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
)

func TestClassifyBody(t *testing.T) {
	for _, tc := range []struct {
		body string
		want signal
	}{
		{`{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`, signalBodyLimit},
		{`{"message":"You have triggered an abuse detection mechanism."}`, signalBodyLimit},
		{`{"errors":[{"type":"RATE_LIMITED","message":"API rate limit exceeded"}]}`, signalBodyLimit},
		{`{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`, signalGone},
		{`{"error":{"type":"rate_limit_exceeded","message":"Rate limit reached for requests"}}`, signalNone},
		{`{"message":"API rate limit exceeded for user ID 1."}`, signalNone},
		{``, signalNone},
	} {
		assert.Equal(t, tc.want, classifyBody([]byte(tc.body)), "%s", tc.body)
	}
}

// The classifier reads a bounded prefix of the body and gives the caller
// every byte back, however long the body.
func TestBodySignalGivesTheBodyBackByteForByte(t *testing.T) {
	long := `{"message":"You have exceeded a secondary rate limit."}` + strings.Repeat("x", 3*bodyPeek)
	for _, body := range []string{long, `{"message":"You have exceeded a secondary rate limit."}`, `short`} {
		resp := &http.Response{StatusCode: http.StatusForbidden, Body: io.NopCloser(strings.NewReader(body))}
		sig := bodySignal(resp)
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, body, string(got))
		assert.NoError(t, resp.Body.Close())
		if strings.Contains(body, "secondary") && len(body) < bodyPeek {
			assert.Equal(t, signalBodyLimit, sig)
		}
	}
	ok := &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("secondary rate limit"))}
	assert.Equal(t, signalNone, bodySignal(ok), "only 403 and 429 bodies are read")
}

// OpenAI's insufficient_quota is a 429 whose headers show plenty left: no
// wait can help. One request per call, returned at once with its body.
func TestQuotaGoneForGoodIsReturnedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const body = `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`
		m := newMock(func(r *http.Request) (*http.Response, error) {
			return respondBody(429, body, "X-Ratelimit-Limit-Requests", "5000", "X-Ratelimit-Remaining-Requests", "4999",
				"X-Ratelimit-Reset-Requests", "12ms")(), nil
		})
		tr := NewTransport(m)
		for i := range 5 {
			start := time.Now()
			resp := mustGet(t, tr, mockURL)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
			assert.Equal(t, body, string(got), "the body, byte for byte")
			assert.Zero(t, time.Since(start), "at once")
			assert.Equal(t, i+1, m.GetTotalCallCount(), "one request per call")
		}
	})
}

// A secondary limit GitHub states only in a 403's body, with the primary
// quota far from spent: no more than 60 requests a minute. 16 workers
// saturate the endpoint for 20 minutes: pacer waits a minute after the
// first (then doubling), slows down, and trips it a handful of times while
// still using at least half of what it allows.
func TestSecondaryLimitInTheBodyIsHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const perMinute = 60
		var mu sync.Mutex
		var sent []time.Time
		var secondary, ok atomic.Int64
		m := newMock(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			now := time.Now()
			n := 0
			for _, at := range sent {
				if now.Sub(at) < time.Minute {
					n++
				}
			}
			sent = append(sent, now)
			mu.Unlock()
			if n >= perMinute {
				secondary.Add(1)
				return respondBody(403, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`,
					"X-Ratelimit-Limit", "5000", "X-Ratelimit-Remaining", "4000")(), nil
			}
			ok.Add(1)
			return respond(200, "X-Ratelimit-Limit", "5000", "X-Ratelimit-Remaining", "4000")(), nil
		})
		tr := NewTransport(m)
		ctx, cancel := context.WithCancel(context.Background())
		end := time.Now().Add(20 * time.Minute)
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for time.Now().Before(end) {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, mockURL, nil)
					resp, err := tr.RoundTrip(req)
					if err != nil {
						continue
					}
					resp.Body.Close()
					time.Sleep(100 * time.Millisecond) // the worker's own work
				}
			})
		}
		time.Sleep(time.Until(end))
		cancel()
		wg.Wait()
		t.Logf("ok %d, secondary-limit responses %d", ok.Load(), secondary.Load())
		assert.LessOrEqual(t, secondary.Load(), int64(5), "secondary-limit responses in 20 minutes")
		// At least half of what the limit allows (985 of 1,200 in every
		// run measured): one trip, its answers counted as one, a minute's
		// wait, then no probing past what the server admitted.
		assert.GreaterOrEqual(t, float64(ok.Load()), 0.5*perMinute*20, "what the secondary limit allows")
	})
}
