// Package bench compares pacer's token bucket with the limiters users
// would otherwise reach for: golang.org/x/time/rate and go.uber.org/ratelimit.
// The same workloads run as `go test -bench` benchmarks (bucket_test.go) and
// through `go run ./cmd/compare`, which prints a markdown table.
//
// It is a separate module so the peers never enter pacer's own go.mod.
package bench

import (
	"context"
	"testing"
	"time"

	"github.com/pacer-go/pacer"
	"go.uber.org/ratelimit"
	"golang.org/x/time/rate"
)

// Library names, as they appear in benchmark names and the table.
const (
	Pacer = "pacer"
	XRate = "x-time-rate"
	Uber  = "uber-ratelimit"
	Clock = "clock"
)

// Workload is one benchmark: a scenario run against one library.
type Workload struct {
	Scenario string // e.g. "Allow", "AllowParallel"
	Lib      string // one of Pacer, XRate, Uber, Clock
	Note     string // what the library call is, when not obvious
	Fn       func(b *testing.B)
}

// Name is the benchmark's sub-test name: Scenario/Lib.
func (w Workload) Name() string { return w.Scenario + "/" + w.Lib }

// The limiters are configured not to bind: a billion events per second
// with a second's worth of burst, so every call measures the limiter's own
// cost (clock read, bookkeeping, synchronisation), never a sleep.
const (
	rateNotBinding  = 1e9
	burstNotBinding = 1e9
)

func newPacer() *pacer.Bucket { return pacer.NewBucket(rateNotBinding, burstNotBinding) }
func newXRate() *rate.Limiter { return rate.NewLimiter(rateNotBinding, burstNotBinding) }
func newUber() ratelimit.Limiter {
	return ratelimit.New(rateNotBinding, ratelimit.WithSlack(burstNotBinding))
}

var (
	t0 = time.Now()
	// The clock baselines store here so the compiler keeps the reads.
	sinkTime time.Time
	sinkDur  time.Duration
)

// serial runs op b.N times on one goroutine.
func serial(op func() bool) func(b *testing.B) {
	return func(b *testing.B) {
		b.ReportAllocs()
		denied := 0
		for b.Loop() {
			if !op() {
				denied++
			}
		}
		if denied > 0 {
			b.Fatalf("%d of %d calls denied: the limiter was meant not to bind", denied, b.N)
		}
	}
}

// parallel runs op b.N times over GOMAXPROCS goroutines.
func parallel(op func() bool) func(b *testing.B) {
	return func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				op()
			}
		})
	}
}

// Workloads lists every benchmark, grouped by scenario. Each scenario has
// a pacer and an x/time/rate entry (the ratio's denominator); uber's Take is
// its only entry point, a blocking pacer, listed under Wait and Allow alike
// as the closest equivalent.
func Workloads() []Workload {
	ctx := context.Background()
	return []Workload{
		{Scenario: "Clock", Lib: "time.Now", Fn: serial(func() bool { sinkTime = time.Now(); return true })},
		{Scenario: "Clock", Lib: "time.Since", Note: "monotonic only", Fn: serial(func() bool { sinkDur = time.Since(t0); return sinkDur >= 0 })},

		{Scenario: "Allow", Lib: Pacer, Fn: serial(newPacer().Allow)},
		{Scenario: "Allow", Lib: XRate, Fn: serial(newXRate().Allow)},
		{Scenario: "Allow", Lib: Uber, Note: "Take", Fn: func() func(*testing.B) {
			l := newUber()
			return serial(func() bool { l.Take(); return true })
		}()},

		{Scenario: "AllowParallel", Lib: Pacer, Fn: parallel(newPacer().Allow)},
		{Scenario: "AllowParallel", Lib: XRate, Fn: parallel(newXRate().Allow)},
		{Scenario: "AllowParallel", Lib: Uber, Note: "Take", Fn: func() func(*testing.B) {
			l := newUber()
			return parallel(func() bool { l.Take(); return true })
		}()},

		{Scenario: "Wait", Lib: Pacer, Fn: func() func(*testing.B) {
			l := newPacer()
			return serial(func() bool { return l.Wait(ctx) == nil })
		}()},
		{Scenario: "Wait", Lib: XRate, Fn: func() func(*testing.B) {
			l := newXRate()
			return serial(func() bool { return l.Wait(ctx) == nil })
		}()},

		{Scenario: "WaitParallel", Lib: Pacer, Fn: func() func(*testing.B) {
			l := newPacer()
			return parallel(func() bool { return l.Wait(ctx) == nil })
		}()},
		{Scenario: "WaitParallel", Lib: XRate, Fn: func() func(*testing.B) {
			l := newXRate()
			return parallel(func() bool { return l.Wait(ctx) == nil })
		}()},

		{Scenario: "Reserve", Lib: Pacer, Fn: func() func(*testing.B) {
			l := newPacer()
			return serial(func() bool { return l.Reserve().OK() })
		}()},
		{Scenario: "Reserve", Lib: XRate, Fn: func() func(*testing.B) {
			l := newXRate()
			return serial(func() bool { return l.Reserve().OK() })
		}()},
	}
}
