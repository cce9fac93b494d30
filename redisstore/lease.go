package redisstore

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/pacer-go/pacer/store"
)

// leaseTolerance is how far a reservation's limit may drift from the limit a
// lease was booked at before the lease is handed back and rebooked: limits
// learned from headers move a little with every response, and rebooking on
// each move would cost the round trips leases save.
const leaseTolerance = 0.1

// demandHorizon is the time constant of a key's local demand estimate.
const demandHorizon = time.Second

// keyIdle is how long a process keeps the local state of a key it no longer
// uses.
const keyIdle = time.Minute

// keyState is one process's view of one key: its current lease, the shared
// state last read from Redis, and its own demand.
type keyState struct {
	mu       sync.Mutex
	lease    lease
	inflight *fetch // lease being fetched; others wait for it instead of calling Redis too

	// Shared state as last read (local times), and local pauses.
	limit      float64
	burst      int
	learnedAt  time.Time
	pauseUntil time.Time
	readAt     time.Time // when the above was read from Redis; zero if never
	unsent     bool      // a locally published limit has not reached Redis yet
	// deliveredAt is when local publishes last reached Redis. A reply to a
	// call sent before then may have been read before the publish landed.
	deliveredAt time.Time

	// Demand estimate sizing the next lease, in tokens per second.
	rate      float64
	requested float64 // tokens asked for since lastFetch
	lastFetch time.Time
	lastUse   time.Time
}

// lease is a run of tokens booked in Redis in one call: the j-th (1-based)
// may be used at origin + max(pause, base + j*interval) seconds.
type lease struct {
	limit    float64
	interval float64
	origin   time.Time
	base     float64
	pause    float64
	total    float64
	used     float64
	deadline time.Time
}

func (l *lease) left() float64 { return l.total - l.used }

// fetch is a lease request in flight.
type fetch struct {
	done      chan struct{}
	first     float64 // tokens the starter takes from the lease
	abandoned bool    // the starter left; its tokens stay in the lease
	// Valid once done is closed:
	r      reply
	origin time.Time
	err    error
}

func (s *Store) keyState(key string) *keyState {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[key]
	if ks == nil {
		ks = &keyState{}
		s.keys[key] = ks
	}
	return ks
}

// reserve serves r from the lease of key, or books in Redis (a lease sized to
// local demand when leases are on), or falls back when the key's shard is
// down. maxWait < 0 means unbounded.
func (s *Store) reserve(ctx context.Context, key string, r store.Request, maxWait time.Duration) (store.Grant, error) {
	s.route(ctx)
	if err := ctx.Err(); err != nil {
		return store.Grant{}, err
	}
	ks := s.keyState(key)
	interval := 0.0
	if r.Limit < store.Unlimited { // also false for +Inf
		interval = 1 / r.Limit
	}
	book := r.Tokens > 0 && interval > 0
	leasing := s.leaseWindow > 0

	ks.mu.Lock()
	now := time.Now()
	ks.lastUse = now
	if book {
		ks.requested += r.Tokens
	}
	for {
		if !book && leasing && !ks.readAt.IsZero() && now.Sub(ks.readAt) < s.leaseWindow {
			// Nothing to book: the shared state read moments ago will do.
			g := store.Grant{OK: true, Shared: ks.shared(now)}
			g.Delay = g.Shared.Pause
			g.OK = maxWait < 0 || g.Delay <= maxWait
			ks.mu.Unlock()
			s.leased.Add(1)
			return g, nil
		}
		if book {
			if g, ok := ks.fromLease(now, r, maxWait); ok {
				ks.mu.Unlock()
				s.leased.Add(1)
				return g, nil
			}
		}
		if leasing && ks.inflight != nil {
			f := ks.inflight
			h := s.healthOf(s.shardOf(key))
			ks.mu.Unlock()
			err := s.await(ctx, h, key, f.done)
			if err != nil && ctx.Err() != nil {
				return store.Grant{}, ctx.Err()
			}
			ks.mu.Lock()
			now = time.Now()
			if err != nil {
				break // the shard is down: no use waiting for the fetch
			}
			continue
		}
		break
	}
	h := s.healthOf(s.shardOf(key))
	if h.down {
		ks.mu.Unlock()
		return s.degraded(ctx, key, r, h.sh, nil)
	}
	b := booking{tokens: r.Tokens, burst: r.Burst, maxWait: maxWait, first: r.Tokens}
	if book {
		b.interval = interval
		b.refund = ks.dropLeaseLocked()
		if leasing {
			b.tokens = ks.leaseSize(now, r, s.leaseWindow, s.maxLease)
		}
	}
	b.refund.merge(s.takeRefund(key))

	if !leasing {
		ks.mu.Unlock()
		res, origin, err := s.reserveRedis(ctx, h, key, b)
		if err != nil {
			if ctx.Err() != nil {
				return store.Grant{}, ctx.Err()
			}
			return s.degraded(ctx, key, r, h.sh, err)
		}
		ks.mu.Lock()
		ks.read(now, origin, res)
		g := ks.grant(time.Now(), origin, res, r.Tokens, interval)
		ks.mu.Unlock()
		return g, nil
	}

	f := &fetch{done: make(chan struct{}), first: r.Tokens}
	ks.inflight = f
	ks.mu.Unlock()
	if !s.goAsync(func() { s.runFetch(h, key, ks, f, b, r.Limit) }) {
		ks.mu.Lock()
		ks.inflight = nil
		close(f.done)
		ks.mu.Unlock()
		return store.Grant{}, ErrClosed
	}
	if err := s.await(ctx, h, key, f.done); err != nil && ctx.Err() != nil {
		ks.mu.Lock()
		select {
		case <-f.done: // finished meanwhile: the starter's tokens were taken for it
			if f.err == nil && f.r.ok && book {
				ks.mu.Unlock()
				s.Cancel(key, r)
				return store.Grant{}, ctx.Err()
			}
		default:
			f.abandoned = true
		}
		ks.mu.Unlock()
		return store.Grant{}, ctx.Err()
	} else if err != nil { // the shard went down
		ks.mu.Lock()
		select {
		case <-f.done: // finished meanwhile: its answer stands
		default:
			f.abandoned = true
			ks.mu.Unlock()
			return s.degraded(ctx, key, r, h.sh, err)
		}
		ks.mu.Unlock()
	}
	if f.err != nil {
		return s.degraded(ctx, key, r, h.sh, f.err)
	}
	ks.mu.Lock()
	g := ks.grant(time.Now(), f.origin, f.r, r.Tokens, interval)
	ks.mu.Unlock()
	return g, nil
}

// runFetch books b in Redis and installs the result as the key's lease, even
// if every caller waiting for it has left: the tokens then serve the next
// ones, or go back at the lease's deadline.
func (s *Store) runFetch(h health, key string, ks *keyState, f *fetch, b booking, limit float64) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	sent := time.Now()
	r, err := s.runReserve(ctx, s.client, h.sh.addr, key, b)
	cancel()
	origin := time.Now()
	if err != nil {
		s.failed(h, key, err)
	}

	ks.mu.Lock()
	defer ks.mu.Unlock()
	f.r, f.origin, f.err = r, origin, err
	if ks.inflight == f { // a caller that gave up on a down shard may have started another
		ks.inflight = nil
	}
	close(f.done)
	if err != nil {
		return
	}
	ks.read(sent, origin, r)
	if !r.ok || b.interval == 0 || b.tokens <= 0 {
		return
	}
	used := b.first
	if f.abandoned {
		used = 0
	}
	last := r.at(b.tokens, b.interval)
	ks.lease = lease{
		limit:    limit,
		interval: b.interval,
		origin:   origin,
		base:     r.base,
		pause:    r.pause,
		total:    b.tokens,
		used:     used,
		deadline: origin.Add(secs(last) + s.leaseWindow),
	}
	if ks.lease.left() > 0 {
		s.signal() // the loop schedules the lease's return
	}
}

// fromLease serves r from the current lease when it can: ok is false when the
// lease is missing, expired, too small or booked at a limit too different
// from r's.
func (ks *keyState) fromLease(now time.Time, r store.Request, maxWait time.Duration) (store.Grant, bool) {
	l := &ks.lease
	if l.total == 0 || !now.Before(l.deadline) || l.left() < r.Tokens-1e-9 ||
		math.Abs(float64(r.Limit-l.limit)) > leaseTolerance*float64(l.limit) {
		return store.Grant{}, false
	}
	at := l.origin.Add(secs(max(l.pause, l.base+(l.used+r.Tokens)*l.interval)))
	g := store.Grant{Shared: ks.shared(now)}
	g.Delay = max(at.Sub(now), g.Shared.Pause, 0)
	if maxWait >= 0 && g.Delay > maxWait {
		return g, true // a later token would come later still
	}
	g.OK = true
	l.used += r.Tokens
	return g, true
}

// grant is the starter's answer from its own fetch.
func (ks *keyState) grant(now, origin time.Time, r reply, tokens, interval float64) store.Grant {
	g := store.Grant{OK: r.ok, Shared: ks.shared(now)}
	at := origin.Add(secs(r.pause))
	if tokens > 0 && interval > 0 {
		at = origin.Add(secs(r.at(tokens, interval)))
	}
	g.Delay = max(at.Sub(now), g.Shared.Pause, 0)
	return g
}

// leaseSize is how many tokens to book for r: about a lease window of local
// demand, at least r.Tokens, at most maxLease (unless r alone needs more).
// Demand is a time-weighted moving average of the tokens asked for, with a
// time constant of demandHorizon, so a long idle spell forgets old traffic.
func (ks *keyState) leaseSize(now time.Time, r store.Request, window time.Duration, maxLease float64) float64 {
	if !ks.lastFetch.IsZero() {
		if e := now.Sub(ks.lastFetch).Seconds(); e > 0 {
			alpha := -math.Expm1(-e / demandHorizon.Seconds())
			ks.rate = alpha*ks.requested/e + (1-alpha)*ks.rate
		} else {
			ks.rate += ks.requested / demandHorizon.Seconds()
		}
	}
	ks.lastFetch, ks.requested = now, 0
	k := math.Ceil(min(ks.rate, float64(r.Limit)) * window.Seconds())
	if k < 2*r.Tokens {
		return r.Tokens // too little traffic for a lease to save anything
	}
	return max(min(k, maxLease), r.Tokens)
}

// read records the shared state of a reply to a call sent at sent and
// answered at origin. A reply without a limit forgets the local one only if
// the call went out after local publishes reached Redis: an older call's
// script may have run before the publish landed, and the publisher must keep
// seeing what it published (the [store.Store] contract).
func (ks *keyState) read(sent, origin time.Time, r reply) {
	ks.readAt = origin
	ks.pauseUntil = maxTime(ks.pauseUntil, origin.Add(secs(r.pause)))
	if r.shared.Limit > 0 {
		learnedAt := origin.Add(-r.shared.Age)
		if ks.limit == 0 || !learnedAt.Before(ks.learnedAt) {
			ks.limit, ks.burst, ks.learnedAt = r.shared.Limit, r.shared.Burst, learnedAt
		}
	} else if !ks.unsent && !sent.Before(ks.deliveredAt) {
		ks.limit, ks.burst = 0, 0 // expired, or Redis restarted empty
	}
}

// learn applies a local publish at once and returns the lease tokens to give
// back because a pause makes them unusable.
func (ks *keyState) learn(now time.Time, st store.State) giveBack {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.lastUse = now // keeps the local pause from being forgotten as idle
	if st.Limit > 0 {
		ks.limit, ks.burst, ks.learnedAt, ks.unsent = st.Limit, st.Burst, now, true
	}
	if st.Pause > 0 {
		ks.pauseUntil = maxTime(ks.pauseUntil, now.Add(st.Pause))
		return ks.dropLeaseLocked()
	}
	return giveBack{}
}

// sent marks local publishes as delivered (or given up on), so that what
// Redis says wins again.
func (ks *keyState) sent() {
	ks.mu.Lock()
	ks.unsent, ks.deliveredAt = false, time.Now()
	ks.mu.Unlock()
}

func (ks *keyState) shared(now time.Time) store.State {
	st := store.State{Pause: max(ks.pauseUntil.Sub(now), 0)}
	if ks.limit > 0 {
		st.Limit, st.Burst, st.Age = ks.limit, ks.burst, max(now.Sub(ks.learnedAt), 0)
	}
	return st
}

func (ks *keyState) dropLease() giveBack {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.dropLeaseLocked()
}

func (ks *keyState) dropLeaseLocked() giveBack {
	var g giveBack
	g.add(max(ks.lease.left(), 0), ks.lease.interval)
	ks.lease = lease{}
	return g
}

// expire returns the tokens of a lease past its deadline, and reports when
// the current lease ends (zero if none) and whether the key is idle enough
// to forget.
func (ks *keyState) expire(now time.Time, idle time.Duration) (refund giveBack, deadline time.Time, forget bool) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.lease.total > 0 && !now.Before(ks.lease.deadline) {
		refund = ks.dropLeaseLocked()
	}
	if ks.lease.total > 0 {
		deadline = ks.lease.deadline
	}
	forget = ks.lease.total == 0 && ks.inflight == nil && now.Sub(ks.lastUse) > idle
	return refund, deadline, forget
}

func secs(s float64) time.Duration {
	if !(s > 0) {
		return 0
	}
	if s >= math.MaxInt64/1e9 {
		return math.MaxInt64
	}
	return time.Duration(math.Round(s * 1e9))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
