package quota

import (
	"math"
	"time"
)

// What changes a quota besides this client: others spending from it
// (negative drift), or a refill as it goes (positive), measured from the
// gap between what responses say and what the budget predicted.

// estimateError is how far a stated cost is taken to miss what the server
// charges, as a share of it: LLM APIs bill the completion's length, which
// a caller's estimate (max_tokens, or the prompt plus a guess) misses by
// tens of percent either way; 0.3 covers the ±30% the scenario tests draw.
// A token quota's drift takes that share of its charges for estimate error
// rather than spending, and a charge leaves room for that share of the
// stated costs in flight (Window.Unconfirmed). A caller whose estimates
// fall shorter still is covered only by the reserve (Reserve).
const estimateError = 0.3

// measureDrift compares what a response says with the window's baseline:
// eff = anchorB - (admitted since) + drift × elapsed.
// A smooth quota's baseline moves on once it is four minimal spans old.
//
// The gap is known only up to the requests in flight at either end: eff
// subtracts every unseen request, and the server may already have counted
// some of them (a request is counted when it arrives, observed when its
// response does). A gap within that noise is no evidence of anyone else, and
// beyond it only the excess is: without this, the ordinary rise of the
// in-flight count after slow start reads as another client draining the
// quota, and its debt makes a job within the quota stop short of it.
func (w *Window) measureDrift(now time.Time, eff, admitted, unseen float64, horizon time.Duration) {
	if w.toFull {
		// The responses state the refill (see readsToFull); a baseline
		// starts afresh should a reset stop reading so.
		w.anchorAt = time.Time{}
		return
	}
	span := now.Sub(w.anchorAt)
	minSpan := max(2*horizon, 250*time.Millisecond)
	if w.window > 0 {
		minSpan = max(minSpan, w.window/10)
	}
	if w.anchorAt.IsZero() {
		w.anchorAt, w.anchorB, w.anchorA, w.anchorU = now, eff, admitted, unseen
		return
	}
	if span < minSpan {

		return
	}
	gap := eff - (w.anchorB - (admitted - w.anchorA))

	// Each figure subtracted all its unseen requests, of which the server
	// had counted between none and all: the gap is off by between minus
	// the unseen now and plus the unseen at the baseline.
	down, up := unseen, w.anchorU
	if w.tokens {
		// Token costs are estimates: what was charged since the baseline
		// can be off by a share of itself, and that error is no one's
		// spending. estimateError is the share allowed for.
		e := estimateError * max(admitted-w.anchorA, 0)
		down, up = down+e, up+e
	}
	switch {
	case gap < 0:
		gap = min(gap+down, 0)
	default:
		gap = max(gap-up, 0)
	}
	if gap != 0 {
		w.drift = gap / span.Seconds()
	} else {
		w.drift = gap // ±0 over a positive span, without the division (the usual gap: nobody else)
	}
	if w.drift < 0 { // maxDrain bounds a drain, never a refill
		w.drift = max(w.drift, -w.maxDrain(span, admitted-w.anchorA))
	}
	w.measuredAt = now
	if w.drift < 0 {
		w.shared = true
	}
	if w.kind == kindSmooth && span >= 4*minSpan {
		w.anchorAt, w.anchorB, w.anchorA, w.anchorU = now, eff, admitted, unseen
	}
}

// maxDrain bounds what others can be spending, units per second, given that
// we spent ours over span: no more than the quota's long-run rate leaves us
// (limit − ours per window, over at least a window). A measurement above it
// is an error of the baseline (a response's figures skewed by requests in
// flight), and taken as a rate it would be extrapolated to the reset and
// carried into the next windows. The window's length stands in as the time
// from the baseline to the reset while unlearned; with neither, no bound.
func (w *Window) maxDrain(span time.Duration, ours float64) float64 {
	win := w.window
	if win <= 0 && w.reset.After(w.anchorAt) {
		win = w.reset.Sub(w.anchorAt)
	}
	limit := w.limitOrPeak()
	if win <= 0 || limit <= 0 {
		return math.Inf(1)
	}
	over := max(span, win)
	return max(limit*over.Seconds()/win.Seconds()-max(ours, 0), 0) / over.Seconds()
}

// AgeDrift halves a drift no response has confirmed for a window (a second
// at least): others' spending measured once, in a burst at the start, must
// not hold this client back forever once nobody spends (every client
// reserving for the others' old burst starves them all; no one then sends
// the requests whose answers would correct it).
func (w *Window) AgeDrift(now time.Time) {
	// Unlearnt, the window's lower bound stands in (as Roll takes it). A
	// second in its stead halved others' spending, measured in our first
	// burst, to nothing within seconds of a minute's window, and what the
	// budget then spread over the rest of it met their spending.
	span := max(w.length(), time.Second)
	if w.toFull && w.drift > 0 {
		// The quota's own refill, stated by its responses, not others'
		// spending measured: it holds without traffic.
		return
	}
	if w.drift == 0 || w.measuredAt.IsZero() || now.Sub(w.measuredAt) < span {
		return
	}
	for now.Sub(w.measuredAt) >= span && w.drift != 0 {
		w.drift /= 2
		if math.Abs(w.drift) < 1e-3 {
			w.drift = 0
		}
		w.measuredAt = w.measuredAt.Add(span)
	}
}

// ApplyDrift moves the budget by the drift since it was last applied. A
// refill never takes it above the limit.
func (w *Window) ApplyDrift(now time.Time) {
	w.moveByDrift(now)
	// Published for the admission path (debt). Plain code rather than a
	// deferred closure: this runs twice per response.
	drain := int64(0) // the probe must go, whatever others spend
	if !w.probing {
		drain = ToMilli(-w.drift)
	}
	w.drain = drain
	if drain != 0 {
		// Read only beside a drain (debt), and set with it.
		w.drainFrom = int64(w.driftAt.Sub(w.epoch))
	}
}

// moveByDrift is applyDrift's change to the budget.
func (w *Window) moveByDrift(now time.Time) {
	if w.driftAt.IsZero() || !now.After(w.driftAt) || w.probing {
		w.driftAt = later(w.driftAt, now)
		return
	}
	if w.drift == 0 {
		// No drift moves nothing: as d == 0 below, without converting
		// the time since (a division, on every response).
		w.driftAt = now
		return
	}
	d := w.drift * now.Sub(w.driftAt).Seconds()
	w.driftAt = now
	if d == 0 || !w.known {
		return
	}
	if d > 0 {
		room := ToMilli(w.limitOrPeak()) - w.budget
		credit := min(ToMilli(d*w.safety), max(room, 0))
		w.budget += credit
		w.credit += credit
		return
	}
	take := min(ToMilli(-d), max(w.drainRoom, 0))
	w.drainRoom -= take
	w.budget = max(w.budget-take, 0) // a server's remaining stops at zero
}

// fullAgree is how closely a response's reset must fall where an earlier
// one's time to full predicts it, as a share of the time to it (beyond how
// far resets wander): a quarter, wider than the rounding of Anthropic's
// token figures (to the thousand), far narrower than what a reset meaning
// anything else gives (a sliding window's stays put while time passes).
const fullAgree = 0.25

// resetResolution is the rounding readsToFull allows a reset even where
// resets were not seen to wander: most APIs state them to the second
// (delta-seconds, Unix seconds, RFC 3339 without a fraction), and a sliding
// window's reset restated each second as "in N s" then moves with the clock
// as a time to full would.
const resetResolution = time.Second

// fullRuns is how many moved resets in a row must fall where predicted for
// a smooth quota's reset to read as its time to full: one may by chance (a
// sliding window's first answer after its step).
const fullRuns = 2

// readsToFull reports the refill rate q states when the smooth quota's
// reset is the time until it is full again (OpenAI's and Anthropic's token
// buckets: x-ratelimit-reset-tokens, anthropic-ratelimit-tokens-reset):
// (Limit − Remaining) over the time to the reset; such a reading makes a
// quota smooth, whatever it was taken for before (a bucket that fills up
// looks like a window that starts afresh), but for a fleet's coordinated
// quota, whose budget the fleet's store keeps. That is its meaning once
// fills saw the reset move in step with spending, or once fullRuns moved
// resets in a row fell where the last one's rate predicts (Limit −
// Remaining at that rate from now); any reset that does not, a while after
// the last, undoes it. A reset closer than resets wander says too little
// (1 token short, "in 1s" rounded up, would read as 1 token a second): the
// last rate then stands.
func (w *Window) readsToFull(q *Report, now time.Time, timed bool) (float64, bool) {
	limit := w.limitOrPeak()
	left := q.Reset.Sub(now)
	tol := max(w.tolerance(), resetResolution)
	if w.kind != kindSmooth && w.coordinated || !timed || !(q.Remaining < limit) || left < 4*tol {
		w.toFull = w.toFull && w.kind == kindSmooth
		return 0, false
	}
	deficit := limit - q.Remaining
	// The rate this response implies is worked out only where it is kept
	// or returned: a window that counts down to a fixed reset (the usual
	// one) keeps its first and never reads another, and the two divisions
	// were 0.6% of a response's CPU time.
	if w.fullRef.IsZero() {
		rate := deficit / left.Seconds()
		w.fullRef, w.fullAt, w.fullRate = q.Reset, now, rate
		return rate, w.toFull
	}
	predicted := time.Duration(deficit / w.fullRate * float64(time.Second))
	fits := (left - predicted).Abs() <= time.Duration(fullAgree*float64(left))+tol
	switch moved := q.Reset.Sub(w.fullRef); {
	case moved.Abs() > tol:
		if w.kind != kindSmooth && (moved.Seconds() > limit/w.fullRate/2 || w.window > 0 && moved > w.window/2) {
			// Not known to refill as it goes, and the reset stepped by
			// half a window, or half what the whole quota takes to
			// refill: a fixed window's next one (emptied at its start
			// by others, or met at the same point each time) fits as
			// well. A time to full moves by what is spent in between.
			fits = false
		}
		if fits {
			w.fullRuns++
		} else {
			w.fullRuns, w.toFull = 0, false
		}
		w.toFull = w.toFull || w.fullRuns >= fullRuns
		if w.toFull {
			// Read so before a reset passed to tell (a bucket that
			// never fills has none): it refills as it goes.
			w.kind = kindSmooth
		}
		w.fullRef, w.fullAt, w.fullRate = q.Reset, now, deficit/left.Seconds()
	case !fits && now.Sub(w.fullAt) > tol:
		// Time passed, the reset stayed: not a time to full.
		w.fullRuns, w.toFull = 0, false
	}
	if !w.toFull {
		w.fullD, w.fullT = 0, 0
		return 0, false
	}
	// The refill, over the last responses: their deficits over their
	// times to full, each figure rounded (Anthropic's remaining tokens to
	// the thousand, resets to the second), which one response's ratio
	// carries whole and a sum of several averages out.
	w.fullD = w.fullD*fullKeep + deficit
	w.fullT = w.fullT*fullKeep + left.Seconds()
	return w.fullD / w.fullT, true
}

// fullKeep is the weight readsToFull's sums keep per response: about ten
// responses count (a quota's refill changes only when its limit does).
const fullKeep = 0.9
