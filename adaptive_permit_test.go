package pacer

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Permit's promises: settled exactly once, its charge given back when the
// request was not sent, and what the response says read by Done.

func TestAdaptivePermitAbandonGivesBackItsCharge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{})
		admit(t, a, 0).Done(reply(http.StatusOK,
			requestsLeft(100, 10, time.Minute), tokensLeft(10000, 5000, time.Minute)))
		p, err := a.Acquire(context.Background(), 700)
		require.NoError(t, err)
		assert.Equal(t, 9.0, requestBudget(a))
		assert.Equal(t, 4300.0-1000, tokenBudget(a), "less the reserve of a tenth of the limit (R4)")
		assert.Equal(t, 1, a.Stats().InFlight)
		p.Abandon()
		p.Abandon() // settled once; later calls do nothing
		p.Done(reply(http.StatusOK))
		assert.Equal(t, 10.0, requestBudget(a), "a request never sent costs nothing")
		assert.Equal(t, 5000.0-1000, tokenBudget(a))
		assert.Zero(t, a.Stats().InFlight)
	})
}

func TestAdaptivePermitDoneSettlesExactlyOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{SlowStart: 2})
		p, err := a.Acquire(context.Background(), 0)
		require.NoError(t, err)
		_, err = a.Acquire(context.Background(), 0)
		require.NoError(t, err)
		p.Done(reply(http.StatusOK, requestsLeft(100, 98, time.Minute)))
		p.Done(reply(http.StatusOK, requestsLeft(100, 98, time.Minute)))
		assert.Equal(t, int64(1), a.Stats().Requests, "a second Done is not a second response")
		assert.Equal(t, 1, a.Stats().InFlight, "nor a second request out of flight")
	})
}

// Done reads what a response says: its headers and, for a 403 or 429, what
// only its body states; the caller still gets the whole body.
func TestPermitDoneReadsTheResponseAndLeavesItsBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{Key: "github"})
		p, err := a.Acquire(context.Background(), 0)
		require.NoError(t, err)
		body := `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`
		resp := &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{
			"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"4990"},
		}, Body: io.NopCloser(strings.NewReader(body))}
		p.Done(resp)
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, body, string(got), "the body, byte for byte")
		assert.GreaterOrEqual(t, time.Until(a.Stats().PausedUntil), time.Minute, "a secondary limit: at least a minute, as GitHub asks")

		b := NewAdaptive(AdaptiveConfig{Key: "openai"})
		p, err = b.Acquire(context.Background(), 0)
		require.NoError(t, err)
		p.Done(&http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{},
			Body: io.NopCloser(strings.NewReader(`{"error":{"type":"insufficient_quota"}}`))})
		assert.True(t, b.Stats().PausedUntil.IsZero(), "a quota gone for good: waiting cannot help, nothing pauses")
	})
}
