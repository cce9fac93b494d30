package quota

import (
	"math"
	"time"
)

// drift is what changes a quota besides this client's spending, in units a
// second: negative when others spend from it, positive when it refills as
// it goes (R33-R39).
type drift struct {
	rate float64
	// fall is others' spending as measured, units a second (≥ 0): of a
	// window whose length is unknown, where rate's drain is bounded but
	// the budget falls between answers by this, if more (others, R34);
	// or of a bucket's stated refill, which gives our share of it
	// (measureShare, refill, R44).
	fall float64
	// ours is our own spending over the last span a bucket that states
	// its refill was measured over, units a second (measureShare).
	ours     float64
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
	// server charges: LLM APIs bill the completion's length, which a
	// caller's estimate misses by tens of percent (R5, R33).
	estimateError = 0.3
	// othersMaxShare is the most of a budget kept back for others' measured
	// spending; a tenth is each client's floor (R37, R41, R45).
	othersMaxShare = 0.9
	// minDriftSpan is the least time a drift is measured over (R33).
	minDriftSpan = 250 * time.Millisecond
)

// measureDrift measures the drift from the baseline to a response's figure
// eff, with admitted and unseen as of it (R33, R34, R35); first marks
// the first measure of a quota just seen shared.
func (s *State) measureDrift(now time.Time, eff, admitted, unseen float64, horizon time.Duration, first bool) {
	d := &s.drift
	span := now.Sub(d.base.at)
	minSpan := max(2*horizon, minDriftSpan)
	if s.win.length > 0 && !first && s.kind != ToFull {
		minSpan = max(minSpan, s.win.length/10)
	}
	if d.base.at.IsZero() {
		d.base = baseline{at: now, budget: eff, admitted: admitted, unseen: unseen}
		return
	}
	if span < minSpan {
		return
	}
	if s.kind == ToFull {
		s.measureShare(now, eff, admitted, unseen, span)
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
	d.rate, d.fall = gap/span.Seconds(), 0
	if d.rate < 0 {
		if s.win.length == 0 && s.mods&Routed == 0 {
			d.fall = -d.rate // R34, R37
		}
		d.rate = max(d.rate, -s.maxDrain(span, admitted-d.base.admitted)) // R34
	}
	if d.rate < 0 {
		s.mods |= Shared
	}
	d.measured = now
}

// measureShare measures what others spend of a bucket that states its
// refill (ToFull), whose drift is the refill the responses state (R22):
// the figure's shortfall from the baseline topped up by the refill, less
// ours and beyond what was in flight, is theirs (R44). It measures ours
// over the same span, and starts the next span here.
func (s *State) measureShare(now time.Time, eff, admitted, unseen float64, span time.Duration) {
	d := &s.drift
	ours := max(admitted-d.base.admitted, 0)
	expect := min(d.base.budget+max(d.rate, 0)*span.Seconds(), s.Limit()) - ours
	noise := unseen + 1 // what is in flight, and the figures' rounding to a unit
	if s.cfg.Tokens {
		noise += estimateError * ours // costs are estimates
	}
	d.fall = max(expect-eff-noise, 0) / span.Seconds()
	d.ours = ours / span.Seconds()
	if d.fall > 0 {
		s.mods |= Shared
	}
	d.base = baseline{at: now, budget: eff, admitted: admitted, unseen: unseen}
}

// refill is what of the drift's refill this client may spend, units a
// second: of a bucket others are measured spending from, its share, its
// own spending over everyone's (R44).
func (s *State) refill() float64 {
	d := &s.drift
	if s.kind == ToFull && d.fall > 0 && d.ours > 0 {
		return d.rate * d.ours / (d.ours + d.fall)
	}
	return d.rate
}

// maxDrain bounds what others can be spending, units a second, given that
// we spent ours over span (R34): the window is its lower bound while
// unlearnt; with neither length nor limit, there is no bound.
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

// ageDrift halves a drift no response confirmed per window (R36).
func (s *State) ageDrift(now time.Time) {
	d := &s.drift
	if d.rate == 0 || d.measured.IsZero() || s.kind == ToFull && d.rate > 0 {
		return
	}
	span := max(s.length(), time.Second)
	for now.Sub(d.measured) >= span && d.rate != 0 {
		d.rate /= 2
		d.fall /= 2
		if math.Abs(d.rate) < 1e-3 {
			d.rate, d.fall = 0, 0
		}
		d.measured = d.measured.Add(span)
	}
}

// applyDrift moves the budget by the drift since it was last applied (R37)
// and publishes others' spending to admission (the debt), but not while a
// look is out: the look goes whatever others spend.
func (s *State) applyDrift(now time.Time) {
	d, b := &s.drift, &s.budget
	if d.rate != 0 && !d.at.IsZero() && now.After(d.at) && !s.look.out && s.known {
		v := s.refill() * now.Sub(d.at).Seconds() // R37
		if d.rate < 0 {
			v = -s.others() * now.Sub(d.at).Seconds()
		}
		switch {
		case v > 0:
			credit := min(milli(v*s.cfg.Safety), max(milli(s.Limit())-b.have, 0))
			b.have += credit
			b.credit += credit
		case v < 0:
			take := min(milli(-v), max(b.room, 0))
			b.room -= take
			b.have = max(b.have-take, 0) // a server's remaining stops at zero
		}
	}
	d.at = later(d.at, now)
	b.drain = 0
	if !s.look.out {
		b.drain = milli(s.others())
	}
	if b.drain != 0 {
		b.from = d.at
	}
}

// debt is what a charge at now must leave, in milli-units: what the budget
// keeps, and what others took by the drift since it was applied (R37).
func (s *State) debt(now time.Time) int64 {
	b := &s.budget
	if elapsed := now.Sub(b.from); b.drain != 0 && elapsed > 0 {
		since := min(int64(float64(b.drain)*float64(elapsed)/float64(time.Second)), b.room)
		if b.capped {
			// What others keep is a share of a budget that fell by since:
			// of since, the client's tenth is theirs too (R37, R41).
			since -= int64(othersMaxShare * float64(since))
		}
		return b.keep + since
	}
	return b.keep
}

// others is what others spend, units a second, that the budget falls by
// between answers (R1, R34, R37).
func (s *State) others() float64 {
	if s.drift.rate >= 0 {
		return 0
	}
	return max(s.drift.fall, -s.drift.rate)
}
