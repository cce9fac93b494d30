package pacer

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A server that states a quota's limit and not what is left (an IETF
// RateLimit-Policy with no RateLimit field, a limit field with no remaining
// one) has said nothing of the current window: the limiter learns the limit
// and window, but takes the quota for neither full (a budget to spend at
// once) nor empty (a reason to wait, or to read a 403 as throttled).
func TestAPolicyAloneIsNeitherFullNorEmpty(t *testing.T) {
	cases := []struct {
		name   string
		why    string
		h      http.Header
		window time.Duration
	}{
		{
			name:   "IETF RateLimit-Policy without RateLimit",
			why:    "the policy is Limit per Window; the RateLimit field, absent, would say what is left",
			h:      http.Header{"Ratelimit-Policy": {`"daily";q=1000;w=86400`}},
			window: 24 * time.Hour,
		},
		{
			name: "a limit and a reset without a remaining count",
			why:  "a reset says when the window ends, not what it holds: read as Limit it was a full window",
			h:    http.Header{"X-Ratelimit-Limit": {"1000"}, "X-Ratelimit-Reset": {"60"}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := NewAdaptive(AdaptiveConfig{})
				p := admit(t, a, 0)
				now := time.Now()
				info, ok := ParseHeaders(c.h, now)
				require.True(t, ok)
				require.Len(t, info.Quotas, 1)
				assert.Equal(t, -1.0, info.Quotas[0].Remaining, "reported as unknown; why: %s", c.why)
				assert.False(t, meaningOf(&http.Response{StatusCode: http.StatusForbidden, Header: c.h, Body: http.NoBody}, now).Throttled, "a 403 it rides on is no throttle")

				p.Done(&http.Response{StatusCode: http.StatusOK, Header: c.h, Body: http.NoBody})
				a.mu.Lock()
				followed, known := a.book.Len(), a.book.Known()
				keep := a.book.KeepUntil(time.Now())
				a.mu.Unlock()
				require.Equal(t, 1, followed, "the quota is followed")
				assert.Equal(t, time.Now().Add(c.window), keep, "the window is learnt: kept a window after its last use")
				assert.False(t, known, "no budget speaks for the current window; why: %s", c.why)
				assert.True(t, a.Stats().PausedUntil.IsZero(), "not taken for empty")
				assert.Zero(t, waitTook(t, a), "the next request goes at once")
			})
		})
	}
}
