package pacer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"math"
	"sync"
	"time"

	"github.com/pacer-go/pacer/internal/quota"
	"github.com/pacer-go/pacer/internal/response"
	"github.com/pacer-go/pacer/store"
)

// fleetShare is an Adaptive's membership in a fleet that spends its quotas
// together under budgets a [store.Budgeter] keeps: what the fleet may still
// spend of each quota before its reset. The limiter leases units of each
// budget in batches, spends them on the requests it admits, and reports
// with its next call the freshest figure its responses stated and what it
// still holds. While the fleet's budget affords the work, every member
// spends at once, as one client does; when it does not, members wait for
// the reset, which the first answer of the new window opens for all.
//
// What a member holds is the units leased to it that the server has not
// counted: unused ones, and ones spent on requests still in flight. A
// lease is spent within half its TTL by this member's clock, so that the
// store, which keeps it for the whole TTL, never hands it out again first.
//
// A member without an answer from the store (the store is down, or knows
// no budget yet) goes by its own model of the quota.
//
// What the member holds is the limiter's state: it is guarded by the
// limiter's lock, which no Store call is made under. Its methods take that
// lock; none is called with it held.
type fleetShare struct {
	store  store.Budgeter
	key    string
	member string
	ttl    time.Duration

	mu     *sync.Mutex // the limiter's lock
	quotas map[string]*fleetQuota
	// blind counts requests in flight that were charged to no quota: sent
	// before this limiter knew any (its first contact). Each is held in
	// every quota (one unit: its cost is unknown) until answered; the
	// first figures the fleet reads may not count them.
	blind float64
}

// fleetQuota is one quota's part of a fleetShare, under its lock.
type fleetQuota struct {
	leased   float64   // leased, unspent
	until    time.Time // the lease's end, by this member's clock
	inflight float64   // spent on requests not yet answered
	seen     *store.Sighting
	seenAt   time.Time // when seen was read (its ResetIn counts from then)
	known    bool      // the store knew the budget at the last call
	budget   float64   // and what it had left
	resetAt  time.Time // and when its window resets; zero none stated
	members  int       // and how many members it knew
	// alone is what this member may still spend while the store does not
	// answer: its share of the last budget it was told, for that window.
	alone   float64
	calling bool // a Lease call is out: others wait for it, not call too
	// forInteractive: the lease was taken for interactive work, with no
	// reserve left to it; batch work leases its own.
	forInteractive bool
	// told: a call for this quota told the store of interactive work on
	// this member (LeaseRequest.InteractiveAgo); report tells it at once
	// when none did yet.
	told     bool
	done     chan struct{}
	want     float64 // units taken per leaseSpan, smoothed: the next lease's size
	wantFrom time.Time
	taken    float64
}

// leaseSpan is how much of its own spending a member leases at once: a
// tenth of a second's worth, so a member spending 1,000 requests a second
// calls the store ten times a second (0.01 calls per request), and one
// spending a few a second calls about once per request, which costs it
// nothing it would notice against round trips of 10-250 ms.
const leaseSpan = 100 * time.Millisecond

// leaseShareMax is the most of the fleet's budget one lease takes before the
// store has said how many members there are (then: an even share): a
// sixteenth, so that a member that leases ahead of its need cannot starve
// the others of a window's last units.
const leaseShareMax = 1.0 / 16

// newFleetShare returns the fleet membership of a limiter configured with
// cfg whose lock is mu, nil when its Store keeps no budgets.
func newFleetShare(cfg AdaptiveConfig, mu *sync.Mutex) *fleetShare {
	b, ok := cfg.Store.(store.Budgeter)
	if !ok {
		return nil
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &fleetShare{store: b, key: cfg.Key, member: hex.EncodeToString(id[:]), ttl: store.DefaultLeaseTTL, mu: mu, quotas: make(map[string]*fleetQuota)}
}

// need is one quota a request is charged to: its name, what it takes, and
// for batch work what it must leave to interactive work. own is set by take
// when the units came from the member's own model, not a lease: given back,
// they do not join the lease.
type need struct {
	quota   string
	amount  float64
	reserve *store.Reserve
	own     bool
	report  bool // only report (see report): take nothing
}

// take spends the units a request needs of each quota in needs, leasing
// more from the store when a lease runs short. ok is false when the fleet's
// budget cannot afford the request; at is then when it may (the window's
// reset), or zero when only the next answer can tell. Nothing stays taken
// when ok is false.
//
// A request charged to no quota (needs is empty: the limiter knows none
// yet) counts as blind until it is answered or given back.
func (f *fleetShare) take(ctx context.Context, needs []need, now time.Time, interactiveAgo time.Duration) (ok bool, at time.Time, err error) {
	if len(needs) == 0 {
		f.mu.Lock()
		f.blind++
		f.mu.Unlock()
		return true, time.Time{}, nil
	}
	for i := range needs {
		ok, at, err = f.takeOne(ctx, &needs[i], now, interactiveAgo)
		if !ok || err != nil {
			if i > 0 {
				f.giveBack(needs[:i])
			}
			return false, at, err
		}
	}
	return true, time.Time{}, nil
}

func (f *fleetShare) takeOne(ctx context.Context, n *need, now time.Time, interactiveAgo time.Duration) (bool, time.Time, error) {
	f.mu.Lock()
	for {
		q := f.quota(n.quota)
		if n.report && (q.told || q.calling) {
			// Told already, or a call is out that tells it.
			f.mu.Unlock()
			return true, time.Time{}, nil
		}
		if !n.report && q.leased >= n.amount && now.Before(q.until) && (n.reserve == nil || !q.forInteractive) {
			q.spend(n, now)
			f.mu.Unlock()
			return true, time.Time{}, nil
		}
		if q.calling {
			done := q.done
			f.mu.Unlock()
			select {
			case <-done:
			case <-ctx.Done():
				return false, time.Time{}, ctx.Err()
			}
			f.mu.Lock()
			continue
		}
		r := f.leaseRequest(q, n, now, interactiveAgo)
		q.calling, q.done = true, make(chan struct{})
		f.mu.Unlock()

		l, err := f.store.Lease(ctx, f.key, r)
		answered := time.Now()

		f.mu.Lock()
		q.calling = false
		close(q.done)
		if err != nil {
			if ctx.Err() != nil {
				f.mu.Unlock()
				return false, time.Time{}, ctx.Err()
			}
			if n.report {
				f.mu.Unlock()
				return false, time.Time{}, nil
			}
			// The store failed. Within the window the store last spoke
			// of, spend at most this member's share of what was left then;
			// past it, or with nothing known, go by this member's own model.
			ok, at := q.fallback(n, now)
			f.mu.Unlock()
			return ok, at, nil
		}
		ok, at := f.applyLease(q, n, l, r.Seen, answered, now, interactiveAgo)
		f.mu.Unlock()
		return ok, at, nil
	}
}

// leaseRequest is what to ask the store for n at now, with f.mu held: a
// lapsed lease or a fragment too small for the request given back, no more
// than an even share of what is left, whole requests, and the figure to
// report while its window lasts.
func (f *fleetShare) leaseRequest(q *fleetQuota, n *need, now time.Time, interactiveAgo time.Duration) store.LeaseRequest {
	if !now.Before(q.until) || q.leased < n.amount {
		// Lapsed: the store no longer keeps it for this member. Or a
		// fragment too small for the request: given back with this
		// call, it joins the fleet's budget. Held, the fragments of
		// 100 members' even shares (a 600-a-minute quota's 5.9 each)
		// added up to 30-66 units a window that no member could spend.
		q.leased = 0
	}
	r := store.LeaseRequest{
		Quota: n.quota, Member: f.member, TTL: f.ttl,
		Take:       max(n.amount-q.leased, q.want),
		Held:       q.leased + q.inflight + f.blind,
		Unbudgeted: n.amount,
		Reserve:    n.reserve, InteractiveAgo: interactiveAgo,
	}
	if q.known && q.budget > 0 {
		// No more than an even share of what is left between the
		// members the store knows (a sixteenth before it says): one
		// member leasing ahead of its need would starve the others of
		// a window's last units.
		share := leaseShareMax
		if q.members > 0 {
			share = 1 / float64(q.members)
		}
		r.Take = min(r.Take, max(n.amount-q.leased, share*q.budget))
	}
	if n.amount > 0 {
		// Whole requests: what a lease holds beyond them is a fragment.
		r.Take = max(math.Floor(r.Take/n.amount)*n.amount, n.amount-q.leased)
	}
	if n.report {
		r.Take = 0
	}
	if s := q.seen; s != nil {
		c := *s
		if s.ResetIn > 0 {
			c.ResetIn -= now.Sub(q.seenAt)
		}
		if s.ResetIn == 0 || c.ResetIn > 0 {
			r.Seen = &c
		} else {
			// Its window is over: the figure says nothing of the
			// next. (Reported with a reset an instant away, it once
			// reached Redis as a figure with no reset, a window that
			// never ended: the fleet spent nothing more.)
			q.seen = nil
		}
	}
	return r
}

// applyLease reads the store's answer l to a lease of n asked at now
// (reporting sent) and answered at answered, with f.mu held: whether the
// need is met, else when to ask again.
func (f *fleetShare) applyLease(q *fleetQuota, n *need, l store.Lease, sent *store.Sighting, answered, now time.Time, interactiveAgo time.Duration) (bool, time.Time) {
	if sent != nil && q.seen != nil && q.seen.Remaining == sent.Remaining {
		q.seen = nil // reported
	}
	q.told = q.told || interactiveAgo >= 0
	q.known, q.budget, q.members = l.Known, l.Budget, max(l.Members, 1)
	q.resetAt = time.Time{}
	if l.ResetIn > 0 {
		q.resetAt = answered.Add(l.ResetIn)
	}
	q.alone = q.budget / float64(q.members)
	if n.report {
		// Nothing was asked for: the lease, if any, stands as it was.
		return true, time.Time{}
	}
	if !l.Known {
		// No budget known for the current window (it has not been
		// seen since its reset): this member's own model decides, and
		// its answer will tell the store, which holds the request
		// for this member meanwhile (r.Unbudgeted).
		n.own = true
		q.spend(n, now)
		return true, time.Time{}
	}
	q.leased += l.Granted
	q.until = now.Add(f.ttl / 2)
	// A lease taken for interactive work may be spent into the reserve
	// batch work leaves it: batch work on this member does not spend it.
	q.forInteractive = n.reserve == nil
	if q.leased >= n.amount {
		q.spend(n, now)
		return true, time.Time{}
	}
	at := q.resetAt
	if !at.IsZero() {
		at = at.Add(quota.RollGuard)
	}
	return false, at
}

// fallback decides a request's need n while the store does not answer, at
// now: within the window the store last spoke of, from this member's share
// of the budget it was told then (ok false, with the window's reset, once it
// is spent); otherwise by the member's own model (ok true). Called with the
// lock held.
func (q *fleetQuota) fallback(n *need, now time.Time) (bool, time.Time) {
	if !q.known || q.resetAt.IsZero() || !now.Before(q.resetAt) {
		n.own = true
		q.spend(n, now)
		return true, time.Time{}
	}
	if q.leased >= n.amount && now.Before(q.until) {
		// What the member leased before the store went away is its own
		// while the store keeps it for it.
		q.spend(n, now)
		return true, time.Time{}
	}
	if q.alone < n.amount {
		return false, q.resetAt.Add(quota.RollGuard)
	}
	q.alone -= n.amount
	n.own = true
	q.spend(n, now)
	return true, time.Time{}
}

// spend puts n's units in flight for a request admitted at now: out of the
// lease, unless the request goes by the member's own model (n.own, set
// before). Called with the lock held.
func (q *fleetQuota) spend(n *need, now time.Time) {
	if !n.own {
		q.leased -= n.amount
	}
	q.note(n.amount, now)
	q.inflight += n.amount
}

// quota returns the named quota's state, creating it; called with the
// lock held.
func (f *fleetShare) quota(name string) *fleetQuota {
	q := f.quotas[name]
	if q == nil {
		q = &fleetQuota{}
		f.quotas[name] = q
	}
	return q
}

// note counts amount taken at now into the smoothed need per leaseSpan.
func (q *fleetQuota) note(amount float64, now time.Time) {
	if q.wantFrom.IsZero() {
		q.wantFrom = now
	}
	q.taken += amount
	if d := now.Sub(q.wantFrom); d >= leaseSpan {
		per := q.taken * float64(leaseSpan) / float64(d)
		q.want = 0.5*q.want + 0.5*per
		q.wantFrom, q.taken = now, 0
	}
	q.want = max(q.want, amount)
}

// giveBack returns units taken for a request that was not sent.
func (f *fleetShare) giveBack(needs []need) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settleLocked(needs, true)
}

// settleLocked takes a request's units out of flight: back into the lease
// (unused) when the request was not sent and they came from it, else spent.
// A request charged to no quota leaves the blind ones. Called with the lock
// held.
func (f *fleetShare) settleLocked(needs []need, unused bool) {
	if len(needs) == 0 {
		f.blind = max(f.blind-1, 0)
	}
	for _, n := range needs {
		q := f.quota(n.quota)
		q.inflight = max(q.inflight-n.amount, 0)
		if unused && !n.own {
			q.leased += n.amount
		}
	}
}

// answered settles the units a request held once its response arrived at
// now, and keeps the freshest figure each quota it stated showed (m: what
// the response meant, nil for none), to report with the next call. It
// reports whether a quota of m was never told of interactive work (see
// report).
func (f *fleetShare) answered(needs []need, m *response.Meaning, now time.Time) (untold bool) {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settleLocked(needs, false)
	return f.sawLocked(m, now)
}

// saw keeps the figures of a response another limiter admitted the request
// of (the host's, for a route the response put in this limiter's bucket),
// as answered does; untold is as for answered.
func (f *fleetShare) saw(m *response.Meaning, now time.Time) (untold bool) {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sawLocked(m, now)
}

// sawLocked is answered's keeping of m's figures, with the lock held.
func (f *fleetShare) sawLocked(m *response.Meaning, now time.Time) (untold bool) {
	if m == nil {
		return false
	}
	for i := range m.Quotas.Len() {
		qt := m.Quotas.At(i)
		if !(qt.Remaining >= 0) || math.IsInf(qt.Remaining, 0) {
			continue
		}
		// A quota this member has not leased from yet is kept too: the
		// figures of its first responses are the lowest of the window
		// (dropped, a fleet of four leased from a figure its own first
		// requests had overtaken: a 429).
		q := f.quota(qt.Name)
		untold = untold || !q.told
		s := store.Sighting{Remaining: qt.Remaining, Held: q.leased + q.inflight + f.blind}
		if !qt.Reset.IsZero() {
			s.ResetIn = max(qt.Reset.Sub(now), time.Nanosecond)
		}
		if old := q.seen; old != nil {
			oldReset := q.seenAt.Add(old.ResetIn)
			// The same window (or none stated): keep the lowest figure.
			same := old.ResetIn == 0 && s.ResetIn == 0 ||
				old.ResetIn > 0 && s.ResetIn > 0 && qt.Reset.Sub(oldReset).Abs() <= time.Second
			if same && old.Remaining <= s.Remaining {
				continue
			}
			if old.ResetIn > 0 && s.ResetIn > 0 && qt.Reset.Before(oldReset.Add(-time.Second)) {
				continue // an older window's figure, read late
			}
		}
		q.seen, q.seenAt = &s, now
	}
	return untold
}

// report tells the store at once, with a call that takes nothing, of the
// interactive work this member had interactiveAgo before now, for each
// quota no call told of it yet; it does nothing when the member had none
// (interactiveAgo negative). A member's calls tell the store of it as they
// lease, but a member's first request leases nothing: it goes before the
// member knows any quota (or, on a server that names buckets, through the
// host's limiter, not the bucket's). Told only by its next request, the
// store let batch work on other members spend the reserve meanwhile: a
// job's burst spent an hour's window down to the floor in the half minute
// between an interactive client's first two calls.
func (f *fleetShare) report(now time.Time, interactiveAgo time.Duration) {
	if f == nil || interactiveAgo < 0 {
		return
	}
	f.mu.Lock()
	var untold []string
	for name, q := range f.quotas {
		if !q.told && !q.calling {
			untold = append(untold, name)
		}
	}
	f.mu.Unlock()
	for _, name := range untold {
		// (A store that fails is not told: the next call tells it.)
		_, _, _ = f.takeOne(context.Background(), &need{quota: name, report: true}, now, interactiveAgo)
	}
}
