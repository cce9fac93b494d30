package integrations_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/retry"
)

// anthropicClient is the SDK on pacer, with sdkRetries of the SDK's own
// retries (-1: the SDK's default, 2).
func anthropicClient(tr *pacer.Transport, sdkRetries int) anthropic.Client {
	opts := []option.RequestOption{
		option.WithBaseURL("http://api.anthropic.test/"),
		option.WithAPIKey("sk-ant-test"),
		option.WithHTTPClient(&http.Client{Transport: tr}),
	}
	if sdkRetries >= 0 {
		opts = append(opts, option.WithMaxRetries(sdkRetries))
	}
	return anthropic.NewClient(opts...)
}

// message is the recommended call: no cost stated (pacer learns it from
// the token quotas' headers).
func message(ctx context.Context, c anthropic.Client) error { return messageJob(ctx, c, hi) }

func messageJob(ctx context.Context, c anthropic.Client, j llmJob) error {
	_, err := c.Messages.New(ctx, anthropic.MessageNewParams{
		Model:     anthropic.ModelClaudeSonnet4_5,
		MaxTokens: int64(j.maxOut),
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(j.prompt))},
	})
	return err
}

func TestAnthropicFanOut(t *testing.T) {
	for _, sc := range []struct {
		name       string
		sdkRetries int
		opts       []pacer.Option
	}{
		{"recommended: SDK retries 0, pacer retries", 0, nil},
		{"SDK default retries (2), pacer default", -1, nil},
	} {
		t.Run(sc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fake{provider: anthropicAPI, limit: limit, window: window, latency: latency,
					tokenLimit: ampleTokens, outputLimit: ampleTokens}
				tr := pacer.NewTransport(inMemory{f}, sc.opts...)
				c := anthropicClient(tr, sc.sdkRetries)
				o := fanOut(calls, workers, func(int) error { return message(background(), c) })
				s := f.stats()
				min := quotaMinimum(calls, limit, window)
				record(t, row{sdk: "anthropic-sdk-go", scenario: sc.name, calls: calls, requests: s.requests, throttled: s.throttled,
					errs: o.errs, refusals: o.refusals, pacerRetries: retries(tr), elapsed: o.elapsed, slowest: o.slowest,
					ratio: float64(o.elapsed) / float64(min)})
				checkPaced(t, o, s, retries(tr), min, paceBound)
			})
		})
	}
}

// Anthropic's 529 overloaded_error is load shedding, not a rate limit: pacer
// retries it like a 503, under its retry budget, and does not slow down for
// it; with the SDK's retries off no call fails for a scattered 529.
func TestAnthropicOverloaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{provider: anthropicAPI, limit: limit, window: window, latency: latency, overloadedEvery: 25}
		tr := pacer.NewTransport(inMemory{f})
		c := anthropicClient(tr, 0)
		o := fanOut(100, workers, func(int) error { return message(background(), c) })
		s := f.stats()
		record(t, row{sdk: "anthropic-sdk-go", scenario: "every 25th request 529 overloaded, recommended", calls: 100, requests: s.requests,
			throttled: s.throttled, errs: o.errs, refusals: o.refusals, pacerRetries: retries(tr), elapsed: o.elapsed, slowest: o.slowest})
		if o.errs != 0 || s.overloaded == 0 {
			t.Errorf("%d caller errors for %d 529s; first %v", o.errs, s.overloaded, o.firstErr)
		}
		if s.requests > 100+s.overloaded {
			t.Errorf("%d requests for 100 calls and %d 529s: retries multiplied", s.requests, s.overloaded)
		}
	})
}

func TestAnthropicRefusal(t *testing.T) {
	for _, sc := range []struct {
		name       string
		sdkRetries int
	}{
		{"refusal, recommended (SDK retries 0)", 0},
		{"refusal, SDK default retries (2)", -1},
	} {
		t.Run(sc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fake{provider: anthropicAPI, limit: 20, window: 4 * time.Second, latency: latency}
				tr := pacer.NewTransport(inMemory{f}, pacer.WithMaxWait(300*time.Millisecond))
				c := anthropicClient(tr, sc.sdkRetries)
				o := fanOut(60, workers, func(int) error { return message(background(), c) })
				s := f.stats()
				record(t, row{sdk: "anthropic-sdk-go", scenario: sc.name, calls: 60, requests: s.requests, throttled: s.throttled,
					errs: o.errs, refusals: o.refusals, pacerRetries: retries(tr), elapsed: o.elapsed, slowest: o.slowest})
				if s.throttled != 0 {
					t.Errorf("server throttled %d requests", s.throttled)
				}
				if sc.sdkRetries == 0 && (o.errs != 40 || o.refusals != o.errs || o.slowestErr > refusalBound) {
					t.Errorf("errors %d, refusals %d, slowest refusal %v; want 40 immediate refusals; first: %v", o.errs, o.refusals, o.slowestErr, o.firstErr)
				}
				if sc.sdkRetries != 0 && o.slowest < 500*time.Millisecond {
					t.Errorf("SDK retries on: slowest call %v; the SDK no longer backs off on a refusal, update the README", o.slowest)
				}
			})
		})
	}
}

func TestAnthropicStorm(t *testing.T) {
	for _, sc := range []struct {
		name       string
		sdkRetries int
	}{
		{"storm + x-should-retry: true, recommended", 0},
		{"storm + x-should-retry: true, SDK default retries (2)", -1},
	} {
		t.Run(sc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fake{provider: anthropicAPI, limit: limit, window: window, latency: latency, storm: stormFor, shouldRetry: "true"}
				tr := pacer.NewTransport(inMemory{f})
				c := anthropicClient(tr, sc.sdkRetries)
				const n = 4
				o := fanOut(n, n, func(int) error { return message(background(), c) })
				s := f.stats()
				record(t, row{sdk: "anthropic-sdk-go", scenario: sc.name, calls: n, requests: s.requests, throttled: s.throttled,
					errs: o.errs, refusals: o.refusals, pacerRetries: retries(tr), elapsed: o.elapsed, slowest: o.slowest})
				if sc.sdkRetries == 0 && s.requests > n+retries(tr) {
					t.Errorf("%d server requests > %d calls + %d pacer retries", s.requests, n, retries(tr))
				}
				if sc.sdkRetries != 0 && s.requests <= n*(1+retry.DefaultMax) {
					t.Errorf("SDK retries on: %d server requests for %d calls, no multiplication; update the README", s.requests, n)
				}
			})
		})
	}
}
