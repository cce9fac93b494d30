package apisim

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// BenchmarkTransport measures one in-memory request end to end (admission,
// headers, response), with the unseen client and a token quota active.
func BenchmarkTransport(b *testing.B) {
	for _, st := range []Style{StyleGitHub, StyleIETF, StyleOpenAI} {
		b.Run(string(st), func(b *testing.B) {
			s := New(Config{Style: st, Limit: 1_000_000, Window: time.Second, TokenLimit: 1 << 30, UnseenShare: 0.3})
			rt := s.Transport()
			req, _ := http.NewRequest(http.MethodGet, "http://api.test/v1/items", nil)
			req.Header.Set(TokensHeader, strconv.Itoa(10))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := rt.RoundTrip(req)
					if err != nil {
						b.Fatal(err)
					}
					resp.Body.Close()
				}
			})
		})
	}
}
