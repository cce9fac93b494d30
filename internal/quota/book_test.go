package quota

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// page is what happens to a Book at t0+at: a response's reports observed
// with counts and seen, or, with plan, the owner's Plan with tokenUnit.
type page struct {
	at      time.Duration
	reports []Named
	counts  Counts
	seen    Seen
	plan    bool
	unit    float64
}

// said is a response at t0+at describing the quotas.
func said(at time.Duration, c Counts, seen Seen, reports ...Named) page {
	if seen.Horizon == 0 {
		seen.Horizon = horizon
	}
	return page{at: at, reports: reports, counts: c, seen: seen}
}

// planned at t0+at, a token quota's request taking tokenUnit.
func planAt(at time.Duration, tokenUnit float64) page {
	return page{at: at, plan: true, unit: tokenUnit}
}

// read replays the pages on b: what the last Observe reported spent, and
// the last Plan.
func read(b *Book, pages []page) (spent bool, p Plan) {
	for _, g := range pages {
		now := t0.Add(g.at)
		if g.plan {
			p = b.Advance(now, g.counts, g.unit)
			continue
		}
		c, seen := g.counts, g.seen
		spent = b.Observe(g.reports, now, c, seen)
	}
	return spent, p
}

func bookConfig() BookConfig {
	return BookConfig{Safety: 0.9, MaxDelay: time.Minute, Horizon: time.Hour}
}

// quotaState is what a test reads of one quota of a Book.
type quotaState struct {
	name     string
	units    float64
	reset    time.Time
	shared   bool
	drift    float64
	inferred bool
}

func quotaStates(b *Book) []quotaState {
	var qs []quotaState
	for _, w := range b.states {
		qs = append(qs, quotaState{w.cfg.Name, w.Units(), w.win.reset, w.shared(), w.drift.rate, (w.mods&Inferred != 0)})
	}
	return qs
}

// planEqual compares Plans, their rates and budgets to within rounding.
func planEqual(t *testing.T, want, got Plan, why string) {
	t.Helper()
	for _, f := range []struct {
		name      string
		want, got float64
	}{
		{"Req.Rate", want.Req.Rate, got.Req.Rate}, {"Req.Budget", want.Req.Budget, got.Req.Budget},
		{"Tok.Rate", want.Tok.Rate, got.Tok.Rate}, {"Tok.Budget", want.Tok.Budget, got.Tok.Budget},
	} {
		rateEqual(t, f.want, f.got, f.name+"; why: "+why)
	}
	want.Req.Rate, want.Req.Budget, want.Tok.Rate, want.Tok.Budget = got.Req.Rate, got.Req.Budget, got.Tok.Rate, got.Tok.Budget
	assert.Equal(t, want, got, "plan; why: %s", why)
}

func TestBook(t *testing.T) {
	minute := reset(time.Minute)
	req := func(name string, limit, remaining float64, reset time.Time) Named {
		return Named{Name: name, Report: Report{Limit: limit, Remaining: remaining, Reset: reset}}
	}
	numbered := func(n int, remaining float64) []Named {
		var rs []Named
		for i := range n {
			rs = append(rs, req(fmt.Sprintf("q%02d", i), 100, remaining, minute))
		}
		return rs
	}
	// noPlan is the Plan of a timeline with no plan page.
	var noPlan Plan
	cases := []struct {
		name   string
		why    string
		cfg    func(*BookConfig)
		pages  []page
		quotas []quotaState
		spent  bool
		plan   Plan
	}{
		{
			name: "quotas beyond MaxQuotas are ignored",
			why: "the book is bounded whatever a server names (ParseHeaders keeps 16): the 17th " +
				"quota is never followed, while the first 16 still learn from later responses",
			pages: []page{
				said(0, Counts{}, Seen{}, numbered(17, 50)...),
				said(100*time.Millisecond, Counts{}, Seen{Fed: inf}, req("q03", 100, 40, minute), req("q16", 100, 40, minute)),
			},
			quotas: func() []quotaState {
				var qs []quotaState
				for i := range MaxQuotas {
					qs = append(qs, quotaState{name: fmt.Sprintf("q%02d", i), units: 50, reset: minute})
				}
				qs[3].units = 40
				return qs
			}(),
		},
		{
			name: "hostile counts are dropped",
			why: "the model assumes finite, non-negative figures: NaN would poison every " +
				"comparison, +Inf would open the gate for good, a negative count is no state",
			pages: []page{said(0, Counts{}, Seen{},
				req("nan remaining", 100, math.NaN(), minute),
				req("negative remaining", 100, -5, minute),
				req("infinite remaining", 100, math.Inf(1), minute),
				req("nan limit", math.NaN(), 50, minute),
				req("negative limit", -1, 50, minute),
				req("infinite limit", math.Inf(1), 50, minute),
				req("sane", 100, 50, minute),
			)},
			quotas: []quotaState{{name: "sane", units: 50, reset: minute}},
		},
		{
			name:   "Remaining is clamped to Limit",
			why:    "a quota cannot hold more than its limit: a budget above it would promise requests the server refuses",
			pages:  []page{said(0, Counts{}, Seen{}, req("requests", 100, 500, minute))},
			quotas: []quotaState{{name: "requests", units: 100, reset: minute}},
		},
		{
			name:   "a reset beyond Horizon is taken as Horizon from now",
			why:    "every wait has a cap: a reset two days away (a server's error, a hostile header) is believed only an hour",
			pages:  []page{said(0, Counts{}, Seen{}, req("requests", 100, 0, reset(48*time.Hour)))},
			quotas: []quotaState{{name: "requests", reset: reset(time.Hour)}},
			spent:  true,
		},
		{
			name:   "a quota described with nothing left before its reset is reported spent",
			why:    "the owner tells a 429 or 403 the quota explains (wait for the reset) from one it does not",
			pages:  []page{said(0, Counts{}, Seen{}, req("a", 100, 50, minute), req("b", 100, 0, minute))},
			quotas: []quotaState{{name: "a", units: 50, reset: minute}, {name: "b", reset: minute}},
			spent:  true,
		},
		{
			name: "a quota whose Remaining is unstated is followed, never spent",
			why: "the server stated the limit and a reset but not what is left: the book " +
				"follows the quota (its limit is learnt) with no budget, neither full nor " +
				"spent, so a 403 or 429 is not explained by it",
			pages: []page{said(0, Counts{}, Seen{Refused: true},
				Named{Name: "policy", Report: Report{Limit: 100, Remaining: Unstated, Reset: minute, Window: time.Minute}})},
			quotas: []quotaState{{name: "policy"}},
		},
		{
			name:   "a quota with no reset is never reported spent",
			why:    "a leaky bucket with nothing left refills as it goes: there is no reset to wait for",
			pages:  []page{said(0, Counts{}, Seen{}, Named{Name: "bucket", Report: Report{Limit: 40, Remaining: 0}})},
			quotas: []quotaState{{name: "bucket"}},
		},
		{
			name: "a blind-rolled quota the response does not mention is dropped",
			why: "both quotas rolled spent and are being looked at; the look's response speaks " +
				"only of a: the server stopped speaking of b, whose look would never be answered",
			pages: []page{
				said(0, Counts{}, Seen{}, req("a", 100, 0, minute), req("b", 100, 0, minute)),
				planAt(time.Minute+RollGuard, 1),
				planAt(61210*time.Millisecond, 1), // 2 × 60 s / 100 after the roll: the looks
				said(61300*time.Millisecond, Counts{}, Seen{}, req("a", 100, 100, reset(2*time.Minute))),
			},
			quotas: []quotaState{{name: "a", units: 100, reset: reset(2 * time.Minute)}},
			plan:   Plan{Req: Pace{Rate: inf, Budget: 1}, Tok: Pace{Rate: inf, Budget: inf}, Known: 2, Blind: true},
		},
		{
			name: "a rolled quota with room the response does not mention is kept",
			why: "b carried 48 over its reset with no look out: nothing is waiting on an answer " +
				"about it, and what it learnt still holds",
			pages: []page{
				said(0, Counts{}, Seen{}, req("a", 100, 0, minute), req("b", 100, 50, minute)),
				planAt(time.Minute+RollGuard, 1),
				planAt(61210*time.Millisecond, 1),
				said(61300*time.Millisecond, Counts{}, Seen{}, req("a", 100, 100, reset(2*time.Minute))),
			},
			quotas: []quotaState{{name: "a", units: 100, reset: reset(2 * time.Minute)}, {name: "b", units: 48}},
			plan:   Plan{Req: Pace{Rate: inf, Budget: 1}, Tok: Pace{Rate: inf, Budget: inf}, Known: 2, Blind: true},
		},
		{
			name: "a fleet's quotas start shared and measure no drift",
			why: "a fleet spends the quota together through a store: each member spreads it from " +
				"the first response, and the others' spending (30 in 10 s here) is the store's " +
				"to hold, not each member's to deduct again",
			cfg: func(c *BookConfig) { c.Fleet = true },
			pages: []page{
				said(0, Counts{}, Seen{}, Named{Name: "requests", Report: Report{Limit: 600, Remaining: 600, Reset: minute, Window: time.Minute}}),
				said(10*time.Second, Counts{Admitted: 50}, Seen{}, Named{Name: "requests", Report: Report{Limit: 600, Remaining: 520, Reset: minute, Window: time.Minute}}),
				planAt(10*time.Second, 1),
			},
			quotas: []quotaState{{name: "requests", units: 520, reset: minute, shared: true}},
			plan:   Plan{Req: Pace{Rate: 0.9 * 520 / 50, Budget: 520}, Tok: Pace{Rate: inf, Budget: inf}, Known: 1, Next: minute.Add(RollGuard)},
		},
		{
			name: "the inferred quota never reads others in its books",
			why: "its figures are the limiter's own count: a figure below the budget is the " +
				"count's error, corrected by the figure itself, not another client (a stated " +
				"quota with the same figures is marked shared)",
			cfg: func(c *BookConfig) { c.Inferred = "inferred" },
			pages: []page{
				said(0, Counts{}, Seen{}, req("inferred", 100, 80, minute), req("requests", 100, 80, minute)),
				said(100*time.Millisecond, Counts{}, Seen{}, req("inferred", 100, 70, minute), req("requests", 100, 70, minute)),
			},
			quotas: []quotaState{
				{name: "inferred", units: 70, reset: minute, inferred: true},
				{name: "requests", units: 70, reset: minute, shared: true},
			},
		},
		{
			name:   "a fleet infers no quota",
			why:    "a fleet's quotas are the store's: none is the member's own count",
			cfg:    func(c *BookConfig) { c.Fleet, c.Inferred = true, "inferred" },
			pages:  []page{said(0, Counts{}, Seen{}, req("inferred", 100, 80, minute))},
			quotas: []quotaState{{name: "inferred", units: 80, reset: minute, shared: true}},
		},
		{
			name: "Plan takes the tightest rate and budget of each unit and the earliest look",
			why: "a request goes only if every quota it counts against affords it: the 5 left of " +
				"b bound the requests, the token quota's 5000 less its reserve bound the tokens",
			pages: []page{
				said(0, Counts{}, Seen{},
					req("a", 100, 50, minute),
					req("b", 100, 5, reset(30*time.Second)),
					Named{Name: "tokens", Tokens: true, Report: Report{Limit: 10000, Remaining: 5000, Reset: reset(2 * time.Minute)}},
				),
				planAt(time.Second, 100),
			},
			quotas: []quotaState{
				{name: "a", units: 50, reset: minute},
				{name: "b", units: 5, reset: reset(30 * time.Second)},
				{name: "tokens", units: 5000, reset: reset(2 * time.Minute)},
			},
			plan: Plan{Req: Pace{Rate: inf, Budget: 5}, Tok: Pace{Rate: inf, Budget: 4000}, Known: 3, Tokens: true, Next: reset(30 * time.Second).Add(RollGuard)},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := bookConfig()
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			b := NewBook(cfg)
			spent, p := read(b, c.pages)
			assert.Equal(t, c.quotas, quotaStates(b), "why: %s", c.why)
			assert.Equal(t, c.spent, spent, "spent; why: %s", c.why)
			if c.plan == noPlan {
				assert.Equal(t, noPlan, p, "no plan page")
				return
			}
			planEqual(t, c.plan, p, c.why)
		})
	}
}

func TestBookCharge(t *testing.T) {
	minute := reset(time.Minute)
	requests := Named{Name: "requests", Report: Report{Limit: 100, Remaining: 10, Reset: minute}}
	tokens := func(remaining float64) Named {
		return Named{Name: "tokens", Tokens: true, Report: Report{Limit: 1000, Remaining: remaining, Reset: minute}}
	}
	cases := []struct {
		name    string
		why     string
		reports []Named
		drop    func(name string) bool // dropped after the Plan
		cost    float64
		refund  bool   // the charged request is not sent
		short   string // the quota that could not take it
		units   []float64
	}{
		{
			name: "a token quota without room charges nothing, also where it comes last",
			why: "a request goes only if every quota affords it: the request quota's unit, " +
				"taken first, is given back, and the owner learns which quota is short",
			reports: []Named{requests, tokens(50)},
			cost:    200, short: "tokens",
			units: []float64{10, 50},
		},
		{
			name:    "a token quota without room charges nothing where it comes first",
			why:     "all or nothing does not depend on the order the server named the quotas in",
			reports: []Named{tokens(50), requests},
			cost:    200, short: "tokens",
			units: []float64{50, 10},
		},
		{
			name:    "a request every quota affords is charged to each: a unit, and its cost in tokens",
			why:     "a request quota counts the request, a token quota its estimated cost",
			reports: []Named{requests, tokens(900)},
			cost:    200,
			units:   []float64{9, 700},
		},
		{
			name:    "a refund gives the charge back to every quota",
			why:     "a request admitted but not sent must not spend the quota",
			reports: []Named{requests, tokens(900)},
			cost:    200, refund: true,
			units: []float64{10, 900},
		},
		{
			name: "a quota nothing has described is not charged",
			why: "its budget says nothing: charging it (from zero) would hold every request " +
				"for a quota a policy header merely named",
			reports: []Named{requests, {Name: "tokens", Tokens: true, Report: Report{Limit: 1000, Remaining: 1000, Window: time.Minute}}},
			cost:    200,
			units:   []float64{9, 0},
		},
		{
			name:    "a dropped quota is no longer charged",
			why:     "Drop forgets a quota for good, also for the admissions the last Plan set up",
			reports: []Named{{Name: "gone", Report: Report{Limit: 100, Remaining: 0, Reset: minute}}, requests},
			drop:    func(name string) bool { return name == "gone" },
			cost:    1,
			units:   []float64{9},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := NewBook(bookConfig())
			b.Observe(c.reports, t0, Counts{}, Seen{Horizon: horizon})
			b.Advance(t0.Add(time.Second), Counts{}, 100)
			if c.drop != nil {
				b.Drop(c.drop)
			}
			short, ok := b.Charge(c.cost, t0.Add(time.Second), 0, 0)
			assert.Equal(t, c.short == "", ok, "why: %s", c.why)
			assert.Equal(t, c.short, short, "why: %s", c.why)
			if c.refund {
				b.Refund(c.cost)
			}
			var units []float64
			for _, w := range b.states {
				units = append(units, w.Units())
			}
			assert.Equal(t, c.units, units, "why: %s", c.why)
		})
	}
}

func TestBookUntil(t *testing.T) {
	minute := reset(time.Minute)
	cases := []struct {
		name    string
		why     string
		reports []Named
		query   func(b *Book) time.Time
		want    time.Time
	}{
		{
			name:    "SpentUntil is the wake-up of a spent quota",
			why:     "the owner refuses at once a request whose wait for the reset is too long",
			reports: []Named{{Name: "requests", Report: Report{Limit: 100, Remaining: 0, Reset: reset(30 * time.Second)}}},
			query:   func(b *Book) time.Time { return b.SpentUntil(1, 0, t0.Add(time.Second)) },
			want:    reset(30 * time.Second).Add(RollGuard),
		},
		{
			name:    "SpentUntil is zero while every quota affords the cost",
			why:     "nothing to wait for: the request goes at once",
			reports: []Named{{Name: "requests", Report: Report{Limit: 100, Remaining: 10, Reset: minute}}},
			query:   func(b *Book) time.Time { return b.SpentUntil(1, 0, t0.Add(time.Second)) },
		},
		{
			name:    "SpentUntil counts a token quota by the request's cost",
			why:     "50 tokens left do not take a request costing 200: it waits for the reset",
			reports: []Named{{Name: "tokens", Tokens: true, Report: Report{Limit: 1000, Remaining: 50, Reset: reset(30 * time.Second)}}},
			query:   func(b *Book) time.Time { return b.SpentUntil(200, 0, t0.Add(time.Second)) },
			want:    reset(30 * time.Second).Add(RollGuard),
		},
		{
			name:    "HeldUntil is the wake-up of a spent request quota",
			why:     "every request waits for a spent request quota, whatever it costs",
			reports: []Named{{Name: "requests", Report: Report{Limit: 100, Remaining: 0, Reset: reset(30 * time.Second)}}},
			query:   func(b *Book) time.Time { return b.HeldUntil() },
			want:    reset(30 * time.Second).Add(RollGuard),
		},
		{
			name:    "HeldUntil ignores a spent token quota",
			why:     "a cheap request may still fit a token quota's remainder: only the cost tells",
			reports: []Named{{Name: "tokens", Tokens: true, Report: Report{Limit: 1000, Remaining: 50, Reset: reset(30 * time.Second)}}},
			query:   func(b *Book) time.Time { return b.HeldUntil() },
		},
		{
			name: "HeldUntil counts what a request quota must keep",
			why: "a leaky bucket keeps its last unit for another client's request in flight: " +
				"with one unit left it holds requests until the look a second later",
			reports: []Named{{Name: "bucket", Report: Report{Limit: 40, Remaining: 1}}},
			query:   func(b *Book) time.Time { return b.HeldUntil() },
			want:    reset(2 * time.Second),
		},
		{
			name:    "KeepUntil is a window after the last use when that is later than the reset",
			why:     "what the book learnt of an hourly quota is worth keeping for an hour without traffic",
			reports: []Named{{Name: "requests", Report: Report{Limit: 100, Remaining: 10, Reset: reset(30 * time.Second), Window: time.Hour}}},
			query:   func(b *Book) time.Time { return b.KeepUntil(t0.Add(time.Second)) },
			want:    reset(time.Hour + time.Second),
		},
		{
			name:    "KeepUntil is the reset when no window is known",
			why:     "the stated window's end is all the book knows to be worth keeping",
			reports: []Named{{Name: "requests", Report: Report{Limit: 100, Remaining: 10, Reset: reset(30 * time.Second)}}},
			query:   func(b *Book) time.Time { return b.KeepUntil(t0.Add(time.Second)) },
			want:    reset(30 * time.Second),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := NewBook(bookConfig())
			b.Observe(c.reports, t0, Counts{}, Seen{Horizon: horizon})
			b.Advance(t0.Add(time.Second), Counts{}, 100)
			assert.Equal(t, c.want, c.query(b), "why: %s", c.why)
		})
	}
}

// A quota the server stopped speaking of is forgotten at once for charges
// too, not only at the next Plan: a request is never refused by a quota the
// book no longer follows.
func TestAForgottenQuotaIsNotCharged(t *testing.T) {
	b := NewBook(BookConfig{Safety: 0.9, MaxDelay: time.Hour, Horizon: time.Hour})
	b.Observe([]Named{{Name: "a", Report: Report{Limit: 100, Remaining: 0, Reset: t0.Add(time.Minute)}}}, t0, Counts{}, Seen{})
	b.Advance(t0.Add(60010*time.Millisecond), Counts{}, 1)
	b.Advance(t0.Add(61210*time.Millisecond), Counts{}, 1)
	if short, ok := b.Charge(1, t0.Add(61210*time.Millisecond), 0, 0); !ok {
		t.Fatalf("the look was refused by %v", short)
	}
	b.Observe(nil, t0.Add(61300*time.Millisecond), Counts{}, Seen{})
	if b.Len() != 0 {
		t.Fatalf("a blind-rolled quota the response did not mention is forgotten: %v", b)
	}
	if short, ok := b.Charge(1, t0.Add(61300*time.Millisecond), 0, 0); !ok {
		t.Errorf("a forgotten quota refused a charge: %v", short)
	}
}
