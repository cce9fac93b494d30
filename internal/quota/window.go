package quota

import (
	"fmt"
	"math"
	"time"

	"github.com/pacer-go/pacer/internal/clock"
)

// Window follows one server quota (a Quota name) across responses: what
// is left of it for new requests, how that changes by itself over time, when
// the current window ends, and how long windows are.
//
// The budget is the heart of the zero-429 promise. It is a lower bound on what
// new requests may still spend: the Remaining of a response minus everything
// admitted but not yet observed (which that response may not have counted),
// then charged by Wait for every request it admits, and moved by the drift.
// A response lowers it at once; one that would raise it is believed only once
// the budget has stood for a while, because concurrent requests return out of
// order and a stale response reports a Remaining that later requests have
// already spent.
//
// The drift is what changes the quota besides this client: negative when
// someone else spends from it (another process with the same key), positive
// when it refills within a window (sliding windows, token buckets, leaky
// buckets). It is measured as the gap between what a response says and what
// the budget predicted from the window's first response and the admissions
// since, over the time between them. It also absorbs a systematic error in
// the cost estimates of a token quota.
type Window struct {
	name   string
	tokens bool // token-denominated: charged a request's cost, not 1

	// budget is in milli-units (fixed point, so that charges and refunds
	// of whole requests cancel exactly). Meaningful while known.
	budget int64
	// drain is what others take from the quota, milli-units per second
	// (the negative part of the drift), and drainFrom when (on the package clock)
	// the budget last had it deducted: Wait deducts what accrued since, so
	// the budget gate does not lag behind others' spending between responses.
	drain     int64
	drainFrom int64
	// drainRoom is how much more of the budget others' predicted spending
	// may still take before a response confirms it (milli-units): at most
	// othersMaxShare of the budget a response last set. Deducted by the
	// drain between responses; when others in fact stopped (all waiting
	// for the reset on the same prediction), what is left of the last
	// figure keeps a request or two going, and their answers correct the
	// prediction. Without it, 50 clients sharing a quota each predicted
	// the others' spending until nobody spent: a quarter of every window
	// went unused.
	drainRoom int64
	// keep is what a charge must leave in the budget besides the debt: a
	// smooth quota's last unit, which another client may be taking while
	// our request travels (its refill hides that client from the drift).
	keep int64
	// spread is the rate the last Plan spread a shared quota at; 0 when
	// the last Plan did not spread one (see Plan).
	spread   float64
	safety   float64       // a refill, being an estimate, is only believed this much
	maxDelay time.Duration // the longest wait for a reset nothing explains

	// most is the largest single charge the quota can ever take (its limit,
	// milli-units): a cost above it is charged as this much, or it would wait
	// for a window that never comes.
	most int64

	limit  float64       // quota per window as last stated; 0 unknown
	peak   float64       // highest Remaining seen: the limit's stand-in when unstated
	window time.Duration // policy window, else learned from the reset cadence; 0 unknown
	stated bool          // window came from a policy parameter (w=)
	reset  time.Time     // end of the current window as believed; zero unknown
	stamp  time.Time     // latest reset a response stated (not assumed): the cadence's last beat
	jitter time.Duration // how much stated resets of one window wander (rounding, latency)
	// phase is an upper bound of the true end of the current window that
	// can be earlier than any stated reset (see learnPhase); zero unknown.
	phase  time.Time
	setAt  time.Time // when a response last set the budget
	known  bool      // budget describes the current window
	rolled bool      // reset passed with no response from the new window yet
	kind   windowKind
	carry  float64 // budget when the last reset passed, to see whether the quota jumped
	// toFull: a smooth quota whose stated reset is the time until it is
	// full again (OpenAI's and Anthropic's token buckets). Its refill is
	// then stated by every response, (Limit − Remaining) over that time,
	// not measured: no look is needed to find it.
	toFull bool
	// The last moved reset readsToFull compares with, when it was seen and
	// the refill it implied; and how many in a row fit.
	fullRef, fullAt time.Time
	fullRate        float64
	fullD, fullT    float64 // decayed sums of deficits and times to full
	fullRuns        int

	// estSum over estN is the learnt cost of a blind request (no stated
	// cost) to this token quota (decayed sums, see addSample), estVar its
	// variance, estFrom the sample under way (see cost.go); blindCharged
	// is what blind requests were charged, ever.
	estSum, estN float64
	estVar       float64
	estFrom      costAnchor
	blindCharged int64

	drift    float64   // units per second, see above
	driftAt  time.Time // drift applied to the budget up to here
	anchorAt time.Time // first response of the window: the drift's baseline
	anchorB  float64   // budget then
	anchorA  float64   // admissions counter then
	anchorU  float64   // unseen (in flight) then: the baseline's noise
	low      float64   // lowest Remaining stated in this window
	first    time.Time // reset the window's first response stated
	firstRem float64   // and its Remaining
	firstAt  time.Time // when it arrived
	// shared: others were seen spending from this quota (a drain beyond
	// the noise, or a 429 the budget did not expect). It is then spread
	// to the reset, not spent at once.
	shared bool
	// inferred: the quota is the model's (package infer), counted from our
	// own answers; its books never show others (ForgetOthers).
	inferred bool
	// coordinated: others' spending is accounted for elsewhere (Config).
	coordinated bool
	// cadenced: the stated reset's last advance was a whole number of the
	// window known before it (checkCadence): its length is confirmed.
	cadenced bool
	// measuredAt is when a response last measured the drift (see ageDrift).
	measuredAt time.Time

	// probing lets one request through to learn a window the budget cannot
	// speak for (after a reset, or a pause, with nothing left).
	probing bool
	probeAt time.Time // when a quota with no reset may probe again
	wakeAt  time.Time // when a spent budget can next take a request

	// mentioned marks the windows the response being observed described.
	mentioned bool
}

// windowKind is what happens to a quota when its reset passes.
type windowKind uint8

const (
	kindUnknown windowKind = iota // not seen yet: carry the budget, learn from the next response
	kindRefill                    // jumps back to the limit (fixed window)
	kindSmooth                    // does not jump; refills by drift (sliding window, token bucket)
)

// Milli is the fixed-point scale of budgets and in-flight costs.
const Milli = 1000

// ToMilli is v in milli-units, rounded up; 0 for v ≤ 0 or NaN, and bounded
// far below overflow.
func ToMilli(v float64) int64 {
	switch {
	case !(v > 0):
		return 0
	case v >= math.MaxInt64/(2*Milli):
		return math.MaxInt64 / 2
	}
	return int64(math.Ceil(v * Milli))
}

// initialJitter is the wander assumed between the stated resets of one
// window before any is measured: a quarter second covers resets stated in
// whole seconds from now and a round trip's latency, and it shrinks by an
// eighth per response as the real wander shows (see Observe).
const initialJitter = 250 * time.Millisecond

// Config describes a quota before anything is said about it.
type Config struct {
	// Name is the quota's name in the server's responses.
	Name string
	// Tokens marks a quota counted in tokens: charged a request's cost,
	// not 1, and keeping back 1 − Safety of its limit for cost estimates
	// that fall short.
	Tokens bool
	// Safety is the share of an estimated refill that is believed, in (0, 1].
	Safety float64
	// MaxDelay is the longest wait for a reset nothing explains.
	MaxDelay time.Duration
	// Shared marks a quota known from the start to be spent by others too
	// (a fleet sharing a Store): spread to its reset, never taken at once.
	Shared bool
	// Inferred marks a quota the limiter infers from its own answers (a
	// server that states none): its books never show others (ForgetOthers).
	Inferred bool
	// Coordinated marks a quota whose other spenders are accounted for
	// elsewhere (a fleet's budget in a shared store): what they spend is
	// not read as others' spending to leave room for (ForgetOthers).
	Coordinated bool
}

// New returns the model of a quota nothing has been said about yet.
func New(c Config) *Window {
	return &Window{
		name: c.Name, tokens: c.Tokens, safety: c.Safety, maxDelay: c.MaxDelay,
		shared: c.Shared, inferred: c.Inferred, coordinated: c.Coordinated, jitter: initialJitter,
	}
}

// Limit is the quota per window as last stated, or the highest Remaining
// seen when none was; 0 when unknown.
func (w *Window) Limit() float64 { return w.limitOrPeak() }

// Name is the quota's name.
func (w *Window) Name() string { return w.name }

// Tokens reports whether the quota is counted in tokens.
func (w *Window) Tokens() bool { return w.tokens }

// Inferred reports whether the quota is inferred (Config.Inferred).
func (w *Window) Inferred() bool { return w.inferred }

// Known reports whether the budget describes the current window: a
// response has stated it and no reset has passed since without a look.
func (w *Window) Known() bool { return w.known }

// Probing reports whether one request is let through to learn the window
// (after a reset, or with nothing left): its answer sets the budget.
func (w *Window) Probing() bool { return w.probing }

// String describes the window's state, for debugging.
func (w *Window) String() string {
	return fmt.Sprintf("%s: kind=%d shared=%v drift=%.3f budget=%.1f window=%v reset=%v probing=%v",
		w.name, w.kind, w.shared, w.drift, w.Units(), w.window, w.reset, w.probing) +
		fmt.Sprintf(" toFull=%v est=%.0f±%.0f", w.toFull, w.Estimate(), w.Deviation())
}

// Rolled reports that the window's reset passed with no response from the
// new window yet.
func (w *Window) Rolled() bool { return w.rolled }

// Reset is the end of the current window as believed; zero when unknown.
func (w *Window) Reset() time.Time { return w.reset }

// Length is the window's length, stated or learned; 0 when unknown.
func (w *Window) Length() time.Duration { return w.window }

// WakeAt is when a spent budget can next take a request (its reset, a
// refill, or a look), as the last Plan set it; zero when not spent.
func (w *Window) WakeAt() time.Time { return w.wakeAt }

// ProbeAt is when a look is due; zero when none is.
func (w *Window) ProbeAt() time.Time { return w.probeAt }

// Budget is what new requests may still spend, in milli-units; Keep is
// what a charge must leave of it besides others' accrued spending (Debt).
func (w *Window) Budget() int64 { return w.budget }

// Keep: see Budget.
func (w *Window) Keep() int64 { return w.keep }

// Amount is what a request of the given cost takes from the quota, in
// milli-units: 1 for a request quota; the cost for a token quota, but never
// more than the quota can ever hold (a cost above the limit would wait for
// a window that never comes); for a request with no cost (≤ 0), what the
// quota learnt such requests cost, high (see blindAmount), or 0 while it
// knows nothing of them.
func (w *Window) Amount(cost float64) int64 {
	switch {
	case !w.tokens:
		return Milli
	case cost > 0:
		return min(ToMilli(cost), w.most)
	}
	return w.blindAmount()
}

// Charge takes amount (milli-units) from the budget if what is left still
// covers Debt at now (package clock) and share of the quota's limit (the
// reserve a class of work must leave to another; 0 for none); otherwise it
// takes nothing and reports false.
func (w *Window) Charge(amount, now int64, share float64) bool {
	if w.budget-amount < w.Debt(now)+w.held(share) {
		return false
	}
	w.budget -= amount
	return true
}

// held is the reserve a charge leaving share of the limit must leave, in
// milli-units: none while the window is being looked at, or has rolled over
// with no answer from the new one yet, since the look must go, whoever
// sends it (a budget carried over a reset is refreshed only by an answer).
func (w *Window) held(share float64) int64 {
	if !(share > 0) || w.probing || w.rolled {
		return 0
	}
	return ToMilli(share * w.limitOrPeak())
}

// Reserved reports whether a request of amount would be refused only for
// leaving less than share of the limit: the budget holds it otherwise.
func (w *Window) Reserved(amount, now int64, share float64) bool {
	return w.budget-amount >= w.Debt(now) && w.budget-amount < w.Debt(now)+w.held(share)
}

// RefillAt is when a window whose reserve holds a request back next gains
// budget by itself: its roll, for a window with a reset; else a look after
// reprobe. now is the time of the question.
func (w *Window) RefillAt(now time.Time) time.Time {
	if !w.reset.IsZero() && w.kind != kindSmooth {
		return w.reset.Add(RollGuard)
	}
	return now.Add(w.reprobe())
}

// Refund gives back a charge (milli-units) whose request was not sent.
func (w *Window) Refund(amount int64) { w.budget += amount }

// ForgetOthers undoes what an inferred window's books read as others'
// spending. Its figures are the limiter's own count, so a refusal with
// budget left is the count's error, which the refusal itself corrected,
// not another client to leave room for.
func (w *Window) ForgetOthers() {
	w.shared = false
	w.drift = max(w.drift, 0)
	w.drain = 0
}

// ForgetDrift sets the drift to zero. With a Store, the other limiters of
// the key are clients this one does not see, and the drift model would
// deduct their spending from its plan although the shared bucket already
// holds them to the same rate (see the Adaptive's store share).
func (w *Window) ForgetDrift() {
	w.drift = 0
	w.drain = 0
}

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
	// Horizon is how old the budget must be before a higher Remaining in
	// the same window is believed (responses overtake each other).
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

// Debt is what others have taken, by the drift, since the budget was last
// brought up to date: milli-units a charge at now (package clock) must leave
// in the budget.
func (w *Window) Debt(now int64) int64 {
	rate := w.drain
	if rate == 0 {
		return w.keep
	}
	elapsed := now - w.drainFrom
	if elapsed <= 0 {
		return w.keep
	}
	return w.keep + min(int64(float64(rate)*float64(elapsed)/float64(time.Second)), w.drainRoom)
}

func (w *Window) Units() float64 { return float64(w.budget) / Milli }

// setBudget sets the budget from a response's figure, and the room others'
// predicted spending has in it until the next (see drainRoom).
func (w *Window) setBudget(units float64) {
	w.budget = ToMilli(units)
	w.drainRoom = ToMilli(othersMaxShare * units)
}

func (w *Window) limitOrPeak() float64 {
	if w.limit > 0 {
		return w.limit
	}
	return w.peak
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
	w.observe(q, now, seen)
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
			w.reset, w.stamp = clock.Later(w.reset, q.Reset), clock.Later(w.stamp, q.Reset)
			if w.window > 0 {
				// roll moved the reset a window on; the stated one is it.
				w.reset = q.Reset
			}
			w.setAt = now
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
			// would hide the jump. (Not asked of a quota whose reset
			// states its time to full: full at that reset is what it
			// said, not a jump.)
			switch {
			case q.Remaining-before > 0.5*(limit-before):
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
			w.reset, w.stamp = clock.Later(w.reset, q.Reset), clock.Later(w.stamp, q.Reset)
		}
		if unseen == 0 && w.low > w.Units() {
			w.budget = ToMilli(max(w.low-max(-w.drift, 0)*age.Seconds(), 0))
		}
		return
	case !countsDown && eff > w.Units() && now.Sub(w.setAt) < horizon:
		// A quota that refills by itself may legitimately report more, so
		// the lowest figure proves nothing: a higher one soon after the
		// budget was set is stale until proven otherwise. Keep the later
		// reset, which is the conservative one.
		if timed {
			w.reset, w.stamp = clock.Later(w.reset, q.Reset), clock.Later(w.stamp, q.Reset)
		}
		return
	case countsDown && w.fills(q):
		// A reset that moves later as the quota is spent is the time until
		// a bucket is full again (OpenAI's token buckets): it refills as it
		// goes, and the deficit over that time is its refill rate.
		// (Limit − Remaining) over the time to full is the refill rate, from
		// one response's consistent figures: no baseline, no noise.
		w.kind, w.toFull = kindSmooth, true
		w.stamp, w.reset = clock.Later(w.stamp, q.Reset), clock.Later(w.reset, q.Reset)
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
	w.known, w.rolled, w.setAt, w.probing = true, false, now, false
	w.setBudget(eff)
}

// fills reports whether q, from the window w is in, says the window is a
// bucket that refills as it goes rather than a window that counts down to a
// reset: its stated reset has moved later, since the window's first
// response, by more than resets wander (four times their jitter, at least a
// second), and by about the time the spending since then takes to refill
// at the rate the stated limit and window imply, or, with no window
// stated, in step with the spending (a fixed window's reset does not move).
func (w *Window) fills(q *Report) bool {
	moved := q.Reset.Sub(w.first)
	spent := w.firstRem - q.Remaining
	if w.first.IsZero() || spent < 2 || moved < max(4*w.jitter, time.Second) {
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
	// The window's length, or a lower bound of it while unlearned: the
	// time from its first response to its reset.
	win := w.window
	if win <= 0 && !w.firstAt.IsZero() && w.reset.After(w.firstAt) {
		win = w.reset.Sub(w.firstAt)
	}
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
		w.budget = ToMilli(max(w.limitOrPeak()-inflight, 0))
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
		w.budget = ToMilli(carry + w.Reserve())
		return
	}
	if w.kind == kindUnknown && win > 0 && w.limitOrPeak() >= 1 {
		w.probeAt = now.Add(time.Duration(2 * float64(win) / w.limitOrPeak()))
		w.budget = 0
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

// Reserve is what a charge must leave in the budget. For a token quota, a request's cost
// is an estimate: (1-safety) of the quota absorbs estimates that fall short
// until the server's next figure corrects them. Request quotas count
// exactly: a job may spend all that is left.
func (w *Window) Reserve() float64 {
	if !w.tokens {
		return 0
	}
	return (1 - w.safety) * w.limitOrPeak()
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
	w.budget = min(ToMilli(unit), max(w.most, Milli))
}
