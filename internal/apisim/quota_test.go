package apisim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// takeAll takes single units at t until the quota refuses, returning how many it took.
func takeAll(q quota, t time.Duration) int {
	n := 0
	for q.fits(t, 1) {
		q.take(t, 1)
		n++
	}
	return n
}

func TestFixedWindowCountsPerWindowAndRollsOverAtTheBoundary(t *testing.T) {
	q := newQuota(FixedWindow, 10*time.Second, 3, 0)
	require.Equal(t, 3, takeAll(q, 2*time.Second))
	at, ok := q.availableAt(2*time.Second, 1)
	require.True(t, ok)
	assert.Equal(t, 10*time.Second, at, "next request fits when the window ends")
	assert.Equal(t, 10*time.Second, q.resetAt(9*time.Second))
	assert.False(t, q.fits(10*time.Second-1, 1), "still the old window one nanosecond before the boundary")
	assert.Equal(t, 3.0, q.remaining(10*time.Second))
	assert.Equal(t, 20*time.Second, q.resetAt(10*time.Second))
	_, ok = q.availableAt(10*time.Second, 4)
	assert.False(t, ok, "more than the limit never fits")
}

func TestFixedWindowSkippedWindowsStartFresh(t *testing.T) {
	q := newQuota(FixedWindow, time.Second, 2, 0)
	takeAll(q, 0)
	assert.Equal(t, 2.0, q.remaining(5500*time.Millisecond))
	assert.Equal(t, 6*time.Second, q.resetAt(5500*time.Millisecond))
}

func TestFixedWindowSetLimitTakesEffectInTheNextWindow(t *testing.T) {
	q := newQuota(FixedWindow, 10*time.Second, 4, 0)
	q.take(time.Second, 1)
	assert.Equal(t, 10*time.Second, q.setLimit(5*time.Second, 2), "effective from the next window")
	assert.Equal(t, 4.0, q.limit(9*time.Second))
	assert.Equal(t, 3, takeAll(q, 9*time.Second), "the current window keeps its quota")
	assert.Equal(t, 2.0, q.limit(10*time.Second))
	assert.Equal(t, 2, takeAll(q, 10*time.Second))
	_, ok := q.availableAt(10*time.Second, 3)
	assert.False(t, ok)
}

func TestSlidingWindowWeighsThePreviousWindowByItsOverlap(t *testing.T) {
	const w = 10 * time.Second
	q := newQuota(SlidingWindow, w, 10, 0)
	require.Equal(t, 10, takeAll(q, 0))
	// Halfway through the next window the previous 10 weigh 5.
	assert.InDelta(t, 5.0, q.remaining(15*time.Second), 1e-9)
	assert.Equal(t, 20*time.Second, q.resetAt(15*time.Second), "reset is the current window's end")
	// Two windows later nothing counts.
	assert.InDelta(t, 10.0, q.remaining(25*time.Second), 1e-9)
}

func TestSlidingWindowAvailableAtIsTheExactInstantTheRequestFits(t *testing.T) {
	const w = 10 * time.Second
	q := newQuota(SlidingWindow, w, 10, 0)
	require.Equal(t, 10, takeAll(q, 0))

	// Still in the first window: wait for the next, where 10·(1-e/w) ≤ 9 at e = 1s.
	at, ok := q.availableAt(5*time.Second, 1)
	require.True(t, ok)
	assert.Equal(t, 11*time.Second, at)
	assert.False(t, q.fits(11*time.Second-time.Millisecond, 1))
	require.True(t, q.fits(11*time.Second, 1))
	q.take(11*time.Second, 1)

	// Now prev=10, cur=1: 10·(1-e/w) + 1 ≤ 9 at e = 2s.
	at, ok = q.availableAt(11*time.Second, 1)
	require.True(t, ok)
	assert.Equal(t, 12*time.Second, at)
	assert.True(t, q.fits(at, 1))

	_, ok = q.availableAt(11*time.Second, 11)
	assert.False(t, ok)
}

func TestSlidingWindowSetLimitTakesEffectAtOnce(t *testing.T) {
	q := newQuota(SlidingWindow, time.Minute, 10, 0)
	q.take(0, 4)
	assert.Equal(t, time.Second, q.setLimit(time.Second, 5))
	assert.InDelta(t, 1.0, q.remaining(time.Second), 1e-9)
}

func TestTokenBucketStartsFullAndRefillsContinuously(t *testing.T) {
	// 10 per 10 s = 1/s, capacity 5.
	q := newQuota(TokenBucket, 10*time.Second, 10, 5)
	require.Equal(t, 5, takeAll(q, 0))
	at, ok := q.availableAt(0, 1)
	require.True(t, ok)
	assert.Equal(t, time.Second, at)
	assert.Equal(t, 5*time.Second, q.resetAt(0), "full again after 5 s")
	assert.InDelta(t, 2.5, q.remaining(2500*time.Millisecond), 1e-9)
	assert.InDelta(t, 5.0, q.remaining(time.Hour), 1e-9, "never above capacity")
	_, ok = q.availableAt(time.Hour, 6)
	assert.False(t, ok, "more than the capacity never fits")
}

func TestTokenBucketSetLimitChangesRateAtOnceAndShrinksADefaultCapacity(t *testing.T) {
	q := newQuota(TokenBucket, 10*time.Second, 10, 0) // capacity follows the limit
	q.take(0, 2)
	assert.Equal(t, time.Duration(0), q.setLimit(0, 4))
	assert.InDelta(t, 4.0, q.remaining(0), 1e-9, "8 tokens clamp to the new capacity 4")
	require.Equal(t, 4, takeAll(q, 0))
	at, _ := q.availableAt(0, 1)
	assert.Equal(t, 2500*time.Millisecond, at, "refill is now 4 per 10 s")

	fixed := newQuota(TokenBucket, 10*time.Second, 10, 20)
	fixed.setLimit(0, 4)
	assert.InDelta(t, 20.0, fixed.remaining(0), 1e-9, "an explicit Burst stays")
}
