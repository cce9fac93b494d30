package clock

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestClampKeepsRoomForAMaxSpan(t *testing.T) {
	for _, ns := range []int64{math.MinInt64, Min - 1, 0, Max + 1, math.MaxInt64} {
		c := Clamp(ns)
		assert.GreaterOrEqual(t, c, Min)
		assert.LessOrEqual(t, c, Max)
		assert.Greater(t, c+MaxSpan, c, "adding MaxSpan to %d must not overflow", c)
	}
	assert.Equal(t, int64(42), Clamp(42))
}

func TestOfAndTimeAreInverse(t *testing.T) {
	ref := time.Now()
	refNs := Of(ref)
	for _, d := range []time.Duration{-time.Hour, 0, time.Nanosecond, 24 * time.Hour} {
		at := ref.Add(d)
		assert.True(t, Time(Of(at), ref, refNs).Equal(at), "%v", d)
	}
	assert.GreaterOrEqual(t, Now(), refNs, "the clock does not go back")
}

func TestSleepUntilEndsWithTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		assert.NoError(t, SleepUntil(context.Background(), start.Add(time.Second)))
		assert.Equal(t, time.Second, time.Since(start))

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		assert.ErrorIs(t, SleepUntil(ctx, time.Now().Add(time.Hour)), context.DeadlineExceeded)
		assert.Equal(t, 2*time.Second, time.Since(start), "returns when the context ends, not at t")

		assert.ErrorIs(t, SleepUntil(ctx, time.Now().Add(-time.Hour)), context.DeadlineExceeded,
			"a time already passed still reports an ended context")
	})
}

// BenchmarkClock measures the floor of the buckets' fast path: the
// monotonic clock read Now does, against time.Now.
func BenchmarkClock(b *testing.B) {
	b.Run("time.Now", func(b *testing.B) {
		var t time.Time
		for b.Loop() {
			t = time.Now()
		}
		_ = t
	})
	b.Run("clock.Now", func(b *testing.B) {
		var ns int64
		for b.Loop() {
			ns = Now()
		}
		_ = ns
	})
}
