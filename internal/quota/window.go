package quota

import (
	"cmp"
	"fmt"
	"math"
	"time"
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
	// credit is what of budget the refill added since the last figure
	// (moveByDrift): a prediction, where the rest is what a response said
	// (see Step.AtOnce).
	credit int64
	// drain is what others take from the quota, milli-units per second
	// (the negative part of the drift), and drainFrom when (since epoch)
	// the budget last had it deducted: Wait deducts what accrued since, so
	// the budget gate does not lag behind others' spending between responses.
	drain     int64
	drainFrom int64
	epoch     time.Time // the charges' clock's instant 0 (Config.Epoch)
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
	setSeq int64     // Seen.Admissions when a response last set the budget
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
	// burstLow is the lowest Remaining the answers of a burst stated
	// (requests of ours out together, until an answer leaves none in
	// flight; see observeAt); burst that one is under way.
	burstLow float64
	burst    bool
	// lookGap is how long a spent quota that refills as it goes waits
	// before a look beyond reprobe (see Plan): doubled by each look the
	// server refused, back to nothing when one finds room.
	lookGap  time.Duration
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
	// Epoch is the instant the caller's clock counts from: the times of a
	// charge (Charge, Reserved, Debt) are nanoseconds since Epoch, read on
	// the monotonic clock, so admissions need no time.Time. The model
	// reads no clock; it only converts the times it is given. Zero means
	// the instant the package was loaded.
	Epoch time.Time
}

// loaded stands in for a zero Config.Epoch.
var loaded = time.Now()

// New returns the model of a quota nothing has been said about yet.
func New(c Config) *Window {
	return &Window{
		name: c.Name, tokens: c.Tokens, safety: c.Safety, maxDelay: c.MaxDelay,
		shared: c.Shared, inferred: c.Inferred, coordinated: c.Coordinated, jitter: initialJitter,
		epoch: cmp.Or(c.Epoch, loaded),
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
// covers Debt at now (since Config.Epoch), share of the quota's limit (the
// reserve a class of work must leave to another; 0 for none) and margin
// (milli-units: what the costs in flight may yet fall short by, see
// Unconfirmed); otherwise it takes nothing and reports false.
func (w *Window) Charge(amount, now int64, share float64, margin int64) bool {
	if w.budget-amount < w.Debt(now)+w.held(share)+margin {
		return false
	}
	w.budget -= amount
	return true
}

// Unconfirmed is what a charge must leave in a token quota's budget beyond
// its keep, for the stated costs no figure has confirmed yet to fall short:
// estimateError of them all, the charge's own (a request of cost; none for
// a blind one, cost ≤ 0) and those of the requests in flight besides it
// (flight, milli-units), less the reserve the keep already holds for that.
// The reserve is a share of the limit, while what is in flight can be the
// whole budget: a window's budget spent at once at its start is all in
// flight before any of it is answered, and the shortfall of 28 or 29
// estimates together, ±30% each, passed a reserve of a tenth of the limit
// about once in 10,000 to 20,000 windows (a 429 in 0.3% to 0.7% of
// TestAdaptiveScenarios' 60-window anthropic-tokens runs). Past this
// margin a request waits for the answers in flight, whose figures count
// what the server charged them: a round trip, once per window. Nothing
// while nothing else is in flight: no answer would come to wait for, and
// the reserve is a lone request's headroom. Request quotas count exactly,
// a blind request's charge is already high (see blindAmount), and a look
// goes whatever it finds.
func (w *Window) Unconfirmed(cost float64, flight int64) int64 {
	if !w.tokens || w.probing || flight <= 0 {
		return 0
	}
	own := int64(0)
	if cost > 0 {
		own = w.Amount(cost)
	}
	return max(ToMilli(estimateError*float64(own+flight)/Milli)-ToMilli(w.Reserve()), 0)
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

// Debt is what others have taken, by the drift, since the budget was last
// brought up to date: milli-units a charge at now (since Config.Epoch) must leave
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
	w.budget, w.credit = ToMilli(units), 0
	w.drainRoom = ToMilli(othersMaxShare * units)
}

func (w *Window) limitOrPeak() float64 {
	if w.limit > 0 {
		return w.limit
	}
	return w.peak
}

// Reserve is what a charge must leave in the budget. For a token quota, a request's cost
// is an estimate: (1-safety) of the quota absorbs estimates that fall short
// until the server's next figure corrects them (and Unconfirmed, whatever
// is in flight beyond what it covers). Request quotas count
// exactly: a job may spend all that is left.
func (w *Window) Reserve() float64 {
	if !w.tokens {
		return 0
	}
	return (1 - w.safety) * w.limitOrPeak()
}

// earlier returns the earlier of a and b.
func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
