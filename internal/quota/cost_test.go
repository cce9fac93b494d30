package quota

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// What a request with no stated cost is learnt to cost, case by case (see
// sampleCost). Each case is a sequence of responses on a 40,000 quota: the
// time, Remaining, the blind requests admitted ever and in flight, and the
// stated costs answered; and the mean it then holds.
func TestBlindCostIsLearntFromTheQuotasFigures(t *testing.T) {
	type resp struct {
		at, rem             float64
		blind, unseen, cost float64
		refused             bool
	}
	fixed := func(w *State) { w.kind = Fixed }
	bucket := func(w *State) { w.kind, w.drift.rate = ToFull, 100 }
	known := func(w *State) { fixed(w); w.cost.add(1000, 8) } // later samples span 8
	for _, tc := range []struct {
		name  string
		why   string
		setup func(*State)
		resps []resp
		want  float64
	}{{
		name: "fixed window", setup: fixed,
		why:   "8 requests answered took 16,000 from a window that does not refill",
		resps: []resp{{0, 30000, 5, 0, 0, false}, {10, 14000, 13, 0, 0, false}},
		want:  2000,
	}, {
		name: "too few", setup: fixed,
		why:   "a first sample of one request is not taken",
		resps: []resp{{0, 30000, 5, 0, 0, false}, {10, 28000, 6, 0, 0, false}},
		want:  0,
	}, {
		name: "too few later", setup: fixed,
		why:   "the first sample spans 2 requests, each later one 8: 5 more at 3,200 wait",
		resps: []resp{{0, 30000, 5, 0, 0, false}, {5, 26000, 7, 0, 0, false}, {10, 10000, 12, 0, 0, false}},
		want:  2000,
	}, {
		name: "in flight at the ends", setup: fixed,
		why:   "a sample spans twice the requests in flight at its ends: 2 × (3 + 3) > 10",
		resps: []resp{{0, 30000, 8, 3, 0, false}, {10, 10000, 18, 3, 0, false}},
		want:  0,
	}, {
		name: "refilling bucket", setup: bucket,
		why:   "what it says it refilled (100 a second for 10 s) was spent too: (20,000 − 5,000 + 1,000) over 8",
		resps: []resp{{0, 20000, 5, 0, 0, false}, {10, 5000, 13, 0, 0, false}},
		want:  2000,
	}, {
		name: "bucket full between responses", setup: bucket,
		why: "it had room for 2,000 of the first 3,000 it refilled, and 3,000 of the next: " +
			"(38,000 − 37,000 + 5,000) over 8, not the 7,000 it would have refilled with room",
		resps: []resp{{0, 38000, 5, 0, 0, false}, {30, 37000, 9, 3, 0, false}, {60, 37000, 13, 0, 0, false}},
		want:  750,
	}, {
		name: "full bucket at the anchor", setup: bucket,
		why:   "a full bucket refills nothing until spent from: (40,000 − 32,000) over 8",
		resps: []resp{{0, 40000, 5, 0, 0, false}, {10, 32000, 13, 0, 0, false}},
		want:  1000,
	}, {
		name: "full bucket at the end", setup: bucket,
		why:   "what was spent before it filled up is lost from the figures",
		resps: []resp{{0, 32000, 5, 0, 0, false}, {100, 40000, 13, 0, 0, false}},
		want:  0,
	}, {
		name: "anchor kept", setup: known,
		why: "one in flight at the anchor and none later: the sample grows to 8 from it " +
			"(2,000 each), and is not started again 6 requests in",
		resps: []resp{{0, 30000, 5, 1, 0, false}, {5, 22000, 10, 0, 0, false}, {10, 14000, 12, 0, 0, false}},
		want:  (1000*8*math.Exp(-8.0/costMemory) + 2000*8) / (8*math.Exp(-8.0/costMemory) + 8),
	}, {
		name: "hinted among them", setup: fixed,
		why:   "the stated costs answered (4,000) are the hinted requests': (16,000 − 4,000) over 8",
		resps: []resp{{0, 30000, 5, 0, 1000, false}, {10, 14000, 13, 0, 5000, false}},
		want:  1500,
	}, {
		name: "refused", setup: fixed,
		why:   "a refused request's figures say nothing of what was spent",
		resps: []resp{{0, 30000, 5, 0, 0, false}, {10, 0, 13, 0, 0, true}},
		want:  0,
	}, {
		name: "new window", setup: fixed,
		why:   "a fixed window's next figures are not comparable with the last one's",
		resps: []resp{{0, 30000, 5, 0, 0, false}, {70, 38000, 13, 0, 0, false}},
		want:  0,
	}, {
		name: "first look", setup: fixed,
		why:   "the answer to one blind request alone, from a quota found at least half full: it cost at most what the quota lost",
		resps: []resp{{0, 38000, 1, 0, 0, false}},
		want:  2000,
	}, {
		name: "first look at a quota mostly spent", setup: fixed,
		why:   "what a quota found below half lost is others' spending as much as the request's",
		resps: []resp{{0, 15000, 1, 0, 0, false}},
		want:  0,
	}, {
		name: "first answer of a burst", setup: fixed,
		why:   "with others in flight, what the quota lost is not one request's",
		resps: []resp{{0, 30000, 5, 4, 0, false}},
		want:  0,
	}, {
		name: "burst anchor moved", setup: fixed,
		why:   "a start with 10 in flight would wait for 20 more; one with none is taken instead",
		resps: []resp{{0, 30000, 12, 10, 0, false}, {1, 20000, 12, 0, 0, false}, {10, 4000, 20, 0, 0, false}},
		want:  2000,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			w := New(Config{Name: "tokens", Tokens: true, Safety: 0.9, MaxDelay: time.Hour})
			w.known, w.size.limit, w.win.length = true, 40000, time.Minute
			tc.setup(w)
			first := t0.Add(time.Minute)
			for _, r := range tc.resps {
				now := t0.Add(time.Duration(r.at * float64(time.Second)))
				reset := first
				for !reset.After(now) {
					reset = reset.Add(time.Minute)
				}
				q := Report{Limit: 40000, Remaining: r.rem, Reset: reset}
				w.sampleCost(&q, now, &Seen{Blind: r.blind, BlindUnseen: r.unseen, Stated: r.cost, Refused: r.refused},
					r.at >= 60)
			}
			assert.InDelta(t, tc.want, w.cost.mean(), 1e-6, tc.why)
		})
	}
}

// The estimate follows the samples as a moving average, and a blind request
// is charged it plus two deviations of one request's cost.
func TestBlindChargeCoversCostsAboveTheMean(t *testing.T) {
	w := New(Config{Name: "tokens", Tokens: true, Safety: 0.9, MaxDelay: time.Hour})
	w.size.limit, w.size.most = 40000, milli(40000)
	assert.Zero(t, w.amount(0), "nothing learnt: a blind request is charged to request quotas only")
	w.cost.add(2000, 8)
	assert.InDelta(t, 2000.0, w.cost.mean(), 1e-9)
	assert.InDelta(t, 4000.0, float64(w.amount(0))/Milli, 1, "the first sample: a deviation of half the mean assumed")
	w.cost.add(2400, 8) // off by 400 over 8 requests, from an estimate over 8: one request's deviation about 800
	keep := math.Exp(-8.0 / costMemory)
	assert.InDelta(t, (2000*8*keep+2400*8)/(8*keep+8), w.cost.mean(), 1e-9, "weighted by requests, the older decayed")
	assert.InDelta(t, 1000.0*1000+0.25*(8*8/(8+8)*400*400-1000.0*1000), w.cost.variance, 1e-6)
	assert.InDelta(t, w.cost.mean()+2*w.cost.deviation(), float64(w.amount(0))/Milli, 1)
	assert.Equal(t, milli(1500), w.amount(1500), "a stated cost is charged as stated")
}
