package quota

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The ordering that collapsed scenario f: 25 requests of a fresh 600/min
// window all counted by the server, and the oldest response (Remaining 599)
// applied first, with none of the others counted as unseen. A quarter second
// later the server's figure is 28 below it after only 3 more admissions. Read
// as others' spending that is 96 units a second, ten times what the whole
// quota allows; extrapolated to the reset, it spent every later window.
func TestDriftFromASkewedBaselineIsBoundedByTheQuotasRate(t *testing.T) {
	epoch := t0
	w := New(Config{Name: "requests", Safety: 0.9, MaxDelay: time.Hour})
	reset := epoch.Add(time.Minute)
	q := func(rem float64) Report { return Report{Limit: 600, Remaining: rem, Reset: reset} }

	w.Observe(q(599), epoch, Seen{Admitted: 25, Horizon: 10 * time.Millisecond})
	now := epoch.Add(260 * time.Millisecond)
	w.Observe(q(571), now, Seen{Admitted: 28, Horizon: 10 * time.Millisecond})

	// Others can spend at most what a window leaves us: (600 − 3) / 60 s.
	require.Less(t, w.drift.rate, 0.0, "a fall beyond our own spending is others' spending")
	assert.GreaterOrEqual(t, w.drift.rate, -(600.0-3)/60, "others' spending rate, units per second")
}

// A consistent drift within the bound is kept as measured.
func TestDriftWithinTheQuotasRateIsKept(t *testing.T) {
	epoch := t0
	w := New(Config{Name: "requests", Safety: 0.9, MaxDelay: time.Hour})
	w.win.length, w.win.stated = time.Minute, true
	reset := epoch.Add(time.Minute)
	q := func(rem float64) Report { return Report{Limit: 600, Remaining: rem, Reset: reset} }

	w.Observe(q(600), epoch, Seen{Admitted: 0, Horizon: 10 * time.Millisecond})
	// 10 s later: we spent 50, others 30 (3 a second).
	w.Observe(q(520), epoch.Add(10*time.Second), Seen{Admitted: 50, Horizon: 10 * time.Millisecond})
	assert.InDelta(t, -3.0, w.drift.rate, 1e-9)
}

func TestMaxDrainIsTheLongRunRateLeftToOthers(t *testing.T) {
	w := New(Config{Name: "requests", Safety: 0.9, MaxDelay: time.Hour})
	w.size.limit, w.win.length = 600, time.Minute
	assert.InDelta(t, 590.0/60, w.maxDrain(time.Second, 10), 1e-9, "within a window: limit − ours per window")
	assert.InDelta(t, (1200.0-900)/120, w.maxDrain(2*time.Minute, 900), 1e-9, "over two windows")
	assert.Zero(t, w.maxDrain(time.Second, 700), "we spent the whole quota: nothing is left to others")
	w.win.length = 0
	assert.Equal(t, math.Inf(1), w.maxDrain(time.Second, 10), "no window, no reset: unbounded")
}

// A figure above the baseline less our spending is a refill only of a
// quota known to refill; of one that counts down it is an answer the
// server wrote before others of ours it had counted (R11, R33). Answers
// of one instant applied out of order read as a refill of 16 a second,
// which raised the budget past the next figure, and that read as others'
// spending (R35): a lone client paced a GitHub job as if shared.
func TestAQuotaThatCountsDownMeasuresNoRefill(t *testing.T) {
	for _, k := range []Kind{Unknown, Fixed, Sliding} {
		w := New(Config{Name: "requests", Safety: 0.9, MaxDelay: time.Hour})
		w.kind = k
		w.measureDrift(t0, 180, 100, 15, 10*time.Millisecond, false)
		w.measureDrift(t0.Add(time.Second), 190, 110, 15, 10*time.Millisecond, false)
		if k.refills() {
			assert.InDelta(t, 5.0, w.drift.rate, 1e-9, "%v: 20 above the baseline less ours, beyond the 15 in flight", k)
		} else {
			assert.Zero(t, w.drift.rate, "%v: a window that counts down does not refill", k)
		}
	}
}

// Fifty clients of one GitHub-style quota spend its window of an unstated
// hour in seconds. R34's bound, the long-run rate over the hour the reset
// is away (a third of a unit a second), is what the keep predicts to the
// reset; but between answers the budget falls as fast as others were
// measured to spend, else every client's last figure promised the same
// last units to all of them at once (R34, R37). Once the window's length
// is known the bound holds there too, and a route's quota that our other
// routes spend keeps it: their spending is ours, and waits on our callers.
func TestAWindowOfUnstatedLengthFallsByOthersMeasuredDrain(t *testing.T) {
	const bound = (1200.0 - 2) / 3600
	for _, c := range []struct {
		name   string
		mods   Mods
		length time.Duration
		fall   float64 // measured, beyond the bound
		falls  float64 // what the budget falls by, a second
	}{
		{name: "length unstated", fall: 58, falls: 58},
		{name: "length known", length: time.Hour, falls: bound},
		{name: "a route's, whose host's other routes spend it too", mods: Routed, falls: bound},
	} {
		w := New(Config{Name: "requests", Safety: 0.9, MaxDelay: time.Hour, Mods: c.mods})
		w.win.length = c.length
		reset := t0.Add(time.Hour)
		q := func(rem float64) Report { return Report{Limit: 1200, Remaining: rem, Reset: reset} }
		w.Observe(q(1200), t0, Seen{Horizon: 10 * time.Millisecond})
		now := t0.Add(time.Second)
		w.Observe(q(1140), now, Seen{Admitted: 2, Horizon: 10 * time.Millisecond}) // others: 58 in a second

		assert.InDelta(t, -bound, w.drift.rate, 1e-3, "%s: the prediction to the reset is bounded (R34)", c.name)
		assert.InDelta(t, c.fall, w.drift.fall, 1e-9, "%s: the drain measured beyond the bound", c.name)
		before := w.Units()
		w.Advance(now.Add(500*time.Millisecond), 0, 1)
		assert.InDelta(t, c.falls/2, before-w.Units(), 0.01, "%s: half a second later", c.name)
	}
}

// A drift no response confirmed halves every window (R36), and a window
// whose length is unstated is at least its first answer's time to reset,
// after its roll too: a client that waited out a spent window must enter
// the next still knowing that others spend, not having halved their drain
// every second of the wait.
func TestADriftAgesByTheWindowsLowerBoundAfterItsRoll(t *testing.T) {
	w := New(Config{Name: "requests", Safety: 0.9, MaxDelay: time.Hour})
	reset := t0.Add(time.Minute)
	q := func(rem float64) Report { return Report{Limit: 1200, Remaining: rem, Reset: reset} }
	w.Observe(q(1200), t0, Seen{Horizon: 10 * time.Millisecond})
	w.Observe(q(600), t0.Add(10*time.Second), Seen{Admitted: 10, Horizon: 10 * time.Millisecond})
	require.Less(t, w.drift.rate, -1.0, "others spend")
	drift := w.drift.rate

	w.Advance(reset.Add(RollGuard), 0, 1) // the roll: the reset is no longer known
	w.Advance(reset.Add(20*time.Second), 0, 1)
	assert.Equal(t, time.Minute, w.length(), "the first answer's time to reset, after the roll")
	assert.InDelta(t, drift/2, w.drift.rate, 1e-9, "70 s unconfirmed: halved once, not once a second")
}
