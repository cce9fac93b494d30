package pacer

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacer-go/pacer/internal/response"
)

// One quota per route. Some servers keep a quota per endpoint of a host and
// name none of them: X states 300 on one route and 15 on the next under the
// same x-rate-limit-* fields, Mastodon one per family of endpoints, Okta one
// per API family. A host's limiter that took their figures for one quota
// would let a spent route hold every other route. So the endpoint of a host
// (the default key, scheme://host) watches what its routes state, and once
// two routes state quotas that cannot be one, every route gets a limiter of
// its own, as a server-named bucket does (learnBucket): bound by its
// template, the method and the path with identifiers folded (routeTemplate).
//
// Two routes' figures of a quota of one name cannot be one quota when
//   - their limits differ; or
//   - their resets, the earlier one still ahead, are further apart than
//     the time between the answers (and a rounding), and their deficits
//     over their times to reset state different refills: a fixed window
//     holds its reset until it passes, and a bucket that states its time
//     to full moves it only as its deficit over one refill does (Mastodon
//     states 300 per 5 minutes on most routes and 300 per 3 hours on
//     POST /statuses).
//
// Until two routes have stated a quota alike, a host held spent (or
// paused) does not hold a route it has not heard from: that route's first
// request looks on a limiter of its own, and its answer tells. The host's
// quota stated alike (same limit, same reset) is the route's too: the
// route goes back to the host's limiter, and no other route looks (a host
// whose routes are named, not numbered, would otherwise spend a look per
// resource). Routes' answers are still compared: a family of routes may
// share one quota and keep another family apart (Mastodon's media). A
// quota stated alike on every route is so shared by all of them; one a
// host states beside per-route quotas (X's app quota) is learnt by every
// route's limiter from its own answers, each leaving the others what their
// spending shows, at its long-run rate (quota.Routed, R34): it is our own
// callers' spending, which waits when a route does.

// routeState is what a host's answers have shown of its quotas.
type routeState uint8

const (
	routesUndecided routeState = iota // no two routes compared yet
	routesOneQuota                    // two routes stated one quota
	routesPerRoute                    // two routes stated quotas that cannot be one
)

// maxRouteQuotas bounds the figures kept of one route's answer: the quotas
// one response states, beyond which a route's further quotas are not
// compared.
const maxRouteQuotas = 4

// resetRounding is how far two statements of one fixed reset may differ:
// servers round resets to whole seconds, one up and the next down.
const resetRounding = 2 * time.Second

// maxTemplate bounds a route template's length: a longer path is cut
// there, so that what a route costs in memory does not grow with the
// caller's paths.
const maxTemplate = 256

// routeWatch is what the endpoint of a host has seen of its routes.
type routeWatch struct {
	mu    sync.Mutex
	state routeState
	// seen holds the figures of each route's last answer that stated a
	// quota, at most maxRoutesPerEndpoint routes.
	seen map[string]routeFigures
	// looking is closed when the look out (lookTmpl's request) is
	// answered; nil when none is out.
	looking  chan struct{}
	lookTmpl string
	// last is the route whose template was folded last (see template).
	last atomic.Pointer[routeMemo]
	// perRoute mirrors state == routesPerRoute, and undecided state ==
	// routesUndecided, for the request path, which reads them without the
	// lock.
	perRoute, undecided atomic.Bool
	// heldUntil is when the wait the host's last spent or refused answer
	// asked for ends, on the package clock; 0 when none did. A route
	// looks only while it has not passed (see awaitRoute).
	heldUntil atomic.Int64
}

// routeFigures is what one answer of a route stated.
type routeFigures struct {
	at     time.Time
	n      int
	quotas [maxRouteQuotas]routeQuota
}

type routeQuota struct {
	name             string
	limit, remaining float64
	reset            time.Time
}

// figuresOf keeps what m states of its quotas, answered at now; prev is
// the route's last figures, whose names are kept where they recur (a
// name is copied out of the response only the first time).
func figuresOf(m *response.Meaning, now time.Time, prev routeFigures) routeFigures {
	f := routeFigures{at: now, n: min(m.Quotas.Len(), maxRouteQuotas)}
	for i := range f.n {
		q := m.Quotas.At(i)
		name := prev.quotas[i].name
		if i >= prev.n || name != q.Name {
			name = strings.Clone(q.Name)
		}
		f.quotas[i] = routeQuota{name: name, limit: q.Limit, remaining: q.Remaining, reset: q.Reset}
	}
	return f
}

// routeMemo is a route and its template.
type routeMemo struct{ method, path, tmpl string }

// template is u's route template, kept for the route folded last: a client
// that calls one route (nearly all) has it folded, and allocated, once,
// however many requests it sends.
func (w *routeWatch) template(u *urlParts) string {
	if m := w.last.Load(); m != nil && m.method == u.method && m.path == u.path {
		return m.tmpl
	}
	m := &routeMemo{method: strings.Clone(u.method), path: strings.Clone(u.path), tmpl: routeTemplate(u.method, u.path)}
	w.last.Store(m)
	return m.tmpl
}

// find returns the quota of f named name.
func (f *routeFigures) find(name string) (routeQuota, bool) {
	for _, q := range f.quotas[:f.n] {
		if q.name == name {
			return q, true
		}
	}
	return routeQuota{}, false
}

// apart reports whether a and b, what two routes stated of the quotas of
// their names, cannot be one quota (see the rule above).
func apart(a, b *routeFigures) bool {
	if b.at.Before(a.at) {
		a, b = b, a
	}
	for _, qb := range b.quotas[:b.n] {
		qa, ok := a.find(qb.name)
		if !ok {
			continue
		}
		if qa.limit > 0 && qb.limit > 0 && qa.limit != qb.limit {
			return true
		}
		if qa.reset.IsZero() || qb.reset.IsZero() || !qa.reset.After(b.at) || qa.remaining < 0 || qb.remaining < 0 {
			continue
		}
		if (qb.reset.Sub(qa.reset)).Abs() > b.at.Sub(a.at)+resetRounding && !oneRefill(qa, a.at, qb, b.at) {
			return true
		}
	}
	return false
}

// oneRefill reports whether qa, stated at ta, and qb, at tb, could be one
// bucket that states its time to full: its deficit over that time is its
// refill, the same in both (within a factor of two, for the rounding of
// small deficits and resets).
func oneRefill(qa routeQuota, ta time.Time, qb routeQuota, tb time.Time) bool {
	limit := max(qa.limit, qb.limit)
	da, db := limit-qa.remaining, limit-qb.remaining
	la, lb := qa.reset.Sub(ta).Seconds(), qb.reset.Sub(tb).Seconds()
	if limit <= 0 || da <= 0 || db <= 0 || la <= 0 || lb <= 0 {
		return false
	}
	ra, rb := da/la, db/lb
	return ra < 2*rb && rb < 2*ra
}

// alike reports whether b states the quotas a does as one quota: each of
// a's that b names has its limit and its reset.
func alike(a, b *routeFigures) bool {
	shared := 0
	for _, qa := range a.quotas[:a.n] {
		qb, ok := b.find(qa.name)
		if !ok {
			continue
		}
		if qa.limit != qb.limit {
			return false
		}
		if d := qa.reset.Sub(qb.reset); d > resetRounding || d < -resetRounding {
			return false
		}
		shared++
	}
	return shared > 0
}

// routeTemplate is the route a request's quota is kept per once its host
// keeps one per route: its method and its path with every segment that
// names a resource folded to ":id" (numbers, and long segments with digits
// in them: ids, hashes, UUIDs), so that /2/users/1072250532645998596/
// pinned_lists and /2/users/783214/pinned_lists are one route.
func routeTemplate(method, path string) string {
	if method == "" {
		method = "GET"
	}
	var b strings.Builder
	b.Grow(len(method) + 1 + min(len(path), maxTemplate))
	b.WriteString(method)
	b.WriteByte(' ')
	for seg := range strings.SplitSeq(strings.TrimPrefix(path, "/"), "/") {
		if b.Len() >= maxTemplate {
			break
		}
		b.WriteByte('/')
		if names(seg) {
			seg = ":id"
		}
		b.WriteString(seg[:min(len(seg), max(maxTemplate-b.Len(), 0))])
	}
	return b.String()
}

// minIDLen is the shortest segment with letters and digits folded as an
// identifier: longer than a version ("v1", "v2beta1") or a short word
// with a digit, as short as a short hash.
const minIDLen = 8

// names reports whether a path segment names a resource rather than a
// route: all digits, or at least minIDLen long with a digit in it.
func names(seg string) bool {
	if seg == "" {
		return false
	}
	digits := 0
	for i := 0; i < len(seg); i++ {
		if '0' <= seg[i] && seg[i] <= '9' {
			digits++
		}
	}
	return digits == len(seg) || digits > 0 && len(seg) >= minIDLen
}

// routeBinding is the binding of a route of ep to a limiter of its own.
func routeBinding(ep *endpoint, tmpl string) binding {
	return binding{key: ep.key + "#" + tmpl, name: tmpl, route: true}
}

// routeFor returns the limiter binding of u's route when ep keeps one
// quota per route, or u's route is looking (see awaitRoute); ok is false
// when u's route waits on ep's own limiter.
func (t *Transport) routeFor(ep *endpoint, u *urlParts) (b binding, ok bool) {
	w := ep.watch
	if w == nil {
		return binding{}, false
	}
	perRoute, tbl := w.perRoute.Load(), ep.tmpls.Load()
	if !perRoute && tbl == nil {
		return binding{}, false
	}
	tmpl := w.template(u)
	rk := routeKey{seg: tmpl}
	if tbl != nil {
		if b, ok := tbl.get(rk); ok {
			return b, true
		}
	}
	if !perRoute {
		return binding{}, false
	}
	b = routeBinding(ep, tmpl)
	if !ep.bindTemplate(rk, b) {
		return binding{}, false // the routes kept are at their bound
	}
	return b, true
}

// awaitRoute decides, before u's request picks its limiter, whether it is
// a look: the first request of a route the host has not heard from, sent
// to a limiter of its own while the host's limiter holds requests and the
// host is not known to keep one quota (see the rule above). One route of
// a host looks at a time: a request of another unheard-of route waits for
// the look's answer (or ctx), which decides for it too. look reports that
// the request is the look; endLook must follow its answer, or its failure.
func (t *Transport) awaitRoute(ctx context.Context, ep *endpoint, u *urlParts) (look bool, err error) {
	if w := ep.watch; w == nil || !w.undecided.Load() || w.heldUntil.Load() == 0 {
		return false, nil // nearly every request: nothing holds its host
	}
	return t.awaitLook(ctx, ep, u)
}

// awaitLook is awaitRoute for a host whose answers asked it to wait.
func (t *Transport) awaitLook(ctx context.Context, ep *endpoint, u *urlParts) (look bool, err error) {
	w := ep.watch
	for {
		// The answers' held end first, before asking the limiter.
		if held := w.heldUntil.Load(); held == 0 || clockNow() >= held || !ep.lim.nextAllowed().After(time.Now()) {
			return false, nil
		}
		wait, look := w.lookOrWait(ep, w.template(u))
		if wait == nil {
			return look, nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return false, context.Cause(ctx)
		}
	}
}

// lookOrWait makes route tmpl's request the host's look, or returns the
// look to wait for; neither when the route need not look.
func (w *routeWatch) lookOrWait(ep *endpoint, tmpl string) (wait <-chan struct{}, look bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != routesUndecided || len(w.seen) == 0 {
		return nil, false
	}
	if _, answered := w.seen[tmpl]; answered {
		return nil, false
	}
	if w.looking != nil {
		return w.looking, false
	}
	if !ep.bindTemplate(routeKey{seg: tmpl}, routeBinding(ep, tmpl)) {
		return nil, false
	}
	w.looking, w.lookTmpl = make(chan struct{}), tmpl
	return nil, true
}

// endLook ends ep's look: its route goes back to the host's limiter unless
// the host keeps one quota per route, and the requests waiting for the look
// decide again.
func (t *Transport) endLook(ep *endpoint) {
	w := ep.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.looking == nil {
		return
	}
	if w.state != routesPerRoute {
		ep.unbindTemplate(routeKey{seg: w.lookTmpl})
	}
	close(w.looking)
	w.looking, w.lookTmpl = nil, ""
}

// watchRoutes folds an answer of u's route, m, into what ep has seen of
// its routes, and keeps one quota per route from the answer on that shows
// it. lim is the endpoint whose limiter admitted the request; look reports
// that the request was the host's look.
func (t *Transport) watchRoutes(ep, lim *endpoint, u *urlParts, m *response.Meaning, now time.Time, look bool) {
	if ep.watch != nil && m.Quotas.Len() > 0 && m.Bucket == "" {
		t.compareRoute(ep, lim, u, m, now, look)
	}
	if look {
		t.endLook(ep)
	}
}

// compareRoute is watchRoutes for an answer that states quotas and names
// no bucket.
func (t *Transport) compareRoute(ep, lim *endpoint, u *urlParts, m *response.Meaning, now time.Time, look bool) {
	w := ep.watch
	if lim == ep {
		w.heldUntil.Store(heldEnd(m, now))
	}
	w.mu.Lock()
	tmpl := w.template(u)
	fig := figuresOf(m, now, w.seen[tmpl])
	state := w.state
	if state != routesPerRoute {
		state = w.compare(tmpl, &fig)
	}
	w.remember(tmpl, fig)
	w.mu.Unlock()
	switch {
	case state == routesPerRoute && lim == ep:
		// The answer that showed it came through the host's limiter: the
		// route's own learns it, as a bucket a response names does.
		b := routeBinding(ep, tmpl)
		if ep.bindTemplate(routeKey{seg: tmpl}, b) {
			t.eps.teachBucket(b, lim.lim, m)
		}
	case state != routesPerRoute && look:
		// The look found the host's quota, or nothing to tell it apart:
		// the route waits on the host's limiter again (endLook), which
		// learns what the look saw.
		ep.lim.learnOther(m)
	}
}

// heldEnd is when the wait m asks of its quota ends, on the package clock:
// its Retry-After, else the latest reset of a quota it states as spent; 0
// when it asks for none.
func heldEnd(m *response.Meaning, now time.Time) int64 {
	var end time.Time
	if m.RetryAfter > 0 {
		end = now.Add(m.RetryAfter)
	}
	for i := range m.Quotas.Len() {
		if q := m.Quotas.At(i); 0 <= q.Remaining && q.Remaining < 1 && q.Reset.After(end) {
			end = q.Reset
		}
	}
	if end.IsZero() {
		return 0
	}
	return clockOf(end)
}

// compare folds fig, an answer of route tmpl, into what the host's routes
// have shown: quotas that cannot be one keep one per route from now on;
// one quota stated alike by two routes ends the looks (but not the
// comparing: a host whose routes share a family's quota may keep another
// family apart). Called with w.mu held.
func (w *routeWatch) compare(tmpl string, fig *routeFigures) routeState {
	for other, f := range w.seen {
		if other == tmpl || !fresh(&f, fig.at) {
			continue
		}
		if apart(&f, fig) {
			w.state = routesPerRoute
			w.perRoute.Store(true)
			w.undecided.Store(false)
			return w.state
		}
		if alike(&f, fig) {
			w.state = routesOneQuota
			w.undecided.Store(false)
		}
	}
	return w.state
}

// fresh reports whether f still describes its quotas at now: one of them
// has a reset ahead, or states none (what is left is all it says).
func fresh(f *routeFigures, now time.Time) bool {
	for _, q := range f.quotas[:f.n] {
		if q.reset.IsZero() || q.reset.After(now) {
			return true
		}
	}
	return false
}

// remember keeps fig as route tmpl's last answer; called with w.mu held.
func (w *routeWatch) remember(tmpl string, fig routeFigures) {
	if _, ok := w.seen[tmpl]; !ok && len(w.seen) >= maxRoutesPerEndpoint {
		for k, f := range w.seen { // make room: one that no longer describes its quotas, else any
			if !fresh(&f, fig.at) {
				delete(w.seen, k)
				break
			}
		}
		if len(w.seen) >= maxRoutesPerEndpoint {
			for k := range w.seen {
				delete(w.seen, k)
				break
			}
		}
	}
	w.seen[tmpl] = fig
}

// bindTemplate binds route template rk of ep to b; false when ep keeps as
// many routes as it may.
func (ep *endpoint) bindTemplate(rk routeKey, b binding) bool {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	old := ep.tmpls.Load()
	if old != nil {
		if cur, ok := old.get(rk); ok {
			return cur == b
		}
		if old.len() >= maxRoutesPerEndpoint {
			return false
		}
	}
	ep.tmpls.Store(old.with(rk, b))
	return true
}

// unbindTemplate takes route template rk of ep back to ep's limiter.
func (ep *endpoint) unbindTemplate(rk routeKey) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if old := ep.tmpls.Load(); old != nil {
		if _, ok := old.get(rk); ok {
			next := old.without(rk)
			if next.len() == 0 {
				next = nil
			}
			ep.tmpls.Store(next)
		}
	}
}
