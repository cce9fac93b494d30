package quota

import "time"

// tolerance is how far apart one window's stated resets may be (R13).
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

// learnLength learns the window's length from the advance of a new window's
// reset over the last (R16), unless it refills as it goes.
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

// explains reports whether the window's length accounts for its reset (R32).
func (s *State) explains(now time.Time) bool {
	w := s.win
	return w.length > 0 && w.reset.Sub(now) <= w.length+w.length/20+time.Second
}
