package integrations_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-github/v84/github"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/integrations"
	"github.com/pacer-go/pacer/retry"
)

// The examples run against a local fake of the provider with a quota of 10
// requests per second, so 25 calls need three windows. Four workers stay
// under the quota before the first response tells pacer what it is. The
// LLM fakes also state token quotas, as the APIs do, that 25 calls do not
// exhaust.
const (
	exampleCalls   = 25
	exampleWorkers = 4
)

// runExample sends exampleCalls calls from exampleWorkers goroutines and
// prints what the callers and the server saw.
func runExample(f *fake, call func(ctx context.Context) error) {
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	jobs := make(chan struct{})
	for range exampleWorkers {
		wg.Go(func() {
			for range jobs {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if err := call(ctx); err != nil {
					failed.Add(1)
					fmt.Println(err)
				} else {
					ok.Add(1)
				}
				cancel()
			}
		})
	}
	for range exampleCalls {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	s := f.stats()
	fmt.Printf("%d calls OK, %d failed; the server saw %d requests, %d throttled\n", ok.Load(), failed.Load(), s.requests, s.throttled)
}

// openai-go: the SDK's retries off, pacer retrying (a 429'd chat completion
// is safe to replay), and no cost stated. Against the real API the token
// quota usually binds: pacer learns what a call costs it from the
// x-ratelimit-*-tokens headers of the responses (Stats.Costs shows what it
// learnt), so the calls need no work.WithCost. WithCost(ctx, n), which
// reaches the Transport through the SDK's context, overrides the learnt
// cost for a caller who knows it (prompt plus max_completion_tokens is what
// OpenAI counts).
func Example_openai() {
	f := &fake{provider: openAI, limit: 10, window: time.Second, tokenLimit: 200_000}
	srv := httptest.NewServer(f)
	defer srv.Close()

	tr := pacer.NewTransport(nil)
	hc := &http.Client{Transport: tr}
	defer hc.CloseIdleConnections()
	client := openai.NewClient(
		option.WithBaseURL(srv.URL+"/v1/"), // omit for api.openai.com
		option.WithAPIKey("sk-test"),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0), // pacer is the one layer that retries
	)

	runExample(f, func(ctx context.Context) error {
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:               openai.ChatModelGPT4oMini,
			MaxCompletionTokens: openai.Int(maxTokens),
			Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		var refused *pacer.RateLimitError
		if errors.As(err, &refused) {
			return fmt.Errorf("not sent, come back at %v: %w", refused.RetryAt, err)
		}
		return err
	})
	// Output:
	// 25 calls OK, 0 failed; the server saw 25 requests, 0 throttled
}

// anthropic-sdk-go: the same setup as openai-go, no cost stated: pacer
// learns what a call costs each of the anthropic-ratelimit-*-tokens quotas
// (input, output, and the more restrictive "tokens") from their headers. A
// 529 overloaded_error is retried by pacer, like a 503, within its retry
// budget.
func Example_anthropic() {
	f := &fake{provider: anthropicAPI, limit: 10, window: time.Second, tokenLimit: 100_000, outputLimit: 20_000}
	srv := httptest.NewServer(f)
	defer srv.Close()

	tr := pacer.NewTransport(nil)
	hc := &http.Client{Transport: tr}
	defer hc.CloseIdleConnections()
	client := anthropic.NewClient(
		anthropicoption.WithBaseURL(srv.URL+"/"), // omit for api.anthropic.com
		anthropicoption.WithAPIKey("sk-ant-test"),
		anthropicoption.WithHTTPClient(hc),
		anthropicoption.WithMaxRetries(0), // pacer is the one layer that retries
	)

	runExample(f, func(ctx context.Context) error {
		_, err := client.Messages.New(ctx, anthropic.MessageNewParams{
			Model:     anthropic.ModelClaudeSonnet4_5,
			MaxTokens: maxTokens,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
		})
		return err
	})
	// Output:
	// 25 calls OK, 0 failed; the server saw 25 requests, 0 throttled
}

// go-github: go-github's own rate-limit check off, so that a window spent to
// Remaining: 0 does not fail the calls pacer would hold until the reset. Each
// call has a deadline: with the quota exhausted pacer waits for the reset
// (up to an hour on GitHub), and a deadline turns that wait into an
// immediate *pacer.RateLimitError.
func Example_github() {
	f := &fake{provider: gitHub, limit: 10, window: time.Second}
	srv := httptest.NewServer(f)
	defer srv.Close()

	tr := pacer.NewTransport(nil)
	hc := &http.Client{Transport: tr}
	defer hc.CloseIdleConnections()
	client := github.NewClient(hc).WithAuthToken("ghp_test")
	client.BaseURL, _ = url.Parse(srv.URL + "/") // omit for api.github.com
	client.DisableRateLimitCheck = true          // pacer paces; go-github must not refuse

	var n atomic.Int64
	runExample(f, func(ctx context.Context) error {
		_, _, err := client.Issues.Get(ctx, "pacer-go", "pacer", int(n.Add(1)))
		return err
	})
	// Output:
	// 25 calls OK, 0 failed; the server saw 25 requests, 0 throttled
}

// go-retryablehttp: retryablehttp is the one layer that retries; it waits
// what pacer knows (Transport.Backoff) and does not retry pacer's refusals
// (integrations.CheckRetry), so a refusal reaches the caller at once.
func ExampleCheckRetry() {
	f := &fake{provider: generic, limit: 10, window: time.Second}
	srv := httptest.NewServer(f)
	defer srv.Close()

	tr := pacer.NewTransport(nil, pacer.WithRetry(retry.Policy{Max: retry.None}))
	client := retryablehttp.NewClient()
	client.Logger = nil
	client.HTTPClient = &http.Client{Transport: tr}
	defer client.HTTPClient.CloseIdleConnections()
	client.Backoff = tr.Backoff
	client.CheckRetry = integrations.CheckRetry(nil)

	var n atomic.Int64
	runExample(f, func(ctx context.Context) error {
		return getItemFrom(ctx, client, srv.URL, int(n.Add(1)))
	})
	// Output:
	// 25 calls OK, 0 failed; the server saw 25 requests, 0 throttled
}
