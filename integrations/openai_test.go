package integrations_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/retry"
)

// maxTokens is the max_completion_tokens (max_tokens) of most tests' calls.
const maxTokens = 500

// ampleTokens is a token quota a minute that the request-bound tests never
// come near: the fakes state it, as the APIs always do, without its binding.
const ampleTokens = 1_000_000

// openAIClient is the SDK on pacer against f, with sdkRetries of the SDK's
// own retries (-1: the SDK's default, 2).
func openAIClient(tr *pacer.Transport, sdkRetries int) openai.Client {
	opts := []option.RequestOption{
		option.WithBaseURL("http://api.openai.test/v1/"),
		option.WithAPIKey("sk-test"),
		option.WithHTTPClient(&http.Client{Transport: tr}),
	}
	if sdkRetries >= 0 {
		opts = append(opts, option.WithMaxRetries(sdkRetries))
	}
	return openai.NewClient(opts...)
}

// llmJob is one call to an LLM API: its prompt and the most tokens it lets
// the model write (max_completion_tokens, max_tokens).
type llmJob struct {
	prompt string
	maxOut int
}

// hi is the call most tests make: a one-token prompt.
var hi = llmJob{prompt: "hi", maxOut: maxTokens}

// promptTokens is the prompt's size as the providers (and the fake)
// estimate it: a token per 4 characters.
func (j llmJob) promptTokens() int { return (len(j.prompt) + 3) / 4 }

// cost is what the job costs OpenAI's tokens quota: its prompt and its
// whole completion, counted up front.
func (j llmJob) cost() int { return j.promptTokens() + j.maxOut }

// chat is the recommended call: no cost stated (pacer learns it from the
// token quota's headers).
func chat(ctx context.Context, c openai.Client) error { return chatJob(ctx, c, hi) }

func chatJob(ctx context.Context, c openai.Client, j llmJob) error {
	_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:               openai.ChatModelGPT4oMini,
		MaxCompletionTokens: openai.Int(int64(j.maxOut)),
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage(j.prompt)},
	})
	return err
}

// The recommended setup: the SDK's retries off, pacer retrying (chat
// completions are safe to replay after a 429), and no cost stated: pacer
// learns what a call costs the token quota from its x-ratelimit-*-tokens
// headers (here the request quota binds; TestTokenQuotaSaturated has the
// token quota bind).
func TestOpenAIFanOut(t *testing.T) {
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
				f := &fake{provider: openAI, limit: limit, window: window, latency: latency, tokenLimit: ampleTokens}
				tr := pacer.NewTransport(inMemory{f}, sc.opts...)
				c := openAIClient(tr, sc.sdkRetries)
				o := fanOut(calls, workers, func(int) error { return chat(background(), c) })
				s := f.stats()
				min := quotaMinimum(calls, limit, window)
				record(t, row{sdk: "openai-go", scenario: sc.name, calls: calls, requests: s.requests, throttled: s.throttled,
					errs: o.errs, refusals: o.refusals, pacerRetries: retries(tr), elapsed: o.elapsed, slowest: o.slowest, ratio: float64(o.elapsed) / float64(min)})
				// Within the quota both setups pace cleanly: the choice is
				// made by the refusal and storm scenarios below.
				checkPaced(t, o, s, retries(tr), min, paceBound)
			})
		})
	}
}

// A refusal: pacer's WithMaxWait(300ms) against 20 calls per 4 s. With the
// SDK's retries on, the SDK takes *pacer.RateLimitError for a connection
// failure and retries it after 0.5-8 s of its own backoff; with them off the
// caller gets the RateLimitError at once and can come back at RetryAt.
func TestOpenAIRefusal(t *testing.T) {
	for _, sc := range []struct {
		name       string
		sdkRetries int
	}{
		{"refusal, recommended (SDK retries 0)", 0},
		{"refusal, SDK default retries (2)", -1},
	} {
		t.Run(sc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fake{provider: openAI, limit: 20, window: 4 * time.Second, latency: latency}
				tr := pacer.NewTransport(inMemory{f}, pacer.WithMaxWait(300*time.Millisecond))
				c := openAIClient(tr, sc.sdkRetries)
				o := fanOut(60, workers, func(int) error { return chat(background(), c) })
				s := f.stats()
				record(t, row{sdk: "openai-go", scenario: sc.name, calls: 60, requests: s.requests, throttled: s.throttled,
					errs: o.errs, refusals: o.refusals, pacerRetries: retries(tr), elapsed: o.elapsed, slowest: o.slowest})
				if s.throttled != 0 {
					t.Errorf("server throttled %d requests", s.throttled)
				}
				if sc.sdkRetries == 0 {
					// Every failure is pacer's refusal, visible to errors.As,
					// and returned without sleeping.
					if o.errs != 40 || o.refusals != o.errs {
						t.Errorf("errors %d, refusals %d; want 40 refusals (60 calls, 20 afforded); first: %v", o.errs, o.refusals, o.firstErr)
					}
					t.Logf("slowest call %v, slowest refusal %v", o.slowest, o.slowestErr)
					if o.slowestErr > refusalBound {
						t.Errorf("slowest refusal took %v; a refusal must come at once", o.slowestErr)
					}
				}
			})
		})
	}
}

// A deadline the quota cannot meet: the next window is 4 s away and the
// caller gives 1 s. Recommended: an immediate *pacer.RateLimitError whose
// Unwrap is context.DeadlineExceeded. With the SDK's retries: the SDK sleeps
// its backoff until the deadline and returns the bare context error.
func TestOpenAIDeadline(t *testing.T) {
	for _, sdkRetries := range []int{0, -1} {
		synctest.Test(t, func(t *testing.T) {
			f := &fake{provider: openAI, limit: 1, window: 4 * time.Second, latency: latency}
			tr := pacer.NewTransport(inMemory{f})
			c := openAIClient(tr, sdkRetries)
			if err := chat(background(), c); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(background(), time.Second)
			defer cancel()
			start := time.Now()
			err := chat(ctx, c)
			took := time.Since(start)
			var rle *pacer.RateLimitError
			t.Logf("openai-go, SDK retries %d: deadline refusal after %v: %v", sdkRetries, took, err)
			if sdkRetries == 0 {
				if !errors.As(err, &rle) || !errors.Is(err, context.DeadlineExceeded) || took != 0 {
					t.Errorf("got %v after %v; want an immediate *pacer.RateLimitError wrapping DeadlineExceeded", err, took)
				}
			} else if errors.As(err, &rle) {
				t.Errorf("SDK retries on: got the RateLimitError through (%v); the measured behaviour changed, update the README", err)
			}
		})
	}
}

// stormFor is longer than pacer's three retries a second apart, so a call's
// 429 reaches the SDK, which retries it when x-should-retry says so.
const stormFor = 20 * time.Second

// A storm: every request for the first 20 s answered 429 with Retry-After: 1
// and x-should-retry: true (another client has spent the account's quota). Both layers retrying multiply: up to (1+2)×(1+3)
// requests per call. The recommended setup bounds a call to 1+3.
func TestOpenAIStorm(t *testing.T) {
	for _, sc := range []struct {
		name       string
		sdkRetries int
		bound      int // server requests per call at most
	}{
		{"storm + x-should-retry: true, recommended", 0, 1 + retry.DefaultMax},
		{"storm + x-should-retry: true, SDK default retries (2)", -1, (1 + 2) * (1 + retry.DefaultMax)},
	} {
		t.Run(sc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fake{provider: openAI, limit: limit, window: window, latency: latency, storm: stormFor, shouldRetry: "true"}
				tr := pacer.NewTransport(inMemory{f})
				c := openAIClient(tr, sc.sdkRetries)
				const n = 4
				o := fanOut(n, n, func(int) error { return chat(background(), c) })
				s := f.stats()
				record(t, row{sdk: "openai-go", scenario: sc.name, calls: n, requests: s.requests, throttled: s.throttled,
					errs: o.errs, refusals: o.refusals, pacerRetries: retries(tr), elapsed: o.elapsed, slowest: o.slowest})
				if s.requests > n*sc.bound {
					t.Errorf("%d server requests for %d calls; want ≤ %d per call", s.requests, n, sc.bound)
				}
				if sc.sdkRetries == 0 && s.requests > n+retries(tr) {
					t.Errorf("%d server requests > %d calls + %d pacer retries", s.requests, n, retries(tr))
				}
				if sc.sdkRetries != 0 && s.requests <= n*(1+retry.DefaultMax) {
					t.Errorf("SDK retries on: %d server requests for %d calls, no multiplication; the measured behaviour changed, update the README", s.requests, n)
				}
			})
		})
	}
}
