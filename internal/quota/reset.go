package quota

import "time"

// tolerance is how far apart two stated resets may be and still name the
// same window (R13).
func (s *State) tolerance() time.Duration {
	tol := min(max(4*s.win.jitter, 10*time.Millisecond), time.Second)
	if s.win.length > 0 {
		tol = min(tol, max(s.win.length/4, 2*s.win.jitter))
	}
	return tol
}

// sameWindowReset folds in the reset of a response of the current window
// (R15): surely the same window's when its figure did not rise, its reset
// is less than half a window later and the jitter small against the window.
func (s *State) sameWindowReset(q *Report, timed bool, eff float64) {
	if !timed {
		return
	}
	w := &s.win
	w.stamp = later(w.stamp, q.Reset)
	if s.kind.fixed() && !w.reset.IsZero() && eff <= s.Units() &&
		w.length > 0 && q.Reset.Sub(w.reset) < w.length/2 && 2*w.jitter < w.length {
		w.reset = earlier(w.reset, q.Reset)
	} else {
		w.reset = later(w.reset, q.Reset)
	}
}

// learnLength learns the window's length from the advance of a new
// window's reset over the last (R16), for a quota that does not refill as
// it goes: an advance beyond twice the jitter.
func (s *State) learnLength(reset, now time.Time) {
	w := &s.win
	d := reset.Sub(w.stamp)
	if w.stated || s.kind.refills() || w.stamp.IsZero() || !s.rolled && now.Before(w.stamp) || d <= 2*w.jitter {
		return
	}
	if w.length == 0 || d < w.length+w.length/2 && d > w.length/2 {
		w.length = d
	}
}

const (
	// phaseGrain is the coarsest rounding of a stated reset learnPhase
	// allows: whole seconds (R17).
	phaseGrain = time.Second
	// phaseJitter is the most one window's stated resets may wander for
	// learnPhase to apply: servers that state one rounded instant (R17).
	phaseJitter = 10 * time.Millisecond
	// cadenceSlack is the most a window's advance may be off a whole
	// number of windows (at most a fiftieth of one) for the cadence to
	// hold (R17).
	cadenceSlack = 20 * time.Millisecond
)

// checkCadence reads whether a new window's reset advanced from the last by
// a whole number of the known window (R17); a phase is carried only while
// it does.
func (s *State) checkCadence(reset time.Time) {
	w := &s.win
	w.cadenced = false
	if w.stamp.IsZero() || w.length <= 0 {
		return
	}
	d := reset.Sub(w.stamp)
	n := (d + w.length/2) / w.length
	w.cadenced = n >= 1 && (d-n*w.length).Abs() <= min(w.length/50, cadenceSlack)
	if !w.cadenced {
		s.setPhase(time.Time{})
	}
}

// learnPhase tightens the end of a fixed window whose stated resets are
// rounded up (R17): a response of the window ending at stated came at now,
// so the window ends by now + its length. The bound is carried whole windows
// on, and dropped when it falls a second or more before a stated reset: the
// length is wrong.
func (s *State) learnPhase(now, stated time.Time) {
	w := &s.win
	if !s.kind.fixed() || w.length <= 0 || !w.stated && !w.cadenced || w.jitter > phaseJitter || stated.Sub(w.stamp).Abs() > s.tolerance() {
		return
	}
	b := now.Add(w.length)
	if !w.phase.IsZero() {
		n := (stated.Sub(w.phase) + w.length/2) / w.length
		b = earlier(b, w.phase.Add(n*w.length))
	}
	b = earlier(b, stated)
	if stated.Sub(b) >= phaseGrain {
		s.setPhase(time.Time{})
		return
	}
	s.setPhase(b)
	if w.reset.Sub(stated).Abs() < w.length/2 {
		w.reset = earlier(w.reset, b)
	}
}

// setPhase sets the learnt phase, and with it whether a fixed window is
// Phased.
func (s *State) setPhase(t time.Time) {
	s.win.phase = t
	if s.kind.fixed() {
		s.setKind(Fixed)
	}
}

// explains reports whether the window's length accounts for the time to its
// reset (R32).
func (s *State) explains(now time.Time) bool {
	w := s.win
	return w.length > 0 && w.reset.Sub(now) <= w.length+w.length/20+time.Second
}
