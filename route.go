package pacer

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/pacer-go/pacer/internal/response"
)

// This file maps a request to the endpoint and limiter it waits on (route
// patterns, key functions, hosts, server-named buckets) and teaches a
// server-named bucket what a response said.

// maxRoutesPerEndpoint bounds the server-named bucket bindings one endpoint
// learns, so a server inventing bucket names per path cannot grow memory.
const maxRoutesPerEndpoint = 64

// maxBucketName bounds the length of a server-named bucket that is kept; a
// longer (hostile or broken) name is ignored.
const maxBucketName = 128

// binding is the server-named bucket a route was last seen in.
type binding struct {
	key  string // the bucket endpoint's key, "scope#name"
	name string // the name the server gave
}

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

// urlParts is the little of a request URL the table needs.
type urlParts struct{ scheme, host, path string }

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
		return ep
	}
	if c := ep.bucketEP.Load(); c != nil && c.key == b.key && c.tryRef() {
		return c
	}
	c := t.eps.acquireBucket(b.key, b.name)
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

// learn reports what an admitted attempt's response meant, m, to the
// limiter that admitted it and learns the server-named bucket of ep's
// route from it; now is when it arrived. seen is the binding limiterBound
// found for the request, or nil.
func (t *Transport) learn(ep, lim *endpoint, u *urlParts, seen *seenBinding, p *Permit, m *response.Meaning, now time.Time) {
	// The bucket is taught and bound before the permit settles: settling
	// lets requests held for this answer go (the first look), and each
	// must find its route bound, and the bucket knowing what this
	// response said, or it spends the host's budget beside the bucket's.
	t.learnBucket(ep, lim, u, seen, m)
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
		t.eps.teachBucket(b.key, b.name, lim.lim, m)
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
