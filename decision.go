package pacer

import (
	"math"

	"github.com/pacer-go/pacer/internal/infer"
	"github.com/pacer-go/pacer/internal/quota"

	"github.com/pacer-go/pacer/observe"
)

// decisionInput is what the pure makeDecision reads, taken by retune under
// mu once the windows have moved on to now; it is comparable, so retune
// skips an input it applied last.
type decisionInput struct {
	Started bool // a response has been seen (slow start is over)
	Quotas  int  // windows that describe the current state of a quota
	Blind   bool // a window is being looked at: one request in flight learns it

	Req, Tok quota.Pace // the tightest request and token quotas' paces

	ProbeRate    float64 // the CUBIC fallback's rate now; Inf until a throttle
	ProbeEngaged bool
	ProbeClosed  bool // the server refuses all: one look at a time
	InferTrial   bool // the window inferred from Retry-After has not yet held

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
	TokNeed  int // the largest request's cost: the token burst must hold it (R66)

	Gate   int64 // the cap on requests in flight, 0 none; in slow start its own (R52)
	Mode   observe.Mode
	Reason string // what set the request rate: "quota", "probe", "ceiling", "none"
}

// canonicalize sets what makeDecision does not read to one value: the pace
// beside an unlimited rate (a budget only bounds a finite rate's burst).
// Inputs of one canonical form get the same decision.
func (in *decisionInput) canonicalize() {
	for _, p := range [...]*quota.Pace{&in.Req, &in.Tok} {
		if math.IsInf(p.Rate, 1) {
			p.Budget, p.AtOnce, p.Spare = math.Inf(1), 0, 0
		}
	}
}

// makeDecision is the limiter's decision on s: the request rate the
// tightest of the quotas', the probe's and the ceiling's (R64), the token
// rate the tightest token quota's (R66), and the gate (R52, R53).
func makeDecision(s decisionInput) decision {
	d := decision{ReqLimit: s.Req.Rate, ReqBurst: 1, Reason: "none"}
	if !math.IsInf(s.Req.Rate, 1) {
		d.Reason = "quota"
		d.ReqBurst = int(max(1, spreadBurst(s.Req, s.Safety)))
	}
	if s.ProbeRate < d.ReqLimit {
		d.ReqLimit, d.ReqBurst, d.Reason = s.ProbeRate, int(max(1, math.Floor(s.ProbeRate/10))), "probe"
	}
	if s.Ceiling > 0 && s.Ceiling <= d.ReqLimit {
		d.ReqLimit, d.ReqBurst, d.Reason = s.Ceiling, int(s.CeilingBurst), "ceiling"
	} else if s.Ceiling > 0 {
		d.ReqBurst = min(d.ReqBurst, int(s.CeilingBurst))
	}

	d.TokLimit, d.TokNeed = s.Tok.Rate, int(math.Ceil(s.MaxCost))
	tburst := math.Ceil(s.MaxCost)
	if !math.IsInf(s.Tok.Rate, 1) {
		tburst = max(tburst, spreadBurst(s.Tok, s.Safety))
	}
	d.TokBurst = int(max(tburst, 1))

	switch {
	case !s.Started:
		d.Mode = observe.ModeSlowStart
		return d
	case s.Quotas > 0 || s.Blind:
		d.Mode = observe.ModeHeaders
	case s.ProbeEngaged || s.Ceiling == 0:
		d.Mode = observe.ModeProbing
	default:
		d.Mode = observe.ModeStatic
	}
	switch {
	case s.Blind || s.ProbeClosed:
		d.Gate = 1
	case s.InferTrial:
		d.Gate = infer.TrialInFlight
	}
	return d
}

// spreadBurst is what a quota spread at p's rate lets go at once (R64, R65),
// within the budget; the safety headroom is rounded down, but not below its
// decimal value (0.1 × 50 is 5, not the 4.999… float64 makes of it).
func spreadBurst(p quota.Pace, safety float64) float64 {
	b := math.Min(math.Floor(p.Rate), math.Floor((1-safety)*p.Budget+1e-9))
	return max(b, math.Floor(math.Min(max(p.AtOnce, p.Spare), p.Budget)+1e-9))
}
