package pacer

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// BenchmarkTransportOverhead compares a request through a pacer Transport
// with the same request through the bare base transport, against a loopback
// server whose limits never bind. Compare medians over -count runs:
//
//	go test -run '^$' -bench TransportOverhead -count 10 -benchmem
//
// "headers" has the server send GitHub-style rate-limit headers (a quota far
// from exhausted), so it includes parsing them and retuning the limiter.
func BenchmarkTransportOverhead(b *testing.B) {
	plain := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"ok":true}`)
	})
	withHeaders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-RateLimit-Limit", "1000000000")
		h.Set("X-RateLimit-Remaining", "999999999")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(1<<40, 10))
		h.Set("X-RateLimit-Resource", "core")
		io.WriteString(w, `{"ok":true}`)
	})
	for _, srv := range []struct {
		name    string
		handler http.Handler
	}{{"plain", plain}, {"headers", withHeaders}} {
		s := httptest.NewServer(srv.handler)
		for _, mode := range []string{"bare", "pacer"} {
			b.Run(srv.name+"/"+mode, func(b *testing.B) {
				base := &http.Transport{MaxIdleConnsPerHost: 4}
				defer base.CloseIdleConnections()
				var rt http.RoundTripper = base
				if mode == "pacer" {
					rt = NewTransport(base)
				}
				req, err := http.NewRequest(http.MethodGet, s.URL+"/v1/items", nil)
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
				get() // connect, and let pacer learn and leave slow start
				get()
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					get()
				}
			})
		}
		s.Close()
	}
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
