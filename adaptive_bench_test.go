package pacer

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// BenchmarkAdaptiveAcquireDone measures the limiter's cost per request when
// it is not binding: Acquire then Permit.Done with the response, serially
// and from parallel goroutines. The response is built once: what is
// measured is the limiter's reading of it, not its making.
func BenchmarkAdaptiveAcquireDone(b *testing.B) {
	ctx := context.Background()
	for _, bc := range []struct {
		name   string
		fields []string
	}{
		{"no-headers", nil},
		{"headers", requestsLeft(1e12, 1e12, time.Hour)},
	} {
		resp := reply(http.StatusOK, bc.fields)
		once := func(a *Adaptive) error {
			p, err := a.Acquire(ctx, 0)
			if err != nil {
				return err
			}
			p.Done(resp)
			return nil
		}
		start := func(b *testing.B) *Adaptive {
			a := NewAdaptive(AdaptiveConfig{})
			if err := once(a); err != nil {
				b.Fatal(err)
			}
			return a
		}
		b.Run(bc.name, func(b *testing.B) {
			a := start(b)
			b.ReportAllocs()
			for b.Loop() {
				if err := once(a); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			a := start(b)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := once(a); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
