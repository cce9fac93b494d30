package pacer

import "time"

// Quota is one rate-limit policy as a server described it in response headers.
// A response may carry several (a per-second burst and a daily cap, or the
// requests and tokens quotas of an LLM API); the tightest binds.
type Quota struct {
	// Name identifies the quota: "requests", "tokens", "input-tokens",
	// "output-tokens", an IETF policy name, or "" when the server gave none.
	Name string
	// Limit is the quota per window; 0 if unknown.
	Limit float64
	// Remaining is what is left in the current window. It is never negative
	// and never above Limit when Limit is known.
	Remaining float64
	// Reset is the absolute time the window resets (or, for the IETF fields,
	// the time more quota becomes available); zero if unknown.
	Reset time.Time
	// Window is the policy's window length; 0 if unknown.
	Window time.Duration
}

// Info is everything rate-limit related that one response said.
type Info struct {
	// Quotas lists the quotas the response described, in header order.
	Quotas []Quota
	// RetryAfter is how long the server asked clients to wait, from
	// Retry-After (delta-seconds or HTTP-date), Retry-After-Ms or a provider
	// equivalent; 0 if none. When present it wins over the quotas.
	RetryAfter time.Duration
	// Bucket is a server-named bucket (X-RateLimit-Bucket,
	// X-RateLimit-Resource): endpoints the server puts in one bucket share one
	// limit. "" if none.
	Bucket string
}
