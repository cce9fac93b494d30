package pacer

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/internal/apisim"
)

func TestRouteTemplateFoldsWhatNamesAResource(t *testing.T) {
	for _, tc := range []struct{ method, path, want string }{
		{"POST", "/2/users/1072250532645998596/pinned_lists", "POST /:id/users/:id/pinned_lists"},
		{"GET", "/2/users/783214/pinned_lists", "GET /:id/users/:id/pinned_lists"},
		{"DELETE", "/api/v1/users/00uq9rs3h9Fu2NAyU1d7", "DELETE /api/v1/users/:id"},     // Okta's ids
		{"GET", "/api/v1/statuses/117020570194921638", "GET /api/v1/statuses/:id"},       // Mastodon's
		{"GET", "/v1/models/3fa85f64-5717-4562-b3fc-2c963f66afa6", "GET /v1/models/:id"}, // a UUID
		{"GET", "/v1beta/models", "GET /v1beta/models"},                                  // a version stays
		{"GET", "/repos/golang/go/issues", "GET /repos/golang/go/issues"},                // names are not numbered
		{"", "/", "GET /"}, // no method is GET
		{"GET", "/api/v1/apps/test_123/features/USER_PROVISIONING", "GET /api/v1/apps/:id/features/USER_PROVISIONING"},
	} {
		assert.Equal(t, tc.want, routeTemplate(tc.method, tc.path), "%s %s", tc.method, tc.path)
	}
	long := routeTemplate("GET", "/"+string(make([]byte, 4096)))
	assert.LessOrEqual(t, len(long), maxTemplate+len("GET /"), "a template's length is bounded")
}

func TestRoutesStatingQuotasThatCannotBeOne(t *testing.T) {
	t0 := time.Date(2021, 11, 15, 23, 40, 31, 0, time.UTC)
	fig := func(at time.Duration, limit, remaining float64, reset time.Duration) routeFigures {
		f := routeFigures{at: t0.Add(at), n: 1}
		f.quotas[0] = routeQuota{limit: limit, remaining: remaining}
		if reset > 0 {
			f.quotas[0].reset = t0.Add(reset)
		}
		return f
	}
	for _, tc := range []struct {
		why          string
		a, b         routeFigures
		apart, alike bool
	}{
		{why: "different limits (X: 300 on one endpoint, 50 on the next)",
			a: fig(0, 300, 298, 196*time.Second), b: fig(time.Second, 50, 48, 206*time.Second), apart: true},
		{why: "more left and a reset 12 minutes later, 1 s on, before the first reset (X's two 300s)",
			a: fig(0, 300, 298, 196*time.Second), b: fig(time.Second, 300, 299, 900*time.Second), apart: true},
		{why: "one fixed window counting down, its reset stated a second apart by rounding",
			a: fig(0, 600, 596, 432*time.Second), b: fig(time.Second, 600, 595, 433*time.Second), alike: true},
		{why: "a new window after the first one's reset passed",
			a: fig(0, 600, 573, 2*time.Second), b: fig(44*time.Second, 600, 597, 598*time.Second)},
		{why: "a bucket that states its time to full: more left, full sooner",
			a: fig(0, 10000, 9998, 17*time.Second), b: fig(10*time.Second, 10000, 9999, 18*time.Second), alike: true},
		{why: "a bucket spent by others: less left, full later",
			a: fig(0, 10000, 9999, 8*time.Second), b: fig(time.Second, 10000, 9990, 87*time.Second)},
		{why: "the same limit, resets 70 minutes apart and refills 7 times apart (Mastodon's API family and POST /statuses)",
			a: fig(0, 300, 299, 300*time.Second), b: fig(time.Second, 300, 298, 4200*time.Second), apart: true},
		{why: "the same, the longer window's answer first",
			a: fig(0, 300, 298, 4200*time.Second), b: fig(time.Second, 300, 299, 299*time.Second), apart: true},
		{why: "no reset stated: limits alone tell",
			a: fig(0, 40, 36, 0), b: fig(time.Second, 40, 37, 0), alike: true},
	} {
		assert.Equal(t, tc.apart, apart(&tc.a, &tc.b), "apart: %s", tc.why)
		assert.Equal(t, tc.apart, apart(&tc.b, &tc.a), "apart, either order: %s", tc.why)
		if !tc.apart {
			assert.Equal(t, tc.alike, alike(&tc.a, &tc.b), "alike: %s", tc.why)
		}
	}
}

// routeJob is a job on a host that keeps a quota per route (X's style),
// after another route's quota was spent.
type routeJob struct {
	spentLimit int // the spent route's quota
	limit      int // the host's quota, which the job's route states
	n, workers int
	latency    time.Duration
	jobFirst   bool // the job's route answers once before the other is spent
}

type routeResult struct {
	elapsed, unpaced time.Duration
	late429          map[string]int // per route, after its first response
	callerErrors     int
}

func (j routeJob) run(t *testing.T) routeResult {
	var r routeResult
	synctest.Test(t, func(t *testing.T) {
		srv := apisim.New(apisim.Config{Style: apisim.StyleX, Limit: j.limit, Window: 15 * time.Minute,
			Latency: j.latency, Routes: map[string]int{"/2/lists/": j.spentLimit}})
		tr := NewTransport(srv.Transport())
		defer tr.CloseIdleConnections()
		get := func(path string, within time.Duration) (*http.Response, error) {
			ctx, cancel := context.WithTimeout(context.Background(), within)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.x.test"+path, nil)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			return resp, err
		}
		if j.jobFirst {
			_, err := get("/2/users/1/timelines", time.Hour)
			require.NoError(t, err)
		}
		for i := range j.spentLimit + 1 { // spent, and one more, refused
			_, _ = get(fmt.Sprintf("/2/lists/%d/members", 1000+i), time.Second)
		}
		var next atomic.Int64
		var errs atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for range j.workers {
			wg.Go(func() {
				for k := next.Add(1); k <= int64(j.n); k = next.Add(1) {
					if resp, err := get(fmt.Sprintf("/2/users/%d/timelines", k), time.Hour); err != nil || resp.StatusCode != http.StatusOK {
						errs.Add(1)
					}
				}
			})
		}
		wg.Wait()
		r.elapsed = time.Since(start)
		r.callerErrors = int(errs.Load())
		r.late429 = map[string]int{}
		first := map[string]time.Time{}
		for _, e := range srv.Events() {
			if _, ok := first[e.Key]; !ok {
				first[e.Key] = e.At.Add(j.latency)
				continue
			}
			if e.Status == http.StatusTooManyRequests && !e.At.Before(first[e.Key]) {
				r.late429[e.Key]++
			}
		}
	})
	r.unpaced = time.Duration((j.n+j.workers-1)/j.workers) * j.latency
	return r
}

// On a host that keeps a quota per route and names none (X, Mastodon,
// Okta), a route with quota left runs as fast as with no limiter beside a
// route whose quota is spent, with no 429 beyond the one that found each
// route's quota spent.
func TestASpentRouteHoldsNoRouteWithQuotaLeft(t *testing.T) {
	for _, j := range []routeJob{
		{spentLimit: 15, limit: 300, n: 200, workers: 16, latency: 50 * time.Millisecond},
		{spentLimit: 15, limit: 300, n: 200, workers: 16, latency: 50 * time.Millisecond, jobFirst: true},
		{spentLimit: 50, limit: 900, n: 800, workers: 64, latency: 200 * time.Millisecond},
		{spentLimit: 1, limit: 300, n: 100, workers: 4, latency: 20 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("spent=%d/limit=%d/n=%d/workers=%d/first=%v", j.spentLimit, j.limit, j.n, j.workers, j.jobFirst), func(t *testing.T) {
			r := j.run(t)
			t.Logf("elapsed %v, unpaced %v (%.2f×), late 429s %v", r.elapsed, r.unpaced, r.elapsed.Seconds()/r.unpaced.Seconds(), r.late429)
			assert.LessOrEqual(t, r.elapsed.Seconds(), 1.25*r.unpaced.Seconds(), "the route with quota left runs within 1.25× unpaced")
			assert.Zero(t, r.callerErrors, "every request of the job succeeds")
			for route, n := range r.late429 {
				assert.LessOrEqual(t, n, 1, "route %s: 429s after its first response", route)
			}
		})
	}
}

// A host whose quota is one for all its routes (stated alike by two of
// them) looks at a new route once at most: its spent quota holds every
// route, and a job on routes it has not heard from meets one 429, not one
// per route.
func TestAHostWideQuotaIsLookedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lat = 50 * time.Millisecond
		srv := apisim.New(apisim.Config{Style: apisim.StyleX, Limit: 20, Window: time.Minute, Latency: lat})
		tr := NewTransport(srv.Transport())
		defer tr.CloseIdleConnections()
		get := func(path string) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.x.test"+path, nil)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
		}
		for i := range 20 { // one route spends the host's quota
			get(fmt.Sprintf("/a/%d", i))
		}
		start := time.Now()
		var wg sync.WaitGroup
		for i := range 10 { // ten routes it has not heard from
			wg.Go(func() { get(fmt.Sprintf("/route%c/x", 'a'+i)) })
		}
		wg.Wait()
		n429 := 0
		for _, e := range srv.Events() {
			if e.Status == http.StatusTooManyRequests {
				n429++
			}
		}
		assert.LessOrEqual(t, n429, 1, "one route looks; its answer holds the rest")
		assert.GreaterOrEqual(t, time.Since(start), 55*time.Second, "the rest wait for the host's reset")
	})
}

// A quota stated alike on every route of a host that keeps one per route
// (X's app quota beside its endpoints') stays one quota: the routes, each
// paced by its own limiter, spend it together without a 429 after their
// first answers, and use most of it.
func TestAQuotaStatedAlikeOnEveryRouteStaysShared(t *testing.T) {
	for _, c := range []struct {
		app, a, b, workers int
		window             time.Duration
	}{
		{app: 500, a: 300, b: 900, workers: 16, window: 15 * time.Minute},
		{app: 100, a: 300, b: 900, workers: 8, window: time.Minute},
		{app: 1000, a: 600, b: 700, workers: 32, window: time.Minute},
	} {
		t.Run(fmt.Sprintf("app=%d/routes=%d,%d/workers=%d/window=%v", c.app, c.a, c.b, c.workers, c.window), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const lat = 50 * time.Millisecond
				srv := apisim.New(apisim.Config{Style: apisim.StyleX, Limit: c.b, Window: c.window, Latency: lat,
					Routes: map[string]int{"/2/lists/": c.a}, AppLimit: c.app})
				tr := NewTransport(srv.Transport())
				defer tr.CloseIdleConnections()
				ctx, cancel := context.WithCancel(context.Background())
				start := time.Now()
				end := start.Add(2 * c.window)
				var k atomic.Int64
				var wg sync.WaitGroup
				for range c.workers {
					wg.Go(func() {
						for time.Now().Before(end) {
							path := fmt.Sprintf("/2/users/%d/tweets", k.Add(1))
							if k.Load()%2 == 0 {
								path = fmt.Sprintf("/2/lists/%d/members", k.Load())
							}
							req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.x.test"+path, nil)
							resp, err := tr.RoundTrip(req)
							if err != nil {
								if ctx.Err() == nil {
									time.Sleep(time.Second)
								}
								continue
							}
							resp.Body.Close()
						}
					})
				}
				time.Sleep(end.Sub(start))
				cancel()
				wg.Wait()
				late := map[string]int{}
				first := map[string]time.Time{}
				for _, e := range srv.Events() {
					if _, ok := first[e.Key]; !ok {
						first[e.Key] = e.At.Add(lat)
						continue
					}
					if e.Status == http.StatusTooManyRequests && !e.At.Before(first[e.Key]) {
						late[e.Key]++
					}
				}
				ok := srv.Stats().OK
				t.Logf("OK %d of the app quota's %d, late 429s %v", ok, 2*c.app, late)
				for route, n := range late {
					assert.LessOrEqual(t, n, 1, "route %s: 429s after its first response", route)
				}
				assert.GreaterOrEqual(t, float64(ok), 0.85*float64(2*c.app), "most of the app quota used")
			})
		})
	}
}

// A route's own limiter is made knowing that its host's other routes have
// limiters of ours, which may spend a quota it states too (quota.Routed);
// the host's limiter is not a route's.
func TestARoutesLimiterKnowsItsHostsOtherRoutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := apisim.New(apisim.Config{Style: apisim.StyleX, Limit: 900, Window: time.Minute, Latency: 50 * time.Millisecond,
			Routes: map[string]int{"/2/lists/": 300}, AppLimit: 100})
		tr := NewTransport(srv.Transport())
		defer tr.CloseIdleConnections()
		for i := range 4 {
			for _, path := range []string{"/2/users/%d/tweets", "/2/lists/%d/members"} {
				req, _ := http.NewRequest(http.MethodGet, "https://api.x.test"+fmt.Sprintf(path, i), nil)
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				resp.Body.Close()
			}
		}
		routes := 0
		tr.eps.mu.RLock()
		defer tr.eps.mu.RUnlock()
		for key, ep := range tr.eps.m {
			if ep.bucket == "" {
				assert.False(t, ep.lim.cfg.routed, "the host's limiter, %s", key)
				continue
			}
			routes++
			assert.True(t, ep.lim.cfg.routed, "a route's limiter, %s", key)
		}
		assert.Equal(t, 2, routes, "each route has a limiter of its own")
	})
}
