package quota

import (
	"math"
	"time"
)

// classifyAtReset reads whether the quota jumped back at a reset (R19),
// at every boundary that leaves room to tell, so one misreading does not
// stick. Remaining is compared, not the budget, which the requests sent
// into the new window before its first answer would hide the jump in.
func (s *State) classifyAtReset(q *Report, seen *Seen, boundary bool) {
	before := s.Units()
	if s.rolled {
		before = s.carry
	}
	limit := s.Limit()
	if !s.known || !boundary || seen.Refused || s.kind == ToFull || s.kind != Unknown && limit-before < jumpRoom*limit {
		return
	}
	switch {
	case q.Remaining-before > max(0.5*(limit-before), seen.Unseen):
		s.kind = Fixed
	case !s.shared() && q.Remaining >= 1:
		s.kind = Sliding
	}
	// Else shared or nothing left: others may have emptied it (R19).
}

// jumpRoom is the least share of the limit spent in a window for its reset
// to tell a jump from none (R19).
const jumpRoom = 0.1

// fills reports whether q's reset moved later than the window's first, as a
// bucket's that refills does (R20): by at least its rounding, a unit spent
// since and, with a window stated, by about that spending's time to refill.
func (s *State) fills(q *Report) bool {
	moved := q.Reset.Sub(s.first.reset)
	spent := s.first.remaining - q.Remaining
	if s.first.reset.IsZero() || spent < 1 || moved < resetResolution {
		return false
	}
	if s.win.stated && s.win.length > 0 {
		perUnit := s.win.length.Seconds() / s.Limit() // a bucket's time to full grows so per unit spent
		got := moved.Seconds() / spent
		return got > perUnit/2 && got < 2*perUnit
	}
	return true
}

// fillsInStep reports whether q's reset moved as a bucket's time to full
// does (R20): it fills, the window's first response and q state one refill
// rate ((Limit − Remaining) over the time to reset), and the move is what
// the spending since takes to refill at that rate.
func (s *State) fillsInStep(q *Report, now time.Time) bool {
	if !s.fills(q) {
		return false
	}
	limit, tol := s.Limit(), max(s.tolerance(), resetResolution)
	deficit, left := limit-q.Remaining, q.Reset.Sub(now)
	firstDeficit, firstLeft := limit-s.first.remaining, s.first.reset.Sub(s.first.at)
	if deficit <= 0 || left <= 0 || firstDeficit <= 0 || firstLeft <= 0 {
		return false
	}
	lo, hi := refillBounds(deficit, left, tol)
	firstLo, firstHi := refillBounds(firstDeficit, firstLeft, tol)
	if lo*(1-fullAgree) > firstHi || firstLo*(1-fullAgree) > hi {
		return false
	}
	moved := q.Reset.Sub(s.first.reset)
	predicted := time.Duration((s.first.remaining - q.Remaining) / deficit * float64(left))
	return (predicted - moved).Abs() <= time.Duration(fullAgree*float64(moved))+tol
}

// refillBounds is the range of refill rates (units a second) a deficit over
// a time to full states, the time known within tol.
func refillBounds(deficit float64, left, tol time.Duration) (lo, hi float64) {
	lo, hi = deficit/(left+tol).Seconds(), math.Inf(1)
	if left > tol {
		hi = deficit / (left - tol).Seconds()
	}
	return lo, hi
}

const (
	// fullAgree is how closely a reset must fall where a time to full
	// predicts it, as a share of the time to it: wider than Anthropic's
	// token figures' rounding (to the thousand) (R20, R22).
	fullAgree = 0.25
	// resetResolution is the rounding allowed a stated reset: most APIs
	// state them to the second (R14, R20, R22).
	resetResolution = time.Second
	// restateAhead is how far ahead a window's reset must be for a later
	// one within its rounding to be the same reset restated (R14).
	restateAhead = 3 * resetResolution
	// fullRuns is how many moved resets in a row must fit (R22).
	fullRuns = 2
	// fullKeep is the weight the refill's sums keep per response: about ten
	// responses count (R22).
	fullKeep = 0.9
)

// fullReader reads a bucket's reset as its time to full (R22).
type fullReader struct {
	ref, at time.Time // the last moved reset compared with, when it was seen
	rate    float64   // the refill it implied
	d, t    float64   // decayed sums of deficits and times to full
	runs    int       // moved resets in a row that fit
}

// readToFull reads the quota's reset as its time to full (R22, R23): while
// ToFull, the refill (Limit − Remaining over the time to the reset, averaged
// over the last responses) is the drift. A reset closer than 4 tolerances
// says too little.
func (s *State) readToFull(q *Report, now time.Time) {
	limit := s.Limit()
	left := q.Reset.Sub(now)
	tol := max(s.tolerance(), resetResolution)
	if !s.kind.refills() && s.mods&Coordinated != 0 || q.Reset.IsZero() || !(q.Remaining < limit) || left < 4*tol {
		return
	}
	f := &s.full
	deficit := limit - q.Remaining
	if f.ref.IsZero() {
		f.ref, f.at, f.rate = q.Reset, now, deficit/left.Seconds()
		if s.kind == ToFull {
			s.drift.rate, s.drift.measured = f.rate, now
		}
		return
	}
	predicted := time.Duration(deficit / f.rate * float64(time.Second))
	fits := (left - predicted).Abs() <= time.Duration(fullAgree*float64(left))+tol
	shift := q.Reset.Sub(f.ref)
	moved := shift.Abs() > tol
	if moved && !s.kind.refills() && (shift.Seconds() > limit/f.rate/2 || s.win.length > 0 && shift > s.win.length/2) {
		fits = false // a fixed window's next one, not a move
	}
	switch {
	case moved && fits:
		f.runs++
		if f.runs >= fullRuns {
			s.kind = ToFull
		}
	case !fits && (moved || now.Sub(f.at) > tol): // moved elsewhere, or stayed while time passed
		f.runs = 0
		if s.kind == ToFull {
			s.kind = Sliding // it still refills as it goes, by a refill measured
		}
	}
	if moved {
		f.ref, f.at, f.rate = q.Reset, now, deficit/left.Seconds()
	}
	if s.kind != ToFull {
		f.d, f.t = 0, 0
		return
	}
	f.d = f.d*fullKeep + deficit
	f.t = f.t*fullKeep + left.Seconds()
	s.drift.rate, s.drift.measured = f.d/f.t, now
}
