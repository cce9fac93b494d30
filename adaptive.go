package pacer

import (
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacer-go/pacer/internal/cubic"
	"github.com/pacer-go/pacer/internal/header"
	"github.com/pacer-go/pacer/internal/infer"
	"github.com/pacer-go/pacer/internal/quota"
	"github.com/pacer-go/pacer/internal/response"
	"github.com/pacer-go/pacer/observe"
	"github.com/pacer-go/pacer/store"
	"github.com/pacer-go/pacer/work"
)

// AdaptiveConfig configures an [Adaptive]. The zero value is ready to use:
// safety factor 0.9, probing floor 0.5/s, no ceiling, pauses capped at
// [DefaultMaxDelay], [DefaultSlowStart] requests in flight before the first
// response.
type AdaptiveConfig struct {
	// Key names the endpoint in *RateLimitError.Endpoint and in log records.
	Key string
	// SafetyFactor, in (0, 1], is the share of what the limiter estimates
	// rather than reads that it believes: a quota's refill, a spread's
	// pace, a refill the server's waits state, and of a token quota the
	// share its stated costs may spend; 0 means 0.9. A request quota's
	// figures are read, not estimated: it is spent to its last unit.
	SafetyFactor float64
	// MinLimit is the floor, in requests per second, of the probing fallback
	// for servers that only answer 429; 0 means 0.5.
	MinLimit Limit
	// Ceiling is a limit the endpoint never exceeds, whatever the server's
	// headers say; 0 means none. With no headers it is a plain static bucket.
	Ceiling Limit
	// CeilingBurst is the burst that goes with Ceiling; 0 means 1.
	CeilingBurst int
	// MaxWait bounds how long Acquire may block: a longer wait fails at once with
	// *RateLimitError, before any sleeping. 0 means only the context bounds it.
	MaxWait time.Duration
	// MaxDelay bounds every wait: a Retry-After longer than it is capped to
	// it; a spent quota whose reset is further away is refused at once with
	// a *RateLimitError carrying the reset when the quota's window explains
	// the reset (an hourly or daily quota), and looked at again with one
	// request after MaxDelay when nothing does. 0 means DefaultMaxDelay.
	MaxDelay time.Duration
	// SlowStart is how many requests may be in flight before the endpoint's
	// first response; 0 means DefaultSlowStart (1: the first request goes
	// alone). It bounds what a large fan-out onto an exhausted quota costs
	// (that many 429s, not one per request); a wider first window sends a
	// worker pool's first round at once, at that many 429s when the quota
	// turns out spent.
	SlowStart int
	// Logger receives a debug record when the limit is retuned and a warning
	// for each throttled response; nil means no logging.
	Logger *slog.Logger
	// BatchReserve is what batch work leaves of each quota to interactive
	// work (see [work.Class]); the zero value means [work.DefaultReserve].
	BatchReserve work.Reserve
	// Store, when set, holds the request and token buckets of Key, shared
	// with every limiter that uses the same Store and Key (several
	// Transports in one process with a [store.Memory], or many processes with
	// redisstore). The limiter publishes the limits it learns and its pauses
	// there and adopts the ones others publish. Spending by clients outside
	// the store's fleet is then not estimated from the figures (the fleet's
	// own would be counted twice); budgets and 429s still catch it. nil:
	// local buckets only.
	Store store.Store
	// Quotas states quotas the endpoint is known to have before any
	// response states them, as [WithQuota] does for a Transport's endpoints:
	// each at most Limit requests per Window, counted afresh each window,
	// the first starting at NewAdaptive. Limit and Window are required;
	// Name names the quota in Stats ("<Limit> per <Window>" when empty);
	// Remaining, Reset and Unit must be left zero (a stated quota counts
	// requests, from full). The quotas govern until the server's responses
	// state quotas of their own, which then take over.
	Quotas []Quota

	// routed: the limiter is a route's, of a host that keeps a quota per
	// route (routes.go); set by the Transport alone.
	routed bool
}

// Adaptive is a rate limiter for one endpoint whose limits follow what the
// server says.
//
// The rule. Each quota the server states (a name, its Remaining, its reset)
// has a budget: the lowest Remaining the current window has reported, less
// every request of ours in flight (the server may not have counted them
// yet), charged as requests are admitted. A request whose cost fits in the
// budget of every quota it is charged to goes at once: while the quota
// affords the work, the limiter is as fast as no limiter. A request that
// does not fit waits for the quota to come back: for a window that refills,
// its reset (then one request looks at the new window, and its answer sets
// the new budget); for one that refills as it goes (a token bucket, a
// sliding window, a leaky bucket, told apart by their headers and their
// answers), its refill, spread to its reset. A bucket that states its
// time to full (and so its refill: OpenAI's, Anthropic's), or no reset at
// all (a leaky bucket, Shopify's), lets what its last figure said is left
// go at once too, and paces only its refill; a quota whose refill is only
// inferred (a sliding window, a window that showed no jump at its reset)
// is spread whole. A quota others are seen spending from (less
// left than our own spending explains) is spread evenly to its reset, and
// what they spend until then is left to them: two clients that each took
// what is left at once would take it twice. A token quota
// keeps (1 − SafetyFactor) of its limit back for cost estimates that fall
// short; a request quota counts exactly and is spent to its last unit.
//
// So a job within the remaining quota runs at the speed of the server, a
// saturated client spends each window to its end with no 429 after the first
// response, and a job larger than the quota follows the fastest schedule
// that has none: what is left now, then each window's quota as it opens.
//
// Bounds. No wait is longer than MaxDelay: a quota whose reset is further
// away is refused at once with a [*RateLimitError] carrying the reset when
// the quota's window explains it (an hourly or daily quota), and looked at
// with one request after MaxDelay when nothing does; a server that keeps
// answering 429 with nothing saying until when is looked at with one
// request at a time, at least once a minute. Retry-After pauses the endpoint (capped at MaxDelay).
// A server that sends no quota headers but answers 429 with a Retry-After
// states its quota without knowing it: the successes before the refusal
// are the window's size, the Retry-After its end, the time between two
// ends its length. That inferred quota is spent like a stated one (Mode
// "headers"). Servers it does not fit (one that refills as it goes), and
// servers that answer 429 or 503 with nothing more, are probed with a
// CUBIC fallback (Mode "probing"); until the first throttle such a server
// is not limited at all. Before the first response at most SlowStart
// requests are in flight.
//
// Use: [Adaptive.Acquire] returns a [Permit]; settle it exactly once, with
// Done and what the response said, or with Abandon if the request was not
// sent (its charge is given back). The request counts as in flight until
// then.
//
// Concurrency. The limiter's state (the quotas and their budgets, the
// probe, the pause, the in-flight gate, the callers waiting for a change,
// what it shares through a Store) sits behind one lock. Admission reads
// what it needs of that state from an immutable snapshot each change
// publishes, and the counters it reads without the lock are atomic. A
// request's admission (its charges and its entry in the in-flight count)
// and a response's application both happen under the lock, so every
// request is either counted as in flight or already applied. The lock is
// never held across a sleep, a Store call, logging or a user callback:
// those are queued and run once it is released. A Bucket's own lock may be
// taken under it (a retune sets the buckets), never the other way round.
// Read methods (Stats) change nothing.
//
// All methods are safe for concurrent use.
type Adaptive struct {
	cfg    AdaptiveConfig
	safety float64

	req *Bucket // requests
	tok *Bucket // tokens of token-denominated quotas; used once one is known

	share *storeShare // nil without a Store
	fleet *fleetShare // nil without a Store that keeps budgets

	// outbox holds what must happen once mu is released: log records and
	// Store publishes (user code and I/O never run under mu). Guarded by
	// mu, and empty whenever mu is free (unlock runs it): a section that
	// queues nothing may release mu plainly.
	outbox []func()

	// The atomics are what is read without mu; gated, applied, changes and
	// snap change only under it.

	started      atomic.Bool  // a response arrived: slow start is over
	gated        atomic.Bool  // in-flight cap active (slow start, or probing a new window)
	inflight     atomic.Int64 // admitted, not yet observed
	inflightCost atomic.Int64 // their stated token cost, milli-tokens
	hinted       atomic.Int64 // those with a stated cost; the others are blind (see quota.Counts)
	waiting      atomic.Int64
	// Per class of work: callers waiting in Acquire, requests admitted.
	// Admissions ever, and the batch part of them and of the waiting
	// callers (interactive work's is the rest: it pays for no counter of
	// its own on the common path).
	admissions   atomic.Int64
	batchWaiting atomic.Int64
	batchAdmits  atomic.Int64
	applied      atomic.Int64 // responses applied (learn), ever: see settled
	// snap is what admission reads without mu: published under mu by
	// every retune (see admission).
	snap         atomic.Pointer[admission]
	admitted     atomic.Int64 // requests admitted, ever
	admittedCost atomic.Int64 // their stated token cost, milli-tokens
	hintedAdmits atomic.Int64 // those with a stated cost, less those refused
	maxCost      atomic.Int64 // largest cost seen, milli-tokens
	avgCost      atomic.Int64 // smoothed cost of requests with one, milli-tokens

	// changes counts the changes that may free a budget (responses
	// applied, charges given back, windows rolled), whether anyone waited
	// for one or not: a caller about to wait compares it with what it read
	// before it looked at the budgets (see awaitChange).
	changes atomic.Int64

	// mu guards what follows, and the state of share and fleet; it is
	// never held across a sleep or a call out (Store, logger, callbacks).
	mu sync.Mutex

	// The in-flight gate: while gated, at most gateCap requests in flight.
	gateCap  int64
	gateWake chan struct{} // closed when a slot frees or the gate opens
	// The callers waiting for a change (awaitChange) wait on respWake,
	// closed at the next change if respWaiters > 0.
	respWake    chan struct{}
	respWaiters int

	feeders []*Adaptive // limiters whose requests may land in this quota (feed)

	book  *quota.Book // the quotas the server states (or the inferred one)
	probe *cubic.Probe
	clock response.Clock // the server's clock, for Permit.Done (the Transport keeps one per host)
	// infer is the quota of a server that states none, learnt from its
	// Retry-Afters; nil once the server states a quota or the model does
	// not fit it (it never comes back: a server that stated a quota has one).
	infer     *infer.Model
	reports   []quota.Named // what a response said of its quotas, reused
	stated    []statedQuota // the quotas stated for the endpoint (WithQuota), until its server states its own
	paused    time.Time     // no request starts before this
	lastInfo  header.Info   // what the last response that stated anything said besides its quotas (see lastInfoLocked)
	lanes     lanes         // the classes of work seen, for their reserves (atomic)
	throttled int64
	requests  int64
	lastObs   time.Time
	interval  float64 // smoothed seconds between responses
	avgFlight float64 // smoothed in-flight count at responses
	mode      observe.Mode
	// Body-stated limits (bodyLimitLocked): how many in a row, the last.
	bodyStrikes   uint
	lastBodyLimit time.Time
	// bodyLimitUntil is the end of the pause the last body-stated limit
	// began: answers arriving before it belong to the same trip.
	bodyLimitUntil time.Time

	// lastQuotas holds that response's quotas; readers convert them under
	// mu.
	lastQuotas header.Quotas
	// lastDecision is what retune last decided on (decided: it has),
	// and applied.
	lastDecision decisionInput
	decided      bool
}

// NewAdaptive returns an Adaptive for cfg. It panics if a field is invalid
// (NaN, negative, SafetyFactor above 1), naming the field and the value.
func NewAdaptive(cfg AdaptiveConfig) *Adaptive {
	cfg = cfg.normalize()
	a := &Adaptive{
		cfg:      cfg,
		safety:   cfg.SafetyFactor,
		req:      NewBucket(Inf, 1),
		tok:      NewBucket(Inf, 1),
		gateCap:  int64(cfg.SlowStart),
		gateWake: make(chan struct{}),
		respWake: make(chan struct{}),
		probe:    cubic.New(float64(cfg.MinLimit), cfg.SafetyFactor),
		infer:    new(infer.Model),
		mode:     observe.ModeSlowStart,
		share:    newStoreShare(cfg),
	}
	a.fleet = newFleetShare(cfg, &a.mu)
	a.book = quota.NewBook(quota.BookConfig{
		Safety: cfg.SafetyFactor, MaxDelay: cfg.MaxDelay, Horizon: MaxResetHorizon,
		// With a Store that keeps budgets the fleet spends each quota
		// under the budget the store holds, at once while it affords the
		// work; with one that keeps only buckets, through the store's
		// bucket at the rate each limiter derives.
		Fleet:       cfg.Store != nil && a.fleet == nil,
		Coordinated: a.fleet != nil,
		Inferred:    infer.Name,
		Routed:      cfg.routed,
	})
	if cfg.Ceiling > 0 {
		a.req.SetLimit(cfg.Ceiling)
		a.req.SetBurst(cfg.CeilingBurst)
	}
	a.lanes.reserve = cfg.BatchReserve
	a.lanes.interactive.Store(never)
	a.gated.Store(true)
	a.snap.Store(&admission{checkAt: math.MaxInt64})
	if len(cfg.Quotas) > 0 {
		a.state(cfg.Quotas, time.Now())
	}
	return a
}

func (cfg AdaptiveConfig) normalize() AdaptiveConfig {
	bad := func(field string, v any, want string) {
		panic(fmt.Sprintf("pacer: AdaptiveConfig.%s must be %s, got %v", field, want, v))
	}
	switch s := cfg.SafetyFactor; {
	case s == 0:
		cfg.SafetyFactor = 0.9
	case !(s > 0 && s <= 1):
		bad("SafetyFactor", s, "in (0,1]")
	}
	switch m := cfg.MinLimit; {
	case m == 0:
		cfg.MinLimit = 0.5
	case !(m > 0) || m == Inf || math.IsInf(float64(m), 1):
		bad("MinLimit", m, "a positive finite rate")
	}
	switch c := cfg.Ceiling; {
	case c == Inf || math.IsInf(float64(c), 1):
		cfg.Ceiling = 0
	case !(c >= 0):
		bad("Ceiling", c, "≥ 0")
	}
	if cfg.CeilingBurst < 0 {
		bad("CeilingBurst", cfg.CeilingBurst, "≥ 0")
	}
	if cfg.CeilingBurst == 0 {
		cfg.CeilingBurst = 1
	}
	if cfg.MaxWait < 0 {
		bad("MaxWait", cfg.MaxWait, "≥ 0")
	}
	switch {
	case cfg.MaxDelay < 0:
		bad("MaxDelay", cfg.MaxDelay, "≥ 0")
	case cfg.MaxDelay == 0:
		cfg.MaxDelay = DefaultMaxDelay
	}
	cfg.BatchReserve = normalizeReserve(cfg.BatchReserve, "AdaptiveConfig.BatchReserve")
	switch {
	case cfg.SlowStart < 0:
		bad("SlowStart", cfg.SlowStart, "≥ 0")
	case cfg.SlowStart == 0:
		cfg.SlowStart = DefaultSlowStart
	}
	// Validated, named, and each name once (WithQuota's of one pattern
	// can repeat one).
	quotas := make([]Quota, 0, len(cfg.Quotas))
	for i, q := range cfg.Quotas {
		field := fmt.Sprintf("Quotas[%d]", i)
		switch {
		case !(q.Limit > 0) || math.IsInf(q.Limit, 1):
			bad(field+".Limit", q.Limit, "a positive finite count")
		case q.Window <= 0 || q.Window > MaxResetHorizon:
			bad(field+".Window", q.Window, fmt.Sprintf("in (0, %v]", MaxResetHorizon))
		case q.Remaining != 0:
			bad(field+".Remaining", q.Remaining, "0 (a stated quota starts full)")
		case !q.Reset.IsZero():
			bad(field+".Reset", q.Reset, "zero (a stated quota's windows start at NewAdaptive)")
		case q.Unit != UnitRequests:
			bad(field+".Unit", q.Unit, "UnitRequests (a stated quota counts requests)")
		}
		if q.Name == "" {
			q.Name = strconv.FormatFloat(q.Limit, 'f', -1, 64) + " per " + q.Window.String()
		}
		if j := slices.IndexFunc(quotas, func(p Quota) bool { return p.Name == q.Name }); j >= 0 {
			if p := quotas[j]; p.Limit != q.Limit || p.Window != q.Window {
				bad(field+".Name", q.Name, "unique to one Limit per Window")
			}
			continue
		}
		quotas = append(quotas, q)
	}
	cfg.Quotas = quotas
	return cfg
}

// statedQuota is a quota stated before the server states any (see
// AdaptiveConfig.Quotas), by the name the limiter knows it by.
type statedQuota struct {
	name string
	quota.Stated
}

// admission is what admission reads of the limiter's state without taking
// mu: published, immutable, after every retune.
type admission struct {
	charged bool  // a quota is known: a request is charged to it (under mu)
	tokens  bool  // a known quota counts tokens
	checkAt int64 // when (package clock) the quotas must be looked at again
}

// keepUntil is until when what the limiter learnt stays worth keeping
// without traffic, for a limiter last used at used: the end of its latest
// stated window (its reset), and a whole window of its longest stated or
// learned length after its last use. The endpoint table keeps an idle
// limiter until then.
func (a *Adaptive) keepUntil(used time.Time) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock() // nothing is queued in the outbox: no unlock flush
	return a.book.KeepUntil(used)
}

// Permit is one request's admission by [Adaptive.Acquire]. The request
// counts as in flight, and its cost as charged, until the permit is settled
// by exactly one call of Done (the request was sent) or Abandon (it was
// not). Later calls on the same Permit do nothing; a Permit must not be
// copied before it is settled.
type Permit struct {
	a     *Adaptive
	cost  float64
	live  bool
	seq   int64  // the request's place in the order of admissions
	fleet []need // what the request took of the fleet's budgets
}

// Done settles the permit of a request that was sent, with the response it
// got: nil when none was obtained (the request stops counting as in flight,
// nothing is learned, and its cost stays charged, since the server may have
// counted it). The limiter learns at once what the response says about the
// rate limit: every header convention [ParseHeaders] reads, absolute resets
// corrected by the server's Date, and, for a 403 or 429, what its body
// states (a limit only the body names, such as GitHub's secondary limits; a
// quota gone for good, such as OpenAI's insufficient_quota; the quotas and
// waits Google's, Groq's, OpenRouter's and Discord's errors state). For
// that it reads at most 4 KiB of such a body, which stays readable byte for
// byte. A 2xx text/event-stream's body is watched as the caller reads it: a
// refusal its first event states (Vertex AI's in-stream 429) is learnt
// then. resp is otherwise untouched, and the caller still closes its body.
func (p *Permit) Done(resp *http.Response) {
	if !p.live {
		return
	}
	now := time.Now()
	if resp == nil {
		p.doneWith(nil, now)
		return
	}
	var m response.Meaning
	caps := capsOf(p.a.cfg.MaxDelay)
	response.Read(&m, resp, now, caps, &p.a.clock)
	if response.Stream(resp) {
		response.Watch(resp, caps, &p.a.clock, nil, p.a.learnLate)
	}
	p.doneWith(&m, now)
}

// tellInteractive tells the fleet's store at once of interactive work this
// limiter had within the reserve's idle span, for the quotas no call told
// of it yet (see fleetShare.report).
func (a *Adaptive) tellInteractive(now time.Time) {
	if ago := a.lanes.since(clockOf(now)); ago >= 0 && ago < a.lanes.reserve.Idle {
		a.fleet.report(now, ago)
	}
}

// sawFleet keeps, for the fleet's budgets, the figures of a response to a
// request from admitted, a limiter that feeds this one (the host's, before
// the response put the route in this limiter's bucket), and takes on the
// interactive work it had: that request and its class came through from,
// never through this limiter, which tells the store of them now.
func (a *Adaptive) sawFleet(from *Adaptive, m *response.Meaning) {
	if a.fleet == nil || from == nil || from == a {
		return
	}
	now := time.Now()
	a.lanes.take(&from.lanes)
	if a.fleet.saw(m, now) {
		a.tellInteractive(now)
	}
}

// Abandon settles the permit of a request that was not sent: its charge is
// given back to every quota and it stops counting as in flight.
func (p *Permit) Abandon() {
	if !p.live {
		return
	}
	p.live = false
	p.a.fleet.giveBack(p.fleet)
	p.a.abandon(p.cost)
}

// abandon undoes an admission whose request was never sent.
func (a *Adaptive) abandon(cost float64) {
	a.mu.Lock()
	a.book.Refund(cost)
	a.settle(cost)
	a.admitted.Add(-1)
	if m := thousandths(cost); m > 0 {
		a.admittedCost.Add(-m)
		a.hintedAdmits.Add(-1)
	}
	a.changedLocked()
	a.wakeGateLocked()
	a.unlock()
}
