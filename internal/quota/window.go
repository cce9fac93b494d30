package quota

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// This file is the model's state and its Plan transition: the Window (one
// quota) and the Book (an endpoint's quotas), their configuration and
// accessors; Plan, which brings every quota to now and says at what rate
// its budget may be spent and when to look next; and what admission asks
// of the budget that plan leaves (Charge, SpentUntil, Debt, Reserve,
// Refund). They are together, past the project's usual file length,
// because they are asked on every admission and after every response, and
// all read the one budget: split by those parts, a request entered each of
// their files. What a response teaches the state (the Observe transition)
// is in observe.go.

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
	// variance, estFrom the sample under way (see costAnchor); blindCharged
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
	// fleet: spread from the start by a fleet sharing a store
	// (Config.Shared), never built up (see Step.Spare).
	fleet bool
	// spreadSeen: the last plan saw the quota shared (see Step.Spare).
	spreadSeen bool
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
		shared: c.Shared, fleet: c.Shared, inferred: c.Inferred, coordinated: c.Coordinated, jitter: initialJitter,
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

// Book is every quota of one endpoint: the Windows its responses describe,
// followed by name. A request is charged to every known quota it counts
// against (1 to each request quota, its cost to each token quota) and goes
// only if every one of them affords it.
//
// A Book is not safe for concurrent use: its owner holds one lock across
// each call, and reads what admission needs from the value its last Plan
// returned.
type Book struct {
	cfg     BookConfig
	windows []*Window
	charged []*Window // the known windows, as of the last Plan
	plan    Plan      // the last Plan's
}

// BookConfig configures a Book.
type BookConfig struct {
	// Safety and MaxDelay are every Window's (see Config).
	Safety   float64
	MaxDelay time.Duration
	// Horizon bounds how far away a stated reset is believed; a later one
	// is taken as Horizon from now.
	Horizon time.Duration
	// Fleet marks an endpoint whose quotas a fleet of limiters spends
	// together through a shared store: every quota is spread from the
	// start, and no drift is measured (the others' spending is the
	// store's to hold, not each member's to deduct).
	Fleet bool
	// Coordinated marks an endpoint whose quotas a fleet spends together
	// under a budget a shared store keeps: each member spends at once what
	// the fleet's budget affords, and what the others spend is not read as
	// unseen clients' spending (Config.Coordinated).
	Coordinated bool
	// Inferred names the quota the owner infers from its own answers (a
	// server that states none); see Config.Inferred. Not with Fleet.
	Inferred string
	// Epoch is every Window's (see Config).
	Epoch time.Time
}

// MaxQuotas caps the quotas tracked per endpoint (ParseHeaders keeps 16).
// Reports of further quotas are ignored.
const MaxQuotas = 16

// NewBook returns a Book that knows no quota yet.
func NewBook(c BookConfig) *Book { return &Book{cfg: c} }

// Counts is what the owner has admitted, in requests and in stated
// tokens: in flight (admitted, not yet answered) and ever. Blind requests
// (no stated cost) are counted apart, and each token quota prices them at
// what it learnt they cost.
type Counts struct {
	Inflight, InflightCost float64
	Admitted, AdmittedCost float64
	Blind, BlindInflight   float64
}

func (c Counts) unseen(w *Window) float64 {
	if w.tokens {
		return c.InflightCost + c.BlindInflight*w.Estimate()
	}
	return c.Inflight
}

func (c Counts) admitted(w *Window) float64 {
	if w.tokens {
		return c.AdmittedCost + float64(w.blindCharged)/Milli
	}
	return c.Admitted
}

// Find returns the named quota's Window, or nil.
func (b *Book) Find(name string) *Window {
	for _, w := range b.windows {
		if w.name == name {
			return w
		}
	}
	return nil
}

// window returns the named quota's Window and its index, creating it.
func (b *Book) window(name string, tokens bool) (int, *Window) {
	for i, w := range b.windows {
		if w.name == name {
			return i, w
		}
	}
	w := New(Config{
		Name: name, Tokens: tokens, Safety: b.cfg.Safety, MaxDelay: b.cfg.MaxDelay,
		Shared:      b.cfg.Fleet,
		Coordinated: b.cfg.Coordinated,
		Inferred:    name == b.cfg.Inferred && !b.cfg.Fleet && !b.cfg.Coordinated,
		Epoch:       b.cfg.Epoch,
	})
	b.windows = append(b.windows, w)
	return len(b.windows) - 1, w
}

// Drop forgets the quotas for which drop reports true.
func (b *Book) Drop(drop func(*Window) bool) {
	b.windows = slices.DeleteFunc(b.windows, drop)
	b.charged = slices.DeleteFunc(b.charged, drop)
}

// Charged is the known quotas, as of the last Plan: those a request is
// charged to. The slice is the book's: read it under the owner's lock.
func (b *Book) Charged() []*Window { return b.charged }

// Windows returns every quota the book follows, known or not; the slice is
// the book's, valid until its next call.
func (b *Book) Windows() []*Window { return b.windows }

// Len is how many quotas the book follows.
func (b *Book) Len() int { return len(b.windows) }

// Known reports whether a response has described a quota the budget
// speaks for.
func (b *Book) Known() bool {
	for _, w := range b.windows {
		if w.known {
			return true
		}
	}
	return false
}

// String describes every quota's state, for debugging.
func (b *Book) String() string {
	parts := make([]string, len(b.windows))
	for i, w := range b.windows {
		parts[i] = w.String()
	}
	return strings.Join(parts, "; ")
}

// How a quota's budget becomes a rate: spent at once while it affords the
// work, spread to its reset when it does not, or when it is shared or
// refills as it goes.

// Plan is where Book.Plan left the endpoint's quotas.
type Plan struct {
	// ReqRate and TokRate are the rates the request and token quotas may
	// be spent at (+Inf: the budgets are the gate); ReqBudget and
	// TokBudget what their tightest budget holds above its reserve
	// (+Inf with none).
	ReqRate, ReqBudget float64
	TokRate, TokBudget float64
	// ReqAtOnce and TokAtOnce are what the quota setting the rate lets
	// go at once beside it, in units (see Step.AtOnce); zero: a burst at
	// the rate is a small part of its budget.
	ReqAtOnce, TokAtOnce float64
	ReqSpare, TokSpare   float64
	// Known is how many quotas are known; Blind reports that one is being
	// looked at (one request in flight learns it).
	Known int
	Blind bool
	// Tokens reports that a known quota is counted in tokens.
	Tokens bool
	// Next is when the quotas must be looked at again; zero when never.
	Next time.Time
	// Rolled reports that a window moved on past its reset.
	Rolled bool
}

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
	// Spare is what of Avail may build up beside Rate while demand stays
	// below it, to go at once when it comes: for a fixed window others
	// spend from, what is left beyond their measured use until the reset
	// and each client's floor. Unlike AtOnce it is not put in the
	// bucket: a client spending at the pace builds up none of it.
	Spare float64
}

// Plan brings every quota to now (Window.Advance) and combines them: the
// tightest rate and budget of each unit, when to look next. tokenUnit is
// what one request takes of a token quota (its average cost). The plan is
// the book's, valid until its next Plan (see advance for why it is not
// returned by value).
func (b *Book) Plan(now time.Time, c *Counts, tokenUnit float64) *Plan {
	p := &b.plan
	*p = Plan{ReqRate: math.Inf(1), ReqBudget: math.Inf(1), TokRate: math.Inf(1), TokBudget: math.Inf(1)}
	b.charged = b.charged[:0]
	var st Step
	for _, w := range b.windows {
		unit := 1.0 // less than a request's worth left is spent
		if w.tokens {
			unit = max(tokenUnit, float64(w.blindAmount())/Milli)
		}
		ok := w.advance(&st, now, c.unseen(w), unit, c.Admitted)
		p.Rolled = p.Rolled || st.Rolled
		if !ok {
			continue
		}
		b.charged = append(b.charged, w)
		p.Known++
		p.Blind = p.Blind || w.probing
		if !st.Next.IsZero() && (p.Next.IsZero() || st.Next.Before(p.Next)) {
			p.Next = st.Next
		}
		if w.tokens {
			p.Tokens = true
			p.TokAtOnce = atOnce(p.TokAtOnce, p.TokRate, &st)
			p.TokSpare = spare(p.TokSpare, p.TokRate, &st)
			p.TokRate, p.TokBudget = min(p.TokRate, st.Rate), min(p.TokBudget, st.Avail)
		} else {
			p.ReqAtOnce = atOnce(p.ReqAtOnce, p.ReqRate, &st)
			p.ReqSpare = spare(p.ReqSpare, p.ReqRate, &st)
			p.ReqRate, p.ReqBudget = min(p.ReqRate, st.Rate), min(p.ReqBudget, st.Avail)
		}
	}
	return p
}

// atOnce is what the tightest rate lets go at once when st joins quotas
// whose tightest rate is rate and lets go before: the tighter one's, and
// at a tie the lesser.
func atOnce(before, rate float64, st *Step) float64 {
	switch {
	case st.Rate < rate:
		return st.AtOnce
	case st.Rate == rate:
		return min(before, st.AtOnce)
	}
	return before
}

func spare(before, rate float64, st *Step) float64 {
	switch {
	case st.Rate < rate:
		return st.Spare
	case st.Rate == rate:
		return min(before, st.Spare)
	}
	return before
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
	if w.shared && w.drift < 0 && !w.fleet && w.kind != kindSmooth && !w.probing {
		// Others spend from it: what they are measured to use before the
		// reset is kept for them (Plan's keep), and what is left beyond
		// that, but for each client's floor, builds up while our demand
		// stays below the pace, to go at once when it comes. A client
		// that spends at the pace (every client of a saturated quota)
		// builds up nothing; one far inside the quota is not held by the
		// spread. (Not a fleet's: its members' spending is the store's to
		// hold, and each spreads its own.)
		floor := (1 - othersMaxShare) * w.Units()
		st.Spare = max(float64(w.budget-w.keep)/Milli-floor, 0)
		if !w.spreadSeen {
			// The first plan since others were seen: nothing was spread
			// before, so what builds up is there already.
			st.AtOnce = max(st.AtOnce, st.Spare)
		}
	}
	w.spreadSeen = w.shared
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

// explains reports whether the window's length, stated or learned, accounts
// for the time to its reset: within 5% and a second of rounding, stated
// resets of a window of that length are believed however far away (an
// hourly quota's 40 minutes, a daily one's 20 hours).
func (w *Window) explains(now time.Time) bool {
	return w.window > 0 && w.reset.Sub(now) <= w.window+w.window/20+time.Second
}

// What admission asks of the budgets: whether a request fits them now,
// charged at once, and when it would if not.

// Charge takes a request of the given cost from every known quota, at now
// on the charges' clock (Config.Epoch), leaving share of each quota's limit (a class's
// reserve; see Window.Charge) and room for the stated costs in flight to
// fall short (flight: those of the requests in flight besides this one,
// milli-units, as Counts.InflightCost; see Window.Unconfirmed). If one
// cannot take it, nothing stays charged and that quota is returned.
func (b *Book) Charge(cost float64, now int64, share float64, flight int64) (short *Window) {
	for i, w := range b.charged {
		amount := w.Amount(cost)
		if amount == 0 || w.Charge(amount, now, share, w.Unconfirmed(cost, flight)) {
			w.countBlind(cost, amount)
			continue
		}
		for _, u := range b.charged[:i] {
			b.refund(u, cost)
		}
		return w
	}
	return nil
}

// Refund gives a charge back to every known quota (its request was not
// sent). A blind request gets back what such requests are charged now,
// which the estimate may have moved since; the next response's figures
// true the budget up either way.
func (b *Book) Refund(cost float64) {
	for _, w := range b.charged {
		b.refund(w, cost)
	}
}

func (b *Book) refund(w *Window, cost float64) {
	amount := w.Amount(cost)
	w.Refund(amount)
	w.countBlind(cost, -amount)
}

// SpentUntil is when the budgets could take a request of this cost: the
// wake-up of a quota that is spent now, else the zero time. With share > 0
// (a class's reserve, see Charge), a quota that holds the request only in
// its reserve counts as spent until it refills by itself (RefillAt). ns
// is the time of the question on the charges' clock (Config.Epoch), and now the same
// instant as a time.Time, read only with share > 0 (the caller makes it
// only then: the clock is read once per admission, as ns).
func (b *Book) SpentUntil(cost, share float64, ns int64, now time.Time) time.Time {
	var at time.Time
	for _, w := range b.charged {
		amount := w.Amount(cost)
		switch {
		case amount == 0:
		case w.budget < amount:
			at = later(at, w.wakeAt)
		case share > 0 && w.Reserved(amount, ns, share):
			at = later(at, w.RefillAt(now))
		}
	}
	return at
}

// HeldUntil is when the spent request quotas let a request go; zero when
// none is spent.
func (b *Book) HeldUntil() time.Time {
	var at time.Time
	for _, w := range b.windows {
		if w.known && !w.tokens && w.budget < Milli+w.keep {
			at = later(at, w.wakeAt)
		}
	}
	return at
}

// KeepUntil is until when what the book learnt stays worth keeping without
// traffic, for an endpoint last used at used: the end of its latest stated
// window, and a whole window of its longest length after its last use.
func (b *Book) KeepUntil(used time.Time) time.Time {
	var at time.Time
	for _, w := range b.windows {
		at = later(at, later(w.reset, used.Add(w.window)))
	}
	return at
}

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
