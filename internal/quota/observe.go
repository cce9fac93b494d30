package quota

import (
	"math"
	"time"
)

// What a response teaches the model of a quota: its budget (Observe), its
// kind (a window that counts down to a reset, or a bucket that fills as
// it goes), and when its window ends (the reset a response states, rounded
// and wandering with latency, tightened to the instant the window is
// rolled over; see Window.Roll).

// Report is what one response said of one quota: Limit per Window, and
// Remaining until Reset. Zero fields are unknown, except Remaining, which
// is unknown when Unstated: the server stated Limit per Window alone, a
// policy, and the report teaches the limit and window but no budget,
// neither full nor empty. The caller has clamped the fields (finite, not
// negative but for Unstated, Remaining at most Limit, Reset within the
// horizon it accepts).
type Report struct {
	Limit     float64
	Remaining float64
	Reset     time.Time
	Window    time.Duration
}

// Unstated is the Remaining of a Report whose server did not say what is
// left.
const Unstated = -1

// Seen is what the limiter around the model knew when a response came in,
// in the quota's unit (requests, or estimated tokens).
type Seen struct {
	// Unseen is what was admitted and not yet answered besides the
	// response's own request: the server may not have counted it.
	Unseen float64
	// Fed is what other limiters feeding this quota have in flight (the
	// host's limiter sends a route's first requests before a response
	// names the route's bucket); +Inf when any may feed it at any time.
	Fed float64
	// Admitted is the running total of admissions, ever.
	Admitted float64
	// Seq is the response's request's place in the order of admissions
	// (1 for the first), and Admissions how many there were so far: a
	// higher Remaining in the same window is believed from a request
	// admitted after the budget was last set, which the server counted
	// after every figure the budget was set from. 0 when unknown (a
	// request another limiter admitted).
	Seq, Admissions int64
	// Horizon is how old the budget must be before a higher Remaining in
	// the same window is believed from a request of unknown order
	// (responses overtake each other).
	Horizon time.Duration
	// Age is how old the response's figures may be: about a round trip.
	Age time.Duration
	// Refused marks a 429: a refusal says nothing about whether the
	// quota jumped back at its reset.
	Refused bool
	// Blind counts the requests admitted with no stated cost, ever (less
	// those refused); BlindUnseen those in flight besides the response's
	// own; Stated is the stated cost of the hinted requests answered.
	// Token quotas learn a blind request's cost from them (see cost.go).
	Blind, BlindUnseen, Stated float64
}

// explains reports whether the window's length, stated or learned, accounts
// for the time to its reset: within 5% and a second of rounding, stated
// resets of a window of that length are believed however far away (an
// hourly quota's 40 minutes, a daily one's 20 hours).
func (w *Window) explains(now time.Time) bool {
	return w.window > 0 && w.reset.Sub(now) <= w.window+w.window/20+time.Second
}

// tolerance is how far apart two stated resets may be and still name the
// same window. Servers round resets (to whole seconds, often) and relative
// resets drift with latency; both show as jitter between responses of one
// window. A known window caps it: resets a quarter window apart are different
// windows unless the jitter itself is that large.
func (w *Window) tolerance() time.Duration {
	tol := min(max(4*w.jitter, 10*time.Millisecond), time.Second)
	if w.window > 0 {
		tol = min(tol, max(w.window/4, 2*w.jitter))
	}
	return tol
}

// Observe folds one response's report of the quota into the model, at now.
// seen is what the limiter knew then (see Seen). A report lowers the budget
// at once; one that would raise it within the window is believed only as
// the window's kind allows (an overtaken figure of a window that counts
// down never raises it; a quota that refills may report more once the
// budget has stood for seen.Horizon).
func (w *Window) Observe(q Report, now time.Time, seen Seen) {
	w.observeAt(&q, now, &seen)
}

// observeAt is Observe for q and seen by pointer, as Book.Observe calls it:
// passed by value (15 words), they were stored word by word and copied
// whole, and the copy's wide loads waited for the narrow stores (a
// store-forwarding stall). Neither is changed.
func (w *Window) observeAt(q *Report, now time.Time, seen *Seen) {
	if q.Remaining != Unstated && (seen.Unseen > 0 || w.burst) && (!w.burst || q.Remaining < w.burstLow) {
		// One of a burst's answers (others of ours were out with it).
		w.burstLow, w.burst = q.Remaining, true
	}
	if w.probing {
		switch {
		case seen.Refused:
			// The look came too early: the refill is no faster than
			// measured. The next waits twice as long (no longer than the
			// measure's own wake-up, see Plan).
			w.lookGap = min(2*max(w.lookGap, w.reprobe()), maxLookGap)
		case q.Remaining != Unstated && q.Remaining >= max(2, w.limitOrPeak()/10):
			// Room for more than the looks since would have taken: the
			// quota refills faster than the gap allows for. (A unit or
			// two is what a gap just past the refill's pace finds, and
			// the budget spends it at once: no reason to look sooner.)
			w.lookGap = 0
		}
	}
	w.observe(q, now, seen)
	if seen.Unseen == 0 {
		w.burst = false // a burst is over: the next one starts afresh
	}
	if w.inferred || w.coordinated {
		w.ForgetOthers()
	}
}

func (w *Window) observe(q *Report, now time.Time, seen *Seen) {
	unseen, fed, admitted, horizon, age := seen.Unseen, seen.Fed, seen.Admitted, seen.Horizon, seen.Age
	hasRemaining := q.Remaining != Unstated
	if seen.Refused && hasRemaining && q.Remaining < 1 {
		if !w.tokens && w.known && !w.probing && !w.rolled && w.Units() >= 1 {
			// Refused with room left by the budget: someone else spent it.
			// (Not a token quota's: its charges are estimates, and one
			// that fell short is refused with room left for another.)
			w.shared = true
		}
		if w.kind == kindSmooth && !w.toFull && !w.tokens && q.Reset.After(now) {
			// (One whose reset states its time to full refills as it
			// goes, whatever refused a request; and a token quota's
			// refusal is first of all a cost estimate that fell short.)
			// A quota taken to refill as it goes refused a look: it does
			// not (it was another client that emptied it at its reset,
			// not a sliding window's tail). Wait for the reset, not the
			// refill.
			w.kind = kindRefill
		}
	}
	if q.Limit > 0 {
		w.limit = q.Limit
	}
	w.peak = max(w.peak, q.Remaining)
	w.most = max(ToMilli(w.limitOrPeak()), Milli)
	if q.Window > 0 {
		w.window, w.stated = q.Window, true
	}
	timed := !q.Reset.IsZero()
	switch {
	case !hasRemaining, !timed && q.Limit > 0 && q.Remaining >= q.Limit:
		// A policy (Limit per Window), not the state of a window: the
		// limit and window are learnt, no budget is set, and a reset
		// stated with it has nothing to count down.
		return
	case timed && !q.Reset.After(now):
		// The window it describes is over (parsers map past resets to now).
		return
	}
	if !timed && w.kind == kindUnknown {
		// A quota with no reset (Shopify's leaky bucket) refills as it
		// goes: nothing to wait for, no window to spend at once.
		w.kind = kindSmooth
	}
	w.ApplyDrift(now)
	// What others take until the figure is seen, at the measured drain:
	// converted only when there is one (the conversion's division was 1%
	// of a response's CPU time; without a drain the term is +0, and
	// subtracting +0 changes no figure).
	eff := q.Remaining - unseen
	if drain := max(-w.drift, 0); drain != 0 {
		eff -= drain * age.Seconds()
	}
	eff = max(eff, 0)
	tol := w.tolerance()
	if timed && w.rolled && w.kind == kindRefill && !q.Reset.After(w.stamp.Add(tol)) {
		// A response from the window that just ended, overtaken by the
		// roll (its reset, rounded up, can be later than the one we rolled at).
		if w.probing && q.Reset.After(now) {
			// The look itself: the window has not ended yet (the reset
			// the roll assumed was early). Back to it, until the reset it
			// states; nothing else would end the look.
			w.rolled, w.probing = false, false
			w.reset, w.stamp = later(w.reset, q.Reset), later(w.stamp, q.Reset)
			if w.window > 0 {
				// roll moved the reset a window on; the stated one is it.
				w.reset = q.Reset
			}
			w.setAt, w.setSeq = now, seen.Admissions
			w.setBudget(eff)
		}
		return
	}
	if timed {
		defer w.learnPhase(now, q.Reset)
	}
	if timed && w.known && !w.rolled {
		if d := q.Reset.Sub(w.stamp).Abs(); d <= tol {
			w.jitter = max(d, w.jitter*7/8)
		}
	}
	fresh := !w.known || w.rolled || w.probing || (timed && q.Reset.Sub(w.stamp) >= tol)
	inStep := fresh && timed && !w.toFull && w.known && now.Before(w.stamp) && w.fillsInStep(q, now)
	if inStep {
		// Not a new window: the reset moved later before the old one
		// passed, by what the spending since takes to refill at the rate
		// this response's time to full implies. A bucket (see fills),
		// whether its kind was unknown or already read as refilling as it
		// goes (its first moved reset showed no jump). Read as a window
		// that started afresh, it was spread as a sliding window would be
		// until its time to full was seen moving twice by more than its
		// rounding: a job of 39 on a bucket of 60 a minute, 4 workers, ran
		// 9.8× unpaced.
		fresh = false
	}
	if !fresh {
		w.low = min(w.low, q.Remaining)
	}
	// A window with a reset that is not known to refill by itself only
	// counts down until the reset: its lowest figure is its freshest. A
	// quota without a reset (a leaky bucket) refills as it goes.
	countsDown := timed && w.kind != kindSmooth
	switch {
	case fresh:
		// A new window.
		// A real window boundary, not resets wandering: the old reset has
		// passed, or the new one is half a window later.
		boundary := w.rolled || !now.Before(w.stamp) || (timed && (w.window == 0 || q.Reset.Sub(w.stamp) > w.window/2))
		before := w.Units()
		if w.rolled {
			before = w.carry
		}
		if limit := w.limitOrPeak(); w.known && boundary && !seen.Refused && !w.toFull && (w.kind == kindUnknown || limit-before >= 0.1*limit) {
			// A reset passed: did the quota jump back up? Asked again at
			// every reset that leaves room to tell (a tenth of the limit
			// spent), so one misreading does not stick. Remaining, not
			// eff: requests sent into the new window on a carried budget
			// before its first answer are in flight, and subtracting them
			// would hide the jump. But a jump no larger than those in
			// flight is no proof: the budget subtracted them and the
			// server may have counted none (a bucket of 60 nearly full,
			// 3 in flight, read 58 against a budget of 55 as a window
			// that started afresh). (Not asked of a quota whose reset
			// states its time to full: full at that reset is what it
			// said, not a jump.)
			switch {
			case q.Remaining-before > max(0.5*(limit-before), unseen):
				w.kind = kindRefill
			case !w.shared:
				w.kind = kindSmooth
			default:
				// Others spend from this quota: a new window they emptied
				// before our first look at it shows no jump either. Read
				// as a quota that refills as it goes, its "refill" (their
				// spending seen late) let one of 50 clients take 3 to 5
				// times the others' share.
			}
		}
		if timed {
			// Consecutive windows' resets teach the window length when no
			// policy states it: the latest advance, unless it is half a
			// window or more longer (a window with no traffic skipped).
			// Taking only shorter ones would keep a length learned short
			// (a first reset read before the server's clock offset was
			// bounded well) for good, and a short window ends early.
			// (Not a smooth quota's: a token bucket's reset moves with every
			// response and has no cadence.)
			w.checkCadence(q.Reset)
			// Nor one under half the length known: a reset that moves by
			// milliseconds (the server's clock offset bounded better, the
			// epoch seconds it states corrected by it) is the same window,
			// and read as a window of 10 ms it rolled one client of 50 on a
			// shared quota a hundred times a second, to twice their share.
			// And only once the old reset has passed: before it, a later
			// reset is the same window's, restated (the server's clock
			// offset learnt from Date moved it by 3 s, which read as a
			// window of 3 s).
			if d := q.Reset.Sub(w.stamp); !w.stated && w.kind != kindSmooth && !w.stamp.IsZero() && (w.rolled || !now.Before(w.stamp)) && d > 2*w.jitter && (w.window == 0 || (d < w.window+w.window/2 && d > w.window/2)) {
				w.window = d
			}
			w.reset, w.stamp = q.Reset, q.Reset
			w.first, w.firstRem, w.firstAt = q.Reset, q.Remaining, now
		}
		if w.kind != kindSmooth {
			// Others' spending carries over; a refill is measured afresh.
			w.drift = min(w.drift, 0)
			w.anchorAt, w.anchorB, w.anchorA, w.anchorU = now, eff, admitted, unseen
		} else {
			// A smooth quota (a token bucket's reset moves with every
			// response) is measured against a rolling baseline.
			w.measureDrift(now, eff, admitted, unseen, horizon)
		}
	case countsDown && q.Remaining > w.low:
		// Overtaken: a window that only counts down already reported less.
		// Its figures are older than ones applied (a later request arrived
		// at the server before it was answered); they can neither raise the
		// budget nor say anything about a drift. But with nothing of ours
		// in flight any more, the lowest figure is exact: the requests
		// subtracted as unseen when it was applied were counted in it.
		if timed {
			w.reset, w.stamp = later(w.reset, q.Reset), later(w.stamp, q.Reset)
		}
		if unseen == 0 {
			exact := max(w.low-max(-w.drift, 0)*age.Seconds(), 0)
			if w.low > w.Units() {
				w.budget, w.credit = ToMilli(exact), 0
			}
			// And the books are exact too: the moment a burst's last
			// answer comes in is the one point where others' spending
			// shows without the noise of ours in flight. Skipped when
			// that answer happened to be overtaken (its burst's answers
			// all arrive at once, read in any order), an unseen client's
			// few units during our first burst went unseen in 1 run of
			// 30, and the next window's burst raced it for its last unit.
			w.measureDrift(now, exact, admitted, 0, horizon)
		}
		return
	case !countsDown && eff > w.Units() && w.overtaken(now, seen):
		// A quota that refills by itself may legitimately report more, so
		// the lowest figure proves nothing: a higher one soon after the
		// budget was set is stale until proven otherwise. Keep the later
		// reset, which is the conservative one.
		if timed {
			w.reset, w.stamp = later(w.reset, q.Reset), later(w.stamp, q.Reset)
		}
		if rate, ok := w.readsToFull(q, now, timed); ok {
			// Its Remaining is stale, but its reset is the time to full
			// of that Remaining, from one consistent response: a burst's
			// answers, read here but for its lowest, are most of what
			// shows a bucket's time to full.
			w.drift, w.measuredAt = rate, now
		}
		if unseen == 0 && w.burst {
			// But with nothing of ours in flight any more, the burst's
			// lowest figure is a lower bound of what is left (the one the
			// server stated last, after counting every request of the
			// burst; only the refill since raised the others): the
			// requests subtracted as unseen when the burst's first answers
			// were applied were counted in it. Read as stale, a round of
			// 16 answers read lowest first left a Shopify bucket's budget
			// at nothing while 15 were left, and the job's next round
			// waited for the refill.
			exact := max(w.burstLow-max(-w.drift, 0)*age.Seconds(), 0)
			if m := ToMilli(exact); m > w.budget {
				w.budget, w.credit = m, 0
			}
		}
		return
	case inStep || countsDown && w.fills(q, w.wanders()):
		// A reset that moves later as the quota is spent is the time until
		// a bucket is full again (OpenAI's token buckets): it refills as it
		// goes, and the deficit over that time is its refill rate.
		// (Limit − Remaining) over the time to full is the refill rate, from
		// one response's consistent figures: no baseline, no noise.
		w.kind, w.toFull = kindSmooth, true
		w.stamp, w.reset = later(w.stamp, q.Reset), later(w.reset, q.Reset)
	default:
		// The lowest Remaining of a window that counts down is the freshest
		// figure there is, whatever order responses are read in: every
		// request that reached the server after it is still in flight (it
		// would otherwise have reported less), so Remaining less everything
		// unseen is a lower bound of what is left, and exact once nothing
		// is in flight.
		if !w.tokens && w.known && !w.rolled && q.Remaining < w.Units()-1-fed {
			// Less left than the budget, which counts every request of
			// ours, even those the server has not seen (but not those
			// that feeding limiters admitted): someone else spent it.
			w.shared = true
		}
		w.sameWindowReset(q, timed, eff)
		w.measureDrift(now, eff, admitted, unseen, horizon)
	}
	if fresh {
		w.low = q.Remaining
	}
	if rate, ok := w.readsToFull(q, now, timed); ok {
		// The refill the response states, exact up to the rounding of
		// its figures (which states it low: resets round up).
		w.drift, w.measuredAt = rate, now
	}
	if w.tokens {
		w.sampleCost(q, now, seen, fresh)
	}
	w.known, w.rolled, w.setAt, w.setSeq, w.probing = true, false, now, seen.Admissions, false
	w.setBudget(eff)
}

// overtaken reports whether a response may be older than the figure the
// budget was last set from, so that a higher Remaining proves nothing: its
// request was admitted before that (by order of admission, where known:
// a request sent after the budget's figure arrived was counted after it),
// or, of unknown order, the budget is younger than the horizon. Taken by
// the horizon alone, a Little's-law round trip that a burst of answers
// read at one instant shrinks below the true one, a stale figure of a
// token bucket read as fresh raised the budget by 15, the next fresh one
// read as others' spending, and the job was spread to the end (1 run in
// 400 of a job the bucket held 2.6× slower than unpaced).
func (w *Window) overtaken(now time.Time, seen *Seen) bool {
	if seen.Seq > 0 {
		return seen.Seq <= w.setSeq
	}
	return now.Sub(w.setAt) < seen.Horizon
}

// fills reports whether q, from the window w is in, says the window is a
// bucket that refills as it goes rather than a window that counts down to a
// reset: its stated reset has moved later, since the window's first
// response, by at least least (see wanders), and by about the time the
// spending since then takes to refill at the rate the stated limit and
// window imply, or, with no window stated, in step with the spending (a
// fixed window's reset does not move).
func (w *Window) fills(q *Report, least time.Duration) bool {
	moved := q.Reset.Sub(w.first)
	spent := w.firstRem - q.Remaining
	if w.first.IsZero() || spent < 2 || moved < least {
		return false
	}
	limit := w.limitOrPeak()
	if limit <= 0 || q.Reset.Sub(w.first) <= 0 {
		return false
	}
	if w.stated && w.window > 0 {
		// Per unit spent, a bucket's time to full grows by window/limit.
		perUnit := w.window.Seconds() / limit
		got := moved.Seconds() / spent
		return got > perUnit/2 && got < 2*perUnit
	}
	return true
}

// wanders is how far a reset may move by rounding and latency alone: four
// times the jitter learned, at least a second (resets stated to the second).
func (w *Window) wanders() time.Duration { return max(4*w.jitter, time.Second) }

// fillsInStep reports whether q's reset moved as a bucket's time to full
// does (fills), with the window's first response and q stating one refill
// rate ((Limit − Remaining) over the time to the reset, within the resets'
// rounding and fullAgree), and by about what the spending since takes to
// refill at that rate. A fixed window's reset that moves (a delta restated
// a second later, a clock offset corrected) fails the last test: the
// deficit of its whole window over its time to reset implies a refill at
// which the spending since would have moved it many times as far. Its next
// window, met before the old reset as the clocks have it, fails the first:
// measured against the old window's first response (1,199 of 1,200 left a
// minute from its reset) the new one's spending fits a move of a window,
// but the two state refills 26 times apart (without this test, 50 clients
// on one quota met 10-17 late 429s in the worst of 20-60 runs, Jain
// 0.85-0.92).
func (w *Window) fillsInStep(q *Report, now time.Time) bool {
	// (At least a reset's rounding, not wanders: the two refills and the
	// move checked below are what tell a bucket from resets that wander,
	// and a bucket refilling a unit a second moves a second per unit
	// spent, which its first moves taught as the resets' jitter; asked to
	// move four times that, a Discord-style bucket of 60 a minute was
	// spread for 300 ms of a 500 ms job, 1.6× unpaced in 1 run of 3.)
	if !w.fills(q, resetResolution) {
		return false
	}
	limit, tol := w.limitOrPeak(), max(w.tolerance(), resetResolution)
	deficit, left := limit-q.Remaining, q.Reset.Sub(now)
	firstDeficit, firstLeft := limit-w.firstRem, w.first.Sub(w.firstAt)
	if deficit <= 0 || left <= 0 || firstDeficit <= 0 || firstLeft <= 0 {
		return false
	}
	lo, hi := refillBounds(deficit, left, tol)
	firstLo, firstHi := refillBounds(firstDeficit, firstLeft, tol)
	if lo*(1-fullAgree) > firstHi || firstLo*(1-fullAgree) > hi {
		return false
	}
	moved := q.Reset.Sub(w.first)
	predicted := time.Duration((w.firstRem - q.Remaining) / deficit * float64(left))
	return (predicted - moved).Abs() <= time.Duration(fullAgree*float64(moved))+tol
}

// refillBounds is the range of refill rates (units a second) a deficit
// over a time to full states, the time known within tol.
func refillBounds(deficit float64, left, tol time.Duration) (lo, hi float64) {
	lo, hi = deficit/(left+tol).Seconds(), math.Inf(1)
	if left > tol {
		hi = deficit / (left - tol).Seconds()
	}
	return lo, hi
}

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
// arrive at new sub-second phases (see response.Clock). Across such a rise
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
		b = earlier(b, w.phase.Add(n*w.window))
	}
	b = earlier(b, stated)
	if stated.Sub(b) >= phaseGrain {
		w.phase = time.Time{}
		return
	}
	w.phase = b
	if w.reset.Sub(stated).Abs() < w.window/2 {
		w.reset = earlier(w.reset, b)
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
	w.stamp = later(w.stamp, q.Reset)
	same := w.kind == kindRefill && !w.reset.IsZero() && eff <= w.Units() &&
		w.window > 0 && q.Reset.Sub(w.reset) < w.window/2 && 2*w.jitter < w.window
	if same {
		w.reset = earlier(w.reset, q.Reset)
	} else {
		w.reset = later(w.reset, q.Reset)
	}
}
