package pacer

import "math"

// The limiter's decision, apart from the state it is made from: retune
// (retune.go) moves every quota's window on to now and reads what the
// decision needs into a decisionInput; decide turns that into the
// buckets' rates and bursts, the in-flight gate and the mode; retune
// applies that in one place. decide is a pure function, tested directly
// (decide_test.go).

// decisionInput is what the decision reads, taken under Adaptive.mu once the
// windows have moved on to now.
type decisionInput struct {
	started bool // a response has been seen (slow start is over)
	quotas  int  // windows that describe the current state of a quota
	blind   bool // a window is being looked at: one request in flight learns it

	// The tightest quota of each kind: its rate (Inf when the budget is the
	// only gate) and what its budget holds above what it keeps (Inf: none).
	reqRate, reqBudget float64
	tokRate, tokBudget float64

	probeRate    float64 // the CUBIC fallback's rate now; Inf until a throttle
	probeEngaged bool
	probeClosed  bool // the server refuses all: one look at a time
	inferTrial   bool // the window inferred from Retry-After has not yet held

	ceiling, ceilingBurst float64 // AdaptiveConfig's; ceiling 0: none
	maxCost               float64 // the largest token cost seen
	safety                float64
}

// decision is what retune applies.
type decision struct {
	reqLimit float64 // requests per second; Inf: unlimited
	reqBurst int
	tokLimit float64 // tokens per second; Inf: unlimited
	tokBurst int
	tokNeed  int // the largest request's cost: the token burst must hold it

	// gate caps the requests in flight: 0 none, n > 0 at most n; keepGate
	// leaves slow start's gate as it is.
	gate     int64
	keepGate bool
	mode     Mode
	// reason names what set the request rate, for the log: "quota",
	// "probe", "ceiling" or "none".
	reason string
}

// decide is the limiter's decision on s.
//
// Requests: the tightest of the quotas, the probe and the ceiling. A quota
// that affords what is asked leaves the rate unlimited (its budget is the
// gate, charged at admission); one spread to its reset gives its rate, with
// a burst of at most a second's worth and no more than the headroom the
// safety factor leaves in its budget, so a spread quota is spread, not
// dumped. The probe's burst is a tenth of a second's worth (CUBIC's rate is
// an estimate: a burst at it would be the overshoot). A ceiling below the
// rest sets rate and burst; above, it still caps the burst.
//
// Tokens: the tightest token quota's rate; the burst holds at least the
// largest request seen, or a request of that cost would never fit.
//
// The gate: one request at a time while a window is looked at or the server
// refuses everything (the probe is closed); at most inferTrialInFlight while
// an inferred window is on trial; otherwise none. Before the first response
// slow start's gate stays.
func decide(s decisionInput) decision {
	d := decision{reqLimit: s.reqRate, reqBurst: 1, reason: "none"}
	if !math.IsInf(s.reqRate, 1) {
		d.reason = "quota"
		d.reqBurst = int(max(1, math.Min(math.Floor(s.reqRate), headroom(s.safety, s.reqBudget))))
	}
	if s.probeRate < d.reqLimit {
		d.reqLimit, d.reqBurst, d.reason = s.probeRate, int(max(1, math.Floor(s.probeRate/10))), "probe"
	}
	if s.ceiling > 0 {
		if s.ceiling <= d.reqLimit {
			d.reqLimit, d.reqBurst, d.reason = s.ceiling, int(s.ceilingBurst), "ceiling"
		} else {
			d.reqBurst = min(d.reqBurst, int(s.ceilingBurst))
		}
	}

	d.tokLimit, d.tokNeed = s.tokRate, int(math.Ceil(s.maxCost))
	tburst := math.Ceil(s.maxCost)
	if !math.IsInf(s.tokRate, 1) {
		tburst = max(tburst, math.Min(math.Floor(s.tokRate), headroom(s.safety, s.tokBudget)))
	}
	d.tokBurst = int(max(tburst, 1))

	switch {
	case !s.started:
		d.mode = ModeSlowStart
	case s.quotas > 0 || s.blind:
		d.mode = ModeHeaders
	case s.probeEngaged || s.ceiling == 0:
		d.mode = ModeProbing
	default:
		d.mode = ModeStatic
	}
	switch {
	case !s.started:
		d.keepGate = true
	case s.blind || s.probeClosed:
		d.gate = 1
	case s.inferTrial:
		d.gate = inferTrialInFlight
	}
	return d
}

// headroom is the whole units the safety factor leaves above a budget's
// share: (1 - safety) × budget, rounded down, but not below what it is in
// decimal (0.1 × 50 is 5, not the 4.999… float64 makes of it).
func headroom(safety, budget float64) float64 {
	return math.Floor((1-safety)*budget + 1e-9)
}
