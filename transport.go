package pacer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pacer-go/pacer/store"
)

// Transport is an [http.RoundTripper] that keeps every request inside the
// rate limits of the endpoint it goes to.
//
// Each request is mapped to an endpoint key: the [WithEndpoint] pattern it
// matches, else the [WithKeyFunc] result, else its scheme://host. Each key
// gets an [Adaptive] limiter on first use, which learns the server's quota
// from response headers and spends it evenly (scaled by the safety factor),
// honours Retry-After, and probes (CUBIC) when the server only answers 429.
//
// When responses name a server-side bucket (X-RateLimit-Bucket,
// X-RateLimit-Resource), the routes the server puts in one bucket share one
// limiter, keyed "scope#bucket" (scope: the key, or scheme://host for a
// pattern). A route is an endpoint key plus the request path's first segment,
// which is where GitHub splits its resources (/search, /graphql, the rest
// "core"); its first request waits on the key's own limiter and reveals the
// bucket, later ones wait on the bucket's. For finer splits give the routes
// their own keys with [WithEndpoint] patterns.
//
// A request waits for its limiter before it is sent, fails at once with a
// [*RateLimitError] when that wait would pass its context's deadline or the
// transport's MaxWait, and is retried (after a fresh wait) when the response
// is a 429, a 503 or GitHub's 403 with an exhausted quota, if it can be
// replayed safely (see [WithRetries]).
//
// A Transport is safe for concurrent use. It never modifies a request, always
// closes the request body, and leaves the response body to the caller. Its
// memory is bounded: idle endpoints are evicted (see [WithIdleTTL],
// [WithMaxEndpoints]) lazily, without a background goroutine, so a Transport
// needs no Close.
type Transport struct {
	base     http.RoundTripper
	eps      *endpoints
	mux      *http.ServeMux // nil without WithEndpoint
	keyFunc  func(*http.Request) string
	retries  int
	retryAll bool
	maxWait  time.Duration
	maxDelay time.Duration
	logger   *slog.Logger
	observer func(Attempt)
	longWait longWaitHook
	views    sync.Pool // *http.Request views for pattern matching
}

// Option configures a [Transport]. Options are validated when they are
// created: an invalid value panics with a message naming the option.
type Option func(*config)

type config struct {
	safety       float64
	rules        []*rule
	keyFunc      func(*http.Request) string
	maxWait      time.Duration
	maxDelay     time.Duration
	retries      int
	retryAll     bool
	slowStart    int
	idleTTL      time.Duration
	maxEndpoints int
	logger       *slog.Logger
	observer     func(Attempt)
	longWait     longWaitHook
	store        store.Store
}

// NewTransport returns a Transport that sends requests through base once
// their endpoint's limiter admits them. A nil base means
// [http.DefaultTransport]. base is wrapped, never modified.
//
// It panics if two [WithEndpoint] patterns conflict or one is invalid, with a
// message naming the pattern, as [http.ServeMux.Handle] does.
func NewTransport(base http.RoundTripper, opts ...Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	c := config{
		safety:       0.9,
		maxDelay:     DefaultMaxDelay,
		retries:      DefaultRetries,
		slowStart:    DefaultSlowStart,
		idleTTL:      DefaultIdleTTL,
		maxEndpoints: DefaultMaxEndpoints,
	}
	for _, o := range opts {
		if o == nil {
			panic("pacer: NewTransport: nil Option")
		}
		o(&c)
	}
	t := &Transport{
		base:     base,
		keyFunc:  c.keyFunc,
		retries:  c.retries,
		retryAll: c.retryAll,
		maxWait:  c.maxWait,
		maxDelay: c.maxDelay,
		logger:   c.logger,
		observer: c.observer,
		longWait: c.longWait,
		views:    sync.Pool{New: func() any { return new(http.Request) }},
	}
	if len(c.rules) > 0 {
		t.mux = http.NewServeMux()
		for _, r := range c.rules {
			register(t.mux, r)
		}
	}
	t.eps = newEndpoints(c.idleTTL, c.maxEndpoints, func(key string, ceiling Limit, burst int) *Adaptive {
		return NewAdaptive(AdaptiveConfig{
			Key:          key,
			SafetyFactor: c.safety,
			Ceiling:      ceiling,
			CeilingBurst: burst,
			MaxWait:      c.maxWait,
			MaxDelay:     c.maxDelay,
			SlowStart:    c.slowStart,
			Logger:       c.logger,
			Store:        c.store,
		})
	})
	return t
}

// routeMarker is the handler registered for a pattern: the mux is only asked
// which pattern matches, never to serve.
type routeMarker struct{ rule *rule }

func (*routeMarker) ServeHTTP(http.ResponseWriter, *http.Request) {}

func register(mux *http.ServeMux, r *rule) {
	pattern := muxPattern(r.pattern)
	defer func() {
		if p := recover(); p != nil {
			panic(fmt.Sprintf("pacer: WithEndpoint(%q): %v", r.pattern, p))
		}
	}()
	mux.Handle(pattern, &routeMarker{rule: r})
}

// muxPattern returns pattern as the mux must see it to match what
// [Transport.match] shows it: the host lower-cased and an IPv6 literal
// unbracketed. A host with a port panics: ServeMux ignores the request's
// port, so the pattern would never match.
func muxPattern(pattern string) string {
	method, rest := "", pattern
	if i := strings.IndexAny(pattern, " \t"); i >= 0 {
		method, rest = pattern[:i+1], strings.TrimLeft(pattern[i:], " \t")
	}
	i := strings.IndexByte(rest, '/')
	if i <= 0 {
		return pattern // no host; ServeMux judges the rest
	}
	host := rest[:i]
	if strings.ContainsAny(host, " \t") || strings.Contains(rest, "://") {
		panic(fmt.Sprintf("pacer: WithEndpoint(%q): %q is not a host", pattern, host))
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		panic(fmt.Sprintf("pacer: WithEndpoint(%q): host %q has a port, which is never matched: use %q (WithKeyFunc can tell ports apart)", pattern, host, h))
	}
	host = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return method + host + rest[i:]
}

// matchHost returns the host of a request URL as muxPattern writes pattern
// hosts: without port or IPv6 brackets, lower-cased. It allocates only for a
// host with upper-case letters.
func matchHost(h string) string {
	if strings.IndexByte(h, ':') >= 0 {
		if hh, _, err := net.SplitHostPort(h); err == nil {
			h = hh
		}
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	for i := 0; i < len(h); i++ {
		if 'A' <= h[i] && h[i] <= 'Z' {
			return strings.ToLower(h)
		}
	}
	return h
}

// WithSafetyFactor sets the fraction of a server's advertised quota the
// transport plans to use, in (0, 1]; the default 0.9 leaves room for clock
// skew and other clients.
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
	r := &rule{pattern: pattern}
	if limit != Inf {
		r.ceiling, r.burst = limit, max(burst, 1)
	}
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

// WithMaxWait makes a request whose wait for its limiter would exceed d fail
// at once with a [*RateLimitError] instead of sleeping. The default, 0, lets
// a request wait as long as its context allows (a server-requested pause is
// capped by [WithMaxDelay]); a wait that would pass the context's deadline
// always fails at once.
func WithMaxWait(d time.Duration) Option {
	if d < 0 {
		panic(fmt.Sprintf("pacer: WithMaxWait(%v): negative duration", d))
	}
	return func(c *config) { c.maxWait = d }
}

// WithMaxDelay caps any pause a server asks for (Retry-After, a quota reset
// time): hostile or broken values cannot park an endpoint for longer than d.
// The default is [DefaultMaxDelay].
func WithMaxDelay(d time.Duration) Option {
	if d <= 0 {
		panic(fmt.Sprintf("pacer: WithMaxDelay(%v): duration must be > 0", d))
	}
	return func(c *config) { c.maxDelay = d }
}

// WithRetries sets how many times a throttled request (429, 503, or 403 with
// an exhausted quota or a Retry-After) is retried; 0 disables retries. The
// default is [DefaultRetries].
//
// A request is retried only when its body can be replayed (no body, or
// Request.GetBody set, as http.NewRequest does for in-memory bodies) and it
// is idempotent: GET, HEAD, OPTIONS, TRACE, PUT, DELETE, or any method with an
// Idempotency-Key or X-Idempotency-Key header. [WithRetryNonIdempotent]
// widens that. The server has the last word: x-should-retry: false or
// Stripe-Should-Retry: false prevents a retry, and x-should-retry: true (or
// Stripe-Should-Retry: true) allows one for any replayable request.
//
// Every retry waits for the endpoint's limiter again, at least as long as
// the response's Retry-After; a wait that would exceed MaxWait or the
// context's deadline returns a [*RateLimitError] at once.
func WithRetries(n int) Option {
	if n < 0 {
		panic(fmt.Sprintf("pacer: WithRetries(%d): negative count", n))
	}
	return func(c *config) { c.retries = n }
}

// WithRetryNonIdempotent allows retrying throttled requests of any method
// (POST, PATCH, …) whose body can be replayed. A 429 usually means the
// server did not act on the request, but only the API's documentation can
// promise that; use this when it does.
func WithRetryNonIdempotent() Option {
	return func(c *config) { c.retryAll = true }
}

// WithSlowStart sets how many requests may be in flight to an endpoint
// before its first response arrives (default [DefaultSlowStart]): a fan-out
// of a thousand requests onto an exhausted quota then costs n 429s, not a
// thousand. 1 is the most careful, at a round trip for every job.
func WithSlowStart(n int) Option {
	if n < 1 {
		panic(fmt.Sprintf("pacer: WithSlowStart(%d): must be >= 1", n))
	}
	return func(c *config) { c.slowStart = n }
}

// WithIdleTTL sets how long an endpoint may go unused before it is
// forgotten (default [DefaultIdleTTL]). An endpoint with a request in
// progress, or still paused by its server, is never evicted; a forgotten one
// starts over (in slow start) on its next request.
func WithIdleTTL(d time.Duration) Option {
	if d <= 0 {
		panic(fmt.Sprintf("pacer: WithIdleTTL(%v): duration must be > 0", d))
	}
	return func(c *config) { c.idleTTL = d }
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
func WithObserver(fn func(Attempt)) Option {
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

// LongWait is a wait [WithLongWaits] reports.
type LongWait struct {
	Endpoint string    // the endpoint's key (see EndpointStats.Key)
	Method   string    // the request's method
	Until    time.Time // when the request expects to go
	Info     Info      // what the endpoint's last response said
}

type longWaitHook struct {
	threshold time.Duration
	fn        func(LongWait)
}

// report calls the hook if lim would hold a request from now for at least
// the threshold. The limiter's state is read, not changed.
func (h longWaitHook) report(lim *endpoint, method string, now time.Time) {
	if h.fn == nil {
		return
	}
	if at := lim.lim.nextAllowed(); at.Sub(now) >= h.threshold {
		h.fn(LongWait{Endpoint: lim.key, Method: method, Until: at, Info: lim.lim.Stats().LastInfo})
	}
}

// Attempt describes one attempt of a request, for [WithObserver].
type Attempt struct {
	// Endpoint is the key of the limiter the attempt waited on: a pattern, a
	// key, scheme://host, or "scope#bucket" for a server-named bucket.
	Endpoint string
	// Method is the request's method.
	Method string
	// Retry is 0 for a request's first attempt and n for its n-th retry.
	Retry int
	// Wait is how long the attempt waited before being sent: the retry
	// backoff, if any, plus the limiter's wait.
	Wait time.Duration
	// Latency is how long the base transport took to return; 0 when the
	// attempt was not sent.
	Latency time.Duration
	// Status is the response's status code; 0 when there was no response.
	Status int
	// Throttled reports a response saying the rate limit was hit: a 429, a
	// 503, or a 403 with an exhausted quota or a Retry-After.
	Throttled bool
	// Err is why there was no response: a [*RateLimitError] when the
	// limiter refused at once, the context's error, or the base transport's.
	Err error
}

type costKey struct{}

// WithCost returns a context whose requests cost n units of the endpoint's
// token-denominated quotas (the tokens quotas of LLM APIs): a limiter that
// has learnt such a quota admits the request only when n units are left.
// Request quotas are charged one per request regardless. A negative or NaN
// cost counts as 0.
func WithCost(ctx context.Context, n float64) context.Context {
	if !(n > 0) {
		n = 0
	}
	return context.WithValue(ctx, costKey{}, n)
}

func costFrom(ctx context.Context) float64 {
	n, _ := ctx.Value(costKey{}).(float64)
	return n
}

// CloseIdleConnections closes the idle connections of the base transport, if
// it has a CloseIdleConnections method (http.Client.CloseIdleConnections
// calls this).
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// EndpointStats is a snapshot of one endpoint of a [Transport].
type EndpointStats struct {
	// Key is the endpoint's key: a pattern, a key function's result,
	// scheme://host, or "scope#bucket" for a server-named bucket.
	Key string
	AdaptiveStats
	// Retries counts throttled responses of this endpoint that were retried.
	Retries int64
	// Refused counts requests refused at once with a [*RateLimitError].
	Refused int64
	// Errors counts attempts the base transport failed (no response).
	Errors int64
}

// Stats returns a snapshot of every endpoint the transport tracks, sorted
// by key. Each endpoint's figures are read separately, not at one instant.
func (t *Transport) Stats() []EndpointStats {
	eps := t.eps.snapshot()
	out := make([]EndpointStats, 0, len(eps))
	for _, ep := range eps {
		out = append(out, EndpointStats{
			Key:           ep.key,
			AdaptiveStats: ep.lim.Stats(),
			Retries:       ep.retries.Load(),
			Refused:       ep.refused.Load(),
			Errors:        ep.failures.Load(),
		})
	}
	slices.SortFunc(out, func(a, b EndpointStats) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// keyOf returns r's endpoint key and the rule of the pattern that produced
// it: the matching pattern, else the key function's result; "" when r is
// keyed by its scheme://host.
func (t *Transport) keyOf(r *http.Request) (string, *rule) {
	if t.mux != nil {
		if rl := t.match(r); rl != nil {
			return rl.pattern, rl
		}
	}
	if t.keyFunc != nil {
		return t.keyFunc(r), nil
	}
	return "", nil
}

// keyEndpoint acquires the endpoint of r's key.
func (t *Transport) keyEndpoint(r *http.Request, u *urlParts) *endpoint {
	if k, rl := t.keyOf(r); k != "" {
		return t.eps.acquire(k, &spec{rule: rl})
	}
	return t.eps.acquireHost(u)
}

// limiterEndpoint acquires the endpoint whose limiter r waits on: the
// server-named bucket its route is bound to, else ep itself.
func (t *Transport) limiterEndpoint(ep *endpoint, u *urlParts) *endpoint {
	return t.limiterBound(ep, u, nil)
}

// seenBinding is the binding of a request's route as limiterBound found it,
// and the route table it came from: learn reuses it while ep's table is
// the same (bind replaces the table), sparing a second hash of the route.
type seenBinding struct {
	routes *map[routeKey]binding
	b      binding
}

// limiterBound is limiterEndpoint, recording in seen (if not nil) the
// binding it found.
func (t *Transport) limiterBound(ep *endpoint, u *urlParts, seen *seenBinding) *endpoint {
	var b binding
	if m := ep.routes.Load(); m != nil {
		b = (*m)[routeKeyOf(ep, u)]
		if seen != nil {
			*seen = seenBinding{routes: m, b: b}
		}
	}
	if b.key != "" {
		return t.eps.acquireBucket(b.key, b.name)
	}
	return ep
}

// peekLimiter returns the endpoint whose limiter r would wait on, without
// creating or counting anything; nil if it is not tracked.
func (t *Transport) peekLimiter(r *http.Request) *endpoint {
	u := partsOf(r)
	var ep *endpoint
	if k, _ := t.keyOf(r); k != "" {
		ep = t.eps.peek(k)
	} else {
		ep = t.eps.peekHost(&u)
	}
	if ep == nil {
		return nil
	}
	if b := ep.boundBucket(&u); b.key != "" {
		if bep := t.eps.peek(b.key); bep != nil {
			return bep
		}
	}
	return ep
}

// match returns the rule of the pattern r matches, or nil.
func (t *Transport) match(r *http.Request) *rule {
	view := r
	// ServeMux matches on Request.Host; a client request's Host may be empty
	// or a virtual host, and its endpoint is where it is sent: URL.Host.
	// Its port is not matched (ServeMux ignores it) and its case does not
	// matter.
	if host := matchHost(r.URL.Host); r.Host != host || r.Method == "" {
		v := t.views.Get().(*http.Request)
		v.Method, v.Host, v.URL = r.Method, host, r.URL
		if v.Method == "" {
			v.Method = http.MethodGet
		}
		view = v
		defer func() {
			*v = http.Request{}
			t.views.Put(v)
		}()
	}
	// A path that needs cleaning, or the /tree → /tree/ redirect, yields
	// ServeMux's redirect handler rather than a marker: no pattern matched
	// the request as sent.
	h, _ := t.mux.Handler(view)
	if m, ok := h.(*routeMarker); ok {
		return m.rule
	}
	return nil
}

// learn reports an admitted attempt's outcome to the limiter that admitted
// it and learns the server-named bucket of ep's route from it.
// sig is what the response's body said; now is when the response arrived.
// seen is the binding limiterBound found for the request, or nil.
func (t *Transport) learn(ep, lim *endpoint, u *urlParts, seen *seenBinding, p *Permit, status int, info Info, sig Signal, now time.Time) {
	if lim.bucket != "" && info.Bucket != "" && info.Bucket != lim.bucket {
		// The server moved this route to another bucket: what the response
		// says belongs to that bucket (taught below), not to lim's.
		p.doneAt(Outcome{}, now)
	} else {
		p.doneAt(Outcome{Status: status, Info: info, Signal: sig}, now)
	}
	if info.Bucket == "" || ep.pinned || len(info.Bucket) > maxBucketName {
		return
	}
	var b binding
	if m := ep.routes.Load(); seen != nil && m == seen.routes {
		b = seen.b
	} else {
		b = ep.boundBucket(u)
	}
	rebind := b.name != info.Bucket
	if rebind {
		scope := ep.key
		if ep.hostScoped {
			scope = hostKey(u)
		}
		b = binding{key: scope + "#" + info.Bucket, name: info.Bucket}
	}
	if lim.bucket != info.Bucket {
		// Teach first: requests the binding sends to the bucket's limiter
		// must find it knowing what this response said.
		t.eps.teachBucket(b.key, b.name, lim.lim, status, info)
	}
	if rebind {
		ep.bind(u, b)
	}
}

func (t *Transport) release(ep, lim *endpoint) {
	t.releaseAt(ep, lim, nanotime())
}

// releaseAt is release at now on the table's clock, for a caller that has
// read the clock already.
func (t *Transport) releaseAt(ep, lim *endpoint, now int64) {
	if lim != ep {
		t.eps.releaseAt(lim, now)
	}
	t.eps.releaseAt(ep, now)
}

// report calls the observer, if any.
func (t *Transport) report(a Attempt) {
	if t.observer != nil {
		t.observer(a)
	}
}

// isRateLimitError reports whether err is a *RateLimitError.
func isRateLimitError(err error) bool {
	var rle *RateLimitError
	return errors.As(err, &rle)
}
