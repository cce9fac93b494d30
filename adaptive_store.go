package pacer

import (
	"context"
	"time"

	"github.com/pacer-go/pacer/observe"
	"github.com/pacer-go/pacer/store"
)

// storeShare is an Adaptive's link to a [store.Store] (AdaptiveConfig.Store): its
// request and token buckets live in the store, shared with every limiter of
// the same key, and it publishes what it learns (its request limit, its
// pauses) and adopts what the others published.
//
// The local buckets keep deriving limit and burst from this limiter's own
// responses and still carry its pauses; they hand out no tokens. A limiter
// without a Store has no storeShare and pays nothing for this.
//
// What it knows of the limits (its own last published, the newest another
// published) is the limiter's state, under the limiter's lock; the Store is
// called without it.
type storeShare struct {
	store store.Store
	key   string // request bucket; key+tokensKeySuffix is the token bucket

	ownAt    time.Time // when this limiter last published its own limit
	own      Limit     // and what it published
	ownBurst int
	shared   Limit // newest limit another limiter published; 0 none
	burst    int
	sharedAt time.Time // when it was learned, on the local clock
}

// tokensKeySuffix names a key's token bucket in the store. The NUL keeps it
// apart from every endpoint key (patterns, hosts, "scope#bucket").
const tokensKeySuffix = "\x00tokens"

func newStoreShare(cfg AdaptiveConfig) *storeShare {
	if cfg.Store == nil {
		return nil
	}
	return &storeShare{store: cfg.Store, key: cfg.Key}
}

// wait books n tokens in the store at b's limit and burst (or at the newest
// shared limit, for requests), sleeps until they are due and returns; it
// refunds them if ctx ends first. Local pauses, which b carries, are waited
// out first, and again if one began while sleeping.
//
// A request books only once its token is at most bookingHorizon away: until
// then it waits unbooked. A booking cannot move when the limit does, so a
// long queue of them would keep the pace of a limit the server has since
// revised: booking late keeps that lag short.
func (s *storeShare) wait(ctx context.Context, a *Adaptive, b *Bucket, n int, tokens bool) (time.Time, error) {
	key := s.key
	if tokens {
		key += tokensKeySuffix
	}
	for {
		now := time.Now()
		if at := b.nextAt(n); at.After(now) { // a local pause
			if err := a.tooLong(ctx, now, at); err != nil {
				return time.Time{}, err
			}
			if err := sleepUntil(ctx, at); err != nil {
				return time.Time{}, err
			}
		}
		limit, burst := b.Limit(), b.Burst()
		if tokens {
			if limit == Inf {
				return time.Now(), nil // no token quota known: nothing to book or share
			}
		} else {
			limit, burst = s.effective(a, limit, burst)
		}
		horizon := bookingHorizon(limit, n)
		r := store.Request{Tokens: float64(n), Limit: toStoreLimit(limit), Burst: burst, MaxWait: horizon}
		if a.cfg.MaxWait > 0 && a.cfg.MaxWait < horizon {
			r.MaxWait = a.cfg.MaxWait
		}
		g, err := s.store.Reserve(ctx, key, r)
		if err != nil {
			return time.Time{}, err
		}
		now = time.Now()
		if !tokens {
			s.adopt(a, now, g.Shared)
			if limit == Inf && g.OK {
				if l, _ := s.effective(a, b.Limit(), b.Burst()); l != Inf {
					continue // booked nothing, but others know a limit now: book at it
				}
			}
		}
		at := now.Add(g.Delay)
		if !g.OK {
			if err := a.tooLong(ctx, now, at); err != nil {
				return time.Time{}, err
			}
			// Within bounds but beyond the horizon: come back shortly before.
			if err := sleepUntil(ctx, at.Add(-horizon/2)); err != nil {
				return time.Time{}, err
			}
			continue
		}
		if err := sleepUntil(ctx, at); err != nil {
			s.store.Cancel(key, r)
			return time.Time{}, err
		}
		if b.nextAt(n).After(time.Now()) {
			// Paused while asleep (this process saw a 429): the token would
			// be spent inside the pause. Give it back and wait the pause out.
			s.store.Cancel(key, r)
			continue
		}
		return at, nil
	}
}

// bookingHorizon is how far ahead a request books its token: 100 ms, or
// the time a few tokens take at slow limits.
func bookingHorizon(limit Limit, n int) time.Duration {
	h := 100 * time.Millisecond
	if limit != Inf && limit > 0 {
		h = max(h, time.Duration(float64(3*max(n, 1))/float64(limit)*float64(time.Second)))
	}
	return h
}

// effective is the request limit and burst of a's bucket to book at, given
// as limit and burst: the newest of this limiter's own and the shared one,
// within the configured ceiling.
func (s *storeShare) effective(a *Adaptive, limit Limit, burst int) (Limit, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.budgetPacedLocked() {
		// The fleet's budget paces the quotas; the store's bucket, shared
		// by every member, carries only what binds the fleet as a whole:
		// the configured ceiling, and pauses.
		if c := a.cfg; c.Ceiling > 0 {
			return c.Ceiling, c.CeilingBurst
		}
		return Inf, 1
	}
	if s.shared == 0 || !s.sharedAt.After(s.ownAt) {
		return limit, burst
	}
	limit, burst = s.shared, s.burst
	if c := a.cfg; c.Ceiling > 0 && limit > c.Ceiling {
		limit, burst = c.Ceiling, c.CeilingBurst
	}
	return limit, burst
}

// budgetPacedLocked reports whether the quotas the server states pace this
// limiter under the budgets a fleet's store keeps (a [store.Budgeter]).
// Then the request rate the limiter derives is its own plan, not the
// fleet's: booked in the store's bucket, which every member shares, one
// member's spread rate paced the whole fleet (100 replicas on a quota of
// 600 a minute published 7 a second, and from then on three of them got
// every window and the rest none). Called with the limiter's lock held.
func (a *Adaptive) budgetPacedLocked() bool {
	return a.fleet != nil && a.mode == observe.ModeHeaders
}

// adopt takes in the shared state a reservation returned: a newer learned
// limit, and a pause (applied to the local request bucket so that Stats,
// NextAllowed and later waits see it).
func (s *storeShare) adopt(a *Adaptive, now time.Time, st store.State) {
	limit := fromStoreLimit(st.Limit)
	if !(limit > 0 && limit != Inf) && !(st.Pause > 0) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock() // nothing is queued: no unlock flush
	if limit > 0 && limit != Inf {
		if at := now.Add(-st.Age); at.After(s.sharedAt) {
			s.shared, s.burst, s.sharedAt = limit, max(st.Burst, 1), at
		}
	}
	if st.Pause > 0 {
		if until := now.Add(st.Pause); until.After(a.paused) {
			a.paused = until // not pauseLocked: it is already shared
			a.req.PauseUntil(until)
		}
	}
}

// learnedLocked records the request limit and burst this limiter derived
// from its own responses, and reports whether they are news to publish
// (publish, once the lock is released). Unknown (Inf) limits are not
// published: they would erase what others know. Called with the lock held,
// by a retune.
func (s *storeShare) learnedLocked(limit Limit, burst int) bool {
	if limit == Inf || !(limit > 0) || limit == s.own && burst == s.ownBurst {
		return false
	}
	s.ownAt, s.own, s.ownBurst = time.Now(), limit, burst
	return true
}

// publish tells the store the request limit and burst this limiter
// learned (learnedLocked).
func (s *storeShare) publish(limit Limit, burst int) {
	_ = s.store.Publish(context.Background(), s.key, store.State{Limit: toStoreLimit(limit), Burst: burst})
}

// paused publishes a pause until t (Retry-After, or a spent quota).
func (s *storeShare) paused(t time.Time) {
	if s == nil {
		return
	}
	if d := time.Until(t); d > 0 {
		_ = s.store.Publish(context.Background(), s.key, store.State{Pause: d})
	}
}

// toStoreLimit and fromStoreLimit carry a limit to a store and back. Inf is
// math.MaxFloat64, which is store.Unlimited, so both are exact; a store may
// also report +Inf (store.Unlimited's alias), which comes back as Inf.
func toStoreLimit(l Limit) float64 { return float64(l) }

func fromStoreLimit(f float64) Limit {
	if f >= store.Unlimited {
		return Inf
	}
	return Limit(f)
}

// The conversions above rely on Inf and store.Unlimited being one value;
// this stops compiling if either changes (a constant index out of range).
var _ = [1]struct{}{}[int(float64(Inf)-store.Unlimited)]
