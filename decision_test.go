package pacer

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/pacer-go/pacer/internal/quota"

	"github.com/pacer-go/pacer/observe"
)

// makeDecision is the limiter's whole decision from what it knows: each case is
// one situation and what follows from it.
func TestDecision(t *testing.T) {
	inf := math.Inf(1)
	base := decisionInput{
		Started: true, Req: quota.Pace{Rate: inf, Budget: inf}, Tok: quota.Pace{Rate: inf, Budget: inf},
		ProbeRate: inf, Safety: 0.9,
	}
	with := func(f func(*decisionInput)) decisionInput { in := base; f(&in); return in }
	for _, c := range []struct {
		name string
		in   decisionInput
		want decision
	}{{
		name: "before the first response: unlimited, slow start keeps its gate",
		in:   with(func(in *decisionInput) { in.Started = false }),
		want: decision{ReqLimit: inf, ReqBurst: 1, TokLimit: inf, TokBurst: 1, Mode: observe.ModeSlowStart, Reason: "none"},
	}, {
		name: "a server that says nothing and never refused: unlimited, probing",
		in:   base,
		want: decision{ReqLimit: inf, ReqBurst: 1, TokLimit: inf, TokBurst: 1, Mode: observe.ModeProbing, Reason: "none"},
	}, {
		name: "a quota that affords the work: its budget is the gate, the rate unlimited",
		in:   with(func(in *decisionInput) { in.Quotas, in.Req.Budget = 1, 4000 }),
		want: decision{ReqLimit: inf, ReqBurst: 1, TokLimit: inf, TokBurst: 1, Mode: observe.ModeHeaders, Reason: "none"},
	}, {
		name: "a quota spread to its reset: its rate, a burst of the safety's headroom",
		in:   with(func(in *decisionInput) { in.Quotas, in.Req.Rate, in.Req.Budget = 1, 20, 50 }),
		want: decision{ReqLimit: 20, ReqBurst: 5, TokLimit: inf, TokBurst: 1, Mode: observe.ModeHeaders, Reason: "quota"},
	}, {
		name: "a quota others spend from, far inside it: its rate, a burst of what they leave beyond each one's floor",
		in:   with(func(in *decisionInput) { in.Quotas, in.Req.Rate, in.Req.Budget, in.Req.Spare = 1, 1.9, 589, 499.6 }),
		want: decision{ReqLimit: 1.9, ReqBurst: 499, TokLimit: inf, TokBurst: 1, Mode: observe.ModeHeaders, Reason: "quota"},
	}, {
		name: "a token bucket's contents go at once, its refill at the rate",
		in:   with(func(in *decisionInput) { in.Quotas, in.Req.Rate, in.Req.Budget, in.Req.AtOnce = 1, 30, 450, 440.5 }),
		want: decision{ReqLimit: 30, ReqBurst: 440, TokLimit: inf, TokBurst: 1, Mode: observe.ModeHeaders, Reason: "quota"},
	}, {
		name: "what goes at once stays within the tightest budget",
		in:   with(func(in *decisionInput) { in.Quotas, in.Req.Rate, in.Req.Budget, in.Req.AtOnce = 2, 30, 100, 440 }),
		want: decision{ReqLimit: 30, ReqBurst: 100, TokLimit: inf, TokBurst: 1, Mode: observe.ModeHeaders, Reason: "quota"},
	}, {
		name: "a token quota's contents go at once too",
		in: with(func(in *decisionInput) {
			in.Quotas, in.Tok.Rate, in.Tok.Budget, in.Tok.AtOnce, in.MaxCost = 1, 500, 9000, 8000, 300
		}),
		want: decision{ReqLimit: inf, ReqBurst: 1, TokLimit: 500, TokBurst: 8000, TokNeed: 300, Mode: observe.ModeHeaders, Reason: "none"},
	}, {
		name: "a spread quota's burst is at most a second's worth",
		in:   with(func(in *decisionInput) { in.Quotas, in.Req.Rate, in.Req.Budget = 1, 2.5, 1000 }),
		want: decision{ReqLimit: 2.5, ReqBurst: 2, TokLimit: inf, TokBurst: 1, Mode: observe.ModeHeaders, Reason: "quota"},
	}, {
		name: "the probe below the quota: its rate, a tenth of a second's burst",
		in:   with(func(in *decisionInput) { in.Quotas, in.Req.Rate, in.Req.Budget, in.ProbeRate = 1, 20, 50, 12 }),
		want: decision{ReqLimit: 12, ReqBurst: 1, TokLimit: inf, TokBurst: 1, Mode: observe.ModeHeaders, Reason: "probe"},
	}, {
		name: "throttled with no headers: probing at the probe's rate",
		in:   with(func(in *decisionInput) { in.ProbeRate, in.ProbeEngaged = 45, true }),
		want: decision{ReqLimit: 45, ReqBurst: 4, TokLimit: inf, TokBurst: 1, Mode: observe.ModeProbing, Reason: "probe"},
	}, {
		name: "a server refusing everything: one look at a time",
		in:   with(func(in *decisionInput) { in.ProbeRate, in.ProbeEngaged, in.ProbeClosed = 3, true, true }),
		want: decision{ReqLimit: 3, ReqBurst: 1, TokLimit: inf, TokBurst: 1, Gate: 1, Mode: observe.ModeProbing, Reason: "probe"},
	}, {
		name: "a window being looked at: one request in flight",
		in:   with(func(in *decisionInput) { in.Quotas, in.Blind, in.Req.Budget = 1, true, 0 }),
		want: decision{ReqLimit: inf, ReqBurst: 1, TokLimit: inf, TokBurst: 1, Gate: 1, Mode: observe.ModeHeaders, Reason: "none"},
	}, {
		name: "an inferred window on trial: a few in flight",
		in:   with(func(in *decisionInput) { in.Quotas, in.InferTrial, in.Req.Budget = 1, true, 90 }),
		want: decision{ReqLimit: inf, ReqBurst: 1, TokLimit: inf, TokBurst: 1, Gate: 8, Mode: observe.ModeHeaders, Reason: "none"},
	}, {
		name: "a Ceiling below everything: its rate and burst, static",
		in:   with(func(in *decisionInput) { in.Ceiling, in.CeilingBurst = 5, 2 }),
		want: decision{ReqLimit: 5, ReqBurst: 2, TokLimit: inf, TokBurst: 1, Mode: observe.ModeStatic, Reason: "ceiling"},
	}, {
		name: "a Ceiling above the quota caps only the burst",
		in: with(func(in *decisionInput) {
			in.Quotas, in.Req.Rate, in.Req.Budget, in.Ceiling, in.CeilingBurst = 1, 20, 500, 100, 3
		}),
		want: decision{ReqLimit: 20, ReqBurst: 3, TokLimit: inf, TokBurst: 1, Mode: observe.ModeHeaders, Reason: "quota"},
	}, {
		name: "a token quota: its rate, a burst that holds the largest request",
		in:   with(func(in *decisionInput) { in.Quotas, in.Tok.Rate, in.Tok.Budget, in.MaxCost = 1, 1000, 20000, 2500.5 }),
		want: decision{ReqLimit: inf, ReqBurst: 1, TokLimit: 1000, TokBurst: 2501, TokNeed: 2501, Mode: observe.ModeHeaders, Reason: "none"},
	}} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, makeDecision(c.in))
		})
	}
}

// canonical is in, canonicalised.
func canonical(in decisionInput) decisionInput {
	in.canonicalize()
	return in
}

// Inputs with one canonical form decide alike: a budget beside an unlimited
// rate is not read, a budget beside a finite one is.
func TestCanonicalInputsDecideAlike(t *testing.T) {
	inf := math.Inf(1)
	a := decisionInput{Started: true, Quotas: 1, Req: quota.Pace{Rate: inf, Budget: 40}, Tok: quota.Pace{Rate: inf, Budget: 7}, ProbeRate: inf, Safety: 0.9}
	b := a
	b.Req.Budget, b.Tok.Budget = 4000, 0
	assert.Equal(t, canonical(a), canonical(b))
	assert.Equal(t, makeDecision(a), makeDecision(b))

	a.Req.Rate, b.Req.Rate = 20, 20
	assert.NotEqual(t, canonical(a), canonical(b), "a finite rate's budget bounds its burst")
	assert.NotEqual(t, makeDecision(a).ReqBurst, makeDecision(b).ReqBurst)
}
