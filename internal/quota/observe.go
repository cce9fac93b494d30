package quota

import "time"

// Report is what one response said of one quota: Limit per Window, and
// Remaining until Reset. Zero fields are unknown; Remaining is Unstated for
// a policy alone (R9). The caller has clamped the fields (R8).
type Report struct {
	Limit     float64
	Remaining float64
	Reset     time.Time
	Window    time.Duration
}

// Unstated is a Report's Remaining when the server did not say what is left.
const Unstated = -1

// Seen is what the limiter around the model knew when a response came in,
// in the quota's unit (requests, or estimated tokens).
type Seen struct {
	// Unseen is what was admitted and not yet answered besides the
	// response's own request: the server may not have counted it (R1).
	Unseen float64
	// Fed is what other limiters feeding this quota have in flight: the
	// server may have counted those too (R35, R59).
	Fed float64
	// Admitted is the running total of admissions, ever (R33).
	Admitted float64
	// Seq is the response's request's place among admissions (1 for the
	// first; 0 unknown) and Admissions how many there were so far (R12).
	Seq, Admissions int64
	// Horizon is how old the budget must be before a higher Remaining of
	// unknown order is believed (R12, R33).
	Horizon time.Duration
	// Age is how old the response's figures may be: about a round trip (R1).
	Age time.Duration
	// Refused marks a 429 (R19, R35).
	Refused bool
	// Blind counts the requests admitted with no stated cost, ever (less
	// those refused), BlindUnseen those in flight besides this one; Stated
	// is the stated cost of the hinted requests answered (R47).
	Blind, BlindUnseen, Stated float64
}

// Observe folds one response's report of the quota into the state, at now
// (R1-R39, R44, R47-R50).
func (s *State) Observe(q Report, now time.Time, seen Seen) {
	if q.Remaining != Unstated && (seen.Unseen > 0 || s.low.inBurst) && (!s.low.inBurst || q.Remaining < s.low.burst) {
		s.low.burst, s.low.inBurst = q.Remaining, true // one of a burst's answers (R12)
	}
	s.read(&q, now, &seen)
	if seen.Unseen == 0 {
		s.low.inBurst = false
	}
	s.forgetOthers()
}

// read reads the report's figures: the quota's size, then its figure.
func (s *State) read(q *Report, now time.Time, seen *Seen) {
	hasRemaining := q.Remaining != Unstated
	if seen.Refused && hasRemaining && q.Remaining < 1 && !s.cfg.Tokens && s.known && !s.look.out && !s.rolled && s.Units() >= 1 {
		s.mods |= Shared // a request quota refused with budget left (R35)
	}
	if q.Limit > 0 {
		s.size.limit = q.Limit
	}
	s.size.peak = max(s.size.peak, q.Remaining)
	s.size.most = max(milli(s.Limit()), Milli) // R3
	if q.Window > 0 {
		s.win.length, s.win.stated = q.Window, true // R16
	}
	timed := !q.Reset.IsZero()
	switch {
	case !hasRemaining, !timed && q.Limit > 0 && q.Remaining >= q.Limit:
		return // a policy (R9)
	case timed && !q.Reset.After(now):
		return // a window that is over (R10)
	}
	if !timed && s.kind == Unknown {
		s.kind = Leaky // R18
	}
	s.applyDrift(now)
	eff := s.lessDrain(q.Remaining-seen.Unseen, seen.Age) // R1
	s.readFigure(q, now, seen, eff)
	s.look.refused = seen.Refused && q.Remaining < 1
}

// lessDrain is v less what others' measured spending took over age (R1).
func (s *State) lessDrain(v float64, age time.Duration) float64 {
	return max(v-s.others()*age.Seconds(), 0)
}

// setFigure sets the budget from a response's figure eff, read at now after
// seq admissions (R12), as the current window's.
func (s *State) setFigure(eff float64, now time.Time, seq int64) {
	s.known, s.rolled, s.look.out = true, false, false
	s.setAt, s.setSeq = now, seq
	s.budget.have, s.budget.credit = milli(eff), 0
	s.budget.room = milli(othersMaxShare * eff) // what others' predicted spending may take of it (R37)
}

// readFigure reads a report of the current or a new window: its reset, its
// kind, its figure.
func (s *State) readFigure(q *Report, now time.Time, seen *Seen, eff float64) {
	timed := !q.Reset.IsZero()
	tol := s.tolerance()
	if timed && s.known && !s.rolled {
		if d := q.Reset.Sub(s.win.stamp).Abs(); d <= tol {
			s.win.jitter = max(d, s.win.jitter*7/8) // R13
		}
	}
	fresh := !s.known || s.rolled || s.look.out || (timed && q.Reset.Sub(s.win.stamp) >= tol)
	inStep := fresh && timed && s.kind != ToFull && s.known && now.Before(s.win.stamp) && s.fillsInStep(q, now)
	if inStep || fresh && s.known && !s.rolled && !s.look.out && s.win.stamp.Sub(now) > restateAhead && q.Reset.Sub(s.win.stamp) < resetResolution+tol {
		fresh = false // a bucket's time to full moving (R20), or the same reset restated (R14)
	}
	if !fresh {
		s.low.window = min(s.low.window, q.Remaining)
		if o := s.win.origin; timed && !s.kind.refills() && !o.IsZero() && now.Sub(o) >= tol && q.Reset.Sub(o) >= tol {
			s.kind = Sliding // answers outlived the first reset stated, which moved on (R19)
		}
	}
	countsDown := timed && !s.kind.refills()
	switch {
	case fresh:
		s.newWindow(q, now, seen, eff)
	case countsDown && q.Remaining > s.low.window:
		s.overtakenCountingDown(q, now, seen)
		return
	case !countsDown && eff > s.Units() && s.overtaken(now, seen):
		s.overtakenRefilling(q, now, seen)
		return
	case inStep:
		s.kind = ToFull // R20
		s.win.extend(q.Reset)
	default:
		// The lowest Remaining of a window is its freshest figure (R11).
		if !s.cfg.Tokens && s.known && !s.rolled && q.Remaining < s.Units()-1-seen.Fed {
			s.mods |= Shared // R35
		}
		s.sameWindowReset(q, timed, eff)
		s.measureDrift(now, eff, seen.Admitted, seen.Unseen, seen.Horizon, s.shared() && s.drift.measured.IsZero())
	}
	if fresh {
		s.low.window = q.Remaining
	}
	s.readToFull(q, now)
	if s.cfg.Tokens {
		s.sampleCost(q, now, seen, fresh)
	}
	s.setFigure(eff, now, seen.Admissions)
}

// newWindow reads the first figure of a new window: whether the quota
// jumped back (its kind), the window's length, and the drift's baseline.
func (s *State) newWindow(q *Report, now time.Time, seen *Seen, eff float64) {
	timed := !q.Reset.IsZero()
	// A real boundary, not resets wandering.
	boundary := s.rolled || !now.Before(s.win.stamp) || (timed && (s.win.length == 0 || q.Reset.Sub(s.win.stamp) > s.win.length/2))
	s.classifyAtReset(q, seen, boundary)
	if timed {
		s.learnLength(q.Reset, now)
		if boundary || s.win.origin.IsZero() {
			s.win.origin = q.Reset
		}
		s.win.reset, s.win.stamp = q.Reset, q.Reset
		s.first = firstFigure{reset: q.Reset, remaining: q.Remaining, at: now}
	}
	if !s.kind.refills() {
		s.drift.rate = min(s.drift.rate, 0) // others' spending carries over (R38)
		s.drift.fall = 0                    // R34
		s.drift.base = baseline{at: now, budget: eff, admitted: seen.Admitted, unseen: seen.Unseen}
	} else {
		s.measureDrift(now, eff, seen.Admitted, seen.Unseen, seen.Horizon, false)
	}
}

// overtakenCountingDown reads a higher figure of a window that counts down
// (R11): with nothing of ours in flight, the window's lowest figure is exact,
// and so are the books.
func (s *State) overtakenCountingDown(q *Report, now time.Time, seen *Seen) {
	s.win.extend(q.Reset)
	if seen.Unseen != 0 {
		return
	}
	exact := s.lessDrain(s.low.window, seen.Age)
	if s.low.window > s.Units() {
		s.budget.have, s.budget.credit = milli(exact), 0
	}
	s.measureDrift(now, exact, seen.Admitted, 0, seen.Horizon, false)
}

// overtakenRefilling reads a higher figure of a quota that refills, which
// may be stale (R12): its reset may still state its time to full, and a
// burst's lowest figure is a lower bound once the burst is in.
func (s *State) overtakenRefilling(q *Report, now time.Time, seen *Seen) {
	if !q.Reset.IsZero() {
		s.win.extend(q.Reset)
	}
	s.readToFull(q, now)
	if m := milli(s.lessDrain(s.low.burst, seen.Age)); seen.Unseen == 0 && s.low.inBurst && m > s.budget.have {
		s.budget.have, s.budget.credit = m, 0
	}
}

// overtaken reports whether a response may be older than the figure the
// budget was last set from (R12): its request was admitted before that, or,
// of unknown order, the budget is younger than the horizon.
func (s *State) overtaken(now time.Time, seen *Seen) bool {
	if seen.Seq > 0 {
		return seen.Seq <= s.setSeq
	}
	return now.Sub(s.setAt) < seen.Horizon
}
