package quota

import (
	"time"

	"github.com/pacer-go/pacer/internal/clock"
)

// When a quota's window ends: the reset a response states, rounded and
// wandering with latency, is turned into the instant the window is rolled
// over (see Window.Roll).

// RollGuard is how long after its believed reset a window is rolled over. A
// reset carried from window to window by a learned length drifts by that
// length's rounding (microseconds a window); rolling exactly at it sends
// the window's first request into the end of the last one, a 429. 10 ms is
// a thousandth of a 10-second window, and the look at each roll brings the
// stated reset back.
const RollGuard = 10 * time.Millisecond

// phaseGrain is the coarsest rounding of a stated reset phase learning
// allows for: whole seconds. A true window ends at most this much before the
// reset a response states; a learned bound earlier than that is wrong (the
// window is not the length it was taken to be) and is dropped.
const phaseGrain = time.Second

// phaseJitter is how far the stated resets of one window may wander for
// learnPhase to apply: it serves servers that state the same rounded instant
// in every response of a window. Delta-second resets wander with latency
// (and are tightened by the earliest stated instead), and their windows'
// lengths, learned from that cadence, can be a rounding short.
const phaseJitter = 10 * time.Millisecond

// checkCadence forgets the learned phase unless a new window's stated reset
// advanced from the last one by a whole number of the known window (within
// a fiftieth of it, at most 20 ms): the length that carries the phase from
// one window to the next must match what the server states.
func (w *Window) checkCadence(reset time.Time) {
	d := reset.Sub(w.stamp)
	w.cadenced = false
	if w.stamp.IsZero() || w.window <= 0 {
		return // the window is learned from this advance
	}
	n := (d + w.window/2) / w.window
	if off := (d - n*w.window).Abs(); n < 1 || off > min(w.window/50, 20*time.Millisecond) {
		w.phase = time.Time{}
		return
	}
	w.cadenced = true
}

// learnPhase tightens the end of a fixed window whose server states resets
// rounded up (epoch seconds, RFC 3339 whole seconds): every response of one
// window then states the same instant, up to a second after the true end.
// A response of the window ending at stated was counted at most at now, so
// that window began by now and ends by now + window, given the window's
// length: stated by policy, or learned from the stated resets' cadence, which
// is exact for a whole-second window (a window of, say, 4.5 s is the residual
// risk: a learned 4 s would end it early; phaseGrain catches part of it). The
// bound is carried to later windows a whole number of windows on while the
// cadence holds, and with the length right it is never earlier than the true
// end: the next window's quota is never spent early.
//
// A length learned from the cadence is used only once the next advance
// confirms it (cadenced): one advance measures two resets read with the
// server's clock offset of their time, and that bound rises as responses
// arrive at new sub-second phases (see clockOffset). Across such a rise
// of 0.69 s, a 5 s window's resets read 4.31 s apart, the window's end was
// bounded 0.33 s early, and the look at the roll met a 429 (one run of
// TestAdaptiveLearnsWindowPhaseBehindWholeSecondResets in 30 or so).
func (w *Window) learnPhase(now, stated time.Time) {
	if w.kind != kindRefill || w.window <= 0 || !w.stated && !w.cadenced || w.jitter > phaseJitter || stated.Sub(w.stamp).Abs() > w.tolerance() {
		return
	}
	b := now.Add(w.window)
	if !w.phase.IsZero() {
		n := (stated.Sub(w.phase) + w.window/2) / w.window
		b = clock.Earlier(b, w.phase.Add(n*w.window))
	}
	b = clock.Earlier(b, stated)
	if stated.Sub(b) >= phaseGrain {
		w.phase = time.Time{}
		return
	}
	w.phase = b
	if w.reset.Sub(stated).Abs() < w.window/2 {
		w.reset = clock.Earlier(w.reset, b)
	}
}

// sameWindowReset folds in the reset of a response taken to be from the
// current window, whose effective remaining is eff. The stamp keeps the
// latest (it tells the next window apart). The reset a fixed window rolls at
// is the earliest stated: servers round the time to reset up (to whole
// seconds, or state epoch seconds), and latency only adds to it, so every
// stated reset of one window is an upper bound of its true end and the
// smallest is the tightest, still never early. That holds only if the
// response is surely of the same window: its remaining did not go up (a
// fixed window that did has rolled over, unnoticed because resets of
// consecutive windows can lie closer together than the rounding), its reset
// is less than half a window later, and the rounding (the jitter) is small
// against the window. Otherwise, and for other quotas, the later reset is
// kept: the conservative choice.
func (w *Window) sameWindowReset(q *Report, timed bool, eff float64) {
	if !timed {
		return
	}
	w.stamp = clock.Later(w.stamp, q.Reset)
	same := w.kind == kindRefill && !w.reset.IsZero() && eff <= w.Units() &&
		w.window > 0 && q.Reset.Sub(w.reset) < w.window/2 && 2*w.jitter < w.window
	if same {
		w.reset = clock.Earlier(w.reset, q.Reset)
	} else {
		w.reset = clock.Later(w.reset, q.Reset)
	}
}
