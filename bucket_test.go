package pacer

import (
	"context"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests in this file drive the pure core (the *At methods) with a
// synthetic clock starting at t0. Issue numbers refer to golang/go issues
// about golang.org/x/time/rate that the case guards against.

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// allowed counts how many of n single-token AllowNAt calls at t succeed.
func allowed(b *Bucket, t time.Time, n int) int {
	c := 0
	for range n {
		if b.AllowNAt(t, 1) {
			c++
		}
	}
	return c
}

func TestNewBucketPanicsNamingTheBadValue(t *testing.T) {
	tests := []struct {
		name  string
		limit Limit
		burst int
		want  string
	}{
		{"NaN limit", Limit(math.NaN()), 1, "pacer: NewBucket: limit NaN is not a rate"},
		{"negative limit", -1, 1, "pacer: NewBucket: limit -1 is not a rate"},
		{"-Inf limit", Limit(math.Inf(-1)), 1, "pacer: NewBucket: limit -Inf is not a rate"},
		{"negative burst", 10, -3, "pacer: NewBucket: burst -3 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				require.NotNil(t, r, "NewBucket must panic")
				assert.Contains(t, r, tt.want)
			}()
			NewBucket(tt.limit, tt.burst)
		})
	}
}

func TestSetLimitAndSetBurstPanicNamingTheBadValue(t *testing.T) {
	b := NewBucket(10, 1)
	assert.PanicsWithValue(t,
		"pacer: SetLimit: limit NaN is not a rate: it must be a non-negative number of events per second, or Inf",
		func() { b.SetLimit(Limit(math.NaN())) })
	assert.Panics(t, func() { b.SetLimit(-0.5) })
	assert.Panics(t, func() { b.SetLimitAt(t0, -2) })
	assert.PanicsWithValue(t, "pacer: SetBurst: burst -1 is negative", func() { b.SetBurst(-1) })
	assert.Panics(t, func() { b.SetBurstAt(t0, -7) })
	assert.Equal(t, Limit(10), b.Limit(), "a rejected value must not be applied")
	assert.Equal(t, 1, b.Burst())
}

func TestEvery(t *testing.T) {
	assert.Equal(t, Limit(10), Every(100*time.Millisecond))
	assert.Equal(t, Inf, Every(0))
	assert.Equal(t, Inf, Every(-time.Second))
	assert.InDelta(t, 1.0/3600, float64(Every(time.Hour)), 1e-15)
}

// A full bucket allows exactly burst events at one instant, whatever the
// mix of sizes, then one per interval (#52618: burst is a capacity, not a
// per-second allowance).
func TestBucketAllowsExactlyBurstThenPacesAtTheLimit(t *testing.T) {
	tests := []struct {
		limit Limit
		burst int
	}{
		{10, 1}, {10, 5}, {3, 7}, {7, 3}, {1e6, 1000}, {Every(3 * time.Millisecond), 4}, {0.5, 2},
	}
	for _, tt := range tests {
		b := NewBucket(tt.limit, tt.burst)
		assert.Equal(t, tt.burst, allowed(b, t0, tt.burst+5), "limit %v burst %d", tt.limit, tt.burst)

		iv := time.Duration(math.Ceil(1e9 / float64(tt.limit)))
		assert.False(t, b.AllowNAt(at(iv-1), 1), "limit %v: one nanosecond before the refill", tt.limit)
		assert.True(t, b.AllowNAt(at(iv), 1), "limit %v: at the refill", tt.limit)
		assert.False(t, b.AllowNAt(at(iv), 1))
	}
	// Split across sizes: 2 + 1 + 2 of a burst of 5.
	b := NewBucket(3, 5)
	assert.True(t, b.AllowNAt(t0, 2))
	assert.True(t, b.AllowNAt(t0, 1))
	assert.True(t, b.AllowNAt(t0, 2))
	assert.False(t, b.AllowNAt(t0, 1))
}

func TestAllowEdgeCases(t *testing.T) {
	tests := []struct {
		name  string
		limit Limit
		burst int
		n     int
		want  []bool // successive AllowNAt(t0, n)
		later bool   // AllowNAt(t0 + 100 years, n)
	}{
		// #16854: an infinite limit ignores the burst (WaitN too, see
		// TestWaitFailsAtOnceForRequestsThatCanNeverBeGranted).
		{"Inf, burst 0", Inf, 0, 1, []bool{true, true, true}, true},
		{"Inf, huge n", Inf, 1, math.MaxInt, []bool{true, true}, true},
		// #68541: zero limit and zero burst deny everything, forever.
		{"limit 0, burst 0", 0, 0, 1, []bool{false}, false},
		// #39984, #68541: zero limit with burst b allows b in total, then
		// nothing ever (x/time/rate once allowed every event here).
		{"limit 0, burst 3", 0, 3, 1, []bool{true, true, true, false}, false},
		{"limit 0, burst 3, n 2", 0, 3, 2, []bool{true, false}, false},
		// Burst 0 with a finite limit allows nothing.
		{"burst 0", 10, 0, 1, []bool{false, false}, false},
		{"n > burst", 10, 3, 4, []bool{false}, false},
		{"huge n", 10, 3, math.MaxInt, []bool{false}, false},
		{"n = 0 on an empty bucket", 0, 0, 0, []bool{true, true}, true},
		{"negative n", 10, 3, -1, []bool{false}, false},
		{"negative n, Inf", Inf, 3, -1, []bool{false}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBucket(tt.limit, tt.burst)
			for i, want := range tt.want {
				assert.Equal(t, want, b.AllowNAt(t0, tt.n), "call %d", i+1)
			}
			assert.Equal(t, tt.later, b.AllowNAt(t0.Add(100*365*24*time.Hour), tt.n), "100 years later")
		})
	}
}

func TestZeroBucketRejectsEverything(t *testing.T) {
	var b Bucket
	assert.False(t, b.Allow())
	assert.False(t, b.ReserveN(1).OK())
	assert.Equal(t, Limit(0), b.Limit())
	assert.Equal(t, 0, b.Burst())
	assert.Equal(t, 0.0, b.Tokens())
	b.SetLimit(10)
	b.SetBurst(1)
	assert.InDelta(t, 0, b.Tokens(), 0.01, "a zero bucket starts empty")
	assert.True(t, b.AllowNAt(time.Now().Add(time.Second), 1))
}

func TestAllowZeroChangesNothing(t *testing.T) {
	b := NewBucket(10, 2)
	require.True(t, b.AllowNAt(t0, 1))
	before := b.TokensAt(t0)
	for range 100 {
		require.True(t, b.AllowNAt(t0, 0))
		require.True(t, b.ReserveNAt(t0, 0).OK())
	}
	assert.Equal(t, before, b.TokensAt(t0))
	assert.True(t, b.AllowNAt(t0, 1), "the second burst token is still there")
}

// #34861 (rounding) and #46579 (float drift): over a long run the bucket
// grants exactly limit·T + burst, never more, also for limits whose interval
// is not a whole number of nanoseconds.
func TestLongRunGrantsExactlyTheLimitWithoutDrift(t *testing.T) {
	tests := []struct {
		limit Limit
		burst int
		step  time.Duration
		span  time.Duration
	}{
		{3, 2, time.Millisecond, 1000 * time.Second},
		{100, 10, 100 * time.Microsecond, 100 * time.Second},
		{Every(7 * time.Millisecond), 2, time.Millisecond, 700 * time.Second},
		{0.1, 1, 10 * time.Millisecond, 10_000 * time.Second},
	}
	for _, tt := range tests {
		b := NewBucket(tt.limit, tt.burst)
		got := 0
		for d := time.Duration(0); d < tt.span; d += tt.step {
			for b.AllowNAt(at(d), 1) {
				got++
			}
		}
		ideal := float64(tt.limit)*tt.span.Seconds() + float64(tt.burst)
		assert.LessOrEqual(t, float64(got), ideal, "limit %v: never more than limit·T + burst", tt.limit)
		assert.GreaterOrEqual(t, float64(got), ideal-1, "limit %v: no drift below the limit", tt.limit)
	}
}

// #46579: one event per hour, the clock exactly an hour later.
func TestTinyLimitRefillsExactlyOnTime(t *testing.T) {
	b := NewBucket(Limit(1.0/3600), 1)
	require.True(t, b.AllowNAt(t0, 1))
	assert.False(t, b.AllowNAt(at(time.Hour-time.Nanosecond), 1))
	assert.True(t, b.AllowNAt(at(time.Hour), 1))
}

// #71154: durations at tiny limits must not overflow into negative delays
// that would allow everything.
func TestTinyLimitsNeverOverflow(t *testing.T) {
	for _, limit := range []Limit{1e-300, Limit(math.SmallestNonzeroFloat64), 1e-12, Every(math.MaxInt64)} {
		b := NewBucket(limit, 1)
		require.True(t, b.AllowNAt(t0, 1), "limit %v: the burst token", limit)
		for _, d := range []time.Duration{0, time.Hour, 100 * 365 * 24 * time.Hour, math.MaxInt64} {
			assert.False(t, b.AllowNAt(t0.Add(d), 1), "limit %v, %v later", limit, d)
		}
		r := b.ReserveNAt(t0, 1)
		if r.OK() {
			assert.Positive(t, r.DelayFrom(t0))
		} else {
			assert.Equal(t, InfDuration, r.DelayFrom(t0))
		}
		assert.GreaterOrEqual(t, b.TokensAt(t0), 0.0)
	}
}

func TestHugeLimitsAndBurstsNeverOverflow(t *testing.T) {
	b := NewBucket(1e300, math.MaxInt)
	assert.Equal(t, 1000, allowed(b, t0, 1000))
	assert.True(t, b.AllowNAt(t0, 1<<40))

	b = NewBucket(100, math.MaxInt)
	assert.True(t, b.AllowNAt(t0, 1<<30))
	assert.False(t, b.AllowNAt(t0, math.MaxInt))
	r := b.ReserveNAt(t0, math.MaxInt)
	assert.False(t, r.OK(), "a reservation centuries away is never")
}

func TestTokens(t *testing.T) {
	b := NewBucket(10, 4)
	assert.Equal(t, 4.0, b.TokensAt(t0), "starts full")
	require.True(t, b.AllowNAt(t0, 3))
	assert.Equal(t, 1.0, b.TokensAt(t0))
	assert.InDelta(t, 1.5, b.TokensAt(at(50*time.Millisecond)), 1e-9)
	assert.Equal(t, 4.0, b.TokensAt(at(time.Hour)), "capped at burst")

	r := b.ReserveNAt(t0, 4)
	require.True(t, r.OK())
	assert.Equal(t, 0.0, b.TokensAt(t0), "never negative while tokens are owed")
	assert.Equal(t, 0.0, b.TokensAt(at(200*time.Millisecond)))
	assert.InDelta(t, 1, b.TokensAt(at(400*time.Millisecond)), 1e-9)

	assert.True(t, math.IsInf(NewBucket(Inf, 0).TokensAt(t0), 1))
	assert.Equal(t, 3.0, NewBucket(0, 3).TokensAt(t0))
}

func TestReserveSetsTokensAsideInArrivalOrder(t *testing.T) {
	b := NewBucket(10, 2)
	require.True(t, b.AllowNAt(t0, 2))

	r1 := b.ReserveNAt(t0, 1)
	r2 := b.ReserveNAt(t0, 2)
	r3 := b.ReserveNAt(t0, 1)
	require.True(t, r1.OK() && r2.OK() && r3.OK())
	assert.Equal(t, 100*time.Millisecond, r1.DelayFrom(t0))
	assert.Equal(t, 300*time.Millisecond, r2.DelayFrom(t0))
	assert.Equal(t, 400*time.Millisecond, r3.DelayFrom(t0))
	assert.Equal(t, 150*time.Millisecond, r2.DelayFrom(at(150*time.Millisecond)))
	assert.Equal(t, time.Duration(0), r1.DelayFrom(at(time.Second)))

	// Allow cannot take tokens set aside for the reservations.
	for d := time.Duration(0); d <= 400*time.Millisecond; d += 10 * time.Millisecond {
		assert.False(t, b.AllowNAt(at(d), 1), "at %v", d)
	}
	assert.True(t, b.AllowNAt(at(500*time.Millisecond), 1))
}

func TestReserveNotOK(t *testing.T) {
	tests := []struct {
		name  string
		limit Limit
		burst int
		n     int
	}{
		{"n > burst", 10, 2, 3},
		{"negative n", 10, 2, -1},
		{"limit 0 and too few tokens (#47221)", 0, 2, 3},
		{"burst 0", 10, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBucket(tt.limit, tt.burst)
			r := b.ReserveNAt(t0, tt.n)
			assert.False(t, r.OK())
			assert.Equal(t, InfDuration, r.DelayFrom(t0))
			r.CancelAt(t0) // no-op
			assert.Equal(t, float64(tt.burst), b.TokensAt(t0), "took nothing")
		})
	}
	// Limit 0 with enough tokens: OK at once, then not OK, never an
	// unlimited series of reservations (#47221).
	b := NewBucket(0, 2)
	assert.True(t, b.ReserveNAt(t0, 2).OK())
	assert.False(t, b.ReserveNAt(at(time.Hour), 1).OK())
}

// #69419: Cancel gives back exactly the tokens no later reservation
// depends on.
func TestCancelRefundsOnlyWhatNoLaterReservationDependsOn(t *testing.T) {
	t.Run("last reservation: full refund", func(t *testing.T) {
		b := NewBucket(10, 1)
		require.True(t, b.AllowNAt(t0, 1))
		r1 := b.ReserveNAt(t0, 1)
		r2 := b.ReserveNAt(t0, 1)
		require.Equal(t, 200*time.Millisecond, r2.DelayFrom(t0))
		r2.CancelAt(at(50 * time.Millisecond))
		r3 := b.ReserveNAt(at(50*time.Millisecond), 1)
		assert.Equal(t, 150*time.Millisecond, r3.DelayFrom(at(50*time.Millisecond)), "r3 takes r2's slot")
		assert.Equal(t, 100*time.Millisecond, r1.DelayFrom(t0), "r1 unchanged")
	})
	t.Run("a later reservation depends on it: its slot stays taken", func(t *testing.T) {
		b := NewBucket(10, 1)
		require.True(t, b.AllowNAt(t0, 1))
		r1 := b.ReserveNAt(t0, 1)
		r2 := b.ReserveNAt(t0, 1)
		r1.CancelAt(t0)
		assert.Equal(t, 200*time.Millisecond, r2.DelayFrom(t0), "a reservation's time is a promise")
		r3 := b.ReserveNAt(t0, 1)
		assert.Equal(t, 300*time.Millisecond, r3.DelayFrom(t0), "FIFO: behind r2")
		assert.False(t, b.AllowNAt(at(150*time.Millisecond), 1))
	})
	t.Run("middle of a burst bucket: later grants move up as far as their promises allow", func(t *testing.T) {
		b := NewBucket(10, 3)
		require.True(t, b.AllowNAt(t0, 3))
		r1 := b.ReserveNAt(t0, 2) // 200ms
		r2 := b.ReserveNAt(t0, 1) // 300ms
		r1.CancelAt(t0)
		assert.Equal(t, 300*time.Millisecond, r2.DelayFrom(t0))
		// The bucket refills from 0 at t0: by 300ms r2 took 1 of 3, so 2 are left.
		assert.Equal(t, 2, allowed(b, at(300*time.Millisecond), 5))
	})
	t.Run("after its time: nothing", func(t *testing.T) {
		b := NewBucket(10, 1)
		r := b.ReserveNAt(t0, 1)
		r.CancelAt(at(time.Millisecond))
		assert.False(t, b.AllowNAt(at(time.Millisecond), 1), "the holder may have acted")
	})
	t.Run("at its time: refunded", func(t *testing.T) {
		b := NewBucket(10, 1)
		r := b.ReserveNAt(t0, 1)
		r.CancelAt(t0)
		assert.True(t, b.AllowNAt(t0, 1))
	})
	t.Run("idempotent", func(t *testing.T) {
		b := NewBucket(10, 2)
		require.True(t, b.AllowNAt(t0, 1))
		r := b.ReserveNAt(t0, 1)
		r.CancelAt(t0)
		r.CancelAt(t0)
		assert.Equal(t, 1, allowed(b, t0, 3), "refunded once, not twice")
	})
}

// SetLimit keeps the level of the bucket, not the time it takes to refill
// (as x/time/rate does).
func TestSetLimitKeepsTheTokens(t *testing.T) {
	b := NewBucket(10, 10)
	require.True(t, b.AllowNAt(t0, 6))
	b.SetLimitAt(t0, 100)
	assert.InDelta(t, 4, b.TokensAt(t0), 1e-9)
	assert.InDelta(t, 5, b.TokensAt(at(10*time.Millisecond)), 1e-9, "refills at the new rate")
	assert.Equal(t, Limit(100), b.Limit())

	b.SetLimitAt(at(10*time.Millisecond), 0)
	assert.InDelta(t, 5, b.TokensAt(at(time.Hour)), 1e-9, "limit 0 keeps what is left, forever (#68541)")
	assert.Equal(t, 5, allowed(b, at(time.Hour), 10))

	b.SetLimitAt(at(time.Hour), 1)
	assert.Equal(t, 0.0, b.TokensAt(at(time.Hour)))
	assert.Equal(t, 1, allowed(b, at(time.Hour+time.Second), 3))

	b.SetLimitAt(at(time.Hour+time.Second), Inf)
	assert.Equal(t, 100, allowed(b, at(time.Hour+time.Second), 100))
	b.SetLimitAt(at(time.Hour+time.Second), 10)
	assert.Equal(t, 10, allowed(b, at(time.Hour+time.Second), 100), "from Inf the bucket is full")
}

func TestSetBurstCapsTheTokens(t *testing.T) {
	b := NewBucket(10, 10)
	b.SetBurstAt(t0, 3)
	assert.Equal(t, 3.0, b.TokensAt(t0))
	assert.Equal(t, 3, b.Burst())
	b.SetBurstAt(t0, 20)
	assert.Equal(t, 3.0, b.TokensAt(t0), "a larger burst adds room, not tokens")
	assert.Equal(t, 20.0, b.TokensAt(at(2*time.Second)))
	b.SetBurstAt(at(2*time.Second), 0)
	assert.False(t, b.AllowNAt(at(time.Hour), 1), "burst 0 allows nothing")
}

// A fill raises the level to what a quota says may go at once, with the
// limit and burst set together, and releases queued waiters with it; it
// never lowers the level, and a pause holds it.
func TestSetFillRaisesTheLevelAndReleasesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(Inf, 1)
		b.SetLimit(1) // paced with the one token an unlimited bucket leaves at its old burst
		require.True(t, b.Allow())
		var done atomic.Int32
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if b.Wait(context.Background()) == nil {
					done.Add(1)
				}
			})
		}
		synctest.Wait()
		assert.Zero(t, done.Load(), "queued at 1 a second")
		b.setFillAt(clockNow(), keepLimit, 10, 5)
		synctest.Wait()
		assert.Equal(t, int32(3), done.Load(), "the fill released the queue at once")
		assert.InDelta(t, 2.0, b.Tokens(), 1e-9, "what the waiters left of the 5")
		wg.Wait()

		b.setFillAt(clockNow(), keepLimit, keepBurst, 1)
		assert.InDelta(t, 2.0, b.Tokens(), 1e-9, "a fill below the level changes nothing")

		b.PauseUntil(time.Now().Add(time.Second))
		b.setFillAt(clockNow(), keepLimit, keepBurst, 8)
		assert.Zero(t, b.Tokens(), "a pause holds the bucket, fill or not")
	})
}

func TestPauseUntil(t *testing.T) {
	b := NewBucket(10, 5)
	now := clockNow()
	b.pauseAt(now, now+int64(time.Second))
	for _, d := range []time.Duration{0, 500 * time.Millisecond, time.Second} {
		assert.False(t, b.allowAt(now+int64(d), 1), "paused, %v", d)
		assert.Equal(t, 0.0, b.tokensAt(now+int64(d)))
	}
	// Empty at the end of the pause: the first token comes one interval later.
	assert.False(t, b.allowAt(now+int64(time.Second+100*time.Millisecond)-1, 1))
	assert.True(t, b.allowAt(now+int64(time.Second+100*time.Millisecond), 1))

	// An earlier pause does not shorten a later one; a past one does nothing.
	b.pauseAt(now, now+int64(10*time.Second))
	b.pauseAt(now, now+int64(5*time.Second))
	b.pauseAt(now+int64(20*time.Second), now+int64(20*time.Second))
	assert.False(t, b.allowAt(now+int64(10*time.Second), 1))
	assert.True(t, b.allowAt(now+int64(10*time.Second+100*time.Millisecond), 1))

	inf := NewBucket(Inf, 0)
	inf.pauseAt(now, now+int64(time.Second))
	assert.False(t, inf.allowAt(now+int64(time.Second)-1, 1))
	assert.Equal(t, 0.0, inf.tokensAt(now))
	assert.True(t, inf.allowAt(now+int64(time.Second), 1000), "Inf releases everything at the end")
}

func TestPauseSurvivesALimitChange(t *testing.T) {
	b := NewBucket(10, 5)
	now := clockNow()
	b.pauseAt(now, now+int64(time.Second))
	b.setAt(now, 100, keepBurst)
	assert.False(t, b.allowAt(now+int64(time.Second), 1))
	assert.True(t, b.allowAt(now+int64(time.Second+10*time.Millisecond), 1), "empty at the pause's end, refilled at the new rate")
}

func TestNextAt(t *testing.T) {
	b := NewBucket(Every(time.Minute), 2)
	before := time.Now()
	assert.WithinDuration(t, before, b.nextAt(2), time.Second, "available now")
	require.True(t, b.AllowN(2))
	assert.WithinDuration(t, before.Add(time.Minute), b.nextAt(1), time.Second)
	assert.WithinDuration(t, before.Add(2*time.Minute), b.nextAt(2), time.Second)
	assert.InDelta(t, 0, b.Tokens(), 0.01, "nextAt takes nothing")
	assert.Greater(t, time.Until(b.nextAt(3)), 70*365*24*time.Hour, "n > burst: never")
	assert.Greater(t, time.Until(NewBucket(0, 1).nextAt(2)), 70*365*24*time.Hour)
	assert.WithinDuration(t, time.Now(), b.nextAt(0), time.Second)
}

// After a faster SetLimit, a reservation made earlier keeps its (later)
// time, and nothing that arrives after it is granted before it.
func TestReservationsKeepTheirOrderAcrossASpeedUp(t *testing.T) {
	b := NewBucket(1, 10)
	require.True(t, b.AllowNAt(t0, 10))
	r := b.ReserveNAt(t0, 1)
	require.Equal(t, time.Second, r.DelayFrom(t0))
	b.SetLimitAt(t0, 100)
	assert.Equal(t, time.Second, r.DelayFrom(t0), "a reservation's time is a promise")
	assert.False(t, b.AllowNAt(at(500*time.Millisecond), 1), "nothing jumps ahead of it")
	assert.False(t, b.AllowNAt(at(time.Second-time.Nanosecond), 1))
	r2 := b.ReserveNAt(t0, 1)
	assert.Equal(t, time.Second, r2.DelayFrom(t0), "the next one comes no earlier")
	// At 1s the bucket, refilling at 100/s since t0, is full again: r, r2
	// and 8 more fit, then the pace is the new limit.
	assert.Equal(t, 8, allowed(b, at(time.Second), 20))
	r3 := b.ReserveNAt(at(time.Second), 1)
	assert.Equal(t, 10*time.Millisecond, r3.DelayFrom(at(time.Second)))
}

// With the clock standing still, nothing refills: however goroutines race
// Allow against SetLimit and SetBurst (each of which swaps the bucket's
// state under the fast path's feet), the grants never exceed the
// tokens the bucket held. Run with -race.
func TestConcurrentAllowAndParameterChangesNeverGrantMoreThanTheLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const burst = 500
		b := NewBucket(1000, burst)
		var granted atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 2000 {
					if b.Allow() {
						granted.Add(1)
					}
					if b.AllowN(3) {
						granted.Add(3)
					}
				}
			})
		}
		wg.Go(func() {
			for i := range 300 {
				b.SetLimit(Limit(1 + i%7*100))
				b.SetBurst(burst + i%3)
			}
		})
		wg.Wait()
		assert.LessOrEqual(t, granted.Load(), int64(burst))
		assert.InDelta(t, burst, float64(granted.Load())+b.Tokens(), 0.01,
			"granted + left = what the bucket held")
	})
}

// A fast path that meets a state being replaced waits for the re-plan and
// then uses the new state.
func TestFastPathWaitsOutAReplan(t *testing.T) {
	b := NewBucket(10, 1)
	b.mu.Lock()
	s := b.st.Load()
	tat := s.tat.Swap(sealed)
	done := make(chan bool)
	go func() { done <- b.Allow() }()
	for range 10 {
		runtime.Gosched()
	}
	ns := &state{params: s.params, floor: noFloor}
	ns.rec.Store(noFloor)
	ns.tat.Store(tat)
	b.st.Store(ns)
	b.mu.Unlock()
	assert.True(t, <-done)
	assert.False(t, b.Allow(), "the one token went to that call")
}

// SetLimitAt and SetBurstAt with a time earlier than a grant already made
// (a stale time) carry the tokens that grant took over to the new setting:
// reading the level at the stale time, where the bucket was already empty,
// would forgive them.
func TestParameterChangeAtAStaleTimeForgivesNoTokens(t *testing.T) {
	b := NewBucket(10, 2)
	require.True(t, b.AllowNAt(t0, 2))
	b.SetLimitAt(at(-time.Hour), 1000)
	assert.Equal(t, 0, allowed(b, t0, 3), "the burst was spent at t0")
	assert.Equal(t, 2, allowed(b, at(2*time.Millisecond), 3), "then refilled at the new limit")

	b = NewBucket(1000, 3)
	require.True(t, b.AllowNAt(t0, 3))
	b.SetBurstAt(at(-time.Hour), 10)
	assert.Equal(t, 0, allowed(b, t0, 11))
	assert.InDelta(t, 7, b.TokensAt(at(7*time.Millisecond)), 1e-9)
}
