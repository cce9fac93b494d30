package quota

import (
	"math"
	"time"
)

// The drift: what changes a quota besides this client's spending, in units
// a second; negative when others spend from it, positive when it refills
// as it goes (R33-R39).
type drift struct {
	rate     float64
	at       time.Time // applied to the budget up to here
	measured time.Time // when a response last measured it (R36)
	base     baseline
}

// baseline is the figure the drift is measured from: when, the budget it
// set, the admissions counter then and what was in flight (its noise).
type baseline struct {
	at                       time.Time
	budget, admitted, unseen float64
}

const (
	// estimateError is how far a stated cost is taken to miss what the
	// server charges, as a share of it: LLM APIs bill the completion's
	// length, which a caller's estimate misses by tens of percent (R5, R33).
	estimateError = 0.3
	// othersMaxShare is the most of a budget kept back for others' measured
	// spending; a tenth is each client's floor (R37, R41, R45).
	othersMaxShare = 0.9
	// minDriftSpan is the least time a drift is measured over (R33).
	minDriftSpan = 250 * time.Millisecond
)

// measureDrift compares what a response says (eff, with admitted and unseen
// as of it) with the baseline (R33): the gap beyond the noise of what was in
// flight at either end, over the time between them. The baseline must be
// twice the horizon old, minDriftSpan, and a tenth of a known window, but
// for the first measure of a quota just seen spent from (first). A
// measured drain marks the quota shared (R35); a refilling quota's baseline
// moves on every four minimal spans (R38).
func (s *State) measureDrift(now time.Time, eff, admitted, unseen float64, horizon time.Duration, first bool) {
	d := &s.drift
	if s.kind == ToFull {
		d.base.at = time.Time{} // the responses state the refill (R22)
		return
	}
	span := now.Sub(d.base.at)
	minSpan := max(2*horizon, minDriftSpan)
	if s.win.length > 0 && !first {
		minSpan = max(minSpan, s.win.length/10)
	}
	if d.base.at.IsZero() {
		d.base = baseline{at: now, budget: eff, admitted: admitted, unseen: unseen}
		return
	}
	if span < minSpan {
		return
	}
	gap := eff - (d.base.budget - (admitted - d.base.admitted))
	down, up := unseen, d.base.unseen
	if s.cfg.Tokens {
		e := estimateError * max(admitted-d.base.admitted, 0) // costs are estimates
		down, up = down+e, up+e
	}
	switch {
	case gap < 0:
		gap = min(gap+down, 0)
	case !s.kind.refills():
		gap = 0 // a higher figure of a window that counts down is overtaken (R11)
	default:
		gap = max(gap-up, 0)
	}
	d.rate = gap / span.Seconds()
	if d.rate < 0 {
		d.rate = max(d.rate, -s.maxDrain(span, admitted-d.base.admitted)) // R34
	}
	if d.rate < 0 {
		s.mods |= Shared
	}
	d.measured = now
	if s.kind.refills() && span >= 4*minSpan {
		d.base = baseline{at: now, budget: eff, admitted: admitted, unseen: unseen}
	}
}

// maxDrain bounds what others can be spending, units a second, given that
// we spent ours over span (R34): no more than the quota's long-run rate
// leaves us, over at least a window (its lower bound while unlearnt); with
// neither length nor limit, no bound.
func (s *State) maxDrain(span time.Duration, ours float64) float64 {
	win := s.win.length
	if win <= 0 && s.win.reset.After(s.drift.base.at) {
		win = s.win.reset.Sub(s.drift.base.at)
	}
	limit := s.Limit()
	if win <= 0 || limit <= 0 {
		return math.Inf(1)
	}
	over := max(span, win)
	return max(limit*over.Seconds()/win.Seconds()-max(ours, 0), 0) / over.Seconds()
}

// ageDrift halves a drift no response confirmed for a window, at least a
// second (R36): others' spending measured once must not hold the client
// back for ever once nobody spends. A refill the responses state does not
// age.
func (s *State) ageDrift(now time.Time) {
	d := &s.drift
	if d.rate == 0 || d.measured.IsZero() || s.kind == ToFull && d.rate > 0 {
		return
	}
	span := max(s.length(), time.Second)
	for now.Sub(d.measured) >= span && d.rate != 0 {
		d.rate /= 2
		if math.Abs(d.rate) < 1e-3 {
			d.rate = 0
		}
		d.measured = d.measured.Add(span)
	}
}

// applyDrift moves the budget by the drift since it was last applied
// (R37), and publishes others' spending to admission (the debt), but not
// while a look is out: the look goes whatever others spend.
func (s *State) applyDrift(now time.Time) {
	s.moveByDrift(now)
	b := &s.budget
	b.drain = 0
	if !s.look.out {
		b.drain = milli(-s.drift.rate)
	}
	if b.drain != 0 {
		b.from = s.drift.at
	}
}

// moveByDrift is applyDrift's change to the budget: a refill, believed by
// the safety factor, up to the limit; a drain, within the room the last
// figure left it.
func (s *State) moveByDrift(now time.Time) {
	d := &s.drift
	if d.rate == 0 || d.at.IsZero() || !now.After(d.at) || s.look.out {
		d.at = later(d.at, now)
		return
	}
	v := d.rate * now.Sub(d.at).Seconds()
	d.at = now
	b := &s.budget
	switch {
	case v == 0 || !s.known:
	case v > 0:
		credit := min(milli(v*s.cfg.Safety), max(milli(s.Limit())-b.have, 0))
		b.have += credit
		b.credit += credit
	default:
		take := min(milli(-v), max(b.room, 0))
		b.room -= take
		b.have = max(b.have-take, 0) // a server's remaining stops at zero
	}
}

// debt is what others have taken, by the drift, since the budget was last
// brought up to date, plus what a charge keeps (R37): milli-units a charge
// at now must leave.
func (s *State) debt(now time.Time) int64 {
	b := &s.budget
	if b.drain == 0 {
		return b.keep
	}
	elapsed := now.Sub(b.from)
	if elapsed <= 0 {
		return b.keep
	}
	return b.keep + min(int64(float64(b.drain)*float64(elapsed)/float64(time.Second)), b.room)
}
