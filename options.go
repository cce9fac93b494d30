package pacer

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"time"

	"github.com/pacer-go/pacer/observe"
	"github.com/pacer-go/pacer/retry"
	"github.com/pacer-go/pacer/store"
	"github.com/pacer-go/pacer/work"
)

// Option configures a [Transport]. Options are validated when they are
// created: an invalid value panics with a message naming the option.
type Option func(*config)

type config struct {
	safety       float64
	rules        []*rule
	keyFunc      func(*http.Request) string
	maxWait      time.Duration
	retries      int
	maxEndpoints int
	logger       *slog.Logger
	observer     func(observe.Attempt)
	longWait     longWaitHook
	store        store.Store
	retryPolicy  func(context.Context, *http.Response, error) (bool, error)
	prepareRetry func(*http.Request) error
	batchReserve work.Reserve
}

// defaultConfig is the configuration without options: NewTransport's
// starting point and what the zero Transport uses.
func defaultConfig() config {
	return config{
		safety:       0.9,
		retries:      retry.DefaultMax,
		maxEndpoints: DefaultMaxEndpoints,
	}
}

// WithSafetyFactor sets the share, in (0, 1], of what the transport
// estimates rather than reads that it believes (see
// AdaptiveConfig.SafetyFactor): a refill, a spread's pace, and the part of a
// token quota stated costs may spend. The default is 0.9. A request quota's
// stated Remaining is read, not estimated, and spent to its last unit.
func WithSafetyFactor(f float64) Option {
	if !(f > 0 && f <= 1) {
		panic(fmt.Sprintf("pacer: WithSafetyFactor(%v): factor must be in (0, 1]", f))
	}
	return func(c *config) { c.safety = f }
}

// WithEndpoint gives the requests matching pattern their own endpoint, keyed
// by the pattern, with at most limit requests per second and bursts of burst
// (0 means 1). Headers can lower the rate the endpoint uses, never raise it
// above limit. With limit [Inf] the pattern only separates the endpoint and
// the limit is learnt from the server alone.
//
// pattern has [http.ServeMux] syntax: "[METHOD ][HOST]/[PATH]", with
// wildcards ("GET api.example.com/repos/{owner}/{repo}/issues") and a
// trailing slash matching a subtree ("api.example.com/search/"). It is matched
// against the request URL's host and path; a pattern without a host matches
// every host, and all of them then share the one endpoint. Hosts match
// whatever their case and port (a pattern with a port panics: tell ports
// apart with [WithKeyFunc]); an IPv6 host may be written with or without
// brackets. The most specific
// pattern wins, as in ServeMux; requests matching none use the key function
// or the host.
//
// An endpoint with a finite limit is pinned: its requests always wait on its
// own limiter, even when the server says the route shares a bucket with
// others, so that nothing routes around the limit you set.
func WithEndpoint(pattern string, limit Limit, burst int) Option {
	if math.IsNaN(float64(limit)) || limit <= 0 {
		panic(fmt.Sprintf("pacer: WithEndpoint(%q): limit %v must be > 0 (use pacer.Inf for no limit)", pattern, limit))
	}
	if burst < 0 {
		panic(fmt.Sprintf("pacer: WithEndpoint(%q): negative burst %d", pattern, burst))
	}
	r := &rule{pattern: pattern, option: "WithEndpoint"}
	if limit != Inf {
		r.ceiling, r.burst = limit, max(burst, 1)
	}
	return func(c *config) { c.rules = append(c.rules, r) }
}

// WithQuota states a quota of the requests matching pattern: at most limit
// of them per window, counted afresh each window, the windows following
// each other from the endpoint's first request. It is the statement "5,000
// requests an hour" (WithQuota(pattern, 5000, time.Hour)), which a rate
// serves badly: 1.39 a second paces a job of 100 that the quota affords at
// once.
//
// The endpoint's limiter knows the quota from the start, as if a server
// had stated it: a request the quota affords goes at once, with no slow
// start; once a window's quota is spent, requests wait for the next
// window (up to MaxWait; see [WithMaxWait]). Once the server's responses
// state quotas of their own (any header convention [ParseHeaders] reads),
// those govern and the stated quotas are dropped: the server's count is
// exact, the statement a model of it. To stay below what the server
// allows whatever it states, set a rate with [WithEndpoint]. A server that
// states nothing and counts in windows of its own phase (starting on its
// clock's hour) can see up to twice limit in one of its windows, from a
// client that spends a whole window's worth at the end of one of these
// windows and again at the start of the next: state such a quota at half.
//
// pattern is as in [WithEndpoint], and keys the same endpoint as a
// WithEndpoint of the same pattern; a pattern may state several quotas
// (an hourly and a per-minute one), each of which a request must fit.
// With a [WithStore] store, each replica counts only its own requests
// against a stated quota: state each replica's share.
//
// It panics if limit is not positive, or window is not positive or is
// longer than [MaxResetHorizon]; NewTransport panics for a pattern as it
// does for WithEndpoint's.
func WithQuota(pattern string, limit int, window time.Duration) Option {
	if limit <= 0 {
		panic(fmt.Sprintf("pacer: WithQuota(%q, %d, %v): limit must be > 0", pattern, limit, window))
	}
	if window <= 0 || window > MaxResetHorizon {
		panic(fmt.Sprintf("pacer: WithQuota(%q, %d, %v): window must be in (0, %v]", pattern, limit, window, MaxResetHorizon))
	}
	r := &rule{pattern: pattern, option: "WithQuota", stated: []Quota{{Limit: float64(limit), Window: window}}}
	return func(c *config) { c.rules = append(c.rules, r) }
}

// WithKeyFunc keys the requests that match no [WithEndpoint] pattern by
// fn's result instead of their scheme://host; an empty result falls back to
// scheme://host. fn is called for every request and must be fast and safe
// for concurrent use.
//
// Keying by credential gives each API token its own limit, as most APIs
// count quotas per token. Hash the credential rather than returning it: keys
// are kept in memory, shown by [Transport.Stats], logged and carried by
// [*RateLimitError] (see the example).
//
// Responses naming a server-side bucket are scoped by the key: two keys
// never share a bucket's limiter, so per-credential keys keep per-credential
// buckets.
func WithKeyFunc(fn func(*http.Request) string) Option {
	if fn == nil {
		panic("pacer: WithKeyFunc(nil)")
	}
	return func(c *config) { c.keyFunc = fn }
}

// WithMaxWait bounds how long a request may wait for its endpoint's
// limiter: a request whose wait would be longer than d fails at once with a
// [*RateLimitError] saying when it could go, instead of sleeping. A wait
// that would pass the request context's deadline fails at once too.
//
// The default, 0, bounds waits by the context alone, up to
// [DefaultMaxDelay]: an hourly quota that runs out is waited for, a daily
// one is refused at once with its reset. A d longer than DefaultMaxDelay
// lets requests wait that long (WithMaxWait(48*time.Hour) for a job that
// may spill into tomorrow's quota).
//
// A pause a server asks for (Retry-After, a spent quota's reset) is believed
// up to the longer of d and DefaultMaxDelay, so a hostile or broken header
// cannot park an endpoint for longer, while a short d refuses early without
// making the endpoint come back before the server said.
func WithMaxWait(d time.Duration) Option {
	if d < 0 {
		panic(fmt.Sprintf("pacer: WithMaxWait(%v): negative duration", d))
	}
	return func(c *config) { c.maxWait = d }
}

// WithMaxEndpoints caps the endpoints tracked at once (default
// [DefaultMaxEndpoints]), so attacker-chosen hosts or keys cannot grow memory
// without bound. At the cap, the least recently used idle endpoints are
// evicted, those still paused by their server last. If every endpoint has a
// request in progress, the table exceeds the cap by at most the number of
// requests in progress.
func WithMaxEndpoints(n int) Option {
	if n < 1 {
		panic(fmt.Sprintf("pacer: WithMaxEndpoints(%d): must be >= 1", n))
	}
	return func(c *config) { c.maxEndpoints = n }
}

// WithLogger sets where the transport and its limiters log: debug when a
// limiter retunes and when a request is retried or refused, warn when a
// server answers 429. nil (the default) disables logging.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithStore keeps every endpoint's buckets in s, shared with all limiters
// that use s: other Transports in this process with one [store.Memory], or
// Transports in many processes with redisstore. Endpoints with the same key
// then pace against one quota, and a limit or Retry-After one of them learns
// applies to all. Without it (the default) buckets are local and cost no
// store round trips.
func WithStore(s store.Store) Option {
	if s == nil {
		panic("pacer: WithStore(nil)")
	}
	return func(c *config) { c.store = s }
}

// WithObserver calls fn after every attempt of every request, including
// attempts the limiter refused, for metrics (see the metrics example). fn
// runs on the request's goroutine: it must be fast and safe for concurrent
// use.
func WithObserver(fn func(observe.Attempt)) Option {
	if fn == nil {
		panic("pacer: WithObserver(nil)")
	}
	return func(c *config) { c.observer = fn }
}

// WithLongWaits calls fn when a request is about to wait at least threshold
// for its endpoint's limiter (a spent quota's reset, a Retry-After, a
// server that keeps refusing), before it waits, with the time it expects
// to go: so an application can say "waiting for GitHub's reset at 14:05"
// instead of looking hung. fn runs on the request's goroutine: it must be
// fast and safe for concurrent use. threshold must be positive.
func WithLongWaits(threshold time.Duration, fn func(LongWait)) Option {
	if fn == nil {
		panic("pacer: WithLongWaits(threshold, nil)")
	}
	if threshold <= 0 {
		panic(fmt.Sprintf("pacer: WithLongWaits(%v, fn): threshold must be > 0", threshold))
	}
	return func(c *config) { c.longWait = longWaitHook{threshold: threshold, fn: fn} }
}
