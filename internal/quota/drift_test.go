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
