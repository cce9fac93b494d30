package quota

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func newRequests() *Window {
	return New(Config{Name: "requests", Safety: 0.9, MaxDelay: time.Hour})
}

// step is one thing that happens to a window in a case: a response's
// report (with what was in flight), or a plan at a time.
type step struct {
	at     time.Duration
	report *Report
	seen   Seen
	refuse bool // the report is a 429's
}

// TestObserveFollowsTheRules drives a window through reports with
// written-out times and checks the budget each case's rule gives.
func TestObserveFollowsTheRules(t *testing.T) {
	reset := t0.Add(time.Minute)
	r := func(limit, remaining float64, reset time.Time) *Report {
		return &Report{Limit: limit, Remaining: remaining, Reset: reset}
	}
	for _, tc := range []struct {
		name, why string
		steps     []step
		budget    float64 // units, after the steps
		known     bool
	}{
		{
			name: "first report", why: "the budget is what is left less what is in flight, which the server may not have counted",
			steps:  []step{{report: r(100, 60, reset), seen: Seen{Unseen: 5}}},
			budget: 55, known: true,
		},
		{
			name: "a lower report", why: "lowers the budget at once: someone spent it",
			steps:  []step{{report: r(100, 60, reset)}, {at: time.Second, report: r(100, 40, reset)}},
			budget: 40, known: true,
		},
		{
			name: "an overtaken report", why: "a window that counts down reports its freshest figure as its lowest: a higher one is older and cannot raise the budget",
			steps:  []step{{report: r(100, 40, reset), seen: Seen{Unseen: 3}}, {at: time.Second, report: r(100, 50, reset), seen: Seen{Unseen: 3}}},
			budget: 37, known: true,
		},
		{
			name: "an overtaken report with nothing in flight", why: "the lowest figure is exact once nothing of ours is in flight: the unseen subtracted from it were counted in it",
			steps:  []step{{report: r(100, 40, reset), seen: Seen{Unseen: 3}}, {at: time.Second, report: r(100, 50, reset)}},
			budget: 40, known: true,
		},
		{
			name: "a policy", why: "a limit with no reset and Remaining at the limit describes the policy, not a window: no budget",
			steps: []step{{report: &Report{Limit: 100, Remaining: 100, Window: time.Minute}}},
			known: false,
		},
		{
			name: "a reset in the past", why: "the window it describes is over: nothing to learn from it",
			steps: []step{{at: 2 * time.Minute, report: r(100, 10, reset)}},
			known: false,
		},
		{
			name: "a new window", why: "a reset a window later is fresh: its figure stands, higher or not",
			steps:  []step{{report: r(100, 5, reset)}, {at: 61 * time.Second, report: r(100, 99, reset.Add(time.Minute))}},
			budget: 99, known: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newRequests()
			for _, s := range tc.steps {
				if s.report != nil {
					s.seen.Refused = s.refuse
					w.Observe(*s.report, at(s.at), s.seen)
				}
			}
			if w.Known() != tc.known {
				t.Fatalf("%s: Known %v, want %v (%v)", tc.why, w.Known(), tc.known, w)
			}
			if tc.known && math.Abs(w.Units()-tc.budget) > 1e-9 {
				t.Errorf("%s: budget %v, want %v (%v)", tc.why, w.Units(), tc.budget, w)
			}
		})
	}
}

// TestPlanSpendsAtOnceOrSaysWhenToLook checks what a plan makes of a
// window's budget: the rate, and when a spent budget can take a request.
func TestPlanSpendsAtOnceOrSaysWhenToLook(t *testing.T) {
	reset := t0.Add(time.Minute)
	for _, tc := range []struct {
		name, why string
		report    Report
		cfg       Config
		planAt    time.Duration
		rate      float64 // +Inf: the budget is the gate
		wakeAt    time.Time
	}{
		{
			name: "room left", why: "what the quota affords goes at once: pacing it would make a job below its quota slower than no limiter",
			report: Report{Limit: 100, Remaining: 50, Reset: reset},
			rate:   math.Inf(1),
		},
		{
			name: "spent", why: "a spent fixed window holds requests until its reset, plus the guard that keeps the first of the next window out of the old one",
			report: Report{Limit: 100, Remaining: 0, Reset: reset},
			rate:   math.Inf(1), wakeAt: reset.Add(RollGuard),
		},
		{
			name: "spent, a reset nothing explains", why: "a reset further than MaxDelay that no window length explains is believed only up to MaxDelay: then one request looks",
			report: Report{Limit: 100, Remaining: 0, Reset: t0.Add(3 * time.Hour)},
			rate:   math.Inf(1), wakeAt: t0.Add(time.Hour),
		},
		{
			name: "spent, a reset the window explains", why: "an hourly quota's reset 50 minutes away is past MaxDelay, but a stated window of an hour explains it: it is believed however far (the caller is refused at once with it, not looked at early)",
			report: Report{Limit: 100, Remaining: 0, Reset: t0.Add(50 * time.Minute), Window: time.Hour},
			cfg:    Config{MaxDelay: 10 * time.Minute},
			rate:   math.Inf(1), wakeAt: t0.Add(50*time.Minute + RollGuard),
		},
		{
			name: "shared", why: "others spend from this quota: what is left is spread to the reset (two clients that each took it at once would take it twice)",
			report: Report{Limit: 100, Remaining: 50, Reset: reset},
			cfg:    Config{Shared: true},
			rate:   0.9 * 50 / 60,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			c.Name, c.Safety = "requests", 0.9
			if c.MaxDelay == 0 {
				c.MaxDelay = time.Hour
			}
			w := New(c)
			w.Observe(tc.report, t0, Seen{})
			st, ok := w.Advance(at(tc.planAt), 0, 1, 0)
			if !ok {
				t.Fatalf("%s: not known (%v)", tc.why, w)
			}
			if !(math.IsInf(tc.rate, 1) && math.IsInf(st.Rate, 1)) && math.Abs(st.Rate-tc.rate) > 1e-9 {
				t.Errorf("%s: rate %v, want %v", tc.why, st.Rate, tc.rate)
			}
			if !w.WakeAt().Equal(tc.wakeAt) {
				t.Errorf("%s: wakes at %v, want %v", tc.why, w.WakeAt(), tc.wakeAt)
			}
		})
	}
}

// TestChargeIsAllOrNothing: a request goes only if every quota it counts
// against affords it, and a refused charge leaves every budget as it was.
func TestChargeIsAllOrNothing(t *testing.T) {
	b := NewBook(BookConfig{Safety: 0.9, MaxDelay: time.Hour, Horizon: 24 * time.Hour})
	reset := t0.Add(time.Minute)
	b.Observe([]Named{
		{Name: "requests", Report: Report{Limit: 100, Remaining: 50, Reset: reset}},
		{Name: "tokens", Tokens: true, Report: Report{Limit: 1000, Remaining: 150, Reset: reset}},
	}, t0, Counts{}, Seen{})
	b.Plan(t0, Counts{}, 1)
	// The token quota keeps (1 - 0.9) × 1000 back for estimates that fall short.
	if w := b.Charge(60, 0, 0); w == nil || w.Name() != "tokens" {
		t.Fatalf("60 tokens of 150, 100 kept back: want the token quota short, got %v", w)
	}
	if got := b.Find("requests").Units(); got != 50 {
		t.Errorf("a refused charge took %v of the request quota", 50-got)
	}
	if w := b.Charge(40, 0, 0); w != nil {
		t.Fatalf("40 tokens fit: %v short", w)
	}
	if got := b.Find("requests").Units(); got != 49 {
		t.Errorf("request budget %v, want 49", got)
	}
	b.Refund(40)
	if got := b.Find("requests").Units(); got != 50 {
		t.Errorf("a refund gives back exactly: %v, want 50", got)
	}
}

// TestHostileReportsAreDropped: counts that are not finite or are negative
// say nothing the model can use.
func TestHostileReportsAreDropped(t *testing.T) {
	b := NewBook(BookConfig{Safety: 0.9, MaxDelay: time.Hour, Horizon: time.Hour})
	for _, r := range []Report{
		{Limit: math.NaN(), Remaining: 5},
		{Limit: 10, Remaining: math.Inf(1)},
		{Limit: -1, Remaining: 5},
		{Remaining: -3},
	} {
		b.Observe([]Named{{Name: "x", Report: r}}, t0, Counts{}, Seen{})
	}
	if b.Len() != 0 {
		t.Errorf("hostile reports made %d quotas: %v", b.Len(), b)
	}
	b.Observe([]Named{{Name: "x", Report: Report{Limit: 10, Remaining: 50, Reset: t0.Add(100 * time.Hour)}}}, t0, Counts{}, Seen{})
	w := b.Find("x")
	if w == nil || w.Units() != 10 || !w.Reset().Equal(t0.Add(time.Hour)) {
		t.Errorf("Remaining is clamped to the limit and the reset to the horizon: %v", w)
	}
}
