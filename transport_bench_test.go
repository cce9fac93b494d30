package pacer

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// BenchmarkTransportOverhead compares a request through a pacer Transport
// with the same request through the bare base transport, against a loopback
// server whose limits never bind:
//
//	go test -run '^$' -bench TransportOverhead -count 10 -benchmem
//
// and compare medians. "plain" has the server send no rate-limit headers,
// "headers" GitHub-style ones (a quota far from exhausted), so it includes
// parsing them and retuning the limiter. The bare and pacer sub-benchmarks
// give the allocations per request; "interleaved" alternates chunks of bare
// and paced requests in one loop, so that load on the machine hits both
// alike, and reports wall and CPU time per request and the overhead in
// percent (see interleave). "inmem" replaces the network by a canned
// response: its cost-ns/req is pacer's absolute cost per request.
func BenchmarkTransportOverhead(b *testing.B) {
	plain := func(http.Header) {}
	github := func(h http.Header) {
		h.Set("X-RateLimit-Limit", "1000000000000")
		h.Set("X-RateLimit-Remaining", "999999999999")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
		h.Set("X-RateLimit-Resource", "core")
	}
	for _, hs := range []struct {
		name string
		set  func(http.Header)
	}{{"plain", plain}, {"headers", github}} {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hs.set(w.Header())
			io.WriteString(w, `{"ok":true}`)
		}))
		defer s.Close()
		newBase := func() *http.Transport { return &http.Transport{MaxIdleConnsPerHost: 4} }
		for _, mode := range []string{"bare", "pacer"} {
			b.Run(hs.name+"/"+mode, func(b *testing.B) {
				base := newBase()
				defer base.CloseIdleConnections()
				var rt http.RoundTripper = base
				if mode == "pacer" {
					rt = NewTransport(base)
				}
				get := getter(b, rt, s.URL)
				b.ReportAllocs()
				for b.Loop() {
					get()
				}
			})
		}
		b.Run(hs.name+"/interleaved", func(b *testing.B) {
			bareBase, pacedBase := newBase(), newBase()
			defer bareBase.CloseIdleConnections()
			defer pacedBase.CloseIdleConnections()
			interleave(b, getter(b, bareBase, s.URL), getter(b, NewTransport(pacedBase), s.URL))
		})
		b.Run(hs.name+"/inmem", func(b *testing.B) {
			h := http.Header{}
			hs.set(h)
			canned := transportFunc(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 200, Header: h, Body: http.NoBody, Request: r}, nil
			})
			b.ReportAllocs()
			interleave(b, getter(b, canned, "https://api.example.com"), getter(b, NewTransport(canned), "https://api.example.com"))
		})
	}
}

// interleave runs bare and paced requests in alternating chunks and reports
// each one's wall and CPU time per request (CPU time of the whole process,
// servers included, so on a loaded machine the ratio stays meaningful), and
// pacer's cost: the difference, absolute and in percent.
func interleave(b *testing.B, bare, paced func()) {
	const chunk = 32
	var wall, cpu [2]time.Duration // [0] bare, [1] paced
	run := func(i int, f func()) {
		c0, _ := processCPU()
		t0 := time.Now()
		for range chunk {
			f()
		}
		c1, _ := processCPU()
		wall[i] += time.Since(t0)
		cpu[i] += c1 - c0
	}
	n := 0
	for b.Loop() {
		// Alternate which goes first, so that neither pays more often for
		// what the other leaves behind (garbage, a busy connection).
		if n/chunk%2 == 0 {
			run(0, bare)
			run(1, paced)
		} else {
			run(1, paced)
			run(0, bare)
		}
		n += chunk
	}
	per := func(d time.Duration) float64 { return float64(d) / float64(n) }
	b.ReportMetric(per(wall[0]), "bare-ns/req")
	b.ReportMetric(per(wall[1]), "pacer-ns/req")
	b.ReportMetric(per(wall[1]-wall[0]), "cost-ns/req")
	b.ReportMetric((float64(wall[1])/float64(wall[0])-1)*100, "overhead-%")
	if _, ok := processCPU(); ok {
		b.ReportMetric(per(cpu[0]), "bare-cpu-ns/req")
		b.ReportMetric(per(cpu[1]), "pacer-cpu-ns/req")
		b.ReportMetric((float64(cpu[1])/float64(cpu[0])-1)*100, "cpu-overhead-%")
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
