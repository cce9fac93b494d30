package pacer

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// decide is the limiter's whole decision from what it knows: each case is
// one situation and what follows from it.
func TestDecide(t *testing.T) {
	inf := math.Inf(1)
	base := decisionInput{
		started: true, reqRate: inf, reqBudget: inf, tokRate: inf, tokBudget: inf,
		probeRate: inf, safety: 0.9,
	}
	with := func(f func(*decisionInput)) decisionInput { in := base; f(&in); return in }
	for _, c := range []struct {
		name string
		in   decisionInput
		want decision
	}{{
		name: "before the first response: unlimited, slow start keeps its gate",
		in:   with(func(in *decisionInput) { in.started = false }),
		want: decision{reqLimit: inf, reqBurst: 1, tokLimit: inf, tokBurst: 1, keepGate: true, mode: ModeSlowStart, reason: "none"},
	}, {
		name: "a server that says nothing and never refused: unlimited, probing",
		in:   base,
		want: decision{reqLimit: inf, reqBurst: 1, tokLimit: inf, tokBurst: 1, mode: ModeProbing, reason: "none"},
	}, {
		name: "a quota that affords the work: its budget is the gate, the rate unlimited",
		in:   with(func(in *decisionInput) { in.quotas, in.reqBudget = 1, 4000 }),
		want: decision{reqLimit: inf, reqBurst: 1, tokLimit: inf, tokBurst: 1, mode: ModeHeaders, reason: "none"},
	}, {
		name: "a quota spread to its reset: its rate, a burst of the safety's headroom",
		in:   with(func(in *decisionInput) { in.quotas, in.reqRate, in.reqBudget = 1, 20, 50 }),
		want: decision{reqLimit: 20, reqBurst: 5, tokLimit: inf, tokBurst: 1, mode: ModeHeaders, reason: "quota"},
	}, {
		name: "a spread quota's burst is at most a second's worth",
		in:   with(func(in *decisionInput) { in.quotas, in.reqRate, in.reqBudget = 1, 2.5, 1000 }),
		want: decision{reqLimit: 2.5, reqBurst: 2, tokLimit: inf, tokBurst: 1, mode: ModeHeaders, reason: "quota"},
	}, {
		name: "the probe below the quota: its rate, a tenth of a second's burst",
		in:   with(func(in *decisionInput) { in.quotas, in.reqRate, in.reqBudget, in.probeRate = 1, 20, 50, 12 }),
		want: decision{reqLimit: 12, reqBurst: 1, tokLimit: inf, tokBurst: 1, mode: ModeHeaders, reason: "probe"},
	}, {
		name: "throttled with no headers: probing at the probe's rate",
		in:   with(func(in *decisionInput) { in.probeRate, in.probeEngaged = 45, true }),
		want: decision{reqLimit: 45, reqBurst: 4, tokLimit: inf, tokBurst: 1, mode: ModeProbing, reason: "probe"},
	}, {
		name: "a server refusing everything: one look at a time",
		in:   with(func(in *decisionInput) { in.probeRate, in.probeEngaged, in.probeClosed = 3, true, true }),
		want: decision{reqLimit: 3, reqBurst: 1, tokLimit: inf, tokBurst: 1, gate: 1, mode: ModeProbing, reason: "probe"},
	}, {
		name: "a window being looked at: one request in flight",
		in:   with(func(in *decisionInput) { in.quotas, in.blind, in.reqBudget = 1, true, 0 }),
		want: decision{reqLimit: inf, reqBurst: 1, tokLimit: inf, tokBurst: 1, gate: 1, mode: ModeHeaders, reason: "none"},
	}, {
		name: "an inferred window on trial: a few in flight",
		in:   with(func(in *decisionInput) { in.quotas, in.inferTrial, in.reqBudget = 1, true, 90 }),
		want: decision{reqLimit: inf, reqBurst: 1, tokLimit: inf, tokBurst: 1, gate: inferTrialInFlight, mode: ModeHeaders, reason: "none"},
	}, {
		name: "a ceiling below everything: its rate and burst, static",
		in:   with(func(in *decisionInput) { in.ceiling, in.ceilingBurst = 5, 2 }),
		want: decision{reqLimit: 5, reqBurst: 2, tokLimit: inf, tokBurst: 1, mode: ModeStatic, reason: "ceiling"},
	}, {
		name: "a ceiling above the quota caps only the burst",
		in: with(func(in *decisionInput) {
			in.quotas, in.reqRate, in.reqBudget, in.ceiling, in.ceilingBurst = 1, 20, 500, 100, 3
		}),
		want: decision{reqLimit: 20, reqBurst: 3, tokLimit: inf, tokBurst: 1, mode: ModeHeaders, reason: "quota"},
	}, {
		name: "a token quota: its rate, a burst that holds the largest request",
		in:   with(func(in *decisionInput) { in.quotas, in.tokRate, in.tokBudget, in.maxCost = 1, 1000, 20000, 2500.5 }),
		want: decision{reqLimit: inf, reqBurst: 1, tokLimit: 1000, tokBurst: 2501, tokNeed: 2501, mode: ModeHeaders, reason: "none"},
	}} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, decide(c.in))
		})
	}
}
