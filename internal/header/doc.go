// Package header is the grammar of the rate-limit fields HTTP servers send:
// it reads one response's headers into the quotas they state, the wait they
// ask for, the bucket they name and the scope of the limit ([Parse]).
//
// # What it reads
//
// The IETF fields of every draft: RateLimit-Policy and RateLimit as named
// policies (draft-08 and later: q, qu, w on a policy; r and t on its state,
// or the a and w proposed in 2026 to replace them), the draft-07 dictionary
// `RateLimit: limit=100, remaining=50, reset=5`, and the older separate
// RateLimit-Limit, -Remaining and -Reset, whose limit may be a list (`10,
// 10;w=1, 50;w=60`: the current limit, then policies) and whose remaining
// may carry the window too (Docker Hub's `196;w=21600`). Their RFC 9651
// syntax is parsed by package sfv; the one departure is Hugging Face's
// policy labelled before its name (`"fixed window";"api";q=1000;w=300`),
// read without the label, and only if it is then valid.
//
// Then X-RateLimit-* and X-Rate-Limit-* (GitHub, X, Reddit, Discord:
// -Limit, -Remaining, -Reset, -Reset-After, -Used, -Resource, -Bucket,
// -Global, -Scope; Jira Data Center's -FillRate and -Interval-Seconds, a
// token bucket's refill), and Brave's -Policy with every field a comma list
// read by position; Strava's -Limit and -Usage pairs (15 minutes, a day:
// used, not left) with X-ReadRateLimit-Limit and -Usage, its read limit,
// told from the lists by its -Usage; X's app quota,
// x-app-rate-limit-{limit,remaining,reset}; OpenAI's
// x-ratelimit-{limit,remaining,reset}-NAME for requests, tokens and any
// NAME ending in -tokens or -requests (project-tokens), with Azure OpenAI's
// x-ratelimit-renewalperiod-{requests,tokens} as their windows;
// anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-*;
// X-Shopify-Shop-Api-Call-Limit (used/limit); HubSpot's
// X-HubSpot-RateLimit-Daily, -Secondly (each with -Remaining), and -Max,
// -Remaining, -Interval-Milliseconds; Mistral's x-ratelimitbysize-*-minute
// and -month, ratelimitbysize-reset and -query-cost (Info.Cost); Meta's
// x-app-usage, x-page-usage and x-business-use-case-usage (JSON of
// percentages); Salesforce's Sforce-Limit-Info (used/limit per key); Amazon
// MWS's x-mws-quota-max, -remaining and -resetsOn; Azure Resource
// Manager's x-ms-ratelimit-remaining-*; and the wait of Retry-After-Ms,
// X-Ms-Retry-After-Ms and Retry-After, the first valid one in that order,
// else of Meta's estimated_time_to_regain_access.
//
// One pass over the header's keys finds every field, matching names in any
// case; a field present under several spellings takes the canonical one's
// value, else the smallest name's. The values of the common conventions'
// fields are kept as the pass meets them; those of the others are looked
// up in a second pass, made only for a response that has one. A field that
// holds one value takes its first line, as http.Header.Get does; a
// structured field split over several lines is joined, as RFC 9651 says.
//
// # The quotas
//
// A quota is reported when the server stated its limit or what is left of
// it; a reset alone is none. A limit with neither a remaining count nor a
// used one describes a policy, not the current window: its Remaining is -1.
// Quotas come in a fixed order, at most 16 kept:
//   - the IETF fields', in field order;
//   - X-RateLimit's (Jira's window from its refill);
//   - OpenAI's "requests", "tokens";
//   - Anthropic's "requests", "tokens", "input-tokens", "output-tokens";
//   - Shopify's;
//   - Strava's "15min", "daily", "read-15min", "read-daily";
//   - X's "app";
//   - OpenAI's other quotas, by name ("project-tokens");
//   - HubSpot's "daily", "secondly", "interval";
//   - Mistral's "tokens-minute", "tokens-month";
//   - Meta's "app", "page", "business-use-case";
//   - Salesforce's, named by their keys ("api-usage", "per-app-api-usage");
//   - Amazon MWS's "hourly";
//   - Azure Resource Manager's, by name ("subscription-reads").
//
// A quota is named by its IETF policy or by its convention as above, else
// ""; a name an earlier quota of the same response took gets "#2", "#3"…
// appended, so that each quota can be followed by name from response to
// response. Quotas count requests, but for OpenAI's, Anthropic's and
// Mistral's *tokens* quotas and Meta's, which count tokens (Meta's are a
// percentage of an allowance a call takes an unknown share of: a limit of
// 100 of which what is left is 100 less the largest percentage). An IETF
// policy named "tokens" counts requests; IETF policies in other units
// (qu=content-bytes, concurrent-requests) are matched but not reported;
// [Concurrency] reads a concurrent-requests quota on its own.
//
// A Window is set where the server or its documentation states one: the
// IETF w= (window=), Strava's 15 minutes and day, HubSpot's day, second and
// stated interval, Mistral's minute, Meta's rolling hour, Salesforce's
// rolling 24 hours, Amazon MWS's hour, Azure OpenAI's renewal period, and a
// token bucket's time to fill from empty (Jira: Limit ÷ FillRate ×
// Interval-Seconds). A quota with a Window and no Reset is a rolling window
// or a bucket: nothing says when it is whole again. Strava's resets are
// computed as it documents them, at the server clock's next quarter hour
// and midnight UTC.
//
// # Hostile and broken values
//
// A value that breaks a rule is ignored; the rest of the response still
// counts. Parse never panics and never modifies the header, and what it
// keeps is bounded whatever the fields hold.
//   - Numbers are plain decimals (`5000`, `599.0`): no sign, exponent, NaN
//     or Inf; a digit string too long for a float64 is infinite, which no
//     count accepts and every wait clamps. A structured field that is not
//     valid RFC 9651 is ignored as a whole.
//   - Remaining above Limit is clamped to Limit; where Used and one of Limit
//     or Remaining are given, the other is derived.
//   - A numeric reset is an epoch in seconds, else in milliseconds, if it
//     lands within the reset cap (Caps.Reset, or Caps.Wait if longer) of
//     now in the server's clock (ours moved by its offset); otherwise,
//     below 1e9, it is seconds from now; otherwise it is ignored, never
//     guessed into a reset years away. Go
//     durations (`6m0s`) are from now; RFC 3339, HTTP and JavaScript dates
//     are absolute and must land within the reset cap too. A past reset
//     means now; a later one is clamped to now plus the cap. Discord's
//     -Reset-After, relative and so immune to clock skew, wins over -Reset.
//   - Retry-After is delta seconds (decimals accepted) or an HTTP-date in
//     any of RFC 9110's three forms, a past date meaning 0; every wait is
//     clamped to [0, Caps.Wait].
//   - Names and buckets are at most 256 bytes; a bucket is visible ASCII;
//     a window is at most a leap year; a structured field yields at most
//     16 members.
//   - Meta's JSON is scanned, not decoded: at most 4096 bytes of it, in one
//     pass that keeps no state but the key before a value, whatever its
//     nesting; a value that is not a plain decimal is skipped, and a byte
//     that starts no JSON token makes the header ignored. Percentages far
//     above 100 leave nothing (Remaining 0), never a negative count.
package header
