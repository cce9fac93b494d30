package integrations_test

import (
	"context"
	"os"
	"testing"
	"testing/synctest"

	"github.com/pacer-go/pacer"
)

// The LLM SDKs' fan-out on a token quota, charged with pacer.WithCost (the
// request quota is 100 per window, the token quota 40 calls' worth).
//
// It is off unless PACER_TOKEN_QUOTA=1 because the core misbehaves here
// (reported on issue 14): it paces a token quota about 0.19 s per window
// slower than a request quota (1.22-1.34× the minimum), and with
// anthropic-sdk-go, whose requests carry a 10-minute deadline, about one run
// in eight under -race stalls: waiters are not woken although the quota
// affords them, until their deadline ("next request allowed in 0s: context
// deadline exceeded"; runs seen: 25 and 61 of 240 calls failed after 20 and
// 40 minutes of virtual time). openai-go (no deadline) did not stall in 14
// runs. Reproduce with
//
//	PACER_TOKEN_QUOTA=1 go test -race -count=8 -run 'TokenQuota/anthropic' -v .
//
// Turn it on in CI once the core is fixed, and lower tokenPaceBound to
// paceBound.
func TestTokenQuotaFanOut(t *testing.T) {
	if os.Getenv("PACER_TOKEN_QUOTA") == "" {
		t.Skip("core bug with token quotas (issue 14): set PACER_TOKEN_QUOTA=1 to run")
	}
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
				tr := pacer.NewTransport(inMemory{f}, pacer.WithRetryNonIdempotent())
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
