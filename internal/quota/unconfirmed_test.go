package quota

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// burstStep is one step of TestChargeLeavesRoomForStatedCostsInFlight at
// t0+at: a response (report, with inflight stated costs unseen) observed and
// planned, or requests of cost charged one after another until one is
// refused, each admitted one joining those in flight as the owner counts
// them (Counts.InflightCost).
type burstStep struct {
	at       time.Duration
	report   *Named
	inflight float64 // stated costs in flight at the response, units
	probe    bool    // a look is let through (after the Plan)
	others   float64 // kept for others' spending until the reset (Plan's keep beyond the reserve)
	cost     float64 // a burst: requests of this cost (0: none)
	n        int     // at most this many (0: until one is refused)
	admitted int     // how many of the burst go
}

// TestChargeLeavesRoomForStatedCostsInFlight replays bursts of requests on
// stated costs against a token quota: a charge leaves room for the costs in
// flight to fall short by estimateError, beyond the reserve, and the
// answers free the rest.
func TestChargeLeavesRoomForStatedCostsInFlight(t *testing.T) {
	window := reset(10 * time.Second)
	tokens := func(limit, remaining float64) *Named {
		return &Named{Name: "tokens", Tokens: true, Report: Report{Limit: limit, Remaining: remaining, Reset: window}}
	}
	requests := &Named{Name: "requests", Report: Report{Limit: 50, Remaining: 10, Reset: window}}
	cases := []struct {
		name  string
		why   string
		steps []burstStep
	}{
		{
			name: "a burst on stated costs stops where they could fall short by more than is left",
			why: "34,000 left, a reserve of 3,500: 30 requests of 1,000 would leave 4,000, and " +
				"at 30% more each the server would count 39,000 (a 429 from the 27th); 26 " +
				"leave 8,000, which holds 30% of the 26,000 in flight",
			steps: []burstStep{
				{report: tokens(35000, 34000)},
				{at: 20 * time.Millisecond, cost: 1000, admitted: 26},
			},
		},
		{
			name: "the answers let the rest of the window go, down to the reserve",
			why: "once the 26 are answered (each took what it was estimated at) 8,000 are " +
				"left and nothing is in flight: 4 more go and leave the reserve, 30 in " +
				"all, as many as the reserve alone lets go, a round trip later",
			steps: []burstStep{
				{report: tokens(35000, 34000)},
				{at: 20 * time.Millisecond, cost: 1000, admitted: 26},
				{at: 40 * time.Millisecond, report: tokens(35000, 8000)},
				{at: 40 * time.Millisecond, cost: 1000, admitted: 4},
			},
		},
		{
			name: "an answer that leaves others in flight keeps room for theirs",
			why: "30,000 left with 20,000 of stated costs still in flight: a budget of " +
				"10,000, of which 3 requests of 1,000 go, leaving 30% of the 23,000 then " +
				"in flight (6 would go down to the reserve alone)",
			steps: []burstStep{
				{report: tokens(35000, 34000)},
				{at: 40 * time.Millisecond, report: tokens(35000, 30000), inflight: 20000},
				{at: 40 * time.Millisecond, cost: 1000, admitted: 3},
			},
		},
		{
			name: "what is kept for others' spending is no room for our estimates",
			why: "of 34,000, 10,000 are kept for what others spend before the reset: 20 " +
				"requests of 1,000 would leave the keep of 13,500 but only 3,500 of it for " +
				"the 6,000 that 30% of them can take; 18 leave 16,000",
			steps: []burstStep{
				{report: tokens(35000, 34000), others: 10000},
				{at: 20 * time.Millisecond, cost: 1000, admitted: 18},
			},
		},
		{
			name: "a lone request is held back by the reserve alone",
			why: "nothing else in flight: no answer would come to wait for, and 16,000 of " +
				"20,000 leave the reserve, although 30% of 16,000 would not fit in it",
			steps: []burstStep{
				{report: tokens(35000, 20000)},
				{at: 20 * time.Millisecond, cost: 16000, admitted: 1},
			},
		},
		{
			name: "one request in flight is enough to wait for",
			why: "after a request of 1,000, 16,000 of the 20,000 left would leave 4,000, less " +
				"than 30% of the 17,000 in flight: it waits for the first one's answer",
			steps: []burstStep{
				{report: tokens(35000, 21000)},
				{at: 20 * time.Millisecond, cost: 1000, n: 1, admitted: 1},
				{at: 20 * time.Millisecond, cost: 16000, admitted: 0},
			},
		},
		{
			name: "a request quota is spent to its last unit whatever is in flight",
			why:  "requests count exactly: a tenth left is ten requests, however many tokens are in flight",
			steps: []burstStep{
				{report: requests, inflight: 30000},
				{at: 20 * time.Millisecond, cost: 1000, admitted: 10},
			},
		},
		{
			name: "a look goes whatever is in flight",
			why: "a look's answer is what sets the budget; held back for the costs in flight " +
				"(whose answers may be of the window before) it would never go",
			steps: []burstStep{
				{report: tokens(35000, 34000), inflight: 20000, probe: true},
				{at: 20 * time.Millisecond, cost: 1000, admitted: 1},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := NewBook(bookConfig())
			var flight float64 // the owner's count of stated costs in flight
			for _, s := range c.steps {
				now := t0.Add(s.at)
				if s.report != nil {
					flight = s.inflight
					counts := Counts{InflightCost: s.inflight}
					b.Observe([]Named{*s.report}, now, counts, Seen{Horizon: horizon})
					b.Advance(now, counts, 1000)
					if s.probe {
						b.find(s.report.Name).startLook(1000)
					}
					// As Plan keeps others' measured spending until the
					// reset of a quota they drain.
					b.find(s.report.Name).budget.keep += milli(s.others)
				}
				if s.cost == 0 {
					continue
				}
				admitted := 0
				for (s.n == 0 || admitted < s.n) && chargeOK(b, s.cost, now, flight) {
					admitted++
					flight += s.cost
				}
				assert.Equal(t, s.admitted, admitted, "requests of %v admitted at %v; why: %s", s.cost, s.at, c.why)
			}
		})
	}
}

func chargeOK(b *Book, cost float64, now time.Time, flight float64) bool {
	_, ok := b.Charge(cost, now, 0, flight)
	return ok
}
