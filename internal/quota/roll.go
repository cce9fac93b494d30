package quota

import "time"

// A window whose reset has passed moves on to the next (Roll), and a
// window nothing tells the state of is looked at by one request
// (StartProbe).

// RollGuard is how long after its believed reset a window is rolled over. A
// reset carried from window to window by a learned length drifts by that
// length's rounding (microseconds a window); rolling exactly at it sends
// the window's first request into the end of the last one, a 429. 10 ms is
// a thousandth of a 10-second window, and the look at each roll brings the
// stated reset back.
const RollGuard = 10 * time.Millisecond

// length is the window's length, or a lower bound of it while unlearned:
// the time from its first response to its reset; 0 when neither is known.
func (w *Window) length() time.Duration {
	if w.window <= 0 && !w.firstAt.IsZero() && w.reset.After(w.firstAt) {
		return w.reset.Sub(w.firstAt)
	}
	return w.window
}

// Roll moves a window whose reset has passed on to the next one. A quota
// known to refill at its reset starts the next window with its full limit,
// minus what is in flight (it may land there). One known to refill smoothly
// keeps its budget, and so does one not seen pass a reset yet, which learns
// from the next response which it is. When the budget then cannot take a
// request, or the next window's size is unknown, one request is let through
// to learn it (probing).
func (w *Window) Roll(now time.Time, inflight, unit, admitted float64) {
	w.ApplyDrift(now)
	if !w.tokens && w.kind == kindRefill && !w.anchorAt.IsZero() && !w.first.IsZero() {
		// The window's books: what the server had left at its end falls
		// short of what its first response said, less what we spent since,
		// by what others spent. Between responses a slow, steady spender
		// hides in the noise of our requests in flight; over a whole
		// window it shows.
		// Requests in flight at the first response may have been counted
		// after it, and are not in ours: they are the books' noise.
		ours := admitted - w.anchorA
		if others := w.firstRem - ours - w.low - w.anchorU; others >= 2 && inflight == 0 {
			w.shared = true
		}
	}
	w.rolled = true
	w.carry = w.Units()
	win := w.length()
	if w.window > 0 {
		if n := now.Sub(w.reset)/w.window + 1; n > 0 {
			w.reset = w.reset.Add(n * w.window)
		}
	} else {
		w.reset = time.Time{}
	}
	if w.probing {
		// A look is already due or out: the window it will describe is
		// the new one. Starting over would take its budget back, and a
		// window shorter than the wait for the look (a reset of 12 ms on
		// every refusal) would roll it away forever.
		return
	}
	if w.toFull {
		// Its reset was the time until it is full: it is, but for what
		// is in flight. No look is needed, and one would let through
		// whatever the gate lets go, whatever it costs.
		w.budget, w.credit = ToMilli(max(w.limitOrPeak()-inflight, 0)), 0
		return
	}
	// Even a quota known to refill at its reset is not refilled by the
	// model: one request looks first, and its response sets the budget of
	// the new window. The look costs a round trip per window; it saves a
	// burst into a window that did not refill after all (a sliding window
	// still weighed down by the last one, a reset a clock skew made early,
	// a quota that changed), which would cost as many 429s as requests.
	//
	// A quota not yet seen pass a reset may be a sliding window, which
	// after a spent window has room again only as the old one ages out:
	// the look waits for two units of that (2 × window/limit: one, and
	// one for the rounding of the reset and of the server's count), so it
	// does not meet a 429. A fixed window loses 2/limit of a window, once.
	//
	// A window that ends with room left needs no look: whatever it is, the
	// next one has at least that much (a fixed window refills, a sliding
	// one's count carries across the boundary unchanged), less two units
	// for the rounding of the reset and of the server's count. The first
	// response of the new window then sets the budget. Below-quota traffic
	// so crosses resets without waiting for anything. (Not a shared one:
	// spread over the new window, a small carried budget would starve it of
	// the responses that bring the new window's figures.)
	if carry := w.Units() - w.Reserve() - 2*unit; carry >= unit && !w.shared {
		w.budget, w.credit = ToMilli(carry+w.Reserve()), 0
		return
	}
	if w.kind == kindUnknown && win > 0 && w.limitOrPeak() >= 1 {
		w.probeAt = now.Add(time.Duration(2 * float64(win) / w.limitOrPeak()))
		w.budget, w.credit = 0, 0
		return
	}
	// Looked at also when what is left does not hold a unit above what
	// a charge must keep (Plan's keep: the reserve, and for a smooth
	// quota a unit more): no charge would take it, and without a look
	// nothing would ever tell that it refilled.
	if w.kind == kindRefill || w.Units()-max(w.Reserve(), float64(w.keep)/Milli) < unit {
		w.StartProbe(unit)
	}
}

// reprobe is how long a spent quota that refills smoothly waits before one
// request looks again: a twentieth of its window, at least a second.
func (w *Window) reprobe() time.Duration {
	return max(time.Second, w.window/20)
}

// StartProbe lets one request through to learn the quota's state.
//
// The in-flight gate lets one request through, and the budget one unit (a
// token quota's: what a request is taken to cost). A look that costs more
// finds nothing out to bring a response, and starts the look afresh with
// its own cost (see the Adaptive's charge). The whole quota as a token
// look's budget let through every request already past the gate, whatever
// they cost, into a quota spent a moment before.
func (w *Window) StartProbe(unit float64) {
	w.probing = true
	w.drain = 0
	w.keep = 0 // nothing is kept back from the look
	w.budget, w.credit = min(ToMilli(unit), max(w.most, Milli)), 0
}
