package store

import (
	"context"
	"math"
	"time"
)

// A Budgeter is a [Store] that also keeps the budget of each quota a fleet
// of limiters shares: how much of it the fleet may still spend before its
// reset. It is what lets replicas spend a quota as one client does: any of
// them goes at once while the fleet's budget affords the work, and none
// spends what another already took.
//
// The budget of a quota follows the rule a single limiter keeps, for the
// fleet: the lowest Remaining its members have seen in the current window,
// less everything the members hold (units leased to them and not yet known
// to the server: unused leases and requests in flight), charged as units
// are leased. Members lease units in batches ([Budgeter.Lease]), spend them
// locally, and report with their next call what they saw and what they
// still hold; a member that stops calling for its lease's TTL is forgotten,
// and what it held is taken as spent for the window: its requests may have
// been counted by the server after the last figure any member reported,
// and handed out again they would meet a 429. A new window (a Remaining
// whose reset is later than the one the store knows, by more than resets
// wander) sets the budget afresh; until a member has seen it, members go by
// their own models, and what they spend so is held as if leased
// ([LeaseRequest.Unbudgeted]). Every step of a call is atomic: members
// never lease the same unit twice.
//
// Quotas are named by key and quota name; units are the quota's (requests
// or tokens). Times are durations from the moment of the call, by the
// store's clock for what it answers.
type Budgeter interface {
	Store
	// Lease reports what member r.Member saw and holds of the quota and
	// leases it up to r.Take more units of the budget. It never waits.
	Lease(ctx context.Context, key string, r LeaseRequest) (Lease, error)
}

// LeaseRequest is one member's call to [Budgeter.Lease].
type LeaseRequest struct {
	// Quota names the quota within the key ("requests", "tokens", ...).
	Quota string
	// Member identifies the caller among the fleet's members: one per
	// limiter, stable for its life, unique across processes.
	Member string
	// Take is how many units the member asks for; 0 only reports.
	Take float64
	// Held is what the member holds now: units leased to it and not yet
	// known to the server (unused, or spent on requests still in flight).
	Held float64
	// Unbudgeted is what the member spends by its own model if the store
	// knows no budget for the window (the request it is admitting): the
	// store counts it as held then, as if leased. The window's first
	// figures may not count it, and a budget set from them would lease it
	// again. Ignored while the budget is known.
	Unbudgeted float64
	// Seen is the freshest figure the member's responses stated since its
	// last call; nil when there is none.
	Seen *Sighting
	// TTL is how long the member's holding stands without another call;
	// its grant is its to spend for as long (the member stops spending it
	// sooner, by its own clock). Zero or less means DefaultLeaseTTL.
	TTL time.Duration
	// Reserve, when set, is what a grant for work of a lower class (batch
	// work) must leave of the budget to work of a higher one (interactive
	// work); nil for work of the higher class.
	Reserve *Reserve
	// InteractiveAgo is how long ago the member last had work of the
	// higher class to do; negative when it never had. The store keeps the
	// fleet's latest, so that a reserve holds across members.
	InteractiveAgo time.Duration
}

// Reserve is what a grant for batch work leaves of a budget, in the quota's
// units: Active while any member had interactive work within Idle, Floor
// otherwise.
type Reserve struct {
	Active, Floor float64
	Idle          time.Duration
}

// Sighting is what one response said of a quota.
type Sighting struct {
	// Remaining is what the server said is left.
	Remaining float64
	// ResetIn is how long from the call until the window resets; 0 when
	// the server stated no reset.
	ResetIn time.Duration
	// Held is what the member held when the response arrived (the server
	// may not have counted it).
	Held float64
}

// Lease is a [Budgeter]'s answer.
type Lease struct {
	// Granted is how many units the member may spend, at once, within its
	// TTL: at most Take, at most the budget.
	Granted float64
	// Known reports that the store knows the budget of the current window:
	// a member has seen the window and its reset has not passed. While it
	// is not known nothing is granted, and members go by what they know.
	Known bool
	// Budget is what is left to lease after this grant, when Known.
	Budget float64
	// ResetIn is how long until the window the budget is of resets, when
	// Known and the server stated one.
	ResetIn time.Duration
	// Members is how many members the store knows (the caller among
	// them): a member cut off from the store spends at most its share of
	// the last budget it was told.
	Members int
}

// DefaultLeaseTTL is how long a member's holding stands without a call:
// long against the round trips of one member's calls, short against a
// window, so that a member that went away is soon forgotten.
const DefaultLeaseTTL = 2 * time.Second

// budgetState is one quota's fleet budget; times are seconds on the
// store's clock. redisstore's Lua script implements the same arithmetic.
//
// The budget is not stored but derived: floor, the lowest figure the
// window's sightings gave (Remaining less what the sighting's member then
// held: the server may not have counted any of it), less what every member
// holds now. A member's holding falls as its requests are answered, and the
// budget rises with it; a sighting's figure only ever lowers the floor. The
// sighting's member is counted twice for what it still holds of what it
// held then: a lower bound all the same, and exact again once those
// requests are answered.
type budgetState struct {
	floor   float64 // lowest sighting figure of the window; meaningful while known
	known   bool
	reset   float64 // when the window resets; 0 none stated
	members map[string]budgetMember
	// interactive is when a member last had interactive work; -Inf never.
	interactive float64
	seenAny     bool // interactive is set
}

type budgetMember struct {
	held    float64
	expires float64
}

// resetSlack is how far apart two stated resets may be and still name one
// window: servers round resets to whole seconds, and a relative reset moves
// with latency.
const resetSlack = 1.0

// resetJitter is how far apart two resets of one window stated relative to
// their responses may be for the latency between them alone.
const resetJitter = 0.1

// lease applies r at now and returns the answer (see Budgeter).
func (b *budgetState) lease(now float64, r LeaseRequest) Lease {
	ttl := r.TTL.Seconds()
	if !(ttl > 0) {
		ttl = DefaultLeaseTTL.Seconds()
	}
	held := b.renew(now, ttl, r)
	members := len(b.members)
	if b.known && b.reset > 0 && now >= b.reset {
		b.known = false // the window is over: the next sighting opens the next
	}
	if s := r.Seen; s != nil && s.Remaining >= 0 && !math.IsInf(s.Remaining, 0) {
		b.sight(now, s)
	}
	if r.InteractiveAgo >= 0 {
		if at := now - r.InteractiveAgo.Seconds(); !b.seenAny || at > b.interactive {
			b.interactive, b.seenAny = at, true
		}
	}
	out := Lease{Known: b.known, Members: members}
	if !b.known {
		if u := finite(r.Unbudgeted); u > 0 {
			m := b.members[r.Member]
			m.held += u
			b.members[r.Member] = m
		}
		return out
	}
	budget := b.floor - held
	leave := 0.0
	if rv := r.Reserve; rv != nil {
		leave = finite(rv.Floor)
		if b.seenAny && now-b.interactive < rv.Idle.Seconds() {
			leave = max(leave, finite(rv.Active))
		}
	}
	if take := finite(r.Take); take > 0 && budget-leave > 0 {
		budget -= leave
		out.Granted = min(take, budget)
		budget -= out.Granted
		m := b.members[r.Member]
		m.held += out.Granted
		b.members[r.Member] = m
		budget += leave
	}
	out.Budget = max(budget, 0)
	if b.reset > 0 {
		out.ResetIn = secondsToDuration(b.reset - now)
	}
	return out
}

// renew records r's member as holding what r says until now + ttl, drops
// the members whose lease lapsed, and returns what the members hold.
func (b *budgetState) renew(now, ttl float64, r LeaseRequest) float64 {
	if b.members == nil {
		b.members = make(map[string]budgetMember)
	}
	b.members[r.Member] = budgetMember{held: finite(r.Held), expires: now + ttl}
	held := 0.0
	for id, m := range b.members {
		if m.expires < now {
			// Spent, as far as anyone can tell: what it held left flight
			// unreported (forgotten as unspent, it was leased again while
			// the server had counted it: a 429 every TTL to 100 replicas
			// whose workers came back while the window was spent).
			if b.known {
				b.floor -= m.held
			}
			delete(b.members, id)
			continue
		}
		held += m.held
	}
	return held
}

// sight reads a member's sighting s of the quota at now: a new window's
// figure, the lowest of the current one's, or an overtaken one ignored.
func (b *budgetState) sight(now float64, s *Sighting) {
	figure := s.Remaining - finite(s.Held)
	reset := 0.0
	if s.ResetIn > 0 {
		reset = now + s.ResetIn.Seconds()
	}
	// Resets of one window wander by their rounding (a second at
	// most) and by latency (a tenth of a second, resetJitter); a new
	// window's is a window later, and a window is at least as long as
	// what is left of it: half of that tells them apart.
	slack := min(resetSlack, max((reset-now)/2, resetJitter))
	switch {
	case b.known && reset > 0 && b.reset > 0 && reset < b.reset-slack:
		// Overtaken: a figure of the window before, read late.
	case !b.known || reset == 0 || reset > b.reset+slack:
		// A new window; or a quota with no reset, which refills as
		// it goes: its latest figure is its freshest.
		b.known, b.floor, b.reset = true, figure, reset
	default:
		b.floor = min(b.floor, figure)
	}
}

// finite is v when it is a finite number not below zero, else 0.
func finite(v float64) float64 {
	if !(v >= 0) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// Lease implements [Budgeter].
func (s *Memory) Lease(ctx context.Context, key string, r LeaseRequest) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k, now := s.touch(key)
	if k.budgets == nil {
		k.budgets = make(map[string]*budgetState)
	}
	b := k.budgets[r.Quota]
	if b == nil {
		b = new(budgetState)
		k.budgets[r.Quota] = b
	}
	return b.lease(now, r), nil
}
