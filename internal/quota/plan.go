package quota

import (
	"math"
	"time"
)

// How a quota's budget becomes a rate: spent at once while it affords the
// work, spread to its reset when it does not, or when it is shared or
// refills as it goes.

// Step is where Advance left a window.
type Step struct {
	// Rate is what the budget may be spent at from now, in units per
	// second: +Inf while the budget is the gate (see Plan).
	Rate float64
	// Avail is the budget above what the quota keeps back, in units.
	Avail float64
	// Next is when the window must be looked at again (its roll, a
	// wake-up of a spent budget, a look); zero when nothing is due.
	Next time.Time
	// Rolled reports that a reset passed and the window moved on.
	Rolled bool
	// AtOnce is what of Avail may go at once beside Rate, in units: for a
	// bucket that states its time to full, or that states no reset at all
	// (a leaky bucket), and that no one else is seen spending from, what
	// the last figure said is left (less what was charged since and what
	// the quota keeps). What is left in such a bucket is there to take,
	// so a job it affords is as fast as with no limiter; what refills is
	// paced at Rate (credited at once, a refill that others share would
	// be spent twice). Zero for any other quota: a burst at Rate is a
	// small part of its budget.
	AtOnce float64
}

// Advance brings a known window to now and plans it: others' measured
// spending ages, the drift moves the budget, a window whose reset passed
// (by RollGuard) rolls over, and Plan sets the rate and the wake-up. unseen
// and admitted are as in Seen; unit is what one request takes. ok is false
// when the window is not known (nothing to plan: its budget says nothing).
func (w *Window) Advance(now time.Time, unseen, unit, admitted float64) (st Step, ok bool) {
	ok = w.advance(&st, now, unseen, unit, admitted)
	return st, ok
}

// advance is Advance into st, which it sets whole. Book.Plan takes the
// step this way: returned, a Step was stored field by field and copied
// whole, and the copy's wide loads waited for the narrow stores (a
// store-forwarding stall, 2% of a GitHub-style response's CPU time through
// the Transport, with Plan's own).
func (w *Window) advance(st *Step, now time.Time, unseen, unit, admitted float64) bool {
	*st = Step{}
	w.AgeDrift(now)
	w.ApplyDrift(now)
	if w.known && !w.reset.IsZero() && now.Sub(w.reset) >= RollGuard {
		w.Roll(now, unseen, unit, admitted)
		if w.inferred || w.coordinated {
			w.ForgetOthers()
		}
		st.Rolled = true
	}
	if !w.known {
		return false
	}
	st.Rate = w.Plan(now, unit)
	if w.kind == kindSmooth && (w.toFull || w.reset.IsZero()) && !w.shared && !w.probing {
		// (A bucket its responses show: one that states its time to full,
		// or one with no reset at all, Shopify's leaky bucket. A fixed
		// window read as smooth at a reset that showed no jump is not
		// spent at once on that reading: its refill is a phantom, and
		// paced it is found out before it costs a 429.)
		st.AtOnce = float64(max(w.budget-w.credit-w.keep, 0)) / Milli
	}
	if !w.reset.IsZero() {
		st.Next = w.reset.Add(RollGuard)
	}
	st.Next = earlierSet(st.Next, w.wakeAt)
	st.Next = earlierSet(st.Next, w.probeAt)
	st.Avail = max(w.Units()-w.Reserve(), 0)
	return true
}

// earlierSet is the earlier of next and t, a zero time standing for none.
func earlierSet(next, t time.Time) time.Time {
	if !t.IsZero() && (next.IsZero() || t.Before(next)) {
		return t
	}
	return next
}

// noResetSpan stands in for the time to reset of a quota whose server gives
// none (Shopify's call limit): the rate spreads its budget over this long,
// on top of what the drift refills (beside what goes at once, Step.AtOnce,
// while no one else is seen spending from it).
const noResetSpan = time.Second

// Plan derives the quota's rate at now (see Adaptive for the rule): unlimited
// while the budget above what it keeps holds a request and the quota is
// neither shared nor refilling as it goes (the budget is the gate), spread
// to the reset when it is, and, when less than a unit is left, the refill
// rate or unlimited (the budget holds every request until wakeAt, which it
// sets: the reset, a refill, or a look). unit is what one request takes.
func (w *Window) Plan(now time.Time, unit float64) (rate float64) {
	safety := w.safety
	prev := w.spread // the pace a shared quota was last spread at
	w.spread = 0
	if !w.probeAt.IsZero() && !now.Before(w.probeAt) {
		w.probeAt = time.Time{}
		if !w.toFull {
			// (One due from before the reset read as the time to full:
			// the refill is stated now, and a look at a token quota lets
			// through whatever is past the gate, whatever it costs.)
			w.StartProbe(unit)
		}
	}
	keep := 0.0
	if !w.probing {
		// The reserve is kept by the charge itself, not by a rate: a
		// request admitted at once must leave it as surely as a paced one.
		keep = w.Reserve()
		if w.kind == kindSmooth {
			keep += unit
		}
		if w.drift < 0 && w.reset.After(now) {
			// Others are spending from this quota: what they will take
			// before the reset, at the rate measured, is theirs. Taken
			// at once it would leave them nothing, and their requests
			// would empty the window under ours.
			//
			// At most nine tenths of what is left, though: the drain is a
			// measurement, and clients that each reserve the others' whole
			// measured drain leave the quota to nobody (ten clients with no
			// Store used a fifth of it). A tenth of what is left, spread to
			// the reset, is each one's floor.
			keep += min(-w.drift*w.reset.Sub(now).Seconds(), othersMaxShare*w.Units())
		}
	}
	// A full quota always takes a request: a keep that leaves less than
	// a unit of the limit (a token quota's reserve and a learnt cost near
	// half of it) would refuse every one. Bounded in milli-units, each
	// side rounded up as the charge's amount is: the bound in units,
	// rounded up, could come out a milli-unit above the limit less the
	// charge, and a full budget, which never grows past the limit,
	// refused every request for good (a blind charge of 13,561 on a
	// 30,000 quota: no request for the last 8 minutes of 10).
	keep = min(keep, max(w.limitOrPeak()-unit, 0))
	w.keep = min(ToMilli(keep), max(ToMilli(w.limitOrPeak())-ToMilli(unit), 0))
	avail := w.Units() - keep
	w.wakeAt = time.Time{}
	if w.probing {
		// One request is out (the gate holds the rest) to learn the quota.
		return math.Inf(1)
	}
	if avail >= unit && w.kind == kindSmooth {
		// A quota that refills as it goes (a token bucket, a sliding
		// window) has no reset to wait for: what is left plus what refills
		// before the stated reset is spread to it, as it refills. Taken at
		// once, its refill would have to be guessed between responses.
		span := w.spanAt(now)
		floor := safety * unit / span
		if avail >= 2*unit && !w.toFull {
			// Its refill is only seen through responses: keep sampling.
			floor = max(floor, unit/w.reprobe().Seconds())
		}
		return max(safety*(avail+w.drift*span)/span, floor)
	}
	if avail >= unit && w.shared {
		// Others spend from this quota too, and they may be spending at
		// once as well: two clients that each take what is left at once
		// take it twice. Spread over the time to the reset instead (at
		// least one request per span: the model can be wrong, and only
		// a response corrects it).
		span := w.spanAt(now)
		// (avail already leaves others their drain until the reset.)
		rate := safety * avail / span
		if others := -w.drift; others > 0 && prev > 0 && avail/span > rushFactor*prev {
			// What is left beyond everyone's pace is seen by every client
			// of the quota alike, and it swells as the reset nears and the
			// span it is spread over shrinks. Each claims its share of it
			// (its own pace over the pace of all), not the whole: each
			// taking the whole, 50 clients emptied every window's last
			// tenth in a rush at its end, where whoever came first took
			// it (one took 8 times its share of a window; Jain 0.89-0.92
			// in the worst of 20 runs, now 0.99).
			share := prev / (prev + others)
			rate = min(rate, safety*(prev+share*(avail/span-prev)))
		}
		rate = max(rate, safety*unit/span)
		if avail >= 2*unit {
			// Others' spending is only seen through responses, and a
			// drain measured over our first burst can be off by half:
			// keep sampling. (One request per span to a reset a minute
			// away held back a third of a window on a drain measured low,
			// then looked into a window the others had emptied.)
			rate = max(rate, unit/w.reprobe().Seconds())
		}
		w.spread = rate
		return rate
	}
	if avail >= unit {
		// What the quota affords goes at once: the budget, charged at
		// admission, is the gate, not a rate. Pacing the work the quota
		// affords would only make a job below its quota slower than no
		// limiter at all; a saturated client spends the budget and then
		// waits for the reset (or the refill) exactly as it would when
		// paced, and ends the window with nothing left either way.
		return math.Inf(1)
	}
	var pause time.Time
	switch {
	case !w.probeAt.IsZero() && (w.reset.IsZero() || w.probeAt.Before(w.reset)):
		// A look is due before the reset (see Roll).
		pause = w.probeAt
	case w.drift > 0 && (w.kind == kindSmooth || w.reset.IsZero()):
		// Refilling by itself: wait for the refill to hold a unit, or, when
		// the measured refill is slower than that, look with one request
		// after reprobe (the measure may be low: only responses show it).
		w.wakeAt = now.Add(time.Duration((unit - avail) / (safety * w.drift) * float64(time.Second)))
		if look := now.Add(max(w.reprobe(), w.lookGap)); look.Before(w.wakeAt) && !w.toFull {
			// (Not one whose responses state the refill: a look that
			// does not fit what is left meets a 429.)
			w.wakeAt, w.probeAt = look, look
		}
		if !w.reset.IsZero() {
			w.wakeAt = earlier(w.wakeAt, w.reset)
		}
		return max(safety*w.drift, minRate)
	case !w.reset.IsZero() && w.kind != kindSmooth:
		pause = w.reset.Add(RollGuard)
		if pause.Sub(now) > w.maxDelay && !w.explains(now) {
			// A reset nothing explains (no window stated or learned that
			// long) is believed only up to maxDelay: then one request
			// looks. One a window explains is believed, however far: the
			// caller is refused at once with the reset (see tooLong).
			if w.probeAt.IsZero() {
				w.probeAt = now.Add(w.maxDelay)
			}
			pause = w.probeAt
		}
	case !w.reset.IsZero():
		// A quota that does not refill at its reset comes back by and by,
		// as others' and earlier spending ages out: look again with one
		// request a little later, not only at the reset.
		pause = earlier(w.reset, now.Add(w.reprobe()))
		if pause.Before(w.reset) {
			w.probeAt = pause
		}
	default:
		pause = now.Add(max(noResetSpan, w.lookGap))
		w.probeAt = pause
	}
	w.wakeAt = pause
	// The budget holds every request until then; a rate would only delay
	// the look that opens the next window.
	return math.Inf(1)
}

// maxLookGap bounds lookGap: a day, the longest window a quota commonly
// states; the measured refill's own wake-up comes sooner on any quota that
// refills at all.
const maxLookGap = 24 * time.Hour

// minRate is the lowest rate a quota sets: a request or token every 1000 s.
// A budget that leaves less is treated as spent, so this only keeps the
// bucket's arithmetic clear of "never".
const minRate = 1e-3

// rushFactor is how many times the pace a shared quota was last spread at
// what is left must afford, spread to the reset, before each client claims
// only its share of the surplus (see Plan). Measured with 50 clients on one
// quota: at 2 the surplus of every window went partly unclaimed (0.85 of
// the quota used), at 20 the rush at the reset stayed (Jain 0.91); at 5,
// 0.99 of the quota and Jain 0.99, worst of 20 runs.
const rushFactor = 5

// othersMaxShare is the most of a shared quota's budget kept back for what
// others are measured to spend before the reset (see Plan).
const othersMaxShare = 0.9

// spanAt is the time the quota's budget is spread over from now: to its
// reset, else a window, else noResetSpan; in seconds.
func (w *Window) spanAt(now time.Time) float64 {
	switch {
	case !w.reset.IsZero():
		return max(w.reset.Sub(now).Seconds(), 1e-3)
	case w.window > 0:
		return w.window.Seconds()
	}
	return noResetSpan.Seconds()
}
