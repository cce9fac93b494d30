package quota

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// advanced is where the last Advance of a timeline left a window: its Step
// (and ok), the budget and what a charge must keep of it (units), whether a
// look is out, whether the window rolled blind, and its reset, wake-up and
// due look.
type advanced struct {
	step    Step
	ok      bool
	units   float64
	keep    float64
	probing bool
	rolled  bool
	reset   time.Time
	wakeAt  time.Time
	probeAt time.Time
}

func TestAdvance(t *testing.T) {
	const L = 100
	minute := reset(time.Minute)
	cases := []struct {
		name   string
		why    string
		w      func() *State // requests() when nil
		events []event
		want   advanced
	}{
		{
			name:   "a window nothing has described plans nothing",
			why:    "an unknown budget says nothing: the window must not gate or pace anything",
			events: []event{obs(0, 0, Report{Limit: L, Remaining: L, Window: time.Minute}, Seen{}), adv(time.Second, Seen{})},
			want:   advanced{},
		},
		{
			name: "a budget above a unit is the gate: no rate",
			why: "what the quota affords goes at once: pacing it would make a job below its " +
				"quota slower than no limiter; the window is looked at again at its roll",
			events: []event{obs(0, 0, Report{Limit: L, Remaining: 50, Reset: minute}, Seen{}), adv(time.Second, Seen{})},
			want: advanced{
				step: Step{Pace: Pace{Rate: inf, Budget: 50}, Next: minute.Add(RollGuard)}, ok: true,
				units: 50, reset: minute,
			},
		},
		{
			name: "a spent budget wakes at the reset plus RollGuard",
			why: "nothing is left before the reset; RollGuard keeps the first request of the " +
				"next window from landing in the end of this one (a 429)",
			events: []event{obs(0, 0, Report{Limit: L, Remaining: 0, Reset: reset(30 * time.Second)}, Seen{}), adv(time.Second, Seen{})},
			want: advanced{
				step: Step{Pace: Pace{Rate: inf}, Next: reset(30 * time.Second).Add(RollGuard)}, ok: true,
				reset: reset(30 * time.Second), wakeAt: reset(30 * time.Second).Add(RollGuard),
			},
		},
		{
			name: "a reset no window explains is believed only up to MaxDelay",
			why: "a 10-minute reset with no window stated or learned may be a server's error: " +
				"after MaxDelay (a minute) one request looks rather than waiting it out",
			events: []event{obs(0, 0, Report{Limit: L, Remaining: 0, Reset: reset(10 * time.Minute)}, Seen{}), adv(time.Second, Seen{})},
			want: advanced{
				step: Step{Pace: Pace{Rate: inf}, Next: reset(61 * time.Second)}, ok: true,
				reset: reset(10 * time.Minute), wakeAt: reset(61 * time.Second), probeAt: reset(61 * time.Second),
			},
		},
		{
			name: "the look, when due, is one request",
			why: "at MaxDelay the budget takes exactly one request (the look), whose answer " +
				"sets the budget; nothing is kept back from it",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 0, Reset: reset(10 * time.Minute)}, Seen{}),
				adv(time.Second, Seen{}),
				adv(61*time.Second, Seen{}),
			},
			want: advanced{
				step: Step{Pace: Pace{Rate: inf, Budget: 1}, Next: reset(10 * time.Minute).Add(RollGuard)}, ok: true,
				units: 1, probing: true, reset: reset(10 * time.Minute),
			},
		},
		{
			name: "a long reset a stated window explains is believed however far",
			why: "an hourly quota's reset 40 minutes away is no error: the caller waits for it " +
				"(or is refused at once), and no look spends a request into a spent window",
			events: []event{obs(0, 0, Report{Limit: 5000, Remaining: 0, Reset: reset(40 * time.Minute), Window: time.Hour}, Seen{}), adv(time.Second, Seen{})},
			want: advanced{
				step: Step{Pace: Pace{Rate: inf}, Next: reset(40 * time.Minute).Add(RollGuard)}, ok: true,
				reset: reset(40 * time.Minute), wakeAt: reset(40 * time.Minute).Add(RollGuard),
			},
		},
		{
			name: "a window is rolled only RollGuard after its reset",
			why: "a reset carried from window to window drifts by its length's rounding: " +
				"rolled exactly at it, the next window's first request lands in this one",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 50, Reset: minute, Window: time.Minute}, Seen{}),
				adv(time.Minute+RollGuard/2, Seen{}),
			},
			want: advanced{
				step: Step{Pace: Pace{Rate: inf, Budget: 50}, Next: minute.Add(RollGuard)}, ok: true,
				units: 50, reset: minute,
			},
		},
		{
			name: "a fixed window ending spent rolls into a look of one unit",
			why: "even a window known to refill is not refilled by the model: one request looks " +
				"first, so a window that did not refill (a clock skew, a changed quota) costs " +
				"one 429, not a burst of them",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 10, Reset: minute}, Seen{}),
				obs(61*time.Second, 0, Report{Limit: L, Remaining: L, Reset: reset(2 * time.Minute)}, Seen{}),
				obs(90*time.Second, L, Report{Limit: L, Remaining: 0, Reset: reset(2 * time.Minute)}, Seen{Admitted: L}),
				adv(2*time.Minute+RollGuard, Seen{Admitted: L}),
			},
			want: advanced{
				step: Step{Pace: Pace{Rate: inf, Budget: 1}, Next: reset(3 * time.Minute).Add(RollGuard), Rolled: true}, ok: true,
				units: 1, probing: true, rolled: true, reset: reset(3 * time.Minute),
			},
		},
		{
			name: "a window ending with room carries it over, less two units, without a look",
			why: "whatever the window is, the next has at least what this one left (a fixed " +
				"window refills, a sliding one carries its count), less two units for the " +
				"rounding of the reset and of the count: traffic below the quota never waits",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 50, Reset: minute, Window: time.Minute}, Seen{}),
				adv(time.Minute+RollGuard, Seen{}),
			},
			want: advanced{
				step: Step{Pace: Pace{Rate: inf, Budget: 48}, Next: reset(2 * time.Minute).Add(RollGuard), Rolled: true}, ok: true,
				units: 48, rolled: true, reset: reset(2 * time.Minute),
			},
		},
		{
			name: "a window of unknown kind ending spent looks after two units of the window",
			why: "it may be a sliding window, which has room again only as the last one ages " +
				"out: the look waits, from the reset, for two units of that (2 × 60 s / 100), " +
				"at most a second (maxSlideWait), so it does not meet a 429",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 0, Reset: minute}, Seen{}),
				adv(time.Minute+RollGuard, Seen{}),
			},
			want: advanced{
				step: Step{Pace: Pace{Rate: inf}, Next: reset(61 * time.Second), Rolled: true}, ok: true,
				rolled: true, wakeAt: reset(61 * time.Second), probeAt: reset(61 * time.Second),
			},
		},
		{
			name: "a window of unknown kind first looked at long after its reset looks at once",
			why: "the wait for a sliding window's room runs from the reset, not from the request " +
				"that rolls the window over (a request 46 s after Reddit's reset waited 1.4 s)",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 0, Reset: minute}, Seen{}),
				adv(time.Minute+30*time.Second, Seen{}),
			},
			want: advanced{
				step: Step{Pace: Pace{Rate: inf, Budget: 1}, Rolled: true}, ok: true,
				rolled: true, probing: true, units: 1,
			},
		},
		{
			name: "a token quota keeps (1 − safety) × limit back",
			why: "a request's token cost is an estimate: a tenth of the quota absorbs estimates " +
				"that fall short until the server's next figure corrects them",
			w:      tokenQuota,
			events: []event{obs(0, 0, Report{Limit: 10000, Remaining: 5000, Reset: minute}, Seen{}), {at: time.Second, advance: true, unit: 100}},
			want: advanced{
				step: Step{Pace: Pace{Rate: inf, Budget: 4000}, Next: minute.Add(RollGuard)}, ok: true,
				units: 5000, keep: 1000, reset: minute,
			},
		},
		{
			name: "a token quota ending with room carries it over above its reserve",
			why:  "the carried budget keeps the reserve: 5000 − 1000 − 2 × 100 above it, plus it",
			w:    tokenQuota,
			events: []event{
				obs(0, 0, Report{Limit: 10000, Remaining: 5000, Reset: minute, Window: time.Minute}, Seen{}),
				{at: time.Minute + RollGuard, advance: true, unit: 100},
			},
			want: advanced{
				step: Step{Pace: Pace{Rate: inf, Budget: 3800}, Next: reset(2 * time.Minute).Add(RollGuard), Rolled: true}, ok: true,
				units: 4800, keep: 1000, rolled: true, reset: reset(2 * time.Minute),
			},
		},
		{
			name: "a shared quota is spread to its reset",
			why: "others may take what is left at once too: two clients each taking it take it " +
				"twice, so 0.9 × 60 is spread over the 50 s to the reset",
			w:      func() *State { return New(Config{Name: "requests", Safety: 0.9, MaxDelay: time.Minute, Mods: Fleet}) },
			events: []event{obs(0, 0, Report{Limit: L, Remaining: 60, Reset: minute}, Seen{}), adv(10*time.Second, Seen{})},
			want: advanced{
				step: Step{Pace: Pace{Rate: 0.9 * 60 / 50, Budget: 60}, Next: minute.Add(RollGuard)}, ok: true,
				units: 60, reset: minute,
			},
		},
		{
			name: "a leaky bucket lets what is left go at once and spreads its refill",
			why: "what a leaky bucket holds is there to take (less the unit kept for another " +
				"client's request in flight): a job it affords goes at once; its refill (2 a " +
				"second, measured) is only seen through responses, so it is spread over the " +
				"span with what is left, not guessed between responses",
			events: []event{
				obs(0, 0, Report{Limit: 40, Remaining: 20}, Seen{}),
				obs(time.Second, 10, Report{Limit: 40, Remaining: 12}, Seen{Admitted: 10}),
				adv(time.Second, Seen{Admitted: 10}),
			},
			want: advanced{
				step: Step{Pace: Pace{Rate: 0.9 * (11 + 2*1), Budget: 12, AtOnce: 11}}, ok: true,
				units: 12, keep: 1,
			},
		},
		{
			name: "what a leaky bucket refilled since its last figure is not let go at once",
			why: "a second on, the budget holds 0.9 more by the measured refill (2 a second, " +
				"halved for a second without news), a prediction others may share: it is " +
				"paced at the rate; what the figure said is left still goes at once",
			events: []event{
				obs(0, 0, Report{Limit: 40, Remaining: 20}, Seen{}),
				obs(time.Second, 10, Report{Limit: 40, Remaining: 12}, Seen{Admitted: 10}),
				adv(2*time.Second, Seen{Admitted: 10}),
			},
			want: advanced{
				step: Step{Pace: Pace{Rate: 0.9 * (11.9 + 1*1), Budget: 12.9, AtOnce: 11}}, ok: true,
				units: 12.9, keep: 1,
			},
		},
		{
			name: "a smooth quota others spend from is spread, none of it at once",
			why: "someone else took 6 of 20 in a second: two clients that each take what is " +
				"left at once take it twice, so all of it is spread: what is left (less the unit " +
				"kept) with the net refill (their -6 a second) over the span",
			events: []event{
				obs(0, 0, Report{Limit: 40, Remaining: 20}, Seen{}),
				obs(time.Second, 4, Report{Limit: 40, Remaining: 10}, Seen{Admitted: 4}),
				adv(time.Second, Seen{Admitted: 4}),
			},
			want: advanced{
				step: Step{Pace: Pace{Rate: 0.9 * (9 - 6*1), Budget: 10, AtOnce: 0}}, ok: true,
				units: 10, keep: 1,
			},
		},
		{
			name: "a spent leaky bucket whose look was refused is looked at a second later",
			why: "a bucket with no reset, spent, is looked at once a second (R46), whatever " +
				"the last look met: only an answer says it refilled",
			events: []event{
				obs(0, 0, Report{Limit: 40, Remaining: 0}, Seen{}),
				adv(0, Seen{}),
				adv(time.Second, Seen{}),
				obs(time.Second+50*time.Millisecond, 1, Report{Limit: 40, Remaining: 0}, Seen{Refused: true}),
				adv(time.Second+50*time.Millisecond, Seen{}),
			},
			want: advanced{
				step: Step{Pace: Pace{Rate: inf, Budget: 0}, Next: reset(2050 * time.Millisecond)}, ok: true,
				keep: 1, wakeAt: reset(2050 * time.Millisecond), probeAt: reset(2050 * time.Millisecond),
			},
		},
		{
			name: "a spent smooth quota with a slow refill looks after reprobe",
			why: "a refill of 1 a second (believed 0.9) would hold a unit in 1.1 s, but the " +
				"measure may be low and only responses show it: one request looks after a second",
			events: []event{
				obs(0, 0, Report{Limit: 40, Remaining: 20}, Seen{}),
				obs(time.Second, 20, Report{Limit: 40, Remaining: 1}, Seen{Admitted: 20}),
				adv(time.Second, Seen{Admitted: 20}),
			},
			want: advanced{
				step: Step{Pace: Pace{Rate: 0.9, Budget: 1}, Next: reset(2 * time.Second)}, ok: true,
				units: 1, keep: 1, wakeAt: reset(2 * time.Second), probeAt: reset(2 * time.Second),
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := requests()
			if c.w != nil {
				w = c.w()
			}
			st, ok := replay(t, w, c.events)
			got := advanced{
				step: st, ok: ok, units: w.Units(), keep: float64(w.budget.keep) / Milli,
				probing: w.look.out, rolled: w.rolled,
				reset: w.win.reset, wakeAt: w.look.wake, probeAt: w.look.due,
			}
			rateEqual(t, c.want.step.Rate, st.Rate, "rate; why: "+c.why)
			got.step.Rate = c.want.step.Rate
			assert.InDelta(t, c.want.step.Budget, st.Budget, 1e-9, "budget; why: %s", c.why)
			got.step.Budget = c.want.step.Budget
			assert.Equal(t, c.want, got, "why: %s", c.why)
		})
	}
}

// TestPlanSharesASharedQuotasSurplus: a shared quota's surplus beyond the
// pace it was last spread at is claimed in proportion to that pace once it
// affords rushFactor times it; below that, what is left is spread as before.
func TestPlanSharesASharedQuotasSurplus(t *testing.T) {
	cases := []struct {
		name, why string
		left      float64 // Remaining, 10 s before the reset
		prev      float64 // the pace the quota was last spread at
		want      float64
	}{
		{
			name: "a surplus past rushFactor times the pace: its share of it",
			why: "others (5 a second, measured) keep 50 of the 110 left; the 60 over 10 s is 6 a " +
				"second, more than 5 times the pace of 1 a second: every client sees that surplus, so " +
				"this one claims 1/(1+5) of the 5 a second above its pace, 0.9 × (1 + 5/6)",
			left: 110, prev: 1, want: 0.9 * (1 + 5.0/6),
		},
		{
			name: "what is left within rushFactor times the pace is spread whole",
			why: "6 a second is 3 times a pace of 2: the steady spread of a shared quota, " +
				"0.9 × 60 over 10 s, which keeps every client near its share",
			left: 110, prev: 2, want: 0.9 * 6,
		},
		{
			name: "no pace yet: spread whole",
			why:  "the first spread of a shared quota has no pace to share by",
			left: 110, prev: 0, want: 0.9 * 6,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := New(Config{Name: "requests", Safety: 0.9, MaxDelay: time.Minute, Mods: Fleet})
			w.Observe(Report{Limit: 1000, Remaining: c.left, Reset: reset(10 * time.Second)}, t0, Seen{Horizon: horizon})
			w.drift.rate, w.drift.measured, w.drift.at = -5, t0, t0
			w.pace.rate = c.prev
			st, _ := w.Advance(t0, 0, 1)
			rateEqual(t, c.want, st.Rate, c.why)
		})
	}
}

// What a fixed window others spend from lets build up, to go at once, while
// demand stays below its spread: what is left beyond others' measured use
// until the reset and each client's floor (a tenth of what is left).
func TestSpareOfAQuotaOthersSpendFrom(t *testing.T) {
	for _, c := range []struct {
		name, why   string
		left, drain float64 // units; others' measured spending, units a second
		want        float64
	}{
		{name: "far inside the quota: most of it",
			why:  "Reddit: 589 of 600 left 305 s before the reset, others spending 0.1 a second; a burst that leaves them their 30.5 goes at once",
			left: 589, drain: 0.1, want: 589 - 30.5 - 58.9},
		{name: "saturated: none",
			why:  "others spend all of it until the reset: what is left is each client's floor, spread, not taken at once",
			left: 500, drain: 10, want: 0},
		{name: "others leave half: what is ours beyond the floor",
			why:  "two clients on one quota each leave the other its measured half and take their own at once",
			left: 600, drain: 1, want: 600 - 305 - 60},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := New(Config{Name: "requests", Safety: 0.9, MaxDelay: time.Hour})
			w.Observe(Report{Limit: 600, Remaining: c.left, Reset: reset(305 * time.Second)}, t0, Seen{Horizon: horizon})
			w.mods |= Shared
			w.drift.rate, w.drift.measured, w.drift.at = -c.drain, t0, t0
			st, ok := w.Advance(t0, 0, 1)
			assert.True(t, ok)
			assert.InDelta(t, c.want, st.Spare, 1e-6, c.why)
		})
	}
}

// A quota first seen shared begins its spread with what may build up beside
// it already there: nothing was spread before, so a client far inside the
// quota is not held while the spread's bucket fills. Only the first plan
// does: a client at the pace builds up nothing after it.
func TestAQuotaFirstSeenSharedLetsItsSpareGoOnce(t *testing.T) {
	w := New(Config{Name: "requests", Safety: 0.9, MaxDelay: time.Hour})
	w.Observe(Report{Limit: 600, Remaining: 589, Reset: reset(305 * time.Second)}, t0, Seen{Horizon: horizon})
	st, _ := w.Advance(t0, 0, 1)
	assert.Zero(t, st.AtOnce, "not shared: the budget is the gate")
	w.mods |= Shared
	w.drift.rate, w.drift.measured, w.drift.at = -0.1, t0, t0
	st, _ = w.Advance(t0, 0, 1)
	assert.InDelta(t, 589-30.5-58.9, st.AtOnce, 1e-6, "the first plan since others were seen")
	st, _ = w.Advance(t0, 0, 1)
	assert.Zero(t, st.AtOnce, "the next ones: it builds up at the pace")
	assert.InDelta(t, 589-30.5-58.9, st.Spare, 1e-6)
}
