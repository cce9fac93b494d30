package pacer

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkTransportOverhead measures what a pacer Transport adds to a
// loopback round trip when its limits never bind, in wall time, against the
// bare base transport measured in the same run (about 35 s):
//
//	go test -run '^$' -bench TransportOverhead .
//
// Each sub-benchmark alternates 31 rounds of 250 ms, bare then pacer, the
// order swapped every round so that neither pays more often for what the
// other leaves behind. (testing.Benchmark would deadlock here: a benchmark
// already holds the lock it takes.) Short rounds, many of them: on a shared
// machine load comes and goes over seconds, and two rounds close in time see
// the same load; whole rounds rather than single requests keep each side's
// connections and caches warm, as in a real client.
//
// Reported, as medians over the rounds: ratio (pacer's wall time per request
// over bare's, the figure issue 13 holds to ≤ 1.03), bare-ns/req and
// pacer-ns/req, cost-ns/req (their difference), allocs/req (what pacer adds)
// and each side's process CPU time per request (servers included). The
// sub-benchmark's own ns/op is the whole run's and means nothing.
//
// "plain": the server sends no rate-limit headers. "github": it sends
// GitHub's X-RateLimit-Limit, -Remaining (counting down from far more than
// the run spends), -Reset, -Used and -Resource, so the figures include
// binding the route to the "core" bucket and reading and learning every
// response. Both use http.Transport{MaxIdleConnsPerHost: 4} and an httptest
// server answering "ok".
func BenchmarkTransportOverhead(b *testing.B) {
	const rounds, round = 31, 250 * time.Millisecond
	plain := func(http.Header) {}
	var remaining atomic.Int64
	remaining.Store(1_000_000_000)
	reset := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	github := func(h http.Header) {
		left := remaining.Add(-1)
		h.Set("X-RateLimit-Limit", "1000000000")
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(left, 10))
		h.Set("X-RateLimit-Reset", reset)
		h.Set("X-RateLimit-Used", strconv.FormatInt(1_000_000_000-left, 10))
		h.Set("X-RateLimit-Resource", "core")
	}
	for _, hs := range []struct {
		name string
		set  func(http.Header)
	}{{"plain", plain}, {"github", github}} {
		b.Run(hs.name, func(b *testing.B) {
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hs.set(w.Header())
				io.WriteString(w, "ok")
			}))
			defer s.Close()
			bareBase := &http.Transport{MaxIdleConnsPerHost: 4}
			pacedBase := &http.Transport{MaxIdleConnsPerHost: 4}
			defer bareBase.CloseIdleConnections()
			defer pacedBase.CloseIdleConnections()
			bare := getter(b, bareBase, s.URL)
			paced := getter(b, NewTransport(pacedBase), s.URL)
			type figures struct{ wall, cpu, allocs float64 }
			measure := func(get func()) figures {
				n, wall, cpu, allocs := timeRound(get, round)
				return figures{float64(wall) / n, float64(cpu) / n, float64(allocs) / n}
			}
			var bares, paceds []figures
			var ratios []float64
			for i := range rounds {
				var fb, fp figures
				if i%2 == 0 {
					fb, fp = measure(bare), measure(paced)
				} else {
					fp, fb = measure(paced), measure(bare)
				}
				bares, paceds = append(bares, fb), append(paceds, fp)
				ratios = append(ratios, fp.wall/fb.wall)
			}
			med := func(fs []figures, f func(figures) float64) float64 {
				var v []float64
				for _, x := range fs {
					v = append(v, f(x))
				}
				return median(v)
			}
			wall := func(f figures) float64 { return f.wall }
			b.ReportMetric(median(ratios), "ratio")
			b.ReportMetric(med(bares, wall), "bare-ns/req")
			b.ReportMetric(med(paceds, wall), "pacer-ns/req")
			b.ReportMetric(med(paceds, wall)-med(bares, wall), "cost-ns/req")
			b.ReportMetric(med(paceds, func(f figures) float64 { return f.allocs })-med(bares, func(f figures) float64 { return f.allocs }), "allocs/req")
			if _, ok := processCPU(); ok {
				b.ReportMetric(med(bares, func(f figures) float64 { return f.cpu }), "bare-cpu-ns/req")
				b.ReportMetric(med(paceds, func(f figures) float64 { return f.cpu }), "pacer-cpu-ns/req")
			}
			b.Logf("wall ratios per round: %.3f", ratios)
		})
	}
}

// BenchmarkTransportCost is pacer's own cost per request, the network
// replaced by a canned response (with GitHub's headers and a Date, or none): pacer's
// ns/op less bare's is what
// BenchmarkTransportOverhead's cost-ns/req would be on an idle machine with
// no effect of pacer on the base transport's scheduling.
func BenchmarkTransportCost(b *testing.B) {
	github := http.Header{}
	github.Set("X-RateLimit-Limit", "1000000000")
	github.Set("X-RateLimit-Remaining", "999999000")
	github.Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
	github.Set("X-RateLimit-Used", "1000")
	github.Set("X-RateLimit-Resource", "core")
	// As every server sends (the loopback's httptest server too): pacer reads
	// it for the server's clock offset, parsing it when it changes.
	github.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	for _, tc := range []struct {
		name string
		h    http.Header
	}{{"plain", http.Header{}}, {"github", github}} {
		for _, mode := range []string{"bare", "pacer"} {
			b.Run(tc.name+"/"+mode, func(b *testing.B) {
				left := 999_999_000
				canned := transportFunc(func(r *http.Request) (*http.Response, error) {
					if v := tc.h["X-Ratelimit-Remaining"]; v != nil {
						// Count down as GitHub does: each response tells the
						// limiter something new.
						left--
						v[0] = strconv.Itoa(left)
					}
					return &http.Response{StatusCode: 200, Header: tc.h, Body: http.NoBody, Request: r}, nil
				})
				var rt http.RoundTripper = canned
				if mode == "pacer" {
					rt = NewTransport(canned)
				}
				get := getter(b, rt, "https://api.example.com")
				b.ReportAllocs()
				for b.Loop() {
					get()
				}
			})
		}
	}
}

// timeRound calls get for about d, in batches timed as a whole (a clock
// read per request would add to both sides what we try to measure), and
// returns the calls made, the wall and process CPU time they took and the
// heap allocations they made.
func timeRound(get func(), d time.Duration) (n float64, wall, cpu time.Duration, allocs uint64) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	c0, _ := processCPU()
	t0 := time.Now()
	calls, batch := 0, 16
	for time.Since(t0) < d {
		for range batch {
			get()
		}
		calls += batch
		batch = min(2*batch, 1024)
	}
	wall = time.Since(t0)
	c1, _ := processCPU()
	runtime.ReadMemStats(&m1)
	return float64(calls), wall, c1 - c0, m1.Mallocs - m0.Mallocs
}

// median returns the median of v (which it sorts).
func median(v []float64) float64 {
	slices.Sort(v)
	if n := len(v); n%2 == 1 {
		return v[n/2]
	} else {
		return (v[n/2-1] + v[n/2]) / 2
	}
}

// getter returns a function sending one GET to url/v1/items through rt and
// reading the response, after a warm-up that connects and lets pacer learn
// and leave slow start.
func getter(b *testing.B, rt http.RoundTripper, url string) func() {
	req, err := http.NewRequest(http.MethodGet, url+"/v1/items", nil)
	if err != nil {
		b.Fatal(err)
	}
	get := func() {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	get()
	get()
	return get
}

// BenchmarkTransportKeying measures finding a request's limiter, the part of
// the overhead that grows with configuration.
func BenchmarkTransportKeying(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"host", nil},
		{"pattern", []Option{WithEndpoint("GET api.example.com/repos/{owner}/{repo}/issues", 100, 10), WithEndpoint("api.example.com/search/", Inf, 0)}},
		{"keyfunc", []Option{WithKeyFunc(func(r *http.Request) string { return r.Header.Get("X-Tenant") })}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tr := NewTransport(okTransport{}, tc.opts...)
			req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/repos/a/b/issues", nil)
			req.Header.Set("X-Tenant", "t1")
			u := partsOf(req)
			b.ReportAllocs()
			for b.Loop() {
				ep := tr.keyEndpoint(req, &u)
				lim := tr.limiterEndpoint(ep, &u)
				tr.release(ep, lim)
			}
		})
	}
}

// BenchmarkTransportKeyingParallel is the table's read path under
// contention: every goroutine finds (and counts a request on) endpoints of a
// few hot hosts.
func BenchmarkTransportKeyingParallel(b *testing.B) {
	tr := NewTransport(okTransport{})
	var reqs []*http.Request
	for i := range 8 {
		r, _ := http.NewRequest(http.MethodGet, "https://h"+strconv.Itoa(i)+".example.com/x", nil)
		reqs = append(reqs, r)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r := reqs[i%len(reqs)]
			i++
			u := partsOf(r)
			ep := tr.keyEndpoint(r, &u)
			tr.release(ep, tr.limiterEndpoint(ep, &u))
		}
	})
}
