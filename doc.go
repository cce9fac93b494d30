// Package pacer keeps HTTP clients inside the rate limits of the APIs they
// call.
//
// Most clients learn about a rate limit by hitting it: a 429, a sleep, a
// retry. pacer paces ahead instead. Its [Transport] is an [http.RoundTripper]
// that keeps a limiter per endpoint (per host by default, per route pattern
// when configured) and reads every rate-limit header convention real APIs
// send (IETF RateLimit/RateLimit-Policy, X-RateLimit-*, OpenAI, Anthropic,
// GitHub, Discord, Shopify, Retry-After). A request the quota affords goes
// at once, as without a limiter; only demand that would run a quota out
// before its reset waits (see [Adaptive] for the rule). A server that states
// no quota but answers 429 with a Retry-After has its window inferred from
// those answers; one that says nothing at all is probed with a CUBIC
// fallback.
//
// Zero configuration is already useful:
//
//	client := &http.Client{Transport: pacer.NewTransport(nil)}
//
// limits per host, learns limits from response headers, honours Retry-After
// and retries the 429s it can replay.
//
// # One request, top to bottom
//
//	Executor.Do            (optional) a concurrency slot, held until the body is closed
//	  └─ http.Client.Do
//	       └─ Transport.RoundTrip: one attempt per try      transport.go
//	            ├─ run: which limiter                       route.go, endpoint.go
//	            │    (key, route patterns, server-named buckets)
//	            │  wait for it: Adaptive.Acquire → Permit   adaptive_acquire.go
//	            │    (slow start, every quota's budget, the bucket,
//	            │    MaxWait and the context's deadline)
//	            │  send through the base RoundTripper
//	            │  read the response                       headers.go, skew.go, classify.go
//	            ├─ settle: Permit.Done, the limiter learns  retune.go, window*.go,
//	            │    (release, Stats, observer)             infer.go, probe.go,
//	            │                                           internal/decision
//	            └─ decide: retry? when?                     retry.go
//
// An [Executor] bounds fan-out: Executor.Do runs a request once a concurrency
// slot is free, before any rate token is spent, and Shutdown stops cleanly
// without losing accepted work.
//
// [Bucket] is the token bucket underneath, usable on its own; its API mirrors
// golang.org/x/time/rate. For quotas shared by many processes, the redisstore
// subpackage keeps the buckets in Redis.
package pacer
