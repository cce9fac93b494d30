package quota

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A reset read as the time until a smooth quota is full again, case by case
// (see readToFull): each case is a sequence of (seconds since t0, Remaining,
// seconds to the stated reset) on a 40,000 quota, and whether it then reads
// to full, at what rate.
func TestResetReadsAsTimeToFull(t *testing.T) {
	type resp struct{ at, rem, left float64 }
	for _, tc := range []struct {
		name   string
		why    string
		resps  []resp
		toFull bool
		rate   float64 // the drift, when toFull
	}{{
		name:   "token bucket",
		why:    "every moved reset falls where (Limit − Remaining) at the last rate puts it",
		resps:  []resp{{0, 20000, 30}, {2, 10000, 45}, {4, 25000, 22.5}, {6, 30000, 15}},
		toFull: true, rate: 10000.0 / 15,
	}, {
		name: "one fit",
		why: "one moved reset may fit by chance: two in a row are asked for (unless the " +
			"spending since moved it as far, at the refill both answers state: see " +
			"TestResetMovingInStepWithSpendingIsABucket; here nothing was spent)",
		resps:  []resp{{0, 20000, 30}, {2, 20000, 32}},
		toFull: false,
	}, {
		name: "sliding window restated in seconds",
		why:  "its reset stays put while time passes, so the time to it shrinks at the same deficit",
		// The next step at 10 s, stated as "in N s"; Remaining steady.
		resps:  []resp{{0, 5000, 10}, {1, 5000, 9}, {2, 5000, 8}, {3, 5000, 7}, {4, 5000, 6}},
		toFull: false,
	}, {
		name:   "undone",
		why:    "a reset that stops fitting undoes the reading",
		resps:  []resp{{0, 20000, 30}, {2, 10000, 45}, {4, 25000, 22.5}, {6, 30000, 15}, {8, 30000, 40}},
		toFull: false,
	}, {
		name:   "rounded near the reset",
		why:    "a reset within resets' rounding says nothing of the rate: the last one stands",
		resps:  []resp{{0, 20000, 30}, {2, 10000, 45}, {4, 25000, 22.5}, {30, 39999, 1}},
		toFull: true, rate: 15000.0 / 22.5,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			w := New(Config{Name: "tokens", Tokens: true, Safety: 0.9, MaxDelay: time.Hour})
			w.kind = Sliding
			for _, r := range tc.resps {
				now := t0.Add(time.Duration(r.at * float64(time.Second)))
				w.Observe(Report{Limit: 40000, Remaining: r.rem,
					Reset: now.Add(time.Duration(r.left * float64(time.Second)))}, now, Seen{Horizon: time.Millisecond})
			}
			assert.Equal(t, tc.toFull, (w.kind == ToFull), tc.why)
			if tc.toFull {
				assert.InDelta(t, tc.rate, w.drift.rate, 1e-6, "the stated refill: %s", tc.why)
			}
		})
	}
}

// A refill the responses state is the quota's own: it is not aged away
// when nothing confirms it, as others' measured spending is.
func TestStatedRefillDoesNotAge(t *testing.T) {
	w := New(Config{Name: "tokens", Tokens: true, Safety: 0.9, MaxDelay: time.Hour})
	w.kind, w.drift.rate, w.drift.measured, w.win.length = ToFull, 666, t0, 4*time.Second
	w.ageDrift(t0.Add(time.Minute))
	assert.InDelta(t, 666.0, w.drift.rate, 1e-9)
	w.kind = Sliding
	w.ageDrift(t0.Add(time.Minute))
	assert.Less(t, w.drift.rate, 1.0, "a measured drift halves each window")
}

// A reset that moves later before the old one passed is a new window or a
// bucket's time to full; case by case (see fillsInStep), on a request
// quota of 60 whose kind nothing has told yet: (seconds since t0,
// Remaining, seconds to the stated reset).
func TestResetMovingInStepWithSpendingIsABucket(t *testing.T) {
	type resp struct{ at, rem, left float64 }
	for _, tc := range []struct {
		name   string
		why    string
		resps  []resp
		toFull bool // read so after the last response (fillsInStep's verdict on it)
	}{{
		name: "bucket of 60 a minute",
		why: "2 spent moved the reset 2 s later, as a refill of 1 a second, which (60 − 57) " +
			"over 3 s also states: its time to full, read from the second answer (not after " +
			"two moves beyond the resets' rounding, while its contents were spread)",
		resps:  []resp{{0, 59, 1}, {0.005, 57, 3}},
		toFull: true,
	}, {
		name: "bucket of 60 a minute, one unit spent",
		why: "1 spent moved the reset a second later (a round trip after the first answer), as " +
			"a refill of 1 a second, which (60 − 58) over 1.96 s also states: one unit is " +
			"enough where both refills and the move agree (read as a new window, a job of 39 " +
			"from 4 workers was spread to 1.9× unpaced in 4 runs of 100)",
		resps:  []resp{{0, 59, 1}, {0.05, 58, 1.96}},
		toFull: true,
	}, {
		name: "fixed window restated a second later, one unit spent",
		why: "1 spent and the reset a second later: at the refill (60 − 49) over 29 s " +
			"implies, 1 would have moved it 2.7 s",
		resps:  []resp{{0, 50, 30}, {1, 49, 30}},
		toFull: false,
	}, {
		name: "fixed window restated a second later",
		why: "10 spent and the reset a second later (a delta rounded the other way): at the " +
			"refill (60 − 40) over 29 s implies, 10 would have moved it 14.5 s",
		resps:  []resp{{0, 50, 30}, {1, 40, 30}},
		toFull: false,
	}, {
		name: "a window's first answer, then its reset restated later",
		why: "the deficit of a window just begun is over its whole length: 2 spent at that " +
			"refill would move the reset 40 s, not 1",
		resps:  []resp{{0, 59, 59}, {0.5, 57, 59.5}},
		toFull: false,
	}, {
		name: "a fixed window's next, met before the old reset as the clocks have it",
		why: "9 spent since the old window's first answer and its next window's 10 fit a move " +
			"of a minute at the refill the new answer states (10 over 60 s), but the first " +
			"answer stated 1 over 60 s: two refills ten times apart are no bucket's",
		resps:  []resp{{0, 59, 60}, {59.997, 50, 60}},
		toFull: false,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			w := New(Config{Name: "requests", Safety: 0.9, MaxDelay: time.Hour})
			for i, r := range tc.resps {
				now := t0.Add(time.Duration(r.at * float64(time.Second)))
				q := Report{Limit: 60, Remaining: r.rem, Reset: now.Add(time.Duration(r.left * float64(time.Second)))}
				if i == len(tc.resps)-1 {
					assert.Equal(t, tc.toFull, w.fillsInStep(&q, now), "in step: %s", tc.why)
				}
				w.Observe(q, now, Seen{Horizon: time.Millisecond})
			}
			assert.Equal(t, tc.toFull, (w.kind == ToFull), tc.why)
		})
	}
}

// Five clients on one bucket of 20 a second each read its refill from
// their own answers, and each credited all of it: spent five times over,
// 7% of their requests were refused. What a figure falls short of the
// baseline topped up by the refill (a full bucket holds no more), less
// ours and a unit of rounding, is others' spending; the client's part of
// the refill is its share, its spending over everyone's (R44).
func TestASharedBucketsRefillIsSplitByShare(t *testing.T) {
	for _, c := range []struct {
		name       string
		base, eff  float64
		ours       float64
		fall, part float64
	}{
		{name: "others spent 15 of it", base: 1000, eff: 1000, ours: 4, fall: 15, part: 20 * 4.0 / 19},
		{name: "a lone client's figure, rounded down", base: 1000, eff: 1015, ours: 4, part: 20},
		{name: "a full bucket holds no more", base: 1195, eff: 1196, ours: 4, part: 20},
	} {
		w := New(Config{Name: "requests", Safety: 0.9, MaxDelay: time.Hour})
		w.kind, w.drift.rate, w.size.limit = ToFull, 20, 1200
		w.drift.base = baseline{at: t0, budget: c.base, admitted: 100}
		w.measureDrift(t0.Add(time.Second), c.eff, 100+c.ours, 0, 10*time.Millisecond, false)
		assert.InDelta(t, c.fall, w.drift.fall, 1e-9, "%s: others' spending, a second", c.name)
		assert.InDelta(t, c.part, w.refill(), 1e-9, "%s: the refill ours to spend, a second", c.name)
		assert.Equal(t, c.fall > 0, w.shared(), "%s: shared", c.name)
	}
}
