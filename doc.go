// Package pacer keeps HTTP clients inside the rate limits of the APIs they
// call.
//
// Most clients learn about a rate limit by hitting it: a 429, a sleep, a
// retry. pacer paces ahead instead. Its [Transport] is an [http.RoundTripper]
// that keeps a limiter per endpoint (per host by default, per route when the
// host's answers show one quota per route, per route pattern when
// configured) and reads the rate-limit conventions real APIs send (IETF
// RateLimit/RateLimit-Policy, X-RateLimit-*, GitHub, X, Reddit, OpenAI,
// Anthropic, Discord, Shopify, Strava, HubSpot, Mistral, Meta, Salesforce,
// Brave, Retry-After…), and the limits and waits some state only in a
// refusal's body (Google's, Groq's, OpenRouter's). A request the quota affords goes
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
// An [Executor] (optional) holds a concurrency slot until the response body
// is closed. The [Transport] maps the request to an endpoint (a [WithEndpoint]
// pattern, a [WithKeyFunc] key, else scheme://host; a bucket the server names
// once it has named one; the request's route, its method and path with ids
// folded, once the host's answers show a quota per route) and waits for
// that endpoint's [Adaptive] limiter to
// admit it: at once while every quota the server states affords it, else
// until one does, never past MaxWait or the context's deadline. It then sends
// through the base RoundTripper, reads the response once (its rate-limit
// headers, its Date, and for a 403 or 429 what its body states), settles the
// admission with what it read (the limiter learns; the request leaves the
// in-flight count), and asks the retry policy ([WithRetry]), which judges
// the same reading, whether and when to go again.
//
// An [Executor] bounds fan-out: Executor.Do runs a request once a concurrency
// slot is free, before any rate token is spent, and Shutdown stops cleanly
// without losing accepted work.
//
// [Bucket] is the token bucket underneath, usable on its own; its API mirrors
// golang.org/x/time/rate. For quotas shared by many processes, the redisstore
// module (github.com/pacer-go/pacer/redisstore) keeps them in Redis.
//
// Three small packages hold what the options take and what pacer reports:
// package work marks a request's class of work (interactive or batch) and
// its stated cost in its context; package retry is the retry policy
// [WithRetry] takes; package observe holds each attempt's record for
// [WithObserver] and the reasons [Stats] and [ExecutorStats] report.
package pacer
