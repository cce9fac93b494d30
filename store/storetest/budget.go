package storetest

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/pacer-go/pacer/store"
)

// The budget cases run only for a store that implements store.Budgeter;
// each states one rule of the fleet budget the Budgeter documents.
var budgetCases = []struct {
	name string
	fn   func(t *testing.T, a, b store.Budgeter)
}{
	{"BudgetIsUnknownUntilAMemberSeesTheQuota", testBudgetUnknown},
	{"BudgetIsTheSightingLessWhatMembersHold", testBudgetFromSighting},
	{"GrantsNeverExceedTheBudgetAndCountAsHeld", testBudgetGrants},
	{"BudgetRisesAsMembersReportLessHeld", testBudgetRisesAsHeldFalls},
	{"ALowerSightingLowersTheBudgetAHigherOneOfTheWindowDoesNot", testBudgetLowestFigure},
	{"ALaterResetOpensANewWindowAnEarlierOneIsIgnored", testBudgetNewWindow},
	{"BudgetIsUnknownOnceTheResetPasses", testBudgetResetPasses},
	{"AResetAnInstantAwayIsAResetNotNone", testBudgetResetAnInstantAway},
	{"WhatAMemberSpendsWhileTheBudgetIsUnknownCountsAsHeld", testBudgetUnbudgeted},
	{"AMemberIsForgottenAfterItsTTLAndWhatItHeldTakenAsSpent", testBudgetMemberTTL},
	{"QuotasAndKeysHaveBudgetsOfTheirOwn", testBudgetIndependent},
	{"BatchGrantsLeaveTheReserveWhileInteractiveWorkIsActive", testBudgetReserve},
	{"ConcurrentLeasesNeverExceedTheBudget", testBudgetConcurrent},
	{"HostileLeaseValuesAreClampedNeverPanics", testBudgetHostile},
}

func runBudgetCases(t *testing.T, newPeers func(t *testing.T) Peers) {
	for _, c := range budgetCases {
		t.Run("Budget/"+c.name, func(t *testing.T) {
			peers := newPeers(t)
			a, ok := peers().(store.Budgeter)
			if !ok {
				t.Skip("the store keeps no budgets (store.Budgeter)")
			}
			b := peers().(store.Budgeter)
			c.fn(t, a, b)
		})
	}
}

// lease calls s.Lease and fails the test on an error.
func lease(t *testing.T, s store.Budgeter, key string, r store.LeaseRequest) store.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r.Quota == "" {
		r.Quota = "requests"
	}
	l, err := s.Lease(ctx, key, r)
	if err != nil {
		t.Fatalf("Lease(%q, %+v): %v", key, r, err)
	}
	return l
}

func seen(remaining float64, resetIn time.Duration, held float64) *store.Sighting {
	return &store.Sighting{Remaining: remaining, ResetIn: resetIn, Held: held}
}

func checkLease(t *testing.T, what string, l store.Lease, known bool, granted, budget float64) {
	t.Helper()
	if l.Known != known || math.Abs(l.Granted-granted) > 1e-9 || math.Abs(l.Budget-budget) > 1e-9 {
		t.Errorf("%s: %+v, want Known %v Granted %v Budget %v", what, l, known, granted, budget)
	}
}

func testBudgetUnknown(t *testing.T, a, _ store.Budgeter) {
	l := lease(t, a, "k", store.LeaseRequest{Member: "a", Take: 5})
	checkLease(t, "no sighting yet", l, false, 0, 0)
}

func testBudgetFromSighting(t *testing.T, a, b store.Budgeter) {
	lease(t, b, "k", store.LeaseRequest{Member: "b", Held: 3})
	// 100 left when a held 2 (the server may not have counted them): 98.
	// Less what the members hold now, a's 2 among them (they may be the
	// same 2: counted twice until a reports them answered).
	l := lease(t, a, "k", store.LeaseRequest{Member: "a", Held: 2, Seen: seen(100, time.Minute, 2)})
	checkLease(t, "100 left, a held 2 then and now, b holds 3", l, true, 0, 93)
	if l.ResetIn < time.Minute-Tolerance || l.ResetIn > time.Minute+Tolerance {
		t.Errorf("ResetIn %v, want about a minute", l.ResetIn)
	}
	checkLease(t, "the other member sees it", lease(t, b, "k", store.LeaseRequest{Member: "b", Held: 3}), true, 0, 93)
	checkLease(t, "a's 2 answered", lease(t, a, "k", store.LeaseRequest{Member: "a"}), true, 0, 95)
}

func testBudgetGrants(t *testing.T, a, b store.Budgeter) {
	lease(t, a, "k", store.LeaseRequest{Member: "a", Seen: seen(10, time.Minute, 0)})
	checkLease(t, "a takes 4", lease(t, a, "k", store.LeaseRequest{Member: "a", Take: 4}), true, 4, 6)
	checkLease(t, "b takes what is left", lease(t, b, "k", store.LeaseRequest{Member: "b", Take: 8}), true, 6, 0)
	checkLease(t, "nothing is left", lease(t, b, "k", store.LeaseRequest{Member: "b", Held: 6, Take: 1}), true, 0, 0)
}

func testBudgetRisesAsHeldFalls(t *testing.T, a, b store.Budgeter) {
	lease(t, a, "k", store.LeaseRequest{Member: "a", Seen: seen(10, time.Minute, 0)})
	lease(t, b, "k", store.LeaseRequest{Member: "b", Take: 10})
	// b's requests were answered, and a's sighting says the server counted
	// them: b holds nothing now.
	lease(t, a, "k", store.LeaseRequest{Member: "a", Seen: seen(0, time.Minute, 0)})
	checkLease(t, "counted and answered: nothing left, nothing held", lease(t, b, "k", store.LeaseRequest{Member: "b"}), true, 0, 0)

	lease(t, a, "j", store.LeaseRequest{Member: "a", Seen: seen(10, time.Minute, 0)})
	lease(t, b, "j", store.LeaseRequest{Member: "b", Take: 4})
	checkLease(t, "b holds 4", lease(t, a, "j", store.LeaseRequest{Member: "a"}), true, 0, 6)
	checkLease(t, "b gives up what it held, unspent", lease(t, b, "j", store.LeaseRequest{Member: "b"}), true, 0, 10)
}

func testBudgetLowestFigure(t *testing.T, a, b store.Budgeter) {
	lease(t, a, "k", store.LeaseRequest{Member: "a", Seen: seen(50, time.Minute, 0)})
	checkLease(t, "lower", lease(t, b, "k", store.LeaseRequest{Member: "b", Seen: seen(40, time.Minute, 0)}), true, 0, 40)
	checkLease(t, "higher, same window: overtaken", lease(t, a, "k", store.LeaseRequest{Member: "a", Seen: seen(45, time.Minute, 0)}), true, 0, 40)
}

func testBudgetNewWindow(t *testing.T, a, b store.Budgeter) {
	lease(t, a, "k", store.LeaseRequest{Member: "a", Seen: seen(5, time.Minute, 0)})
	checkLease(t, "a later reset: a new window", lease(t, b, "k", store.LeaseRequest{Member: "b", Seen: seen(90, 2*time.Minute, 0)}), true, 0, 90)
	checkLease(t, "an earlier reset: the window before, read late", lease(t, a, "k", store.LeaseRequest{Member: "a", Seen: seen(1, time.Minute, 0)}), true, 0, 90)
	checkLease(t, "no reset stated: the latest figure", lease(t, a, "n", store.LeaseRequest{Member: "a", Seen: seen(10, 0, 0)}), true, 0, 10)
	checkLease(t, "and again", lease(t, a, "n", store.LeaseRequest{Member: "a", Seen: seen(30, 0, 0)}), true, 0, 30)
}

func testBudgetResetPasses(t *testing.T, a, _ store.Budgeter) {
	reset := 10 * Tolerance
	lease(t, a, "k", store.LeaseRequest{Member: "a", Seen: seen(5, reset, 0)})
	time.Sleep(reset + Tolerance)
	checkLease(t, "past the reset", lease(t, a, "k", store.LeaseRequest{Member: "a", Take: 1}), false, 0, 0)
}

func testBudgetResetAnInstantAway(t *testing.T, a, _ store.Budgeter) {
	// A figure read just before its window ended, reported as it ends: the
	// window it opens ends at once. (Rounded down to no reset at all, it
	// would stand for good, and nothing more would be granted.)
	lease(t, a, "k", store.LeaseRequest{Member: "a", Seen: seen(0, time.Nanosecond, 0)})
	time.Sleep(Tolerance)
	checkLease(t, "past the reset", lease(t, a, "k", store.LeaseRequest{Member: "a", Take: 1}), false, 0, 0)
}

func testBudgetUnbudgeted(t *testing.T, a, b store.Budgeter) {
	// a sends 2 by its own model while no budget is known; b's figure of
	// the new window may not count them.
	checkLease(t, "unknown", lease(t, a, "k", store.LeaseRequest{Member: "a", Take: 5, Unbudgeted: 2}), false, 0, 0)
	checkLease(t, "10 left, a holds its 2", lease(t, b, "k", store.LeaseRequest{Member: "b", Seen: seen(10, time.Minute, 0)}), true, 0, 8)
	checkLease(t, "a's 2 answered", lease(t, a, "k", store.LeaseRequest{Member: "a"}), true, 0, 10)
	checkLease(t, "known: a lease, not its own model's", lease(t, a, "k", store.LeaseRequest{Member: "a", Take: 1, Unbudgeted: 1}), true, 1, 9)
}

func testBudgetMemberTTL(t *testing.T, a, b store.Budgeter) {
	ttl := 10 * Tolerance
	lease(t, a, "k", store.LeaseRequest{Member: "a", Seen: seen(10, time.Minute, 0), TTL: ttl})
	lease(t, b, "k", store.LeaseRequest{Member: "b", Take: 4, TTL: ttl})
	checkLease(t, "b holds 4", lease(t, a, "k", store.LeaseRequest{Member: "a", TTL: ttl}), true, 0, 6)
	time.Sleep(ttl + Tolerance)
	// b's 4 may have reached the server after the last figure anyone
	// reported: they stay out of the budget until the window ends.
	checkLease(t, "b is gone, its 4 spent", lease(t, a, "k", store.LeaseRequest{Member: "a", TTL: ttl}), true, 0, 6)
	lease(t, b, "k", store.LeaseRequest{Member: "b", Take: 1, TTL: ttl})
	checkLease(t, "b back: a member anew", lease(t, a, "k", store.LeaseRequest{Member: "a", TTL: ttl}), true, 0, 5)
}

func testBudgetIndependent(t *testing.T, a, _ store.Budgeter) {
	lease(t, a, "k", store.LeaseRequest{Member: "a", Seen: seen(10, time.Minute, 0)})
	checkLease(t, "another quota", lease(t, a, "k", store.LeaseRequest{Quota: "tokens", Member: "a", Take: 1}), false, 0, 0)
	checkLease(t, "another key", lease(t, a, "j", store.LeaseRequest{Member: "a", Take: 1}), false, 0, 0)
}

func testBudgetConcurrent(t *testing.T, a, b store.Budgeter) {
	const budget = 200
	lease(t, a, "k", store.LeaseRequest{Member: "seer", Seen: seen(budget, time.Minute, 0)})
	var mu sync.Mutex
	granted := 0.0
	var wg sync.WaitGroup
	for i := range 8 {
		s := a
		if i%2 == 1 {
			s = b
		}
		member := fmt.Sprint("m", i)
		wg.Go(func() {
			held := 0.0
			for range 40 {
				l := lease(t, s, "k", store.LeaseRequest{Member: member, Held: held, Take: 3})
				held += l.Granted
				mu.Lock()
				granted += l.Granted
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if granted > budget+1e-9 {
		t.Errorf("granted %v of a budget of %v", granted, float64(budget))
	}
	if granted < budget-1e-9 {
		t.Errorf("granted %v of a budget of %v: some was lost", granted, float64(budget))
	}
}

func testBudgetHostile(t *testing.T, a, _ store.Budgeter) {
	for _, r := range []store.LeaseRequest{
		{Member: "a", Take: math.NaN(), Held: math.Inf(1), Seen: seen(math.NaN(), -time.Hour, math.Inf(-1))},
		{Member: "a", Take: -5, Held: -1, Seen: seen(-10, time.Minute, -1)},
		{Member: "a", Take: math.Inf(1), Seen: seen(math.Inf(1), time.Minute, 0)},
		{Member: "", Take: 1e300, Held: 1e300, TTL: -time.Second},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := a.Lease(ctx, "k", r)
		cancel()
		if err == nil && (l.Granted < 0 || math.IsNaN(l.Granted) || math.IsInf(l.Granted, 0) || l.Budget < 0 || math.IsNaN(l.Budget)) {
			t.Errorf("Lease(%+v) = %+v: a grant or budget out of range", r, l)
		}
	}
}

func testBudgetReserve(t *testing.T, a, b store.Budgeter) {
	rv := &store.Reserve{Active: 10, Floor: 2, Idle: 10 * Tolerance}
	lease(t, a, "k", store.LeaseRequest{Member: "a", Seen: seen(100, time.Minute, 0), InteractiveAgo: -1})
	checkLease(t, "no interactive work ever: batch leaves the floor",
		lease(t, b, "k", store.LeaseRequest{Member: "b", Take: 200, Reserve: rv, InteractiveAgo: -1}), true, 98, 2)

	lease(t, a, "j", store.LeaseRequest{Member: "a", Seen: seen(100, time.Minute, 0), InteractiveAgo: 0})
	checkLease(t, "interactive work on another member: batch leaves the reserve",
		lease(t, b, "j", store.LeaseRequest{Member: "b", Take: 200, Reserve: rv, InteractiveAgo: -1}), true, 90, 10)
	checkLease(t, "interactive work takes the reserve",
		lease(t, a, "j", store.LeaseRequest{Member: "a", Take: 200, InteractiveAgo: 0}), true, 10, 0)

	lease(t, a, "i", store.LeaseRequest{Member: "a", Seen: seen(100, time.Minute, 0), InteractiveAgo: 0})
	time.Sleep(rv.Idle + Tolerance)
	checkLease(t, "interactive work idle: batch leaves the floor",
		lease(t, b, "i", store.LeaseRequest{Member: "b", Take: 200, Reserve: rv, InteractiveAgo: -1}), true, 98, 2)
}
