package quota

import (
	"math"
	"slices"
	"time"
)

// Book is every quota of one endpoint, by name. A request is charged to
// every known quota it counts against (1 to each request quota, its cost to
// each token quota) and goes only if every one affords it (R2).
//
// A Book is not safe for concurrent use: its owner locks around each call.
type Book struct {
	cfg     BookConfig
	states  []*State
	charged []*State // the known quotas, as of the last Advance
}

// BookConfig configures a Book.
type BookConfig struct {
	// Safety and MaxDelay are every quota's (see Config).
	Safety   float64
	MaxDelay time.Duration
	// Horizon bounds how far away a stated reset is believed (R8).
	Horizon time.Duration
	// Fleet: a fleet spends the quotas via a store of buckets (Mods Fleet).
	Fleet bool
	// Coordinated marks an endpoint whose quotas a fleet spends under a
	// budget a shared store keeps (Mods Coordinated).
	Coordinated bool
	// Inferred names the quota the owner infers from its own answers (Mods
	// Inferred); not with Fleet or Coordinated.
	Inferred string
	// Routed: the owner is the limiter of one route of a host that keeps
	// a quota per route (Mods Routed).
	Routed bool
}

// MaxQuotas caps the quotas tracked per endpoint (R8).
const MaxQuotas = 16

// NewBook returns a Book that knows no quota yet.
func NewBook(c BookConfig) *Book { return &Book{cfg: c} }

// Named is what a response said of one quota, by name.
type Named struct {
	Name   string
	Tokens bool // counted in tokens (see Config.Tokens)
	Report
}

// Counts is what the owner has admitted, in requests and in stated tokens,
// in flight (admitted, not yet answered) and ever. Blind requests (no
// stated cost) are counted apart: each token quota prices them (R50).
type Counts struct {
	Inflight, InflightCost float64
	Admitted, AdmittedCost float64
	Blind, BlindInflight   float64
}

func (c Counts) unseen(s *State) float64 {
	if s.cfg.Tokens {
		return c.InflightCost + c.BlindInflight*s.cost.mean()
	}
	return c.Inflight
}

func (c Counts) admitted(s *State) float64 {
	if s.cfg.Tokens {
		return c.AdmittedCost + float64(s.cost.charged)/Milli
	}
	return c.Admitted
}

// Observe folds in what one response said of its quotas, at now (R8, R31);
// c counts what is in flight besides the response's own request, seen the
// rest. It reports whether a quota the response described is spent before
// a stated reset.
func (b *Book) Observe(rs []Named, now time.Time, c Counts, seen Seen) (spent bool) {
	var mentioned uint64 // bit i: b.states[i] was described (MaxQuotas ≤ 64)
	seen.Blind, seen.BlindUnseen, seen.Stated = c.Blind, c.BlindInflight, c.AdmittedCost-c.InflightCost
	for k := range rs {
		q, ok := b.sane(&rs[k], now)
		if !ok {
			continue
		}
		i, s := b.state(rs[k].Name, rs[k].Tokens)
		mentioned |= 1 << i
		seen.Unseen, seen.Admitted = c.unseen(s), c.admitted(s) // in the quota's unit
		s.Observe(q, now, seen)
		if b.cfg.Fleet {
			s.drift.rate, s.drift.fall, s.budget.drain = 0, 0, 0 // the store holds the fleet to one rate (R39)
		}
		if q.Remaining != Unstated && q.Remaining < 1 && !q.Reset.IsZero() {
			spent = true
		}
	}
	var gone []*State
	for i, s := range b.states {
		if s.look.out && s.rolled && mentioned&(1<<i) == 0 {
			gone = append(gone, s)
		}
	}
	if gone != nil {
		b.drop(func(s *State) bool { return slices.Contains(gone, s) })
	}
	return spent
}

// sane is r's report clamped (R8), and whether the model can use it.
func (b *Book) sane(r *Named, now time.Time) (Report, bool) {
	q := r.Report
	finite := func(v float64) bool { return v >= 0 && !math.IsInf(v, 1) } // false for NaN
	if !finite(q.Remaining) && q.Remaining != Unstated || !finite(q.Limit) || len(b.states) >= MaxQuotas && b.find(r.Name) == nil {
		return q, false
	}
	if q.Limit > 0 {
		q.Remaining = min(q.Remaining, q.Limit)
	}
	q.Window = max(q.Window, 0)
	if !q.Reset.IsZero() && q.Reset.Sub(now) > b.cfg.Horizon {
		q.Reset = now.Add(b.cfg.Horizon)
	}
	return q, true
}

func (b *Book) find(name string) *State {
	for _, s := range b.states {
		if s.cfg.Name == name {
			return s
		}
	}
	return nil
}

// state returns the named quota's state and its index, creating it.
func (b *Book) state(name string, tokens bool) (int, *State) {
	for i, s := range b.states {
		if s.cfg.Name == name {
			return i, s
		}
	}
	var mods Mods
	switch {
	case b.cfg.Fleet:
		mods = Fleet
	case b.cfg.Coordinated:
		mods = Coordinated
	case name == b.cfg.Inferred:
		mods = Inferred
	}
	if b.cfg.Routed {
		mods |= Routed
	}
	s := New(Config{Name: name, Tokens: tokens, Safety: b.cfg.Safety, MaxDelay: b.cfg.MaxDelay, Mods: mods})
	b.states = append(b.states, s)
	return len(b.states) - 1, s
}

// Drop forgets the quotas whose name drop reports true for.
func (b *Book) Drop(drop func(name string) bool) {
	b.drop(func(s *State) bool { return drop(s.cfg.Name) })
}

// drop forgets the quotas del reports true for, for charges too.
func (b *Book) drop(del func(*State) bool) {
	b.states = slices.DeleteFunc(b.states, del)
	b.charged = slices.DeleteFunc(b.charged, del)
}

// Len is how many quotas the book follows.
func (b *Book) Len() int { return len(b.states) }

// Known reports whether a response described a quota the budget speaks for.
func (b *Book) Known() bool {
	return slices.ContainsFunc(b.states, func(s *State) bool { return s.known })
}

// Plan is where Advance left the endpoint's quotas.
type Plan struct {
	// Req and Tok are the tightest request and token quotas' paces.
	Req, Tok Pace
	// Known is how many quotas are known; Blind reports that one is being
	// looked at (one request in flight learns it).
	Known int
	Blind bool
	// Tokens reports that a known quota is counted in tokens.
	Tokens bool
	// Next is when the quotas must be looked at again; zero when never.
	Next time.Time
	// Rolled reports that a window moved on past its reset.
	Rolled bool
}

// join adds a quota's pace to the tightest: the tighter rate sets what may
// go at once, and at a tie the lesser.
func (p *Pace) join(q Pace) {
	switch {
	case q.Rate < p.Rate:
		p.AtOnce, p.Spare = q.AtOnce, q.Spare
	case q.Rate == p.Rate:
		p.AtOnce, p.Spare = min(p.AtOnce, q.AtOnce), min(p.Spare, q.Spare)
	}
	p.Rate, p.Budget = min(p.Rate, q.Rate), min(p.Budget, q.Budget)
}

// Advance brings every quota to now (State.Advance) and combines them: the
// tightest pace of each unit, when to look next. tokenUnit is what one
// request takes of a token quota (its average cost).
func (b *Book) Advance(now time.Time, c Counts, tokenUnit float64) Plan {
	inf := math.Inf(1)
	p := Plan{Req: Pace{Rate: inf, Budget: inf}, Tok: Pace{Rate: inf, Budget: inf}}
	b.charged = b.charged[:0]
	for _, s := range b.states {
		unit := 1.0 // less than a request's worth left is spent
		if s.cfg.Tokens {
			unit = max(tokenUnit, float64(s.blindAmount())/Milli)
		}
		st, ok := s.Advance(now, c.unseen(s), unit)
		p.Rolled = p.Rolled || st.Rolled
		if !ok {
			continue
		}
		b.charged = append(b.charged, s)
		p.Known++
		p.Blind = p.Blind || s.look.out
		p.Next = earlierSet(p.Next, st.Next)
		if s.cfg.Tokens {
			p.Tokens = true
			p.Tok.join(st.Pace)
		} else {
			p.Req.join(st.Pace)
		}
	}
	return p
}

// KeepUntil is until when what the book learnt stays worth keeping without
// traffic, for an endpoint last used at used: the end of its latest window,
// and a whole window of its longest length after its last use.
func (b *Book) KeepUntil(used time.Time) time.Time {
	var at time.Time
	for _, s := range b.states {
		at = later(at, later(s.win.reset, used.Add(s.win.length)))
	}
	return at
}

// HeldUntil is when spent request quotas let a request go (zero: none spent).
func (b *Book) HeldUntil() time.Time {
	var at time.Time
	for _, s := range b.states {
		if s.known && !s.cfg.Tokens && s.budget.have < Milli+s.budget.keep {
			at = later(at, s.look.wake)
		}
	}
	return at
}

// Cost is what a blind request takes of one token quota (R50).
type Cost struct {
	Quota         string
	Mean, Charged float64
}

// Costs appends to dst what each quota learnt a blind request costs (R50).
func (b *Book) Costs(dst []Cost) []Cost {
	for _, s := range b.states {
		if mean := s.cost.mean(); mean > 0 {
			dst = append(dst, Cost{Quota: s.cfg.Name, Mean: mean, Charged: float64(s.blindAmount()) / Milli})
		}
	}
	return dst
}

// Need is what a request takes of one known quota.
type Need struct {
	Quota         string
	Amount, Limit float64
	// Looking reports that a look is out or due at the quota (its window
	// rolled blind): no reserve holds it back (R7).
	Looking bool
}

// Needs appends to dst what a request of cost takes of each known quota.
func (b *Book) Needs(dst []Need, cost float64) []Need {
	for _, s := range b.charged {
		if amount := float64(s.amount(cost)) / Milli; amount > 0 {
			dst = append(dst, Need{Quota: s.cfg.Name, Amount: amount, Limit: s.Limit(), Looking: s.look.out || s.rolled})
		}
	}
	return dst
}

// DropInferred forgets the quota the owner inferred (Mods Inferred): its
// server states quotas of its own.
func (b *Book) DropInferred() {
	b.drop(func(s *State) bool { return s.mods&Inferred != 0 })
}
