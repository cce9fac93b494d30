package pacer

import (
	"cmp"
	"math"
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
	newLimiter func(key string, ceiling Limit, burst int, stated []Quota) *Adaptive
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

func newEndpoints(max int, newLimiter func(string, Limit, int, []Quota) *Adaptive) *endpoints {
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
		return e.create(string(b), &spec{})
	}
	return ep
}

// acquireBucket returns the shared endpoint of a server-named bucket,
// creating it on first use.
func (e *endpoints) acquireBucket(bucketKey, bucket string) *endpoint {
	return e.acquire(bucketKey, &spec{bucket: bucket})
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
func (e *endpoints) teachBucket(key, bucket string, from *Adaptive, m *response.Meaning) {
	ep := e.peek(key)
	if ep == nil {
		fresh := e.newEndpoint(key, &spec{bucket: bucket})
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
	ep.lim = e.newLimiter(key, ceiling, burst, stated)
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
	return urlParts{scheme: r.URL.Scheme, host: r.URL.Host, path: r.URL.Path}
}
