package pacer

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacer-go/pacer/internal/response"
)

// endpoint is one limiter in a transport's table. The table holds two kinds:
// the endpoint of a key (a route pattern, a KeyFunc result or scheme://host),
// and the endpoint of a server-named bucket ("scope#bucket") that several keys
// share once responses have named it.
type endpoint struct {
	key string
	lim *Adaptive
	// clock bounds the server's clock offset from its Date headers, for
	// the absolute resets it states.
	clock response.Clock
	// retryBudget bounds the retries of requests the server shed.
	retryBudget retryBudget
	// bucket is the server's name for this limiter's bucket; "" for the
	// endpoint of a key.
	bucket string
	// pinned endpoints have a ceiling the user configured (WithEndpoint with a
	// finite limit): their requests always wait on their own limiter, so a
	// server-named bucket can never route around that ceiling.
	pinned bool
	// hostScoped endpoints come from a route pattern, which may match several
	// hosts: server-named buckets are scoped by the request's scheme://host
	// rather than by the key.
	hostScoped bool

	// refs counts requests between acquire and release. An evictor (under
	// the table's write lock) takes an endpoint out only by swapping a count
	// of 0 for evictedRefs, so an endpoint with a request in progress is
	// never evicted, and a request that reaches an endpoint through a
	// cache rather than the table (tryRef) finds out that it is gone.
	refs atomic.Int32
	used atomic.Int64 // clockNow() at creation and at the last release

	retries  atomic.Int64
	refused  atomic.Int64
	failures atomic.Int64

	mu     sync.Mutex                 // serialises writers of routes
	routes atomic.Pointer[routeTable] // copy-on-write; nil until a response names a bucket
	// watch is what the endpoint of a host has seen of its routes, to keep
	// one quota per route when they show one (routes.go); nil for any
	// other endpoint. tmpls binds route templates to their limiters.
	watch *routeWatch
	tmpls atomic.Pointer[routeTable]
	// bucketEP is the bucket endpoint a route of this one was last sent to:
	// the next request bound to the same bucket takes it from here, not
	// from the table (see tryRef).
	bucketEP atomic.Pointer[endpoint]
}

// evictedRefs is the count of requests of an endpoint taken out of the
// table: negative whatever number of late tryRefs add to it.
const evictedRefs = math.MinInt32 / 2

// tryRef counts a request of ep, found outside the table's lock (in a
// cache), unless ep has been evicted.
func (ep *endpoint) tryRef() bool { return ep.refs.Add(1) > 0 }

// evict marks ep, idle, as taken out of the table; false if a request
// took it meanwhile. Called under the table's write lock.
func (ep *endpoint) evict() bool { return ep.refs.CompareAndSwap(0, evictedRefs) }

// endpoints is a transport's table of limiters: key → endpoint, created on
// first use, evicted when idle.
//
// Reads take a shared lock and neither allocate nor read the clock; only
// creating an endpoint and evicting take the exclusive lock. The common
// request (the host it called last, a route's bucket as last time) takes
// no lock at all: it finds its endpoint in a one-entry cache and counts
// itself in with tryRef, which fails once the endpoint is evicted. Eviction is
// lazy: the first request to end after a sweep falls due runs it, and
// creating an endpoint at the cap makes room, so there is no background
// goroutine to stop.
type endpoints struct {
	newLimiter func(key string, ceiling Limit, burst int, stated []Quota, routed bool) *Adaptive
	max        int

	mu sync.RWMutex
	m  map[string]*endpoint
	// lastHost is the endpoint of the last request keyed by scheme://host:
	// a client that calls one host (nearly all) finds it without the lock
	// and the map (see tryRef).
	lastHost atomic.Pointer[endpoint]

	nextSweep atomic.Int64 // clockNow() after which the next TTL sweep runs
}

// idleTTL is how long an endpoint is kept without traffic, at least: ten
// minutes outlasts the minute windows most quotas use, so a limiter is not
// forgotten between a job's bursts. An endpoint whose server states a longer
// window (an hourly or daily quota) is kept while that window lasts (see
// sweep): what it learnt of the window is what keeps the next burst inside
// it. Memory is bounded by the cap on endpoints, not by this.
const idleTTL = 10 * time.Minute

func newEndpoints(max int, newLimiter func(string, Limit, int, []Quota, bool) *Adaptive) *endpoints {
	e := &endpoints{newLimiter: newLimiter, max: max, m: make(map[string]*endpoint)}
	e.nextSweep.Store(clockNow() + sweepEvery)
	return e
}

// sweepEvery spaces TTL sweeps so each costs at most one table scan per
// quarter TTL: an idle endpoint goes between idleTTL and 1.25·idleTTL after
// its last use (or after its quota's window, when that is later).
const sweepEvery = int64(idleTTL / 4)

// rule is what a route pattern configured for the endpoint it keys.
type rule struct {
	pattern string
	option  string // the option that configured it, for a panic's message
	ceiling Limit  // 0: none
	burst   int
	stated  []Quota // WithQuota's
}

// spec says how to create an endpoint that does not exist yet.
type spec struct {
	rule   *rule  // the route pattern that produced the key, or nil
	bucket string // the server-named bucket this endpoint is the limiter of, or ""
	host   bool   // keyed by scheme://host, the default key
	route  bool   // bucket is a route's template (routeBinding)
}

// acquire returns the endpoint for key, creating it on first use, and counts
// a request in progress on it until release. It does not read the clock: an
// endpoint in use cannot be evicted, so only the time of its last release
// matters.
func (e *endpoints) acquire(key string, sp *spec) *endpoint {
	e.mu.RLock()
	ep := e.m[key]
	if ep != nil {
		ep.refs.Add(1)
	}
	e.mu.RUnlock()
	if ep == nil {
		return e.create(strings.Clone(key), sp)
	}
	return ep
}

// acquireHost is acquire for the default key scheme://host, built in a stack
// buffer so that the lookup of an existing endpoint does not allocate.
func (e *endpoints) acquireHost(u *urlParts) *endpoint {
	if ep := e.lastHost.Load(); ep != nil && isHostKey(ep.key, u) && ep.tryRef() {
		return ep
	}
	ep := e.acquireHostLocked(u)
	e.lastHost.Store(ep)
	return ep
}

// isHostKey reports whether key is u's scheme://host as it stands: true in
// the common case of a URL already in the key's form (lower case, no
// default port), which appendHostKey would build again.
func isHostKey(key string, u *urlParts) bool {
	s, h := u.scheme, u.host
	return len(key) == len(s)+len("://")+len(h) && key[:len(s)] == s &&
		key[len(s):len(s)+len("://")] == "://" && key[len(s)+len("://"):] == h
}

// acquireHostLocked is acquireHost through the table.
func (e *endpoints) acquireHostLocked(u *urlParts) *endpoint {
	var buf [96]byte
	b := appendHostKey(buf[:0], u.scheme, u.host)
	e.mu.RLock()
	ep := e.m[string(b)] // no allocation: the compiler reuses b for the lookup
	if ep != nil {
		ep.refs.Add(1)
	}
	e.mu.RUnlock()
	if ep == nil {
		return e.create(string(b), &spec{host: true})
	}
	return ep
}

// acquireBucket returns the shared endpoint of a server-named bucket,
// creating it on first use.
func (e *endpoints) acquireBucket(b binding) *endpoint {
	return e.acquire(b.key, b.spec())
}

// peek returns the endpoint for key without creating it or counting a
// request, or nil.
func (e *endpoints) peek(key string) *endpoint {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.m[key]
}

func (e *endpoints) peekHost(u *urlParts) *endpoint {
	var buf [96]byte
	b := appendHostKey(buf[:0], u.scheme, u.host)
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.m[string(b)]
}

// release ends a request that acquire counted, and runs the idle sweep when
// it is due.
func (e *endpoints) release(ep *endpoint) { e.releaseAt(ep, clockNow()) }

// releaseAt is release at now, a package-clock reading (clockNow).
func (e *endpoints) releaseAt(ep *endpoint, now int64) {
	ep.used.Store(now) // before refs drops: an evictor seeing 0 sees this too
	ep.refs.Add(-1)
	e.maybeSweep(now)
}

func (e *endpoints) create(key string, sp *spec) *endpoint {
	return e.insert(e.newEndpoint(key, sp), clockNow(), 1)
}

// teachBucket gives the limiter of a server-named bucket what a response
// said that came through another limiter (a route's first response, or one
// the server moved): Adaptive.Learn applies it without touching the in-flight
// count. A bucket seen for the first time is created here, knowing from the
// start any pause or exhausted quota the response announced; without that it
// would start in slow start, blind, and let a request into a 429.
//
// from is the limiter that admitted the request: its requests in flight
// may be bound for the bucket too, and the bucket's limiter counts them as
// unseen (feed), not as another client's spending.
func (e *endpoints) teachBucket(b binding, from *Adaptive, m *response.Meaning) {
	ep := e.peek(b.key)
	if ep == nil {
		fresh := e.newEndpoint(b.key, b.spec())
		fresh.lim.feed(from)
		fresh.lim.learnOther(m) // before anyone else can see it
		if ep = e.insert(fresh, clockNow(), 0); ep == fresh {
			fresh.lim.sawFleet(from, m)
			return
		}
	}
	ep.lim.feed(from)
	ep.lim.learnOther(m)
	ep.lim.sawFleet(from, m)
}

func (e *endpoints) newEndpoint(key string, sp *spec) *endpoint {
	ep := &endpoint{key: key, bucket: sp.bucket, hostScoped: sp.rule != nil}
	if sp.host {
		ep.watch = &routeWatch{seen: make(map[string]routeFigures)}
		ep.watch.undecided.Store(true)
	}
	var ceiling Limit
	var burst int
	var stated []Quota
	if sp.rule != nil {
		stated = sp.rule.stated
		if sp.rule.ceiling > 0 {
			ceiling, burst = sp.rule.ceiling, sp.rule.burst
			ep.pinned = true
		}
	}
	ep.lim = e.newLimiter(key, ceiling, burst, stated, sp.route)
	return ep
}

// insert adds fresh to the table, making room at the cap, unless an
// endpoint with its key exists; it returns the one in the table with refs
// added to its count of requests in progress (under the lock, so that no
// eviction can come in between).
func (e *endpoints) insert(fresh *endpoint, now int64, refs int32) *endpoint {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ep := e.m[fresh.key]; ep != nil { // created meanwhile
		ep.refs.Add(refs)
		ep.used.Store(now)
		return ep
	}
	if len(e.m) >= e.max {
		e.evictLRULocked()
	}
	fresh.refs.Add(refs)
	fresh.used.Store(now)
	e.m[fresh.key] = fresh
	return fresh
}

// evictable reports whether ep may be dropped now: nobody is using it and
// its limiter would admit a request at once. An endpoint whose server asked
// for a pause (Retry-After, exhausted quota) keeps it until the pause ends:
// forgetting it would let the next request through into a 429.
func evictable(ep *endpoint, wall time.Time) bool {
	return ep.refs.Load() == 0 && !ep.lim.nextAllowed().After(wall)
}

func (e *endpoints) maybeSweep(now int64) {
	next := e.nextSweep.Load()
	if now < next || !e.nextSweep.CompareAndSwap(next, now+sweepEvery) {
		return
	}
	e.sweep(now)
}

// sweep evicts the endpoints idle for longer than the TTL and than what
// their limiter learnt stays true (its quota's window; see keepUntil):
// forgetting a daily quota an hour into the day would spend the next
// burst's first round on learning it again, into a quota that may be spent.
func (e *endpoints) sweep(now int64) {
	wall := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, ep := range e.m {
		idle := now - ep.used.Load()
		if idle >= int64(idleTTL) && !ep.lim.keepUntil(wall.Add(-time.Duration(idle))).After(wall) && evictable(ep, wall) && ep.evict() {
			delete(e.m, k)
		}
	}
}

// evictLRULocked makes room at the cap. It evicts a batch (an eighth of the
// cap) of the least recently used idle endpoints, so the scan it costs is
// paid once per cap/8 new keys. Endpoints still paused by their server go
// last. When every endpoint has a request in progress nothing can go: the
// table then grows past the cap, but only by the number of requests in
// progress, and shrinks back as they finish and new keys arrive.
func (e *endpoints) evictLRULocked() {
	type cand struct {
		key  string
		ep   *endpoint
		used int64
	}
	cands := make([]cand, 0, len(e.m))
	for k, ep := range e.m {
		if ep.refs.Load() == 0 {
			cands = append(cands, cand{k, ep, ep.used.Load()})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(a.used, b.used) })
	n := len(e.m) - e.max + max(e.max/8, 1)
	// Oldest first; whether an endpoint is paused is asked only of those
	// about to go, so a batch costs one scan, not one limiter call per entry.
	wall := time.Now()
	var paused []*endpoint
	for _, c := range cands {
		if n == 0 {
			break
		}
		if c.ep.lim.nextAllowed().After(wall) {
			paused = append(paused, c.ep)
			continue
		}
		if c.ep.evict() {
			delete(e.m, c.key)
			n--
		}
	}
	for _, ep := range paused {
		if n == 0 {
			break
		}
		if ep.evict() {
			delete(e.m, ep.key)
			n--
		}
	}
}

// snapshot returns the endpoints currently tracked.
func (e *endpoints) snapshot() []*endpoint {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]*endpoint, 0, len(e.m))
	for _, ep := range e.m {
		out = append(out, ep)
	}
	return out
}

func (e *endpoints) len() int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return len(e.m)
}

// appendHostKey appends the default endpoint key of a URL: scheme://host,
// lower-cased, with the scheme's default port elided, so that
// "HTTPS://API.example.com:443" and "https://api.example.com" share a limit.
func appendHostKey(b []byte, scheme, host string) []byte {
	b = appendLower(b, scheme)
	b = append(b, "://"...)
	if strings.IndexByte(host, ':') >= 0 {
		if p := defaultPort(scheme); p != "" {
			host = strings.TrimSuffix(host, p)
		}
	}
	return appendLower(b, host)
}

func defaultPort(scheme string) string {
	switch scheme {
	case "https":
		return ":443"
	case "http":
		return ":80"
	}
	switch {
	case strings.EqualFold(scheme, "https"), strings.EqualFold(scheme, "wss"):
		return ":443"
	case strings.EqualFold(scheme, "http"), strings.EqualFold(scheme, "ws"):
		return ":80"
	}
	return ""
}

// appendLower appends s lower-cased (ASCII: hosts are ASCII or punycode).
func appendLower(b []byte, s string) []byte {
	start := len(b)
	b = append(b, s...)
	for i := start; i < len(b); i++ {
		if c := b[i]; 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return b
}

// hostKey returns the default endpoint key of a request URL.
func hostKey(u *urlParts) string {
	var buf [96]byte
	return string(appendHostKey(buf[:0], u.scheme, u.host))
}

func partsOf(r *http.Request) urlParts {
	return urlParts{method: r.Method, scheme: r.URL.Scheme, host: r.URL.Host, path: r.URL.Path}
}

// Routing: which endpoint and limiter a request waits on (route patterns,
// key functions, hosts, server-named buckets), and teaching a server-named
// bucket what a response said. It sits with the table it routes into.

// maxRoutesPerEndpoint bounds the server-named bucket bindings one endpoint
// learns, so a server inventing bucket names per path cannot grow memory.
const maxRoutesPerEndpoint = 64

// maxBucketName bounds the length of a server-named bucket that is kept; a
// longer (hostile or broken) name is ignored.
const maxBucketName = 128

// binding is the server-named bucket a route was last seen in.
type binding struct {
	key   string // the bucket endpoint's key, "scope#name"
	name  string // the name the server gave, or the route's template
	route bool   // a route's own limiter (routeBinding), not a server-named bucket's
}

// spec is what the endpoint of b's limiter is made from.
func (b binding) spec() *spec { return &spec{bucket: b.name, route: b.route} }

// routeKey identifies the part of an endpoint's traffic a server-named bucket
// was learned for: the first path segment (GitHub's resources split there:
// /search, /graphql, everything else "core"), and the host for endpoints
// whose key spans hosts.
type routeKey struct{ host, seg string }

func routeKeyOf(ep *endpoint, u *urlParts) routeKey {
	rk := routeKey{seg: firstSegment(u.path)}
	if ep.hostScoped {
		rk.host = u.host
	}
	return rk
}

// urlParts is the little of a request the table needs: its method and
// what of its URL keys it.
type urlParts struct{ method, scheme, host, path string }

func firstSegment(p string) string {
	p = strings.TrimPrefix(p, "/")
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return p
}

// boundBucket returns the server-named bucket u's route is bound to; its
// zero value when none.
func (ep *endpoint) boundBucket(u *urlParts) binding {
	t := ep.routes.Load()
	if t == nil {
		return binding{}
	}
	b, _ := t.get(routeKeyOf(ep, u))
	return b
}

// bind records that a response for u's route named bucket b. It returns
// false when that was known already or cannot be kept: pinned endpoints are
// never bound, and an endpoint keeps at most maxRoutesPerEndpoint routes.
func (ep *endpoint) bind(u *urlParts, b binding) bool {
	if ep.pinned {
		return false
	}
	rk := routeKeyOf(ep, u)
	ep.mu.Lock()
	defer ep.mu.Unlock()
	old := ep.routes.Load()
	if old != nil {
		if cur, ok := old.get(rk); ok && cur == b {
			return false
		} else if !ok && old.len() >= maxRoutesPerEndpoint {
			return false
		}
	}
	// Copy the strings out of the request so the binding does not keep the
	// caller's URL alive.
	ep.routes.Store(old.with(routeKey{host: strings.Clone(rk.host), seg: strings.Clone(rk.seg)}, b))
	return true
}

// routeTable is an endpoint's route bindings, copied on write. A few
// routes (a client of GitHub calls one or two of its resources) are found
// by comparing strings: in CPU profiles of a loopback round trip, hashing
// the two-string key and comparing it in a map cost about 35 ns a request,
// the scan a few. More routes go in a map.
type routeTable struct {
	list []routeEntry         // while there are at most routeScanMax
	m    map[routeKey]binding // beyond
}

type routeEntry struct {
	rk routeKey
	b  binding
}

// routeScanMax is about where a scan of string comparisons stops being
// cheaper than one map lookup of a two-string key.
const routeScanMax = 8

func (t *routeTable) get(rk routeKey) (binding, bool) {
	if t.m != nil {
		b, ok := t.m[rk]
		return b, ok
	}
	for i := range t.list {
		if e := &t.list[i]; e.rk.seg == rk.seg && e.rk.host == rk.host {
			return e.b, true
		}
	}
	return binding{}, false
}

// without returns a copy of t with rk unbound.
func (t *routeTable) without(rk routeKey) *routeTable {
	var out routeTable
	if t.m != nil {
		out.m = maps.Clone(t.m)
		delete(out.m, rk)
		return &out
	}
	out.list = slices.DeleteFunc(slices.Clone(t.list), func(e routeEntry) bool { return e.rk == rk })
	return &out
}

func (t *routeTable) len() int {
	if t.m != nil {
		return len(t.m)
	}
	return len(t.list)
}

// with returns a copy of t (nil: empty) with rk bound to b.
func (t *routeTable) with(rk routeKey, b binding) *routeTable {
	var out routeTable
	var list []routeEntry
	var m map[routeKey]binding
	if t != nil {
		list, m = t.list, t.m
	}
	switch {
	case m != nil:
		out.m = maps.Clone(m)
		out.m[rk] = b
	default:
		out.list = slices.DeleteFunc(slices.Clone(list), func(e routeEntry) bool { return e.rk == rk })
		out.list = append(out.list, routeEntry{rk, b})
		if len(out.list) > routeScanMax {
			out.m = make(map[routeKey]binding, len(out.list))
			for _, e := range out.list {
				out.m[e.rk] = e.b
			}
			out.list = nil
		}
	}
	return &out
}

// routeMarker is the handler registered for a pattern: the mux is only asked
// which pattern matches, never to serve.
type routeMarker struct{ rule *rule }

func (*routeMarker) ServeHTTP(http.ResponseWriter, *http.Request) {}

func register(mux *http.ServeMux, r *rule) {
	pattern := muxPattern(r.option, r.pattern)
	defer func() {
		if p := recover(); p != nil {
			panic(fmt.Sprintf("pacer: %s(%q): %v", r.option, r.pattern, p))
		}
	}()
	mux.Handle(pattern, &routeMarker{rule: r})
}

// mergeRules folds the quotas WithQuota states for a pattern into the rule
// of that pattern's WithEndpoint, or of its first WithQuota, in fresh rules
// (an Option may configure several Transports). Two WithEndpoints of one
// pattern stay apart, for the mux to refuse.
func mergeRules(rules []*rule) []*rule {
	out := make([]*rule, 0, len(rules))
	byPattern := make(map[string]*rule, len(rules))
	for _, r := range rules {
		m := byPattern[r.pattern]
		if m == nil || r.stated == nil && m.option == "WithEndpoint" {
			c := *r
			c.stated = slices.Clone(r.stated)
			out = append(out, &c)
			if m == nil {
				byPattern[r.pattern] = &c
			}
			continue
		}
		if r.stated == nil { // a WithEndpoint after WithQuotas of its pattern
			m.option, m.ceiling, m.burst = r.option, r.ceiling, r.burst
		}
		m.stated = append(m.stated, r.stated...)
	}
	return out
}

// muxPattern returns pattern as the mux must see it to match what
// [Transport.match] shows it: the host lower-cased and an IPv6 literal
// unbracketed. A host with a port panics: ServeMux ignores the request's
// port, so the pattern would never match.
func muxPattern(option, pattern string) string {
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
		panic(fmt.Sprintf("pacer: %s(%q): %q is not a host", option, pattern, host))
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		panic(fmt.Sprintf("pacer: %s(%q): host %q has a port, which is never matched: use %q (WithKeyFunc can tell ports apart)", option, pattern, host, h))
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
	routes *routeTable
	b      binding
}

// limiterBound is limiterEndpoint, recording in seen (if not nil) the
// binding it found.
func (t *Transport) limiterBound(ep *endpoint, u *urlParts, seen *seenBinding) *endpoint {
	// The binding is read into seen and used from there: copied whole
	// from a local, its wide loads waited for the narrow stores that wrote
	// it (a store-forwarding stall).
	var local seenBinding
	b := &local.b // an unbound route
	if m := ep.routes.Load(); m != nil {
		if seen == nil {
			seen = &local
		}
		seen.routes = m
		seen.b, _ = m.get(routeKeyOf(ep, u))
		b = &seen.b
	}
	if b.key == "" {
		rb, ok := t.routeFor(ep, u)
		if !ok {
			return ep
		}
		b = &rb
	}
	if c := ep.bucketEP.Load(); c != nil && c.key == b.key && c.tryRef() {
		return c
	}
	c := t.eps.acquireBucket(*b)
	ep.bucketEP.Store(c)
	return c
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
	b := ep.boundBucket(&u)
	if b.key == "" && ep.watch != nil && ep.watch.perRoute.Load() {
		b = routeBinding(ep, ep.watch.template(&u))
	}
	if b.key != "" {
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

// learn reports what an admitted attempt's response meant, m, to the
// limiter that admitted it and learns the server-named bucket of ep's
// route from it, and whether ep's routes keep quotas of their own
// (watchRoutes); now is when it arrived. seen is the binding limiterBound
// found for the request, or nil; look reports that the request was its
// host's look at a route.
func (t *Transport) learn(ep, lim *endpoint, u *urlParts, seen *seenBinding, p *Permit, m *response.Meaning, now time.Time, look bool) {
	// The bucket is taught and bound before the permit settles: settling
	// lets requests held for this answer go (the first look), and each
	// must find its route bound, and the bucket knowing what this
	// response said, or it spends the host's budget beside the bucket's.
	t.learnBucket(ep, lim, u, seen, m)
	t.watchRoutes(ep, lim, u, m, now, look)
	if lim.bucket != "" && m.Bucket != "" && m.Bucket != lim.bucket {
		// The server moved this route to another bucket: what the response
		// says belongs to that bucket (taught above), not to lim's.
		p.doneWith(nil, now)
	} else {
		p.doneWith(m, now)
	}
}

// learnBucket learns the server-named bucket of ep's route from a
// response: it teaches the bucket's limiter what the response said and
// binds the route to it.
func (t *Transport) learnBucket(ep, lim *endpoint, u *urlParts, seen *seenBinding, m *response.Meaning) {
	info := &m.Info
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
		t.eps.teachBucket(b, lim.lim, m)
	}
	if rebind {
		ep.bind(u, b)
	}
}

func (t *Transport) release(ep, lim *endpoint) {
	t.releaseAt(ep, lim, clockNow())
}

// releaseAt is release at now on the table's clock, for a caller that has
// read the clock already.
func (t *Transport) releaseAt(ep, lim *endpoint, now int64) {
	if lim != ep {
		t.eps.releaseAt(lim, now)
	}
	t.eps.releaseAt(ep, now)
}
