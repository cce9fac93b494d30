// Package pacer keeps HTTP clients inside the rate limits of the APIs they
// call.
//
// Most clients learn about a rate limit by hitting it: a 429, a sleep, a
// retry. pacer paces ahead instead. Its [Transport] is an [http.RoundTripper]
// that keeps a token bucket per endpoint (per host by default, per route
// pattern when configured), reads every rate-limit header convention real APIs
// send (IETF RateLimit/RateLimit-Policy, X-RateLimit-*, OpenAI, Anthropic,
// GitHub, Discord, Shopify, Retry-After). A request the quota affords goes
// at once, as without a limiter; only demand that would run a quota out
// before its reset waits (see [Adaptive] for the rule). Servers that only
// answer 429 are probed with an additive-increase, multiplicative-decrease
// fallback.
//
// Zero configuration is already useful:
//
//	client := &http.Client{Transport: pacer.NewTransport(nil)}
//
// limits per host, learns limits from response headers, honours Retry-After
// and retries the 429s it can replay.
//
// An [Executor] bounds fan-out: Executor.Do runs a request once a concurrency
// slot is free, before any rate token is spent, and Shutdown stops cleanly
// without losing accepted work.
//
// [Bucket] is the token bucket underneath, usable on its own; its API mirrors
// golang.org/x/time/rate. For quotas shared by many processes, the redisstore
// subpackage keeps the buckets in Redis.
package pacer
