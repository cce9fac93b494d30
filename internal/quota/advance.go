package quota

import (
	"math"
	"time"
)

// Pace is what a quota affords, in its units; in a Plan, the tightest of
// the book's quotas of a unit.
type Pace struct {
	// Rate is what the budget may be spent at from now, in units a second:
	// +Inf while the budget is the gate (R40).
	Rate float64
	// Budget is the budget above what the quota keeps back (+Inf: no quota).
	Budget float64
	// AtOnce is what of Budget may go at once beside Rate (R44, R45); zero:
	// a burst at Rate is a small part of the budget.
	AtOnce float64
	// Spare is what of Budget may build up beside Rate while demand stays
	// below it, as burst capacity, not level (R45).
	Spare float64
}

// Step is where Advance left a quota: what it affords, and when it must be
// looked at again.
type Step struct {
	Pace
	// Next is when the quota must be looked at again (its roll, a wake-up of
	// a spent budget, a look); zero when nothing is due.
	Next time.Time
	// Rolled reports that a reset passed and the window moved on.
	Rolled bool
}

const (
	// RollGuard is how long after its believed reset a window rolls (R24).
	RollGuard = 10 * time.Millisecond
	// maxSlideWait bounds the wait after its reset of a window of unknown
	// kind that ended spent (R27): a reset's rounding.
	maxSlideWait = time.Second
	// noResetSpan stands in for a time to reset where none is stated (R46).
	noResetSpan = time.Second
	// minRate is the lowest rate a quota sets, a unit every 1000 s: it keeps
	// the bucket's arithmetic clear of "never".
	minRate = 1e-3
	// rushFactor is how many times its last pace a shared quota's spread
	// must exceed before each client claims only its share (R43).
	rushFactor = 5
	// carryMargin is what a window that ended with room gives up to the
	// rounding of its reset and of the server's count, in units (R25).
	carryMargin = 2
)

// Advance brings a known quota to now and plans it (R24-R29, R36, R37,
// R40-R46). unseen is as in Seen; unit is what one request takes. ok is
// false when the quota is not known.
func (s *State) Advance(now time.Time, unseen, unit float64) (st Step, ok bool) {
	s.ageDrift(now)
	s.applyDrift(now)
	if s.known && !s.win.reset.IsZero() && now.Sub(s.win.reset) >= RollGuard {
		s.roll(now, unseen, unit)
		s.forgetOthers()
		st.Rolled = true
	}
	if !s.known {
		return st, false
	}
	if due := s.look.due; !due.IsZero() && !now.Before(due) {
		s.look.due = time.Time{}
		if s.kind != ToFull { // its refill is stated: a look would let anything through
			s.startLook(unit)
		}
	}
	p := s.plan(now, unit)
	s.budget.keep = min(milli(p.keep), max(milli(s.Limit())-milli(unit), 0)) // R6, in milli-units
	s.budget.capped = p.capped
	s.look.wake = p.wake
	if !p.due.IsZero() {
		s.look.due = p.due
	}
	s.pace.rate = p.spread
	st.Rate = p.rate
	st.AtOnce, st.Spare = s.burst()
	s.pace.shared = s.shared()
	if !s.win.reset.IsZero() {
		st.Next = s.win.reset.Add(RollGuard)
	}
	st.Next = earlierSet(earlierSet(st.Next, s.look.wake), s.look.due)
	st.Budget = max(s.Units()-s.reserve(), 0)
	return st, true
}

// keepFor is what a charge must leave of the budget at now, in units (R41,
// R6): nothing while a look is out. capped reports that others' part is
// their most, a share of the budget (R37).
func (s *State) keepFor(now time.Time, unit float64) (keep float64, capped bool) {
	if !s.look.out {
		keep = s.reserve()
		if s.kind.refills() {
			keep += unit
		}
		if s.drift.rate < 0 && s.win.reset.After(now) {
			others, most := -s.drift.rate*s.win.reset.Sub(now).Seconds(), othersMaxShare*s.Units()
			keep, capped = keep+min(others, most), others >= most
		}
	}
	return min(keep, max(s.Limit()-unit, 0)), capped
}

// planned is a quota's plan: what a charge keeps (units), the rate, when a
// spent budget wakes, a look to set due (zero: none new), and the pace a
// shared quota is spread at (R43).
type planned struct {
	keep, rate float64
	capped     bool // others' part of keep is their most (keepFor)
	wake, due  time.Time
	spread     float64
}

// plan is the quota's plan at now; it changes nothing.
func (s *State) plan(now time.Time, unit float64) planned {
	keep, capped := s.keepFor(now, unit)
	avail := s.Units() - keep
	var p planned
	switch {
	case s.look.out:
		p.rate = math.Inf(1) // one request is out to learn the quota
	case avail >= unit && s.kind.refills():
		p.rate = s.spread(now, unit, avail)
	case avail >= unit && s.shared():
		p.rate = s.spread(now, unit, avail)
		p.spread = p.rate
	case avail >= unit:
		p.rate = math.Inf(1) // R40: the budget is the gate
	default:
		p = s.planSpent(now, unit, avail)
	}
	p.keep, p.capped = keep, capped
	return p
}

// spread is the rate of a quota that refills as it goes (R42), or that
// others spend from (R43): a client's share is its pace over everyone's.
func (s *State) spread(now time.Time, unit, avail float64) float64 {
	span, safety, prev := s.spanAt(now), s.cfg.Safety, s.pace.rate
	rate := safety * avail / span
	if s.kind.refills() {
		rate = safety * (avail + s.refill()*span) / span
	} else if others := -s.drift.rate; others > 0 && prev > 0 && avail/span > rushFactor*prev {
		share := prev / (prev + others)
		rate = min(rate, safety*(prev+share*(avail/span-prev)))
	}
	rate = max(rate, safety*unit/span)
	if avail >= 2*unit && s.kind != ToFull {
		rate = max(rate, unit/s.reprobe().Seconds()) // only responses show the refill, and others
	}
	return rate
}

// planSpent plans a quota with less than a unit above its keep (R46).
func (s *State) planSpent(now time.Time, unit, avail float64) planned {
	p := planned{rate: math.Inf(1)}
	reset, due := s.win.reset, s.look.due
	switch {
	case !due.IsZero() && (reset.IsZero() || due.Before(reset)):
		p.wake = due
	case s.drift.rate > 0 && (s.kind.refills() || reset.IsZero()):
		p.wake = now.Add(time.Duration((unit - avail) / (s.cfg.Safety * s.refill()) * float64(time.Second)))
		if look := now.Add(s.reprobe()); look.Before(p.wake) && s.kind != ToFull {
			p.wake, p.due = look, look // the measure may be low: look
		}
		if !reset.IsZero() {
			p.wake = earlier(p.wake, reset)
		}
		p.rate = max(s.cfg.Safety*s.refill(), minRate)
	case !reset.IsZero() && (!s.kind.refills() || s.look.refused):
		p.wake = reset.Add(RollGuard)
		if p.wake.Sub(now) > s.cfg.MaxDelay && !s.explains(now) { // R32
			if due.IsZero() {
				p.due = now.Add(s.cfg.MaxDelay)
				due = p.due
			}
			p.wake = due
		}
	case !reset.IsZero():
		p.wake = earlier(reset, now.Add(s.reprobe()))
		if p.wake.Before(reset) {
			p.due = p.wake
		}
	default:
		p.wake = now.Add(noResetSpan)
		p.due = p.wake
	}
	return p
}

// spanAt is the time the budget is spread over from now, in seconds: to
// the reset, else a window, else noResetSpan.
func (s *State) spanAt(now time.Time) float64 {
	switch {
	case !s.win.reset.IsZero():
		return max(s.win.reset.Sub(now).Seconds(), 1e-3)
	case s.win.length > 0:
		return s.win.length.Seconds()
	}
	return noResetSpan.Seconds()
}

// burst is what may go at once beside the rate (R44), and what may build up
// as burst capacity (spare) in a fixed window others spend from (R45, R39).
func (s *State) burst() (atOnce, spare float64) {
	b := &s.budget
	if s.shared() && s.drift.rate < 0 && s.mods&Fleet == 0 && !s.kind.refills() && !s.look.out {
		spare = max(float64(b.have-b.keep)/Milli-(1-othersMaxShare)*s.Units(), 0)
	}
	if s.kind.refills() && (s.kind == ToFull || s.win.reset.IsZero()) && !s.shared() && !s.look.out {
		atOnce = float64(max(b.have-b.credit-b.keep, 0)) / Milli
	}
	if !s.pace.shared {
		atOnce = max(atOnce, spare)
	}
	return atOnce, spare
}

// roll moves a window whose reset passed on to the next (R24-R29).
func (s *State) roll(now time.Time, inflight, unit float64) {
	s.rolled, s.look.refused = true, false
	s.drift.fall = 0 // what the window's answers measured (R34)
	s.carry = s.Units()
	win, end := s.length(), s.win.reset
	if s.win.length > 0 {
		if n := now.Sub(s.win.reset)/s.win.length + 1; n > 0 {
			s.win.reset = s.win.reset.Add(n * s.win.length)
		}
	} else {
		s.win.reset = time.Time{}
	}
	limit, carry := s.Limit(), s.Units()-s.reserve()-carryMargin*unit
	switch {
	case s.look.out:
		// The look out describes the new window.
	case s.kind == ToFull:
		s.budget.have, s.budget.credit = milli(max(limit-inflight, 0)), 0 // R28
	case carry >= unit && !s.shared():
		s.budget.have, s.budget.credit = milli(carry+s.reserve()), 0 // R25
	case s.kind == Unknown && win > 0 && limit >= 1:
		s.look.due = end.Add(min(time.Duration(2*float64(win)/limit), maxSlideWait)) // R27
		s.budget.have, s.budget.credit = 0, 0
	case s.kind.fixed() || s.Units()-max(s.reserve(), float64(s.budget.keep)/Milli) < unit:
		s.startLook(unit) // R26, R29
	}
}

// startLook lets one request through to learn the quota (R26): the budget
// holds one unit and keeps nothing back.
func (s *State) startLook(unit float64) {
	s.look.out = true
	s.budget.drain, s.budget.keep, s.budget.capped = 0, 0, false
	s.budget.have, s.budget.credit = min(milli(unit), max(s.size.most, Milli)), 0
}
