package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/pacer-go/pacer/redisstore"
	"github.com/pacer-go/pacer/redisstore/internal/redistest"
	"github.com/pacer-go/pacer/store"
)

// BenchmarkReserve measures reservations per second of one process against
// a local Redis, with lease batching (the default) and without (one Redis
// call per reservation). The limit is high enough that the bucket never
// makes anyone wait: this is the store's own cost.
func BenchmarkReserve(b *testing.B) {
	srv := redistest.Start(b)
	r := store.Request{Tokens: 1, Limit: 1e7, Burst: 1000}
	for _, bc := range []struct {
		name   string
		window time.Duration
	}{
		{"Leased", redisstore.DefaultLeaseWindow},
		{"Unleased", 0},
	} {
		for _, parallel := range []bool{false, true} {
			name := bc.name + "/Serial"
			if parallel {
				name = bc.name + "/Parallel"
			}
			b.Run(name, func(b *testing.B) {
				s := redisstore.New(srv.Client(b), redisstore.WithPrefix(uniquePrefix()), redisstore.WithLogger(quiet),
					redisstore.WithTimeout(5*time.Second), redisstore.WithLeaseWindow(bc.window))
				defer s.Close()
				ctx := context.Background()
				reserve := func() {
					if _, err := s.Reserve(ctx, "k", r); err != nil {
						b.Error(err)
					}
				}
				start := time.Now()
				if parallel {
					b.SetParallelism(8)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							reserve()
						}
					})
				} else {
					for b.Loop() {
						reserve()
					}
				}
				elapsed := time.Since(start)
				st := s.Stats()
				b.ReportMetric(float64(st.Reservations)/elapsed.Seconds(), "reservations/s")
				b.ReportMetric(float64(st.Calls)/float64(st.Reservations), "calls/reservation")
			})
		}
	}
}
