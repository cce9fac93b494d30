// Package clock is pacer's one clock: nanoseconds since an epoch on the
// monotonic clock, for the buckets, the adaptive limiters' atomic stamps and
// the endpoint table's idle stamps. time.Since(epoch) reads only the
// monotonic clock, about half the cost of time.Now, and cannot jump with the
// wall clock. Times before the epoch (a testing/synctest bubble starts in
// 2000) are negative, which every comparison allows.
package clock

import (
	"context"
	"time"
)

// Bounds of the clock: any time is clamped into [Min, Max], so adding a span
// of at most MaxSpan (about 73 years) to it can never overflow an int64.
const (
	MaxSpan = int64(1) << 61
	Min     = -int64(1) << 61
	Max     = int64(1) << 61
)

var epoch = time.Now()

// Now is now on the clock, clamped (Clamp).
func Now() int64 { return Clamp(int64(time.Since(epoch))) }

// Of converts a time read with time.Now (so carrying a monotonic reading)
// to the clock without reading the clock again.
func Of(t time.Time) int64 { return Clamp(int64(t.Sub(epoch))) }

// Time converts a time on the clock to a time.Time, taking the wall clock
// from ref, a time read at refNs.
func Time(ns int64, ref time.Time, refNs int64) time.Time {
	return ref.Add(time.Duration(ns - refNs))
}

// Clamp bounds a time on the clock so that adding MaxSpan to it can never
// overflow.
func Clamp(ns int64) int64 { return min(max(ns, Min), Max) }

// SleepUntil sleeps until t, or until ctx ends: it returns ctx's error then
// (also when t has passed but ctx has ended, so a caller never goes on with
// an ended context).
func SleepUntil(ctx context.Context, t time.Time) error {
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

// Earlier returns the earlier of a and b.
func Earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Later returns the later of a and b.
func Later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
