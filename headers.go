package pacer

import (
	"net/http"
	"time"

	"github.com/pacer-go/pacer/internal/header"
)

// Quota is one rate-limit policy as a server described it in response headers.
// A response may carry several (a per-second burst and a daily cap, or the
// requests and tokens quotas of an LLM API); the tightest binds.
type Quota struct {
	// Name identifies the quota: an IETF policy name, or the name of the
	// convention's quota ("requests", "tokens", "input-tokens",
	// "output-tokens", "project-tokens"; Strava's "15min", "daily",
	// "read-15min", "read-daily"; X's "app"; HubSpot's "daily",
	// "secondly", "interval"; Mistral's "tokens-minute", "tokens-month";
	// Meta's "app", "page", "business-use-case"; Salesforce's "api-usage",
	// "per-app-api-usage"; Amazon MWS's "hourly"; Azure Resource
	// Manager's "subscription-reads" and the like), or "" when the server
	// gave none. Names are unique within one Info: a name already taken by
	// an earlier quota gets "#2", "#3"… appended, so each quota can be
	// followed from response to response by its name.
	Name string
	// Limit is the quota per window; 0 if unknown.
	Limit float64
	// Remaining is what is left in the current window, never above Limit
	// when Limit is known; -1 when the server did not say. That is the case
	// when it stated the limit alone (an IETF policy with no RateLimit item
	// for it, a limit field without a remaining one): the quota then
	// describes a policy, Limit per Window, and nothing of the current
	// window, which is neither full nor empty as far as anyone knows. A
	// Remaining that was stated is never negative.
	Remaining float64
	// Reset is the absolute time the window resets (or, for the IETF fields,
	// the time more quota becomes available); zero if unknown. It is computed
	// as now plus an offset, so it carries now's monotonic clock reading; it
	// is never before now and never after now plus [MaxResetHorizon]: a
	// daily or monthly quota's reset is reported as stated, and what to wait
	// for is the limiter's decision (bounded by its MaxDelay).
	Reset time.Time
	// Window is the policy's window length; 0 if unknown. Only what the
	// server states (an IETF policy's w= or window=, Azure OpenAI's renewal
	// period, HubSpot's interval) or its documentation gives for a field
	// (Strava's 15 minutes and day, HubSpot's day and second, Mistral's
	// minute, Meta's hour, Salesforce's 24 hours, Amazon MWS's hour) sets
	// it: a reset alone says when the current window ends, not how long
	// windows are. A token bucket's Window is its time to fill from empty
	// (Jira's X-RateLimit-FillRate per X-RateLimit-Interval-Seconds: Limit
	// ÷ FillRate × Interval). A quota with a Window and no Reset is a
	// rolling window or a bucket: nothing says when it is whole again.
	Window time.Duration
	// Unit is what the quota counts: requests, unless the server's
	// convention says tokens (OpenAI's, Anthropic's and Mistral's token
	// quotas) or counts in shares of an allowance a request takes an
	// unknown part of (Meta's usage percentages: Limit 100, and Remaining
	// 100 less the largest percentage used).
	Unit Unit
}

// Unit is what a [Quota] counts.
type Unit uint8

const (
	// UnitRequests: every request takes one.
	UnitRequests Unit = iota
	// UnitTokens: a request takes its cost, stated with [work.WithCost] or
	// learnt from the quota's figures (see [Stats.Costs]).
	UnitTokens
)

// String returns "requests" or "tokens".
func (u Unit) String() string {
	if u == UnitTokens {
		return "tokens"
	}
	return "requests"
}

// Info is everything rate-limit related that one response said.
type Info struct {
	// Quotas lists the quotas the response described, in a fixed order: the
	// IETF fields (RateLimit, RateLimit-Policy, RateLimit-Limit…) in field
	// order, then X-RateLimit-* (and X-Rate-Limit-*), then OpenAI's requests
	// and tokens, then Anthropic's requests, tokens, input-tokens and
	// output-tokens, then Shopify's call limit; then Strava's, X's app
	// quota, OpenAI's other quotas by name, HubSpot's, Mistral's, Meta's,
	// Salesforce's, Amazon MWS's, and Azure Resource Manager's by name. At
	// most 16 are kept.
	//
	// The Transport and Permit.Done also read the quotas a 403's or 429's
	// body states, after the headers' (ParseHeaders, seeing headers alone,
	// never reports them): each quota Google's QuotaFailure lists as
	// violated (spent, its window and unit from its quotaId; a per-day one
	// resets at midnight Pacific time), ErrorInfo's refused limit, the
	// limit OpenAI's and Groq's rate-limit message states ("on tokens per
	// minute (TPM): Limit 15000, Used 11972"), the X-RateLimit-* headers
	// OpenRouter forwards inside its error and a daily cap its message
	// names. A quota the headers state already is not repeated.
	Quotas []Quota
	// RetryAfter is how long the server asked clients to wait, from
	// Retry-After (delta-seconds or HTTP-date), Retry-After-Ms or a provider
	// equivalent (Meta's estimated_time_to_regain_access, in minutes); 0 if
	// none. When present it wins over the quotas. It is
	// never negative and never above the parser's cap (DefaultMaxDelay for
	// ParseHeaders).
	//
	// The Transport and Permit.Done read the response's status too: a
	// Retry-After on a 1xx or 2xx is no wait there (RFC 9110 section 10.2.3
	// defines it for 503 and 3xx responses, RFC 6585 for 429; Hugging
	// Face's router and Anthropic send it on successes), and they read a
	// 403's or 429's body, whose wait counts beside the headers' (the
	// longer of the two): Google's RetryInfo retryDelay (Gemini sends no
	// Retry-After), the "Please try again in 5.289s" of OpenAI's and
	// Groq's messages, a Retry-After OpenRouter forwards inside its error,
	// Discord's retry_after. A request larger than the whole limit that
	// refused it ("Requested ~12903" against "Limit 7000") states no wait:
	// none makes it fit. ParseHeaders, seeing headers alone, reports the
	// headers' wait whatever the status.
	RetryAfter time.Duration
	// Bucket is a server-named bucket (X-RateLimit-Bucket,
	// X-RateLimit-Resource): endpoints the server puts in one bucket share one
	// limit. "" if none.
	Bucket string
	// Global reports that the limit the response speaks of applies to every
	// endpoint of the server, not to the one requested (Discord's
	// X-RateLimit-Global: true or X-RateLimit-Scope: global, sent on 429s).
	Global bool
}

// ParseHeaders reads the rate-limit information in the response headers h,
// received at now (the wall-clock time the response arrived; it may carry a
// monotonic reading, which the resets inherit). ok is false when h holds no
// usable rate-limit field, and Info is then zero.
//
// Header names are matched case-insensitively, so hand-built maps with
// lower-case keys work as well as the canonical keys net/http produces; if a
// field appears under several spellings, the canonical one wins. Fields that
// hold one value use the first line, as [http.Header.Get] does; structured
// fields split over several lines are joined, as RFC 9651 says.
//
// Conventions read: the IETF RateLimit and RateLimit-Policy fields of every
// draft (draft-08+ named policies with q, qu, w, r, t, and the a and w
// proposed in 2026 to replace r and t; the draft-07 dictionary;
// RateLimit-Limit, -Remaining and -Reset with list values such as
// `10, 10;w=1, 50;w=60`, or Docker Hub's `196;w=21600`; Hugging Face's
// policy labelled before its name); X-RateLimit-* and X-Rate-Limit-*
// (GitHub, X, Reddit, Discord: -Limit, -Remaining, -Reset, -Reset-After,
// -Used, -Resource, -Bucket, -Global, -Scope; Jira Data Center: -FillRate,
// -Interval-Seconds; Brave: -Policy, and every field a comma list read by
// position, `X-RateLimit-Remaining: 1, 1000` stating what is left of the
// first and the second quota, lists of different lengths paired as far as
// they go; Strava: -Limit and -Usage pairs, with X-ReadRateLimit-Limit and
// -Usage); X's x-app-rate-limit-*; OpenAI's x-ratelimit-*-requests,
// -tokens and -NAME-tokens (or -requests), with Azure OpenAI's
// x-ratelimit-renewalperiod-*; anthropic-ratelimit-*;
// X-Shopify-Shop-Api-Call-Limit; X-HubSpot-RateLimit-*; Mistral's
// ratelimitbysize-*; Meta's x-app-usage, x-page-usage and
// x-business-use-case-usage; Salesforce's Sforce-Limit-Info; Amazon MWS's
// x-mws-quota-*; Azure Resource Manager's x-ms-ratelimit-remaining-*;
// Retry-After-Ms, X-Ms-Retry-After-Ms and Retry-After, read in that order.
// Quota's fields say which quota each convention's fields make, by name,
// unit and window.
//
// Rules for what servers get wrong (a value that breaks a rule is ignored, the
// rest of the response still counts):
//   - Numbers are plain decimals (`5000`, `599.0`). Signs, exponents, NaN,
//     Inf and text are ignored; so are structured fields that are not valid
//     RFC 9651, as a whole. IETF policies in units other than requests
//     (qu=content-bytes, concurrent-requests) are not reported.
//   - Remaining above Limit is clamped to Limit. Where only Used and one of
//     Limit or Remaining are given, the other is derived. A limit given
//     with neither Remaining nor Used is a policy: Remaining is -1
//     (unknown), not Limit.
//   - A numeric reset is an epoch in seconds, else an epoch in milliseconds,
//     if it lands within MaxResetHorizon of now; otherwise, if below 1e9, it
//     is seconds from now; otherwise it is ignored, never guessed into a
//     reset years away. Go durations (`6m0s`, `12ms`) are from now; RFC 3339
//     and HTTP dates are absolute and must also land within MaxResetHorizon
//     of now. A reset in the past means the window has already reset: Reset
//     is now. Resets are not clamped to the wait cap: an hourly or daily
//     quota's reset is reported as stated, and the limiter decides what to
//     believe and how long to wait (never past its MaxDelay). Discord's
//     -Reset-After, being relative and immune to clock skew, wins over its
//     -Reset.
//   - Retry-After is delta seconds (decimals accepted) or an HTTP-date in any
//     of RFC 9110's three forms; a date in the past means 0. Waits beyond the
//     cap, absurdly long digit strings included, are clamped to it.
//   - At most 16 quotas are kept; names and buckets longer than 256 bytes,
//     and buckets with spaces or control characters, are ignored.
//
// ParseHeaders sees no status and no body: a Retry-After is reported
// whatever the response's status (the Transport reads none on a 1xx or
// 2xx), and what a refusal's body states is not (see Info).
//
// ParseHeaders never panics and does not modify h. A typical response costs
// one allocation, for the Quotas slice.
func ParseHeaders(h http.Header, now time.Time) (Info, bool) {
	return parseHeaders(h, now, DefaultMaxDelay)
}

// parseHeaders is ParseHeaders with the cap maxDelay (the Transport's
// configured one) in place of DefaultMaxDelay; maxDelay ≤ 0 means
// DefaultMaxDelay.
func parseHeaders(h http.Header, now time.Time, maxDelay time.Duration) (Info, bool) {
	var hq header.Quotas
	hi, ok := header.Parse(h, now, capsOf(maxDelay), nil, &hq)
	return infoOf(hi, &hq), ok
}

// capsOf is what a parse under the wait cap maxDelay believes: waits up to
// maxDelay (DefaultMaxDelay for maxDelay ≤ 0), resets up to
// MaxResetHorizon.
func capsOf(maxDelay time.Duration) header.Caps {
	return header.Caps{Wait: delayCap(maxDelay), Reset: MaxResetHorizon}
}

// delayCap is the longest wait a parse believes: maxDelay, or
// DefaultMaxDelay for maxDelay ≤ 0.
func delayCap(maxDelay time.Duration) time.Duration {
	if maxDelay <= 0 {
		return DefaultMaxDelay
	}
	return maxDelay
}

// infoOf is the Info of the grammar's reading hi and hq, the quotas in a
// slice of their own (nil for none).
func infoOf(hi header.Info, hq *header.Quotas) Info {
	info := Info{RetryAfter: hi.RetryAfter, Bucket: hi.Bucket, Global: hi.Global}
	if n := hq.Len(); n > 0 {
		info.Quotas = make([]Quota, n)
		copyQuotas(info.Quotas, hq)
	}
	return info
}

// copyQuotas converts the quotas of hq into dst, of length hq.Len().
func copyQuotas(dst []Quota, hq *header.Quotas) {
	for i := range dst {
		q, d := hq.At(i), &dst[i]
		d.Name, d.Limit, d.Remaining, d.Reset, d.Window, d.Unit = q.Name, q.Limit, q.Remaining, q.Reset, q.Window, Unit(q.Unit)
	}
}

// The grammar numbers its units as Unit does, so that Unit(q.Unit) carries
// a quota's unit over: the index below is 0 only then (otherwise it is out
// of range, or overflows Unit, and does not compile).
var _ = [1]struct{}{}[UnitRequests-Unit(header.Requests)+UnitTokens-Unit(header.Tokens)]
