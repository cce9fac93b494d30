package pacer

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// BenchmarkAdaptiveWaitObserve measures the limiter's cost per request when it
// is not binding: Wait then Observe, serially and from parallel goroutines.
func BenchmarkAdaptiveWaitObserve(b *testing.B) {
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		info func() Info
	}{
		{"no-headers", func() Info { return Info{} }},
		{"headers", func() Info {
			return Info{Quotas: []Quota{{Name: "requests", Limit: 1e12, Remaining: 1e12, Reset: time.Now().Add(time.Hour)}}}
		}},
	} {
		info := bc.info()
		start := func(b *testing.B) *Adaptive {
			a := NewAdaptive(AdaptiveConfig{})
			if err := a.wait(ctx, 0); err != nil {
				b.Fatal(err)
			}
			a.observe(http.StatusOK, info)
			return a
		}
		b.Run(bc.name, func(b *testing.B) {
			a := start(b)
			b.ReportAllocs()
			for b.Loop() {
				if err := a.wait(ctx, 0); err != nil {
					b.Fatal(err)
				}
				a.observe(http.StatusOK, info)
			}
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			a := start(b)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := a.wait(ctx, 0); err != nil {
						b.Error(err)
						return
					}
					a.observe(http.StatusOK, info)
				}
			})
		})
	}
}
