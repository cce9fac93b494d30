package apisim

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Style is the rate-limit header convention a Server speaks. It changes only
// what the responses say, never how requests are counted.
type Style string

// The header conventions a Server can speak. Values follow each provider's
// documented format; see the package documentation for the exact headers.
const (
	// StyleGitHub: X-RateLimit-Limit, -Remaining, -Reset (epoch seconds of the
	// window end), -Used, -Resource ("core", or the route's name). A request over
	// the primary quota gets 429 with Remaining 0 and no Retry-After, as GitHub does.
	StyleGitHub Style = "github"
	// StyleIETF: draft-ietf-httpapi-ratelimit-headers-08 and later:
	// RateLimit: "default";r=R;t=T and RateLimit-Policy: "default";q=Q;w=W.
	StyleIETF Style = "ietf"
	// StyleIETF07: draft-07: RateLimit: limit=L, remaining=R, reset=T and
	// RateLimit-Policy: L;w=W.
	StyleIETF07 Style = "ietf07"
	// StyleOpenAI: x-ratelimit-{limit,remaining,reset}-{requests,tokens}; resets
	// are durations until the quota is fully restored, like "6m0s" or "20ms".
	StyleOpenAI Style = "openai"
	// StyleAnthropic: anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset};
	// resets are RFC 3339 instants, token remaining is rounded to the nearest thousand.
	StyleAnthropic Style = "anthropic"
	// StyleDiscord: X-RateLimit-Limit, -Remaining, -Reset (epoch seconds with
	// milliseconds), -Reset-After (seconds with milliseconds), -Bucket (opaque id).
	StyleDiscord Style = "discord"
	// StyleShopify: X-Shopify-Shop-Api-Call-Limit: used/limit (a leaky bucket:
	// the default Algorithm for this style is TokenBucket); Retry-After like "2.0".
	StyleShopify Style = "shopify"
	// StyleX: X API v2's x-rate-limit-limit, -remaining, -reset (epoch
	// seconds of the window end). X keeps a quota per endpoint and names
	// none of them (Config.Routes give routes theirs, stated under the same
	// fields); a request over its quota gets 429 with remaining 0 and the
	// reset, no Retry-After.
	StyleX Style = "x"
	// StyleReddit: Reddit's Data API: X-Ratelimit-Used, -Remaining (a
	// decimal, "596.0") and -Reset, the seconds until the window ends: no
	// limit field (the limit is used + remaining). The reset is counted
	// from half a second after the request and rounded up, so Date + reset
	// is the window's end or the second after it, whichever the request's
	// place in its second gives: recorded sessions show 432 then 431 in
	// one Date second, both naming one window. A request over the quota
	// gets 429 with an empty body and no Retry-After.
	StyleReddit Style = "reddit"
	// StyleMastodon: Mastodon's X-RateLimit-Limit, -Remaining and -Reset,
	// an ISO 8601 instant with microseconds: the window's end plus the
	// request's own fraction of a second, as Mastodon's rate-limit headers
	// compute it (request time + period − request time's whole seconds mod
	// period), so answers of one window state different resets, each up to
	// a second late. Mastodon keeps a quota per family of endpoints (media
	// uploads, deletions, the API as a whole) and names none of them:
	// Config.Routes give routes theirs, stated under the same fields. A
	// request over its quota gets 429 with remaining 0, the reset, and no
	// Retry-After.
	StyleMastodon Style = "mastodon"
	// StyleGitLab: gitlab.com's RateLimit-Limit, -Observed (used),
	// -Remaining, -Reset and -ResetTime on every answer, the reset
	// restated on each as the Date's second plus the window (epoch
	// seconds; -ResetTime the same instant as an HTTP date whose weekday
	// is the next day's, as recorded), however long the window has run. A
	// request over the quota gets 429 with the same fields and Retry-After.
	StyleGitLab Style = "gitlab"
	// StyleRetryAfter: no rate-limit headers; a 429 carries Retry-After (delta seconds).
	StyleRetryAfter Style = "retry-after"
	// StyleBare: no headers at all; bare 429s.
	StyleBare Style = "bare"
)

// Styles returns every Style, in a stable order, for table-driven tests and benchmarks.
func Styles() []Style {
	return []Style{StyleGitHub, StyleIETF, StyleIETF07, StyleOpenAI, StyleAnthropic,
		StyleDiscord, StyleShopify, StyleX, StyleReddit, StyleMastodon, StyleGitLab,
		StyleRetryAfter, StyleBare}
}

func (s Style) valid() bool {
	for _, v := range Styles() {
		if s == v {
			return true
		}
	}
	return false
}

// Algorithm is how a Server counts requests (and tokens) against its quota.
type Algorithm string

// The counting algorithms. All three admit on average Limit requests per Window;
// they differ in bursts and in what "reset" means.
const (
	// FixedWindow: at most Limit requests in each window [start+k·Window,
	// start+(k+1)·Window), start being the server's creation (or Reset). The
	// headers' reset is the window end. GitHub, X and most REST APIs count so.
	FixedWindow Algorithm = "fixed-window"
	// SlidingWindow: the sliding-window counter of Cloudflare, go-chi/httprate and
	// Upstash: a request is admitted while prev·(1-elapsed/Window) + cur + n ≤ Limit,
	// where prev and cur are the counts of the previous and current fixed windows.
	// The headers' reset is the end of the current fixed window, as httprate
	// reports it — which can be early: the previous window still weighs on the
	// next, so a client that waits for the reset may find the quota partly
	// used. Remaining is exact, and Retry-After the exact time until the
	// request would fit.
	SlidingWindow Algorithm = "sliding-window"
	// TokenBucket: a bucket of capacity Burst (Limit when Burst is 0), refilled
	// continuously at Limit per Window, full at start. The headers' reset is the
	// time the bucket is full again; Retry-After the time until the request fits.
	TokenBucket Algorithm = "token-bucket"
)

func (a Algorithm) valid() bool {
	return a == FixedWindow || a == SlidingWindow || a == TokenBucket
}

// Config describes a simulated API. Limit and Window are required; everything
// else has a documented default. New panics on an invalid Config, naming the field.
type Config struct {
	// Style is the header convention of responses. Required.
	Style Style
	// Algorithm counts requests. Zero means FixedWindow, except TokenBucket for
	// StyleShopify (Shopify's REST limit is a leaky bucket).
	Algorithm Algorithm
	// Limit is the request quota per Window (> 0) of the shared bucket.
	Limit int
	// Window is the quota window (> 0). For TokenBucket the refill rate is
	// Limit per Window. Styles that speak whole seconds (IETF w=) round it up.
	Window time.Duration
	// Burst is the TokenBucket capacity (≥ 0) of the shared bucket; 0 means
	// Limit. Route buckets and token quotas keep the same Burst/Limit ratio.
	// Ignored by the window algorithms.
	Burst int
	// TokenLimit is a token quota per Window (≥ 0), counted by the same Algorithm
	// as requests, in every bucket; 0 means none. A request's token usage is read
	// from its X-Apisim-Tokens header. Only StyleOpenAI and StyleAnthropic
	// advertise it; other styles enforce it silently.
	TokenLimit int
	// InputTokenLimit and OutputTokenLimit (≥ 0) are quotas per Window of
	// input and output tokens, like TokenLimit, read from a request's
	// InputTokensHeader and OutputTokensHeader (Anthropic's separate input
	// and output token limits); 0 means none. Only StyleAnthropic
	// advertises them.
	InputTokenLimit, OutputTokenLimit int
	// UnseenShare in [0, 1) is the fraction of every quota consumed by another
	// client the caller cannot see, sending evenly over time. It is simulated
	// deterministically, without goroutines, when the bucket is next touched.
	UnseenShare float64
	// ShedShare in [0, 1) is the fraction of requests the server sheds as
	// overloaded, evenly (every 1/ShedShare-th): answered 503, with the
	// quota headers as they stand and no Retry-After, and not counted
	// against any quota. Overload, not a rate limit.
	ShedShare float64
	// SecondaryLimit (≥ 0) is a limit no header states, like GitHub's
	// secondary rate limits: at most SecondaryLimit requests in any
	// trailing SecondaryWindow. Every request that reaches the server
	// counts, refused ones too, so a client that keeps sending stays
	// blocked. One over it gets 403 with GitHub's JSON body ("You have
	// exceeded a secondary rate limit"), the quota headers as they stand
	// and no Retry-After, and is not counted against the stated quota.
	// 0 means none.
	SecondaryLimit int
	// SecondaryWindow (≥ 0) is the trailing window of SecondaryLimit; 0
	// means a minute (GitHub's documented secondary limits are per minute).
	SecondaryWindow time.Duration
	// QuotaGone answers every request 429 with OpenAI's insufficient_quota
	// body (the account's credit is spent: no wait can help), the quota
	// headers showing the room they have and no Retry-After; nothing is
	// counted against any quota.
	QuotaGone bool
	// RetryAfterOnSuccess (≥ 0) adds Retry-After, in whole seconds rounded
	// up, to every 2xx answer, as Anthropic's API and Hugging Face's
	// inference router send it on successes while every quota has room
	// (recorded sessions: 20, 30 and 31 s). RFC 9110 defines the field for
	// 503, 429 and 3xx answers; on a 2xx it asks for no wait. 0 means none.
	RetryAfterOnSuccess time.Duration
	// Latency is the service time of each request (≥ 0), slept after admission
	// (virtual under testing/synctest). Transport honours the request context
	// during it; the request has already been counted.
	Latency time.Duration
	// Now is the clock; nil means time.Now (virtual under testing/synctest, so a
	// Server used in a synctest bubble must be created inside it).
	Now func() time.Time
	// Routes maps URL path prefixes (starting with "/") to their own request
	// quota per Window, for APIs with per-route buckets (GitHub's "search"
	// resource, Discord's per-route buckets). The longest matching prefix wins;
	// other paths share the Limit bucket. Each route bucket is named after its
	// prefix ("/search/" → "search") in Event.Key and in the headers that name
	// buckets (GitHub X-RateLimit-Resource, IETF policy name, Discord bucket id).
	Routes map[string]int
	// AppLimit (≥ 0) is a quota per Window every request counts against
	// beside its bucket's, on every route: an app's quota on a host that
	// keeps one per endpoint too (X's x-app-rate-limit-*, which StyleX
	// states beside the endpoint's). A request over it is refused as over
	// its bucket's. 0 means none.
	AppLimit int
}

// withDefaults validates cfg and fills in defaults; it panics naming the bad field.
func (cfg Config) withDefaults() Config {
	bad := func(field string, v any, want string) {
		panic(fmt.Sprintf("apisim: invalid Config.%s %v: %s", field, v, want))
	}
	if !cfg.Style.valid() {
		bad("Style", fmt.Sprintf("%q", cfg.Style), "want one of Styles()")
	}
	if cfg.Algorithm == "" {
		cfg.Algorithm = FixedWindow
		if cfg.Style == StyleShopify {
			cfg.Algorithm = TokenBucket
		}
	}
	if !cfg.Algorithm.valid() {
		bad("Algorithm", fmt.Sprintf("%q", cfg.Algorithm), "want FixedWindow, SlidingWindow or TokenBucket")
	}
	if cfg.Limit <= 0 {
		bad("Limit", cfg.Limit, "must be > 0")
	}
	if cfg.Window <= 0 {
		bad("Window", cfg.Window, "must be > 0")
	}
	if cfg.Burst < 0 {
		bad("Burst", cfg.Burst, "must be ≥ 0")
	}
	if cfg.AppLimit < 0 {
		bad("AppLimit", cfg.AppLimit, "must be ≥ 0")
	}
	if cfg.TokenLimit < 0 {
		bad("TokenLimit", cfg.TokenLimit, "must be ≥ 0")
	}
	if cfg.InputTokenLimit < 0 {
		bad("InputTokenLimit", cfg.InputTokenLimit, "must be ≥ 0")
	}
	if cfg.OutputTokenLimit < 0 {
		bad("OutputTokenLimit", cfg.OutputTokenLimit, "must be ≥ 0")
	}
	if !(cfg.UnseenShare >= 0 && cfg.UnseenShare < 1) { // also rejects NaN
		bad("UnseenShare", cfg.UnseenShare, "must be in [0, 1)")
	}
	if !(cfg.ShedShare >= 0 && cfg.ShedShare < 1) {
		bad("ShedShare", cfg.ShedShare, "must be in [0, 1)")
	}
	if cfg.SecondaryLimit < 0 {
		bad("SecondaryLimit", cfg.SecondaryLimit, "must be ≥ 0")
	}
	if cfg.SecondaryWindow < 0 {
		bad("SecondaryWindow", cfg.SecondaryWindow, "must be ≥ 0")
	}
	if cfg.SecondaryWindow == 0 {
		cfg.SecondaryWindow = time.Minute
	}
	if cfg.RetryAfterOnSuccess < 0 {
		bad("RetryAfterOnSuccess", cfg.RetryAfterOnSuccess, "must be ≥ 0")
	}
	if cfg.Latency < 0 {
		bad("Latency", cfg.Latency, "must be ≥ 0")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	names := map[string]string{sharedName: "the shared bucket"}
	routes := make(map[string]int, len(cfg.Routes))
	for prefix, limit := range cfg.Routes {
		if !strings.HasPrefix(prefix, "/") {
			bad("Routes", fmt.Sprintf("%q", prefix), "prefix must start with \"/\"")
		}
		if limit <= 0 {
			bad("Routes", fmt.Sprintf("%q: %d", prefix, limit), "limit must be > 0")
		}
		name := routeName(prefix)
		if other, dup := names[name]; dup {
			bad("Routes", fmt.Sprintf("%q", prefix), fmt.Sprintf("its bucket name %q collides with %s", name, other))
		}
		names[name] = fmt.Sprintf("%q", prefix)
		routes[prefix] = limit
	}
	cfg.Routes = routes
	return cfg
}

// sharedName is the Event.Key of the bucket shared by all paths without a route.
const sharedName = "default"

// routeName turns a path prefix into a bucket name: "/search/" → "search",
// "/repos/issues" → "repos-issues", "/" → "root".
func routeName(prefix string) string {
	name := strings.ReplaceAll(strings.Trim(prefix, "/"), "/", "-")
	if name == "" {
		return "root"
	}
	return name
}

// sortedRoutes returns the prefixes longest first, so the first match is the longest.
func sortedRoutes(routes map[string]int) []string {
	out := make([]string, 0, len(routes))
	for p := range routes {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return out
}

// ceilSeconds rounds d up to whole seconds (never negative).
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// durationOf converts a float nanosecond count to a Duration, rounding up and
// saturating, so "available at" instants are never early.
func durationOf(ns float64) time.Duration {
	if ns <= 0 || math.IsNaN(ns) {
		return 0
	}
	if ns >= math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return time.Duration(math.Ceil(ns))
}

// tokenLimits is the limit of each token quota; 0 for none.
func (cfg Config) tokenLimits() [tokenKinds]int {
	return [tokenKinds]int{totalTokens: cfg.TokenLimit, inputTokens: cfg.InputTokenLimit, outputTokens: cfg.OutputTokenLimit}
}
