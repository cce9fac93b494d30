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
// 10;w=1, 50;w=60`: the current limit, then policies). Their RFC 9651
// syntax is parsed by package sfv. Then X-RateLimit-* and X-Rate-Limit-*
// (GitHub, X, Reddit, Discord: -Limit, -Remaining, -Reset, -Reset-After,
// -Used, -Resource, -Bucket, -Global, -Scope), and Brave's -Policy with
// every field a comma list read by position; OpenAI's
// x-ratelimit-{limit,remaining,reset}-{requests,tokens};
// anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-*;
// X-Shopify-Shop-Api-Call-Limit (used/limit); and the wait of
// Retry-After-Ms, X-Ms-Retry-After-Ms and Retry-After, the first valid one
// in that order.
//
// One pass over the header's keys finds every field, matching names in any
// case; a field present under several spellings takes the canonical one's
// value, else the smallest name's. A field that holds one value takes its
// first line, as http.Header.Get does; a structured field split over
// several lines is joined, as RFC 9651 says.
//
// # The quotas
//
// A quota is reported when the server stated its limit or what is left of
// it; a reset alone is none. A limit with neither a remaining count nor a
// used one describes a policy, not the current window: its Remaining is -1.
// Quotas come in a fixed order: the IETF fields' in field order, then
// X-RateLimit's, then OpenAI's requests and tokens, then Anthropic's
// requests, tokens, input-tokens and output-tokens, then Shopify's; at most
// 16 are kept. A quota is named by its IETF policy, or by its convention
// ("requests", "tokens"…), else ""; a name an earlier quota of the same
// response took gets "#2", "#3"… appended, so that each quota can be
// followed by name from response to response. OpenAI's and Anthropic's
// *-tokens quotas count tokens, every other one requests (an IETF policy
// named "tokens" counts requests); IETF policies in other units
// (qu=content-bytes, concurrent-requests) are matched but not reported;
// [Concurrency] reads a concurrent-requests quota on its own.
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
//     a policy window is at most a leap year; a structured field yields at
//     most 16 members.
package header
