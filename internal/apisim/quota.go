package apisim

import (
	"math"
	"time"
)

// quota counts units (requests or tokens) against a limit per window. It is a
// pure core: time is an offset from the server's start, passed in and never
// decreasing, so the arithmetic is monotonic and testable without a clock.
// Every method first advances the quota to t.
type quota interface {
	// remaining is what can be taken at t (≥ 0; fractional for some algorithms).
	remaining(t time.Duration) float64
	// take charges n units at t; the caller has checked fits.
	take(t time.Duration, n float64)
	// fits reports whether n units can be taken at t.
	fits(t time.Duration, n float64) bool
	// availableAt is the earliest offset ≥ t at which n units fit assuming no
	// other traffic; ok is false when n can never fit (n above the limit).
	availableAt(t time.Duration, n float64) (at time.Duration, ok bool)
	// resetAt is the instant the headers report as the reset (see Algorithm).
	resetAt(t time.Duration) time.Duration
	// limit is the limit in force at t.
	limit(t time.Duration) float64
	// setLimit changes the limit and returns the offset from which it counts.
	setLimit(t time.Duration, limit float64) (effective time.Duration)
}

// epsilon absorbs float rounding in admission checks (counts are whole or
// derived from whole numbers; an error this small is never a real unit).
const epsilon = 1e-9

func newQuota(alg Algorithm, window time.Duration, limit, burst float64) quota {
	switch alg {
	case SlidingWindow:
		return &slidingWindow{window: window, lim: limit}
	case TokenBucket:
		tb := &tokenBucket{window: window, lim: limit, burst: burst, burstFromLimit: burst == 0}
		if tb.burstFromLimit {
			tb.burst = limit
		}
		tb.tokens = tb.burst
		return tb
	default:
		return &fixedWindow{window: window, lim: limit, next: limit}
	}
}

// fixedWindow admits at most lim units in each window [k·window, (k+1)·window).
// A new limit applies from the next window, as a real server that reads its
// quota when it opens a window would.
type fixedWindow struct {
	window    time.Duration
	lim, next float64 // next: the limit of the coming windows
	idx       int64
	used      float64
}

func (q *fixedWindow) advance(t time.Duration) {
	if i := int64(t / q.window); i != q.idx {
		q.idx, q.used, q.lim = i, 0, q.next
	}
}

func (q *fixedWindow) remaining(t time.Duration) float64 {
	q.advance(t)
	return math.Max(0, q.lim-q.used)
}

func (q *fixedWindow) fits(t time.Duration, n float64) bool {
	q.advance(t)
	return q.used+n <= q.lim+epsilon
}

func (q *fixedWindow) take(t time.Duration, n float64) { q.advance(t); q.used += n }

func (q *fixedWindow) availableAt(t time.Duration, n float64) (time.Duration, bool) {
	if q.fits(t, n) {
		return t, true
	}
	if n > q.next+epsilon {
		return 0, false
	}
	return q.end(), true
}

func (q *fixedWindow) end() time.Duration { return time.Duration(q.idx+1) * q.window }

func (q *fixedWindow) resetAt(t time.Duration) time.Duration { q.advance(t); return q.end() }

func (q *fixedWindow) limit(t time.Duration) float64 { q.advance(t); return q.lim }

func (q *fixedWindow) setLimit(t time.Duration, limit float64) time.Duration {
	q.advance(t)
	q.next = limit
	return q.end()
}

// slidingWindow is the sliding-window counter: the previous fixed window's
// count weighs in proportion to how much of it still overlaps the sliding
// window ending now. A new limit applies at once.
type slidingWindow struct {
	window    time.Duration
	lim       float64
	idx       int64
	prev, cur float64
}

func (q *slidingWindow) advance(t time.Duration) {
	i := int64(t / q.window)
	switch {
	case i == q.idx:
	case i == q.idx+1:
		q.prev, q.cur = q.cur, 0
	default:
		q.prev, q.cur = 0, 0
	}
	q.idx = i
}

// estimate is the weighted count of the sliding window ending at t.
func (q *slidingWindow) estimate(t time.Duration) float64 {
	q.advance(t)
	elapsed := float64(t-time.Duration(q.idx)*q.window) / float64(q.window)
	return q.prev*(1-elapsed) + q.cur
}

func (q *slidingWindow) remaining(t time.Duration) float64 {
	return math.Max(0, q.lim-q.estimate(t))
}

func (q *slidingWindow) fits(t time.Duration, n float64) bool {
	return q.estimate(t)+n <= q.lim+epsilon
}

func (q *slidingWindow) take(t time.Duration, n float64) { q.advance(t); q.cur += n }

func (q *slidingWindow) availableAt(t time.Duration, n float64) (time.Duration, bool) {
	if q.fits(t, n) {
		return t, true
	}
	if n > q.lim+epsilon {
		return 0, false
	}
	w := float64(q.window)
	start := time.Duration(q.idx) * q.window
	// Within the current window the estimate falls linearly as prev's weight shrinks.
	if budget := q.lim - n - q.cur; budget >= 0 && q.prev > 0 {
		return max(t, start+durationOf(w*(1-budget/q.prev))), true
	}
	// Otherwise wait for the next window, where cur becomes the shrinking prev.
	return start + q.window + durationOf(w*(1-(q.lim-n)/q.cur)), true
}

func (q *slidingWindow) resetAt(t time.Duration) time.Duration {
	q.advance(t)
	return time.Duration(q.idx+1) * q.window
}

func (q *slidingWindow) limit(time.Duration) float64 { return q.lim }

func (q *slidingWindow) setLimit(t time.Duration, limit float64) time.Duration {
	q.advance(t)
	q.lim = limit
	return t
}

// tokenBucket holds up to burst units and refills lim per window continuously.
// A new limit applies at once; when the capacity follows the limit (Burst 0)
// the bucket shrinks with it.
type tokenBucket struct {
	window         time.Duration
	lim, burst     float64
	burstFromLimit bool
	tokens         float64
	last           time.Duration
}

func (q *tokenBucket) perNano() float64 { return q.lim / float64(q.window) }

func (q *tokenBucket) advance(t time.Duration) {
	if t > q.last {
		q.tokens = math.Min(q.burst, q.tokens+float64(t-q.last)*q.perNano())
		q.last = t
	}
}

func (q *tokenBucket) remaining(t time.Duration) float64 { q.advance(t); return math.Max(0, q.tokens) }

func (q *tokenBucket) fits(t time.Duration, n float64) bool {
	q.advance(t)
	return n <= q.tokens+epsilon
}

func (q *tokenBucket) take(t time.Duration, n float64) { q.advance(t); q.tokens -= n }

func (q *tokenBucket) availableAt(t time.Duration, n float64) (time.Duration, bool) {
	if q.fits(t, n) {
		return t, true
	}
	if n > q.burst+epsilon {
		return 0, false
	}
	return t + durationOf((n-q.tokens)/q.perNano()), true
}

func (q *tokenBucket) resetAt(t time.Duration) time.Duration {
	q.advance(t)
	return t + durationOf((q.burst-q.tokens)/q.perNano())
}

func (q *tokenBucket) limit(time.Duration) float64 { return q.lim }

func (q *tokenBucket) setLimit(t time.Duration, limit float64) time.Duration {
	q.advance(t)
	q.lim = limit
	if q.burstFromLimit {
		q.burst = limit
		q.tokens = math.Min(q.tokens, q.burst)
	}
	return t
}
