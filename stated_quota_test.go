package pacer

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/pacer-go/pacer/internal/quota"
)

// A quota stated with WithQuota is spent as a quota a server states: a job
// it affords goes at once, from the first request (no slow start, no first
// look), and a job beyond it is paced window by window without a 429, also
// from a server that states nothing. A server's own headers take over.
func TestStatedQuotaIsSpentAsAServersWouldBe(t *testing.T) {
	const lat = 50 * time.Millisecond
	for _, tc := range []struct {
		why   string
		j     job
		limit int // stated per the job's window
		// The job's time at most this many times the bound: unpaced for
		// a job within the quota, the fastest 429-free schedule beyond.
		within float64
	}{
		{why: "a job within an hourly quota, from a server that states nothing",
			j: job{style: apisim.StyleBare, limit: 5000, window: time.Hour, n: 100}, limit: 5000, within: 1.0},
		{why: "the whole of a minute's quota at once",
			j: job{style: apisim.StyleRetryAfter, limit: 300, window: time.Minute, n: 300}, limit: 300, within: 1.0},
		{why: "more callers at once than slow start lets through: the quota is known, there is no slow start",
			j: job{style: apisim.StyleBare, limit: 300, window: time.Minute, n: 300, workers: 100}, limit: 300, within: 1.0},
		{why: "a job beyond a minute's quota, paced window by window",
			j: job{style: apisim.StyleBare, limit: 200, window: time.Minute, n: 700}, limit: 200, within: 1.10},
		{why: "beyond an hourly quota stated below the server's",
			j: job{style: apisim.StyleRetryAfter, limit: 1000, window: time.Hour, n: 1500}, limit: 800, within: 1.05},
		{why: "a server that states its quota: its headers govern",
			j: job{style: apisim.StyleGitHub, limit: 300, window: time.Minute, n: 1000}, limit: 300, within: 1.10},
	} {
		j := tc.j
		j.latency = lat
		if j.workers == 0 {
			j.workers = 16
		}
		t.Run(fmt.Sprintf("%s/%d-per-%v/n=%d", j.style, j.limit, j.window, j.n), func(t *testing.T) {
			r := j.run(t, WithQuota("api.test/", tc.limit, j.window), WithMaxWait(48*time.Hour))
			t.Log(r)
			bound := r.fastest
			if j.n <= tc.limit {
				bound = r.unpaced
			}
			assert.LessOrEqual(t, r.elapsed.Seconds(), tc.within*bound.Seconds(), "%s: job time ÷ its bound", tc.why)
			assert.Zero(t, r.all429, "%s: 429s", tc.why)
			assert.Zero(t, r.callerErrors, "%s: caller errors", tc.why)
		})
	}
}

// A rate serves a windowed quota badly: 5,000 an hour as a rate of 1.39 a
// second paces a job of 100 the quota affords at once.
func TestARateInPlaceOfAStatedQuotaPacesAJobItAffords(t *testing.T) {
	j := job{style: apisim.StyleBare, limit: 5000, window: time.Hour, n: 100, workers: 16, latency: 50 * time.Millisecond}
	asRate := j.run(t, WithEndpoint("api.test/", Limit(5000.0/3600), 10))
	asQuota := j.run(t, WithQuota("api.test/", 5000, time.Hour))
	t.Log("as a rate:", asRate, "as a quota:", asQuota)
	assert.Greater(t, asRate.elapsed, 50*asQuota.elapsed, "the rate paces the job")
	assert.Equal(t, asQuota.unpaced, asQuota.elapsed, "the quota lets it go at once")
}

// WithQuota and WithEndpoint of one pattern configure one endpoint, its
// rate and its quotas; a pattern may state several quotas.
func TestWithQuotaAndWithEndpointShareTheirPatternsEndpoint(t *testing.T) {
	tr := NewTransport(transportFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	}),
		WithQuota("api.test/", 5000, time.Hour),
		WithEndpoint("api.test/", 100, 10),
		WithQuota("api.test/", 100, time.Minute))
	resp := mustGet(t, tr, "http://api.test/v1")
	resp.Body.Close()
	st := tr.Stats()
	require.Len(t, st, 1)
	assert.Equal(t, "api.test/", st[0].Key)
	ep := tr.eps.peek("api.test/")
	require.NotNil(t, ep)
	assert.True(t, ep.pinned, "WithEndpoint's rate holds")
	ep.lim.mu.Lock()
	defer ep.lim.mu.Unlock()
	assert.True(t, found(ep.lim.book, "5000 per 1h0m0s"), "the hourly quota")
	assert.True(t, found(ep.lim.book, "100 per 1m0s"), "the per-minute quota")
}

// Invalid arguments panic when the option is made (the pattern when the
// Transport is), naming the option and the bad value.
func TestWithQuotaPanicsOnInvalidArguments(t *testing.T) {
	for _, tc := range []struct {
		why  string
		make func()
		want string
	}{
		{"no requests", func() { WithQuota("api.test/", 0, time.Hour) }, `pacer: WithQuota("api.test/", 0, 1h0m0s): limit must be > 0`},
		{"a negative limit", func() { WithQuota("api.test/", -5, time.Hour) }, `pacer: WithQuota("api.test/", -5, 1h0m0s): limit must be > 0`},
		{"no window", func() { WithQuota("api.test/", 10, 0) }, `pacer: WithQuota("api.test/", 10, 0s): window must be in (0, 768h0m0s]`},
		{"a window past the horizon", func() { WithQuota("api.test/", 10, 33*24*time.Hour) }, `pacer: WithQuota("api.test/", 10, 792h0m0s): window must be in (0, 768h0m0s]`},
		{"a pattern with a port", func() { NewTransport(nil, WithQuota("api.test:8080/", 10, time.Hour)) }, `pacer: WithQuota("api.test:8080/"): host "api.test:8080" has a port`},
		{"an invalid pattern", func() { NewTransport(nil, WithQuota("GET  api.test/{x", 10, time.Hour)) }, `pacer: WithQuota("GET  api.test/{x"): `},
	} {
		msg := func() (msg string) {
			defer func() { msg = fmt.Sprint(recover()) }()
			tc.make()
			return ""
		}()
		assert.Contains(t, msg, tc.want, tc.why)
	}
}

// The server's own statement of its quotas replaces the stated ones: its
// count is exact.
func TestAServersQuotasReplaceTheStatedOnes(t *testing.T) {
	tr := NewTransport(transportFunc(func(r *http.Request) (*http.Response, error) {
		return reply(http.StatusOK, []string{"X-Ratelimit-Limit", "5000", "X-Ratelimit-Remaining", "4000"}), nil
	}), WithQuota("api.test/", 5000, time.Hour))
	ep := tr.eps.peek("api.test/")
	require.Nil(t, ep, "no endpoint before the first request")
	resp := mustGet(t, tr, "http://api.test/v1")
	resp.Body.Close()
	ep = tr.eps.peek("api.test/")
	require.NotNil(t, ep)
	ep.lim.mu.Lock()
	defer ep.lim.mu.Unlock()
	assert.False(t, found(ep.lim.book, "5000 per 1h0m0s"), "the stated quota is dropped")
	assert.True(t, found(ep.lim.book, ""), "the server's quota governs")
	assert.Empty(t, ep.lim.stated)
}

// found reports whether the book charges the named quota (a known one).
func found(b *quota.Book, name string) bool {
	return slices.ContainsFunc(b.Needs(nil, 1), func(n quota.Need) bool { return n.Quota == name })
}
