// Package apisim simulates rate-limited HTTP APIs. It is test support, internal
// to pacer: pacer's tests (in virtual time under testing/synctest), the
// examples/fanout demo (over loopback) and the bench module's adaptation
// benchmark all measure pacer against it. It does not import pacer: it models
// servers, and must stay independent of the client it judges.
//
// # Serving
//
// New(Config) returns a *Server. Serve it in memory through s.Transport() (no
// sockets, no goroutines; ideal under synctest) or over a socket with
// httptest.NewServer(s). Every method and path is answered: 200 with a small
// JSON body when the request fits the quota, 429 otherwise. Requests to
// different paths share one quota unless Config.Routes gives a path prefix its
// own bucket. A request declares its token usage in the X-Apisim-Tokens header
// (TokensHeader); with Config.TokenLimit set, it is counted against a token
// quota too, and gets 429 when either quota cannot cover it. A 429 consumes
// nothing.
//
// Some refusals no quota header explains, and none consumes quota:
// Config.ShedShare sheds a share of requests with a bare 503 (overload);
// Config.SecondaryLimit is a hidden limit per trailing SecondaryWindow,
// answered 403 with GitHub's "secondary rate limit" body and no
// Retry-After; Config.QuotaGone answers every request 429 with OpenAI's
// insufficient_quota body while the headers show room.
//
// # Counting
//
// Config.Algorithm picks how requests are counted. FixedWindow allows Limit
// requests in each window [start+k·Window, start+(k+1)·Window), start being
// the moment New (or Reset) ran — so windows are deterministic under synctest.
// SlidingWindow is the sliding-window counter of Cloudflare and
// go-chi/httprate. TokenBucket refills Limit per Window continuously up to
// Burst. The default is FixedWindow, or TokenBucket for StyleShopify.
//
// SetLimit (SetRouteLimit, SetTokenLimit) changes a quota mid-run: a
// FixedWindow takes the new limit when its next window opens, the other
// algorithms at once.
//
// The unseen client (Config.UnseenShare) is another client sharing the quota,
// sending evenly at UnseenShare × Limit per Window (and the same share of the
// token quota). It has no goroutine: when a bucket is touched, the unseen
// requests due since the last touch are replayed at their own instants, in
// order, and get 429 like anyone else when the quota is spent.
//
// # Headers
//
// Config.Style picks the header convention; values follow each provider's
// documented format (examples: Limit 60 per minute, one request made at the start
// of a synctest bubble, whose clock starts at 2000-01-01T00:00:00Z):
//
//	github      X-RateLimit-Limit: 60, -Remaining: 59, -Reset: 946684860 (epoch s of the
//	            window end, rounded up), -Used: 1, -Resource: core (or the route's name).
//	            429 with Remaining 0 and no Retry-After (GitHub sends that for
//	            secondary limits only).
//	ietf        RateLimit: "default";r=59;t=60   RateLimit-Policy: "default";q=60;w=60
//	ietf07      RateLimit: limit=60, remaining=59, reset=60   RateLimit-Policy: 60;w=60
//	openai      X-Ratelimit-{Limit,Remaining,Reset}-Requests: 60, 59, 1m0s and, with a
//	            token quota, -Tokens; resets are Go-duration strings of the time until
//	            the quota is fully restored ("6m0s", "20ms", "2m59.56s").
//	anthropic   Anthropic-Ratelimit-Requests-{Limit,Remaining,Reset}: 60, 59,
//	            2000-01-01T00:01:00Z and, with a token quota, -Tokens-*; token
//	            remaining is rounded to the nearest thousand, as Anthropic documents.
//	discord     X-RateLimit-Limit, -Remaining, -Reset: 946684860.000 (epoch s with ms),
//	            -Reset-After: 60.000, -Bucket: a stable 8-hex-digit id per bucket;
//	            429s add X-RateLimit-Scope: user and retry_after in the JSON body.
//	shopify     X-Shopify-Shop-Api-Call-Limit: 1/60 (used/bucket size); 429 Retry-After: 1.0
//	x           x-rate-limit-limit: 60, -remaining: 59, -reset: 946684860 (epoch s
//	            of the window end, rounded up); no bucket is named, so route
//	            buckets (Config.Routes) state theirs under the same fields, as
//	            X's per-endpoint quotas do; with Config.AppLimit, x-app-rate-limit-*
//	            beside them. 429 with remaining 0, no Retry-After.
//	reddit      X-Ratelimit-Used: 1, -Remaining: 59.0 (a decimal, as Reddit sends it),
//	            -Reset: 40 (seconds until the window ends, counted from half a second
//	            later and rounded up: Date + reset is the window's end or the second
//	            after it, so answers of one window in one Date second say 432 and
//	            431, as Reddit's do). No limit field: it is used + remaining (Reddit's
//	            Data API wiki). 429 with an empty body and no Retry-After.
//	mastodon    X-RateLimit-Limit: 60, -Remaining: 59, -Reset:
//	            2000-01-01T00:01:00.500000Z (the window's end plus the request's own
//	            fraction of a second, as Mastodon computes it: each answer's reset
//	            differs, each up to a second late). Per-family quotas (media, deletes)
//	            named nowhere: route buckets state theirs under the same fields.
//	            429 with remaining 0, the reset and no Retry-After.
//	gitlab      RateLimit-Limit: 60, -Observed: 1, -Remaining: 59, -Reset: 946684880
//	            (the Date's second plus the window, restated on every answer, as
//	            gitlab.com's recorded answers of 2018-2019 do), -ResetTime: Sun, 01 Jan
//	            2000 00:01:20 GMT (the same instant, the weekday the next day's, as
//	            recorded). 429 adds Retry-After, with Rack::Attack's "Retry later".
//	retry-after no rate headers; 429s carry Retry-After only.
//	bare        no rate headers, bare 429s.
//
// Every style but github, shopify, x, reddit, mastodon and bare sends
// Retry-After on a 429 as whole delta seconds, rounded up (at least 1): the
// exact time until the rejected request would fit, assuming no other
// traffic. Delta figures (IETF t, reset=) are rounded up to whole seconds and
// instants up to the second (GitHub, Anthropic) or millisecond (Discord), so
// a client that honours them is never early; Reddit's and Mastodon's are up
// to a second and a half late as theirs are, and GitLab's restated reset is
// a whole window away whatever the quota holds.
//
// Config.RetryAfterOnSuccess adds Retry-After to every 2xx answer of any
// style, as Anthropic's API and Hugging Face's inference router send it on
// successes while every quota has room; RFC 9110 gives it no meaning there. "Reset" is the window end for FixedWindow and SlidingWindow, and the
// moment the bucket is full again for TokenBucket. Remaining counts the
// request being answered.
//
// # Measuring
//
// Stats gives totals, Events every visible request with its time, status and
// bucket. Capacity(from, to) is the number of requests the visible client
// could have had admitted in an interval at the long-run rate (quota minus
// the unseen share, following SetLimit), summed over the buckets the client
// used: the denominator of goodput. It excludes the initial burst, so short
// runs may exceed it. BucketCapacity is the same for one bucket, TokenCapacity
// for tokens.
//
// # Concurrency
//
// NewConcurrency(ConcurrencyConfig, quota) is a server whose capacity is
// concurrent work, not a rate: Knee requests at once in Latency each,
// longer beyond (Latency × in-progress/Knee), shed with a 503 above a
// Ceiling it may state as an IETF concurrent-requests policy; a quota
// Server in front of it adds a rate limit. It tells a request's
// httptrace.ClientTrace when the request was written, as net/http does.
//
// Under testing/synctest, create the Server inside the bubble: its clock
// (time.Now by default) must be the bubble's virtual clock.
package apisim
