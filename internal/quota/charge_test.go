package quota

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// entry is n admissions (or, with refund, n refunds) of a request of the
// given cost at t0+at; each charge must report ok.
type entry struct {
	at     time.Duration
	n      int
	cost   float64
	refund bool
	ok     bool
}

func TestCharge(t *testing.T) {
	minute := reset(time.Minute)
	cases := []struct {
		name    string
		why     string
		w       func() *State // requests() when nil
		events  []event
		entries []entry
		budget  int64 // Milli-units left
	}{
		{
			name: "a request quota is spent to zero, then a charge takes nothing",
			why: "request quotas count exactly, so a job may spend all that is left; the " +
				"fourth request of a budget of three must not be let through to a 429",
			events: []event{obs(0, 0, Report{Limit: 100, Remaining: 3, Reset: minute}, Seen{}), adv(0, Seen{})},
			entries: []entry{
				{n: 3, cost: 1, ok: true},
				{n: 1, cost: 1, ok: false},
			},
			budget: 0,
		},
		{
			name: "a token charge must leave the reserve",
			why: "Plan keeps a tenth of the token quota back for estimates that fall short; the " +
				"charge keeps it, not a rate, so a request admitted at once leaves it as surely " +
				"as a paced one: 4001 of 5000 would leave 999 < 1000 and takes nothing",
			w:      tokenQuota,
			events: []event{obs(0, 0, Report{Limit: 10000, Remaining: 5000, Reset: minute}, Seen{}), {at: time.Second, advance: true, unit: 100}},
			entries: []entry{
				{at: time.Second, n: 1, cost: 4001, ok: false},
				{at: time.Second, n: 1, cost: 4000, ok: true},
			},
			budget: 1000 * Milli,
		},
		{
			name: "a charge must leave others' spending accrued since the budget was brought up to date",
			why: "others take 3 a second; 10 s after the Advance they took 30 that no response " +
				"has shown yet, on top of the 150 kept for them until the reset: of 520, 340 " +
				"requests go and the 341st takes nothing",
			events: []event{
				obs(0, 0, Report{Limit: 600, Remaining: 600, Reset: minute, Window: time.Minute}, Seen{}),
				obs(10*time.Second, 50, Report{Limit: 600, Remaining: 520, Reset: minute, Window: time.Minute}, Seen{Admitted: 50}),
				adv(10*time.Second, Seen{Admitted: 50}),
			},
			entries: []entry{
				{at: 20 * time.Second, n: 340, cost: 1, ok: true},
				{at: 20 * time.Second, n: 1, cost: 1, ok: false},
			},
			budget: 180 * Milli,
		},
		{
			name: "a keep at its cap falls with the budget",
			why: "others take 9.2 a second (R34's bound for 600 a minute, of which we took 50); " +
				"the keep for them is at its cap, 0.9 of the 400 left, so 40 are ours. 10 s " +
				"after the Advance they took 92 more, and the keep is 0.9 of what is left: of " +
				"the 308 left, 30 are ours. Counted on top of the whole keep, the 92 took all",
			events: []event{
				obs(0, 0, Report{Limit: 600, Remaining: 600, Reset: minute, Window: time.Minute}, Seen{}),
				obs(10*time.Second, 50, Report{Limit: 600, Remaining: 400, Reset: minute, Window: time.Minute}, Seen{Admitted: 50}),
				adv(10*time.Second, Seen{Admitted: 50}),
			},
			entries: []entry{
				{at: 20 * time.Second, n: 30, cost: 1, ok: true},
				{at: 20 * time.Second, n: 1, cost: 1, ok: false},
			},
			budget: 370 * Milli,
		},
		{
			name: "charges and refunds of whole requests cancel exactly",
			why: "budgets are fixed point so that a request charged and given back leaves no " +
				"residue: token costs of a third, a tenth, 2.7 and 1e-4, each rounded up to " +
				"a milli-unit, refunded in another order, leave the budget as it was",
			w:      tokenQuota,
			events: []event{obs(0, 0, Report{Limit: 100000, Remaining: 50000, Reset: minute}, Seen{}), {at: time.Second, advance: true, unit: 1}},
			entries: []entry{
				{n: 1000, cost: 1.0 / 3, ok: true},
				{n: 1000, cost: 0.1, ok: true},
				{n: 1000, cost: 2.7, ok: true},
				{n: 1000, cost: 1e-4, ok: true},
				{n: 1000, cost: 0.1, refund: true},
				{n: 1000, cost: 1e-4, refund: true},
				{n: 1000, cost: 1.0 / 3, refund: true},
				{n: 1000, cost: 2.7, refund: true},
			},
			budget: 50000 * Milli,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := requests()
			if c.w != nil {
				w = c.w()
			}
			replay(t, w, c.events)
			for _, e := range c.entries {
				for i := range e.n {
					if e.refund {
						w.refund(e.cost)
						continue
					}
					before := w.budget.have
					if ok := w.charge(w.amount(e.cost), t0.Add(e.at), 0, 0); ok != e.ok {
						t.Fatalf("charge %d of cost %v at %v: ok = %v, want %v; why: %s", i+1, e.cost, e.at, ok, e.ok, c.why)
					}
					if !e.ok {
						assert.Equal(t, before, w.budget.have, "a refused charge takes nothing; why: %s", c.why)
					}
				}
			}
			assert.Equal(t, c.budget, w.budget.have, "why: %s", c.why)
		})
	}
}

func TestAmount(t *testing.T) {
	saying := func(q Report) *State {
		w := tokenQuota()
		w.Observe(q, t0, Seen{Horizon: horizon})
		return w
	}
	minute := reset(time.Minute)
	cases := []struct {
		name string
		why  string
		w    *State
		cost float64
		want int64
	}{
		{
			name: "a request quota takes one unit whatever the cost",
			why:  "a request quota counts requests: its cost in tokens is another quota's",
			w: func() *State {
				w := requests()
				w.Observe(Report{Limit: 100, Remaining: 50, Reset: minute}, t0, Seen{Horizon: horizon})
				return w
			}(),
			cost: 5000, want: Milli,
		},
		{
			name: "a token quota takes the cost",
			why:  "a token quota is charged what the request is estimated to take of it",
			w:    saying(Report{Limit: 1000, Remaining: 500, Reset: minute}),
			cost: 250, want: 250 * Milli,
		},
		{
			name: "a token cost is rounded up to a milli-unit",
			why:  "never charge less than the estimate: rounded down, many small requests spend more than the budget counts",
			w:    saying(Report{Limit: 1000, Remaining: 500, Reset: minute}),
			cost: 1e-4, want: 1,
		},
		{
			name: "a token cost above the limit is charged as the limit",
			why:  "a cost above what the quota can ever hold would wait for a window that never comes",
			w:    saying(Report{Limit: 1000, Remaining: 500, Reset: minute}),
			cost: 5000, want: 1000 * Milli,
		},
		{
			name: "with no limit stated the highest Remaining stands in for it",
			why:  "the peak is the most the quota was seen to hold: the cap must not wait on a limit nobody states",
			w:    saying(Report{Remaining: 300, Reset: minute}),
			cost: 5000, want: 300 * Milli,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, c.w.amount(c.cost), "why: %s", c.why)
		})
	}
}

// A full token quota takes a charge of any size up to its limit, whatever
// the reserve and the keep a smooth quota adds (a unit more): the keep,
// bounded by the limit less the unit, must not round up past the limit
// less the amount charged.
func TestAFullQuotaTakesAChargeNearHalfItsLimit(t *testing.T) {
	w := tokenQuota()
	w.known, w.size.limit, w.kind, w.size.most = true, 30000, Sliding, milli(30000)
	now := t0.Add(time.Second)
	refused := 0
	for amount := int64(13_500_000); amount < 15_000_000; amount += 997 {
		w.budget.have = milli(30000)
		w.Advance(now, 0, float64(amount)/Milli)
		if !w.charge(amount, now, 0, 0) {
			refused++
		}
	}
	assert.Zero(t, refused, "charges a full quota refused")
}
