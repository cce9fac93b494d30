package apisim

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A secondary limit counts every request in the trailing window, refused
// ones too, answers 403 with GitHub's body and the primary quota's headers,
// no Retry-After, and charges nothing to the primary quota.
func TestSecondaryLimitIsHiddenAndCountsEveryRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleGitHub, Limit: 100, Window: time.Hour, SecondaryLimit: 3, SecondaryWindow: 10 * time.Second})
		for range 3 {
			require.Equal(t, http.StatusOK, get(t, s, "/", 0).StatusCode)
			time.Sleep(time.Second)
		}
		resp := get(t, s, "/", 0)
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
		assert.Empty(t, resp.Header.Get("Retry-After"))
		assert.Equal(t, "97", resp.Header.Get("X-RateLimit-Remaining"), "the primary quota shows room")
		assert.Contains(t, getBody(t, s, "/"), "You have exceeded a secondary rate limit")

		// At 10 s the first request leaves the window, but the two refused
		// ones (at 3 s) are still in it: refused.
		time.Sleep(7 * time.Second)
		require.Equal(t, http.StatusForbidden, get(t, s, "/", 0).StatusCode)
		// Quiet for a whole window: admitted again.
		time.Sleep(10 * time.Second)
		require.Equal(t, http.StatusOK, get(t, s, "/", 0).StatusCode)

		st := s.Stats()
		assert.Equal(t, Stats{Requests: 7, OK: 4, Secondary: 3, FirstRequest: st.FirstRequest, LastRequest: st.LastRequest}, st)
		statuses := []int{}
		for _, e := range s.Events() {
			statuses = append(statuses, e.Status)
		}
		assert.Equal(t, []int{200, 200, 200, 403, 403, 403, 200}, statuses)
	})
}

// insufficient_quota: every request is refused with OpenAI's body while the
// headers show the whole quota left; nothing is counted against it.
func TestQuotaGoneRefusesEveryRequestWithRoomInTheHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleOpenAI, Limit: 60, Window: time.Minute, QuotaGone: true})
		for range 3 {
			resp := get(t, s, "/", 0)
			require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
			assert.Empty(t, resp.Header.Get("Retry-After"))
			assert.Equal(t, "60", resp.Header.Get("X-Ratelimit-Remaining-Requests"))
		}
		body := getBody(t, s, "/")
		assert.True(t, strings.Contains(body, `"type":"insufficient_quota"`), body)
		st := s.Stats()
		assert.Equal(t, 4, st.Requests)
		assert.Equal(t, 4, st.Gone)
		assert.Zero(t, st.OK+st.Throttled)
	})
}

// ShedShare sheds every 1/ShedShare-th request with a bare 503 and counts
// none of them against the quota.
func TestShedShareShedsEvenlyWithoutCounting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleIETF, Limit: 1000, Window: time.Minute, ShedShare: 0.25})
		for i := range 12 {
			resp := get(t, s, "/", 0)
			want := http.StatusOK
			if i%4 == 3 {
				want = http.StatusServiceUnavailable
				assert.Empty(t, resp.Header.Get("Retry-After"))
			}
			require.Equal(t, want, resp.StatusCode, "request %d", i)
		}
		st := s.Stats()
		assert.Equal(t, 3, st.Shed)
		assert.Equal(t, 9, st.OK)
		resp := get(t, s, "/", 0)
		assert.Contains(t, resp.Header.Get("RateLimit"), "r=990", "only the admitted requests are counted")
	})
}

func TestInvalidSecondaryConfigPanics(t *testing.T) {
	assert.PanicsWithValue(t, "apisim: invalid Config.SecondaryLimit -1: must be ≥ 0", func() {
		New(Config{Style: StyleGitHub, Limit: 1, Window: time.Second, SecondaryLimit: -1})
	})
	assert.PanicsWithValue(t, "apisim: invalid Config.SecondaryWindow -1s: must be ≥ 0", func() {
		New(Config{Style: StyleGitHub, Limit: 1, Window: time.Second, SecondaryWindow: -time.Second})
	})
}
