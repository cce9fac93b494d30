package pacer

import (
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// okTransport answers every request 200 at once, closing the request body as
// a real transport does.
type okTransport struct{}

func (okTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	closeRequestBody(r)
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

func mustGet(t testing.TB, rt http.RoundTripper, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp
}

func endpointKeys(tr *Transport) []string {
	var out []string
	for _, s := range tr.Stats() {
		out = append(out, s.Key)
	}
	return out
}

func TestDefaultKeyIsLowercasedSchemeAndHostWithoutDefaultPort(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"https://api.example.com/a", "https://api.example.com"},
		{"https://API.Example.COM/a", "https://api.example.com"},
		{"https://api.example.com:443/a", "https://api.example.com"},
		{"http://api.example.com:80/a", "http://api.example.com"},
		{"http://api.example.com:443/a", "http://api.example.com:443"},
		{"https://api.example.com:8443/a", "https://api.example.com:8443"},
		{"https://[::1]:443/a", "https://[::1]"},
		{"http://[::1]:8080/a", "http://[::1]:8080"},
		{"https://api.example.com:1443/a", "https://api.example.com:1443"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			tr := NewTransport(okTransport{})
			mustGet(t, tr, tc.url)
			assert.Equal(t, []string{tc.want}, endpointKeys(tr))
		})
	}
}

func TestPatternsKeyRequestsByTheMostSpecificMatch(t *testing.T) {
	tr := NewTransport(okTransport{},
		WithEndpoint("GET api.example.com/search/", 10, 1),
		WithEndpoint("api.example.com/repos/{owner}/{repo}/issues", 10, 1),
		WithEndpoint("POST /upload", Inf, 0),
	)
	for _, tc := range []struct{ method, url, want string }{
		{"GET", "https://api.example.com/search/code?q=x", "GET api.example.com/search/"},
		{"HEAD", "https://api.example.com/search/code", "GET api.example.com/search/"},
		{"POST", "https://api.example.com/search/code", "https://api.example.com"},
		{"GET", "https://api.example.com/repos/a/b/issues", "api.example.com/repos/{owner}/{repo}/issues"},
		{"DELETE", "https://api.example.com/repos/c/d/issues", "api.example.com/repos/{owner}/{repo}/issues"},
		{"GET", "https://api.example.com:8443/search/x", "GET api.example.com/search/"}, // ServeMux ignores the port
		{"POST", "https://other.example.com/upload", "POST /upload"},
		{"POST", "https://third.example.com/upload", "POST /upload"},
		// A path that needs cleaning, or only matches after ServeMux's
		// trailing-slash redirect, matches no pattern: fall back to the host.
		{"GET", "https://api.example.com/search/../search/x", "https://api.example.com"},
		{"GET", "https://api.example.com/search", "https://api.example.com"},
		{"GET", "https://unrelated.example.com/search/x", "https://unrelated.example.com"},
	} {
		t.Run(tc.method+" "+tc.url, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, tc.url, nil)
			require.NoError(t, err)
			u := partsOf(req)
			got := tr.keyEndpoint(req, &u)
			tr.eps.release(got)
			assert.Equal(t, tc.want, got.key)
		})
	}
}

func TestPatternsMatchTheURLHostNotAVirtualHostHeader(t *testing.T) {
	tr := NewTransport(okTransport{}, WithEndpoint("api.example.com/", 10, 1))
	req, err := http.NewRequest(http.MethodGet, "https://api.example.com/x", nil)
	require.NoError(t, err)
	req.Host = "virtual.example.org"
	req.Method = "" // means GET for a client request
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, []string{"api.example.com/"}, endpointKeys(tr))
	assert.Equal(t, "virtual.example.org", req.Host, "the caller's request is untouched")
	assert.Empty(t, req.Method)
}

func TestPatternHostsMatchIgnoringPortCaseAndIPv6Brackets(t *testing.T) {
	for _, tc := range []struct{ pattern, url string }{
		{"api.example.com/", "http://api.example.com:8080/x"},
		{"api.example.com/", "https://API.Example.COM/x"},
		{"API.example.com/", "https://api.example.com/x"},
		{"[::1]/", "http://[::1]:8080/x"},
		{"[::1]/", "http://[::1]/x"},
		{"GET ::1/x", "http://[::1]:8080/x"},
	} {
		t.Run(tc.pattern+" "+tc.url, func(t *testing.T) {
			tr := NewTransport(okTransport{}, WithEndpoint(tc.pattern, 10, 1))
			mustGet(t, tr, tc.url)
			assert.Equal(t, []string{tc.pattern}, endpointKeys(tr))
		})
	}
}

func TestKeyFuncKeysRequestsThatMatchNoPattern(t *testing.T) {
	tr := NewTransport(okTransport{},
		WithEndpoint("api.example.com/search/", Inf, 0),
		WithKeyFunc(func(r *http.Request) string { return r.Header.Get("X-Tenant") }),
	)
	get := func(url, tenant string) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		if tenant != "" {
			req.Header.Set("X-Tenant", tenant)
		}
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	get("https://api.example.com/search/x", "a") // the pattern wins
	get("https://api.example.com/x", "a")
	get("https://api.example.com/y", "b")
	get("https://api.example.com/z", "") // empty key: fall back to the host
	assert.Equal(t, []string{"a", "api.example.com/search/", "b", "https://api.example.com"}, endpointKeys(tr))
}

func TestIdleEndpointsAreEvictedAfterTheTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(okTransport{})
		mustGet(t, tr, "https://a.example.com/")
		mustGet(t, tr, "https://b.example.com/")
		time.Sleep(idleTTL - 2*time.Minute)
		mustGet(t, tr, "https://b.example.com/")
		time.Sleep(4 * time.Minute) // a idle TTL+2 min, b 4 min
		mustGet(t, tr, "https://c.example.com/")
		assert.Equal(t, []string{"https://b.example.com", "https://c.example.com"}, endpointKeys(tr))
	})
}

func TestIdleEndpointIsKeptWhileItsQuotaWindowLasts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hourly := newMock(func(r *http.Request) (*http.Response, error) {
			if r.URL.Host != "api.example.com" {
				return respond(200)(), nil
			}
			return respond(200, "X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4000",
				"X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(50*time.Minute).Unix(), 10))(), nil
		})
		tr := NewTransport(hourly)
		mustGet(t, tr, mockURL)
		mustGet(t, tr, "https://other.example.com/")
		time.Sleep(30 * time.Minute)
		mustGet(t, tr, "https://third.example.com/") // runs the sweep
		keys := endpointKeys(tr)
		assert.Contains(t, keys, "https://api.example.com", "its window resets in 20 min: what it learnt still holds")
		assert.NotContains(t, keys, "https://other.example.com", "an endpoint that learnt nothing goes after the TTL")

		time.Sleep(25 * time.Minute) // past the reset
		mustGet(t, tr, "https://third.example.com/")
		assert.NotContains(t, endpointKeys(tr), "https://api.example.com")
	})
}

func TestEndpointInUseIsNeverEvicted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		slow := transportFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Host == "slow.example.com" {
				<-release
			}
			return okTransport{}.RoundTrip(r)
		})
		tr := NewTransport(slow, WithMaxEndpoints(2))
		done := make(chan struct{})
		go func() {
			defer close(done)
			mustGet(t, tr, "https://slow.example.com/")
		}()
		synctest.Wait()
		time.Sleep(idleTTL + time.Minute)
		for i := range 10 { // at the cap and past the TTL, again and again
			mustGet(t, tr, fmt.Sprintf("https://h%d.example.com/", i))
		}
		assert.Contains(t, endpointKeys(tr), "https://slow.example.com")
		close(release)
		<-done
	})
}

// The endpoints the table hands out without its lock (the last host's, a
// route's bucket) are the table's: one evicted meanwhile is not used again,
// and one in use is not evicted.
func TestCachedEndpointsAreNeverUsedOnceEvicted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(okTransport{}, WithEndpoint("other.example.com/", Inf, 0))
		mustGet(t, tr, "https://a.example.com/")
		cached := tr.eps.lastHost.Load()
		require.NotNil(t, cached)
		assert.Equal(t, "https://a.example.com", cached.key)
		time.Sleep(idleTTL + time.Minute)
		mustGet(t, tr, "https://other.example.com/") // keyed by its pattern; sweeps a out
		require.Same(t, cached, tr.eps.lastHost.Load(), "still cached")
		assert.NotContains(t, endpointKeys(tr), "https://a.example.com")

		mustGet(t, tr, "https://a.example.com/")
		fresh := tr.eps.lastHost.Load()
		assert.NotSame(t, cached, fresh)
		assert.Same(t, fresh, tr.eps.peekHost(&urlParts{scheme: "https", host: "a.example.com"}), "the table's")
		assert.Negative(t, cached.refs.Load(), "the evicted one stays marked")

		// Taken through the cache, an endpoint is in use: not evicted.
		require.True(t, fresh.tryRef())
		tr.eps.mu.Lock()
		assert.False(t, fresh.evict())
		tr.eps.mu.Unlock()
		fresh.refs.Add(-1)
	})
}

func TestCapEvictsLeastRecentlyUsedIdleEndpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := NewTransport(okTransport{}, WithMaxEndpoints(8))
		for i := range 8 {
			mustGet(t, tr, fmt.Sprintf("https://h%d.example.com/", i))
			time.Sleep(time.Second)
		}
		mustGet(t, tr, "https://h0.example.com/") // h0 is now the most recent
		mustGet(t, tr, "https://new.example.com/")
		got := endpointKeys(tr)
		assert.Len(t, got, 8, "one (an eighth of the cap) evicted to make room")
		assert.NotContains(t, got, "https://h1.example.com", "the least recently used goes")
		assert.Contains(t, got, "https://h0.example.com")
		assert.Contains(t, got, "https://new.example.com")
	})
}

func TestEndpointsGrowPastTheCapOnlyWhileAllAreBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		block := transportFunc(func(r *http.Request) (*http.Response, error) {
			<-release
			return okTransport{}.RoundTrip(r)
		})
		tr := NewTransport(block, WithMaxEndpoints(2))
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() { mustGet(t, tr, fmt.Sprintf("https://h%d.example.com/", i)) })
		}
		synctest.Wait()
		assert.Equal(t, 4, tr.eps.len(), "busy endpoints are kept")
		close(release)
		wg.Wait()
		mustGet(t, tr, "https://fresh.example.com/") // the table shrinks back as new keys arrive
		assert.LessOrEqual(t, tr.eps.len(), 2)
	})
}

func TestRouteBindingsAreBounded(t *testing.T) {
	ep := &endpoint{key: "k"}
	for i := range 2 * maxRoutesPerEndpoint {
		u := &urlParts{path: fmt.Sprintf("/p%d/x", i)}
		ep.bind(u, binding{key: "k#b", name: "b"})
	}
	assert.Equal(t, maxRoutesPerEndpoint, ep.routes.Load().len())
	pinned := &endpoint{key: "p", pinned: true}
	assert.False(t, pinned.bind(&urlParts{path: "/x"}, binding{key: "p#b", name: "b"}))
	assert.Nil(t, pinned.routes.Load())
}

// TestManyDistinctKeysStayWithinMemoryBound touches 100 000 distinct hosts
// once each (fewer under -race): the cap keeps the table, and so the live
// heap, bounded.
func TestManyDistinctKeysStayWithinMemoryBound(t *testing.T) {
	tr := NewTransport(okTransport{})
	before := liveHeap()
	touchDistinctKeys(t, tr, manyKeys)
	after := liveHeap()
	n := tr.eps.len()
	t.Logf("endpoints tracked: %d, live heap growth: %.1f MB", n, float64(after-before)/1e6)
	assert.LessOrEqual(t, n, DefaultMaxEndpoints)
	assert.Less(t, after-before, int64(30<<20))
	runtime.KeepAlive(tr)
}

func touchDistinctKeys(t testing.TB, tr *Transport, n int) {
	req, err := http.NewRequest(http.MethodGet, "https://x.example.com/", nil)
	require.NoError(t, err)
	for i := range n {
		r := req.Clone(req.Context())
		r.URL.Host = fmt.Sprintf("h%d.example.com", i)
		resp, err := tr.RoundTrip(r)
		require.NoError(t, err)
		resp.Body.Close()
	}
}

func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func BenchmarkEndpointsManyKeys(b *testing.B) {
	b.ReportAllocs()
	var growth int64
	for b.Loop() {
		tr := NewTransport(okTransport{})
		before := liveHeap()
		touchDistinctKeys(b, tr, 100_000)
		growth = liveHeap() - before
		runtime.KeepAlive(tr)
	}
	b.ReportMetric(float64(growth)/1e6, "MB-live")
}

type transportFunc func(*http.Request) (*http.Response, error)

func (f transportFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The route table scans a few routes and maps many; both find every
// binding, and a route bound again takes its new bucket.
func TestRouteTableFindsEveryBindingAtAnySize(t *testing.T) {
	var rt *routeTable
	for i := range 2 * routeScanMax {
		rt = rt.with(routeKey{seg: strconv.Itoa(i)}, binding{key: "k" + strconv.Itoa(i)})
		assert.Equal(t, i+1, rt.len())
		assert.Equal(t, i >= routeScanMax, rt.m != nil, "mapped once past the scan's size")
		for j := range i + 1 {
			b, ok := rt.get(routeKey{seg: strconv.Itoa(j)})
			require.True(t, ok)
			assert.Equal(t, "k"+strconv.Itoa(j), b.key)
		}
		_, ok := rt.get(routeKey{seg: "unbound"})
		assert.False(t, ok)
		_, ok = rt.get(routeKey{host: "h", seg: "0"})
		assert.False(t, ok, "the host is part of the key")
	}
	for _, n := range []int{1, routeScanMax + 1} {
		var rt *routeTable
		for i := range n {
			rt = rt.with(routeKey{seg: strconv.Itoa(i)}, binding{key: "old"})
		}
		rt = rt.with(routeKey{seg: "0"}, binding{key: "new"})
		b, _ := rt.get(routeKey{seg: "0"})
		assert.Equal(t, "new", b.key)
		assert.Equal(t, n, rt.len(), "rebound, not added")
	}
}
