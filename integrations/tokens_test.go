package integrations_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/pacer-go/pacer"
)

// The LLM SDKs' fan-out on a token quota, charged with pacer.WithCost (the
// request quota is 100 per window, the token quota 40 calls' worth).
//
// A token quota runs at about 1.23× the minimum, against 1.05× for a
// request quota: pacer keeps a tenth of a token quota back for cost
// estimates that fall short, so a window's last tenth waits for the next.
// (The stall seen while the core was being rebuilt, waiters not woken until
// their deadline, no longer reproduces: 0 in 16 runs, 8 of them under
// -race.)
func TestTokenQuotaFanOut(t *testing.T) {
	for _, sdk := range []struct {
		name     string
		provider provider
		call     func(tr *pacer.Transport) func(context.Context) error
	}{
		{"openai-go", openAI, func(tr *pacer.Transport) func(context.Context) error {
			c := openAIClient(tr, 0)
			return func(ctx context.Context) error { return chat(ctx, c) }
		}},
		{"anthropic-sdk-go", anthropicAPI, func(tr *pacer.Transport) func(context.Context) error {
			c := anthropicClient(tr, 0)
			return func(ctx context.Context) error { return message(ctx, c) }
		}},
	} {
		t.Run(sdk.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fake{provider: sdk.provider, limit: 100, tokenLimit: limit * maxTokens, window: window, latency: latency}
				tr := pacer.NewTransport(inMemory{f})
				call := sdk.call(tr)
				o := fanOut(calls, workers, func(int) error { return call(background()) })
				s := f.stats()
				min := quotaMinimum(calls, limit, window)
				record(t, row{sdk: sdk.name, scenario: "recommended, token quota binds (WithCost)", calls: calls, requests: s.requests,
					throttled: s.throttled, errs: o.errs, refusals: o.refusals, pacerRetries: retries(tr), elapsed: o.elapsed,
					slowest: o.slowest, ratio: float64(o.elapsed) / float64(min)})
				checkPaced(t, o, s, retries(tr), min, tokenPaceBound)
			})
		})
	}
}
