package quota

import (
	"math"
	"slices"
	"time"
)

// This file is the Observe transition: all that the model learns from a
// response, read on every response a request brings back. The book checks
// each quota's report and hands it to its window (Book.Observe); the
// window reads its budget, its kind, its reset and phase from it
// (Window.Observe); the drift (others' spending, or a refill) is measured
// against the window's baseline and applied to the budget; a window whose
// reset passed rolls on to the next (Roll, which Plan calls when the time
// comes); and a token quota learns what a request that states no cost
// costs it (what admission then charges such a request). They are
// together, past the project's usual file length, because they are one
// step of a request, the reading of its response, and read and set the
// same learnt fields of a Window (its baseline, drift, reset, cost
// samples): split by those parts, a request entered each of their files on
// every response. The state and the other transition, Plan, are in
// window.go.

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

// Named is what a response said of one quota, by name.
type Named struct {
	Name   string
	Tokens bool // counted in tokens (see Config.Tokens)
	Report
}

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
	// Token quotas learn a blind request's cost from them (see sampleCost).
	Blind, BlindUnseen, Stated float64
}

// Observe folds in what one response said of its quotas, at now. c counts
// what is in flight besides the response's own request (with what feeding
// limiters have in flight); seen carries the rest (Observe sets its Unseen,
// Admitted, Blind, BlindUnseen and Stated per quota from c). Both are
// passed by pointer (see Window.observeAt). It reports whether a quota the response described is
// spent (nothing left before a stated reset).
//
// Reports the model cannot use are dropped: counts that are not finite or
// are negative (but for an Unstated Remaining), and quotas beyond
// MaxQuotas. Remaining is clamped to Limit, the reset to Horizon. A quota
// that rolled over blind (a look is due) and that this response did not
// describe is forgotten: the server stopped speaking of it.
func (b *Book) Observe(rs []Named, now time.Time, c *Counts, seen *Seen) (spent bool) {
	var mentioned uint64 // bit i: b.windows[i] was described (MaxQuotas ≤ 64)
	for k := range rs {
		// By pointer, each step (see observeAt).
		r := &rs[k]
		var q Report
		if !b.sane(r, now, &q) {
			continue
		}
		i, w := b.window(r.Name, r.Tokens)
		mentioned |= 1 << i
		seen.Unseen, seen.Admitted = c.unseen(w), c.admitted(w)
		seen.Blind, seen.BlindUnseen, seen.Stated = c.Blind, c.BlindInflight, c.AdmittedCost-c.InflightCost
		w.observeAt(&q, now, seen)
		if b.cfg.Fleet {
			w.ForgetDrift()
		}
		if q.Remaining != Unstated && q.Remaining < 1 && !q.Reset.IsZero() {
			spent = true
		}
	}
	if b.anyForgotten(mentioned) {
		i := 0
		b.windows = slices.DeleteFunc(b.windows, func(w *Window) bool {
			drop := b.forgotten(w, i, mentioned)
			if drop {
				// Nor is a request charged to it until the next Plan.
				b.charged = slices.DeleteFunc(b.charged, func(c *Window) bool { return c == w })
			}
			i++
			return drop
		})
	}
	return spent
}

// forgotten reports whether Observe forgets w, b.windows[i], after a
// response that described the windows of the bit set mentioned: one that
// rolled over blind and that the response did not describe.
func (b *Book) forgotten(w *Window, i int, mentioned uint64) bool {
	return w.probing && w.rolled && mentioned&(1<<i) == 0
}

// anyForgotten reports whether Observe forgets a window (forgotten): only
// then does it rewrite the lists, which was 5% of observing a response.
func (b *Book) anyForgotten(mentioned uint64) bool {
	for i, w := range b.windows {
		if b.forgotten(w, i, mentioned) {
			return true
		}
	}
	return false
}

// sane sets q to r's report, clamped (see Observe), and reports whether
// it is one the model can use.
func (b *Book) sane(r *Named, now time.Time, q *Report) bool {
	*q = r.Report
	finite := func(v float64) bool { return v >= 0 && !math.IsInf(v, 1) } // false for NaN
	if !finite(q.Remaining) && q.Remaining != Unstated || !finite(q.Limit) || len(b.windows) >= MaxQuotas && b.Find(r.Name) == nil {
		return false
	}
	if q.Limit > 0 {
		q.Remaining = min(q.Remaining, q.Limit)
	}
	q.Window = max(q.Window, 0)
	if !q.Reset.IsZero() && q.Reset.Sub(now) > b.cfg.Horizon {
		q.Reset = now.Add(b.cfg.Horizon)
	}
	return true
}

// What a response teaches the model of a quota: its budget (Observe), its
// kind (a window that counts down to a reset, or a bucket that fills as
// it goes), and when its window ends (the reset a response states, rounded
// and wandering with latency, tightened to the instant the window is
// rolled over; see Window.Roll).

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
	if !inStep && fresh && w.known && !w.rolled && !w.probing && w.stamp.Sub(now) > restateAhead && q.Reset.Sub(w.stamp) < resetResolution+tol {
		// A reset stated later than the window's, while the window's is
		// still well ahead, by no more than a reset's rounding, and not as
		// a bucket spent from moves its time to full: the same reset
		// restated (Reddit's delta seconds, Mastodon's reset carrying each
		// request's fraction of a second), not a new window. Read as one,
		// it showed no jump, and a job far below the quota was spread as
		// over a sliding window (263× unpaced). (Not where the reset is
		// within a few roundings: a bucket of a second states its time to
		// full a second ahead on every answer, and read as restated it was
		// never seen to refill.)
		fresh = false
	}
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
			w.measureDrift(now, eff, admitted, unseen, horizon, false)
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
			w.measureDrift(now, exact, admitted, 0, horizon, false)
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
	case inStep || countsDown && w.fills(q, w.wanders(), 2):
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
		w.measureDrift(now, eff, admitted, unseen, horizon, w.shared && w.measuredAt.IsZero())
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
// response, by at least least (see wanders) with at least spentLeast units
// spent since (see fillsInStep for one), and by about the time the
// spending since then takes to refill at the rate the stated limit and
// window imply, or, with no window stated, in step with the spending (a
// fixed window's reset does not move).
func (w *Window) fills(q *Report, least time.Duration, spentLeast float64) bool {
	moved := q.Reset.Sub(w.first)
	spent := w.firstRem - q.Remaining
	if w.first.IsZero() || spent < spentLeast || moved < least {
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
	// One unit spent is enough here: the refills and the move checked
	// below tell it from a rounding (a bucket of 60 a minute read its
	// second answer, one unit spent, as a new window, and a job of 39 from
	// 4 workers was spread to 1.9× unpaced in 4 runs of 100).
	if !w.fills(q, resetResolution, 1) {
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
//
// The baseline must be a minimal span old: twice the horizon, a quarter
// of a second, and a tenth of a known window (a daily quota's is hours),
// but for the first measure of a quota just seen spent from by someone
// else (first), which needs only the first two: what they spent is then
// beyond the noise already, and the rate it shows stands until a longer
// span measures it again.
func (w *Window) measureDrift(now time.Time, eff, admitted, unseen float64, horizon time.Duration, first bool) {
	if w.toFull {
		// The responses state the refill (see readsToFull); a baseline
		// starts afresh should a reset stop reading so.
		w.anchorAt = time.Time{}
		return
	}
	span := now.Sub(w.anchorAt)
	minSpan := max(2*horizon, 250*time.Millisecond)
	if w.window > 0 && !first {
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

// restateAhead is how far ahead a window's reset must be for a later one
// within its rounding to be read as the same reset restated: a few
// roundings, beyond which a time to full moves by more than a rounding.
const restateAhead = 3 * resetResolution

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
	win, end := w.length(), w.reset
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
	// the look waits, from the reset, for two units of that (2 ×
	// window/limit: one, and one for the rounding of the reset and of the
	// server's count), so it does not meet a 429, but no longer than
	// maxSlideWait. A fixed window loses 2/limit of a window, once.
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
		w.probeAt = end.Add(min(time.Duration(2*float64(win)/w.limitOrPeak()), maxSlideWait))
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

// maxSlideWait bounds how long after its reset a window of unknown kind
// that ended spent waits for a sliding window's room (see Roll): a reset's
// rounding, a second. A server states its reset to that; a longer wait is
// a wait nobody stated, and a sliding window of fewer than two requests a
// second meets a 429 at its first reset instead, which teaches its kind.
const maxSlideWait = time.Second

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

// What a request costs a token quota when the caller does not say (a blind
// request): learnt from the quota's own figures, charged at admission, and
// trued up by every response, whose Remaining less what is still in flight
// replaces the budget the charges came out of (reserve, then reconcile).
//
// Between two responses of one window the quota fell by what the server
// counted in between, less what it refilled: Remaining then − Remaining now
// (+ the refill over the time between, for a bucket whose responses state
// it, see readsToFull, as far as the bucket had room for it). The server counted the requests answered in between,
// give or take those in flight at either end (counted on arrival, answered
// later). Over enough requests that error is small, and what is left after
// the stated costs of the hinted requests among them, over the blind ones,
// is the cost of a blind request. Others spending from the quota raise it:
// a request then pays for their share too, which leaves them room.
//
// A blind request is charged a high estimate of its cost (the mean plus
// costSpread deviations): where the quota has room for the mean but not for
// a request that is dearer than most, the server refuses the dear one.

// costSample is the fewest blind requests one sample of the cost is taken
// over; a sample also spans at least twice the blind requests in flight at
// its ends, so that the server's having counted them or not moves it by at
// most a half of one.
const costSample = 8

// firstSample is the fewest blind requests the first sample is taken over.
const firstSample = 2

// costMemory is how many blind requests the estimate averages over: the
// weight of a request's sample halves about every 11 requests after it
// (prompts grow through a conversation, and a stale estimate costs 429s
// when it is low), and a sample weighs as many requests as it spans, so a
// small first one is soon outweighed.
const costMemory = 16

// costWeight is the weight of each new sample in the variance's moving
// average: about four samples.
const costWeight = 0.25

// costSpread is how many standard deviations of one request's cost, above
// the mean, a blind request is charged: two cover all of a cost uniform
// within ±50% of its mean (1.58 means against 1.5) and about 97% of a
// normal one.
const costSpread = 2

// costAnchor is where the sample being taken started.
type costAnchor struct {
	remaining float64
	blind     float64 // blind requests the server had answered
	stated    float64 // stated costs of the hinted requests it had answered
	unseen    float64 // blind requests in flight
	ok        bool
	// refill is what a bucket that states its refill (toFull) refilled
	// since the anchor, response by response: the refill since the last
	// one (last, lastRem), but never past the limit. A bucket stops
	// filling when full, and one paced below its refill is full between
	// requests (a high cost estimate paces it so: a request waits for
	// room for two): the whole refill over the sample counted what
	// never came in, the sample came out high, the estimate rose, and
	// the pace slowed further (learnt costs 60% to 100% high for
	// minutes, one run in ten). Capped, the sample errs low when a
	// request came in late between full responses (the refill after it
	// is not counted), which quickens the pace and ends it.
	refill  float64
	last    time.Time
	lastRem float64
}

// Estimate is the learnt mean cost of a blind request, in units; 0 while
// unknown and for a request quota.
func (w *Window) Estimate() float64 {
	if w.estN == 0 {
		return 0
	}
	return w.estSum / w.estN
}

// Deviation is the learnt standard deviation of a blind request's cost.
func (w *Window) Deviation() float64 { return math.Sqrt(w.estVar) }

// countBlind adds amount (milli-units; negative for a refund) to what blind
// requests were charged, when cost says the request was blind and the
// quota counts tokens.
func (w *Window) countBlind(cost float64, amount int64) {
	if !(cost > 0) && w.tokens {
		w.blindCharged += amount
	}
}

// BlindCharge is what a blind request is charged, in units (see
// blindAmount).
func (w *Window) BlindCharge() float64 { return float64(w.blindAmount()) / Milli }

// blindAmount is what a blind request is charged, in milli-units: the
// estimate plus costSpread deviations, at least a unit once known, never
// more than the quota holds; 0 while nothing is learnt (the request is
// charged to the request quotas only, as before any response).
func (w *Window) blindAmount() int64 {
	est := w.Estimate()
	if est <= 0 {
		return 0
	}
	return min(max(ToMilli(est+costSpread*w.Deviation()), Milli), w.most)
}

// sampleCost folds what q says into the estimate of a blind request's cost.
// It is called at the end of observe for a token quota, with fresh as
// observe read it (the response opened a new window, or moved a reset).
func (w *Window) sampleCost(q *Report, now time.Time, seen *Seen, fresh bool) {
	if seen.Refused {
		return // its request was not counted; the figures say nothing new
	}
	a := &w.estFrom
	next := costAnchor{remaining: q.Remaining, blind: seen.Blind - seen.BlindUnseen,
		stated: seen.Stated, unseen: seen.BlindUnseen, ok: true, last: now, lastRem: q.Remaining}
	limit := w.limitOrPeak()
	if a.ok && w.toFull {
		// What the bucket refilled since the last response, as far as
		// it could hold it (see costAnchor.refill).
		a.refill += max(min(w.drift*now.Sub(a.last).Seconds(), limit-a.lastRem), 0)
	}
	a.last, a.lastRem = now, q.Remaining
	switch {
	case !a.ok && w.Estimate() == 0 && next.blind == 1 && next.unseen == 0 && next.stated == 0 &&
		q.Remaining >= limit/2 && q.Remaining < limit:
		// The first figure, the answer to one blind request alone (the
		// first look), of a quota found at least half full: a quota that
		// was full lost what the request cost, one that was not lost
		// more. Limit − Remaining is so a first estimate that errs high,
		// charged at once (with the doubt addSample assumes), so the
		// burst after the look is sized by it rather than charged
		// nothing. (A quota found mostly spent says little of one
		// request: its drop is others' spending.)
		w.addSample(limit-q.Remaining, 1)
	case !a.ok || next.blind < a.blind || next.stated < a.stated:
		// The first figure, or counts that went back (an abandoned
		// request, a refusal): start afresh.
	case fresh && !w.toFull, w.kind == kindSmooth && !w.toFull:
		// A new fixed window (its figures are not comparable with the
		// last one's), or a refill no response states, which spending
		// cannot be told from.
	case q.Remaining >= limit:
		// Full now: the refill stopped for a while no one knows, and
		// what was spent before it did is lost from the figures.
	default:
		n := next.blind - a.blind
		least := float64(costSample)
		if w.Estimate() == 0 {
			// The first estimate is wanted soon: with nothing charged,
			// blind requests meet 429s until it comes. Its doubt is
			// in the deviation assumed (see addSample).
			least = firstSample
		}
		if n < max(least, 2*(a.unseen+next.unseen)) {
			if max(least, 2*a.unseen)-n <= max(least, 2*next.unseen) {
				return // keep the anchor: the sample grows
			}
			// A start here, with fewer in flight than at the anchor,
			// is taken sooner than the sample grows to twice those
			// (a burst's anchor would hold the sample back for twice
			// the burst). Not one with merely fewer: a sample most of
			// the way there started again whenever the one in flight
			// at its anchor had none at its side, and at a request
			// every 10 s, an estimate 100% high stood for two
			// minutes.
			break
		}
		used := a.remaining - q.Remaining - (next.stated - a.stated)
		if w.toFull {
			used += a.refill
		}
		if c := used / n; c >= 0 && !math.IsInf(c, 0) {
			w.addSample(min(c, limit), n)
		}
	}
	*a = next
}

// addSample folds the mean cost c of n blind requests into the estimate
// (an average over about costMemory requests, each sample weighing as many
// as it spans) and its variance. A mean over n requests varies by 1/n of
// one request's variance, and the estimate, over the N it weighs, by 1/N:
// their squared difference, times nN/(n+N), estimates the latter. (n
// times it alone took the estimate's own error for spread: after a first
// sample of 2 that was 95% high, the next, of 8, put the deviation at
// 1.6 times the mean, and the charge, the mean and two deviations, at
// nearly half the quota, which then paced a request only when full.)
func (w *Window) addSample(c, n float64) {
	est := w.Estimate()
	if est == 0 {
		// Until samples show the spread, a deviation of half the mean
		// is assumed (a cost anywhere within ±87% of it).
		w.estVar, w.estSum, w.estN = c*c/4, c*n, n
		return
	}
	d := c - est
	weight := n * w.estN / (n + w.estN)
	keep := math.Exp(-n / costMemory)
	w.estSum, w.estN = w.estSum*keep+c*n, w.estN*keep+n
	w.estVar += costWeight * (weight*d*d - w.estVar)
}
