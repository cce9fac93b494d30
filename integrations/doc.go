// Package integrations shows pacer inside the HTTP SDKs people use —
// google/go-github, openai/openai-go, anthropics/anthropic-sdk-go and
// hashicorp/go-retryablehttp — and holds the little glue they need.
//
// It is a separate module so that none of these SDKs enters the library's
// go.mod. Its tests drive each SDK through pacer.NewTransport against an
// in-memory fake of the provider (the provider's header names and formats,
// its error bodies) and measure the setups below; its examples are the
// recommended setup of each SDK.
//
// The recommended setups, and why (figures from the tests, in README.md):
//
//   - openai-go and anthropic-sdk-go: no cost hint. Their token quotas
//     usually bind, and pacer learns what a call costs each of them from
//     the quota's own response headers (x-ratelimit-*-tokens,
//     anthropic-ratelimit-*-tokens; Stats.Costs shows what it learnt), so
//     calls need no work.WithCost; WithCost remains an override for a
//     caller who knows a call's cost. The first minute of a saturated job
//     is spent learning: some 429s, which pacer retries (with 16 or more
//     calls at once on Anthropic, a few calls ran out of retries). After it
//     the tests measure no 429s at 0.99-1.00 of the token quota, but for
//     a gap of the core with 64 calls at once on Anthropic (see
//     TestTokenQuotaSaturated).
//   - openai-go and anthropic-sdk-go: option.WithMaxRetries(0), so that
//     pacer is the only layer that retries (it retries their POSTs on a
//     429 or 529, which refuse a request before any work). Both SDKs
//     treat any transport error as a connection failure
//     and retry it with their own backoff, so a *pacer.RateLimitError
//     refusal (the wait would pass MaxWait or the deadline) cost callers
//     0.5-2 s each and, under a deadline, arrives as a bare
//     context.DeadlineExceeded; with x-should-retry: true the two layers
//     multiplied a call into up to 12 requests. Their "do not retry" marker
//     is unexported, so the SDK's retries cannot be told apart per error:
//     they have to be off. Anthropic's 529 overloaded_error is then retried
//     by pacer, like a 503, within its retry budget.
//   - go-github: Client.DisableRateLimitCheck = true. go-github refuses
//     every call locally while the last response said Remaining: 0 and the
//     reset is ahead; a paced job spends each window to exactly 0, so with
//     the check on most calls of a fan-out failed with *github.RateLimitError
//     although pacer would have held them until the reset. Give calls a
//     deadline (or pacer.WithMaxWait): with an exhausted quota pacer waits
//     until the reset, up to an hour on GitHub, where go-github alone fails
//     at once.
//   - go-retryablehttp: pacer.WithRetry(retry.Policy{Max: retry.None}),
//     Client.Backoff = Transport.Backoff and Client.CheckRetry =
//     CheckRetry(nil), so retryablehttp is the one layer that retries,
//     waits what pacer knows, and does not retry pacer's refusals.
package integrations
