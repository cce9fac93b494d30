package pacer

import (
	"context"
	"time"
)

// The package's one clock: nanoseconds since epoch on the monotonic clock,
// for the buckets (bucket*.go), the adaptive limiters' atomic stamps
// (adaptive*.go, window.go) and the endpoint table's idle stamps
// (endpoint.go). time.Since(epoch) reads only the monotonic clock, about
// half the cost of time.Now, and cannot jump with the wall clock. Times
// before epoch (a testing/synctest bubble starts in 2000) are negative,
// which every comparison allows.
var epoch = time.Now()

// nanotime is now on the package clock, clamped (clampTime).
func nanotime() int64 { return clampTime(int64(time.Since(epoch))) }

// toNanos converts a time read with time.Now (so carrying a monotonic
// reading) to the package clock without reading the clock again.
func toNanos(t time.Time) int64 { return clampTime(int64(t.Sub(epoch))) }

// clampTime bounds a time on the package clock so that adding maxSpan to it
// can never overflow.
func clampTime(ns int64) int64 { return min(max(ns, minTime), maxTime) }

// sleepUntil sleeps until t, or until ctx ends: it returns ctx's error then
// (also when t has passed but ctx has ended, so a caller never goes on with
// an ended context).
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
