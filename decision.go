package pacer

import (
	"math"

	"github.com/pacer-go/pacer/internal/quota"
	"github.com/pacer-go/pacer/observe"
)

// The decision, apart from the state it is made from: retune moves every
// quota's window on to now and reads what the decision needs into a
// decisionInput; makeDecision turns that into the buckets' rates and
// bursts, the in-flight gate and the mode, which retune applies in one
// place. makeDecision is a pure function: the same input gives the same
// decision, so it is tested case by case, and retune skips it when nothing
// it reads has changed.

// decisionInput is what the decision reads, taken under the limiter's lock once the
// windows have moved on to now. It is comparable: the limiter keeps the last
// one it applied.
type decisionInput struct {
	Started bool // a response has been seen (slow start is over)
	Quotas  int  // windows that describe the current state of a quota
	Blind   bool // a window is being looked at: one request in flight learns it

	// The tightest request and token quotas' paces (quota.Pace): the rate
	// (Inf: the budget is the only gate), what the budget holds above what
	// it keeps, what may go at once beside the rate and what may build up.
	Req, Tok quota.Pace

	ProbeRate    float64 // the CUBIC fallback's rate now; Inf until a throttle
	ProbeEngaged bool
	ProbeClosed  bool  // the server refuses all: one look at a time
	InferTrial   bool  // the window inferred from Retry-After has not yet held
	TrialGate    int64 // the requests in flight allowed while it is on trial

	Ceiling, CeilingBurst float64 // AdaptiveConfig's; Ceiling 0: none
	MaxCost               float64 // the largest token cost seen
	Safety                float64
}

// decision is what the limiter applies.
type decision struct {
	ReqLimit float64 // requests per second; Inf: unlimited
	ReqBurst int
	TokLimit float64 // tokens per second; Inf: unlimited
	TokBurst int
	TokNeed  int // the largest request's cost: the token burst must hold it

	// Gate caps the requests in flight: 0 none, n > 0 at most n; KeepGate
	// leaves slow start's gate as it is.
	Gate     int64
	KeepGate bool
	Mode     observe.Mode
	// Reason names what set the request rate, for the log: "quota",
	// "probe", "ceiling" or "none".
	Reason string
}

// canonicalize sets what makeDecision does not read in in to one value: a budget
// beside an unlimited rate (makeDecision reads a budget only to bound the burst of
// a finite rate; see headroom). Two inputs with the same canonical form get
// the same decision, so a caller that keeps the last one it applied can
// skip deciding again. In place: the limiter canonicalises an Input on
// every response, and copying one in and out was 2.5% of a GitHub-style
// response's CPU time through the Transport.
func (in *decisionInput) canonicalize() {
	if math.IsInf(in.Req.Rate, 1) {
		in.Req.Budget, in.Req.AtOnce, in.Req.Spare = math.Inf(1), 0, 0
	}
	if math.IsInf(in.Tok.Rate, 1) {
		in.Tok.Budget, in.Tok.AtOnce, in.Tok.Spare = math.Inf(1), 0, 0
	}
}

// makeDecision is the limiter's decision on s.
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
// refuses everything (the probe is closed); at most TrialGate while an
// inferred window is on trial; otherwise none. Before the first response
// slow start's gate stays.
func makeDecision(s decisionInput) decision {
	d := decision{ReqLimit: s.Req.Rate, ReqBurst: 1, Reason: "none"}
	if !math.IsInf(s.Req.Rate, 1) {
		d.Reason = "quota"
		d.ReqBurst = int(max(1, spreadBurst(s.Req.Rate, s.Req.Budget, s.Safety, max(s.Req.AtOnce, s.Req.Spare))))
	}
	if s.ProbeRate < d.ReqLimit {
		d.ReqLimit, d.ReqBurst, d.Reason = s.ProbeRate, int(max(1, math.Floor(s.ProbeRate/10))), "probe"
	}
	if s.Ceiling > 0 {
		if s.Ceiling <= d.ReqLimit {
			d.ReqLimit, d.ReqBurst, d.Reason = s.Ceiling, int(s.CeilingBurst), "ceiling"
		} else {
			d.ReqBurst = min(d.ReqBurst, int(s.CeilingBurst))
		}
	}

	d.TokLimit, d.TokNeed = s.Tok.Rate, int(math.Ceil(s.MaxCost))
	tburst := math.Ceil(s.MaxCost)
	if !math.IsInf(s.Tok.Rate, 1) {
		tburst = max(tburst, spreadBurst(s.Tok.Rate, s.Tok.Budget, s.Safety, max(s.Tok.AtOnce, s.Tok.Spare)))
	}
	d.TokBurst = int(max(tburst, 1))

	switch {
	case !s.Started:
		d.Mode = observe.ModeSlowStart
	case s.Quotas > 0 || s.Blind:
		d.Mode = observe.ModeHeaders
	case s.ProbeEngaged || s.Ceiling == 0:
		d.Mode = observe.ModeProbing
	default:
		d.Mode = observe.ModeStatic
	}
	switch {
	case !s.Started:
		d.KeepGate = true
	case s.Blind || s.ProbeClosed:
		d.Gate = 1
	case s.InferTrial:
		d.Gate = s.TrialGate
	}
	return d
}

// spreadBurst is what a quota spread at rate lets go at once: at most a
// second's worth and no more than the headroom the safety factor leaves in
// its budget, or what it says may go at once (atOnce), within the budget.
func spreadBurst(rate, budget, safety, atOnce float64) float64 {
	b := math.Min(math.Floor(rate), headroom(safety, budget))
	return max(b, math.Floor(math.Min(atOnce, budget)+1e-9))
}

// headroom is the whole units the safety factor leaves above a budget's
// share: (1 - safety) × budget, rounded down, but not below what it is in
// decimal (0.1 × 50 is 5, not the 4.999… float64 makes of it).
func headroom(safety, budget float64) float64 {
	return math.Floor((1-safety)*budget + 1e-9)
}
