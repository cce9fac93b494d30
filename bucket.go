package pacer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Limit is a rate of events per second. It mirrors golang.org/x/time/rate's
// Limit so code can switch without relearning.
type Limit float64

// Inf is the infinite rate limit: every request is allowed, bursts included.
const Inf = Limit(math.MaxFloat64)

// InfDuration is the delay a [Reservation] reports when it is not OK: the
// tokens it asked for can never be had.
const InfDuration = time.Duration(math.MaxInt64)

// Every converts a minimum time between events to a Limit. A zero or negative
// interval means no limit (Inf).
func Every(interval time.Duration) Limit {
	if interval <= 0 {
		return Inf
	}
	return 1 / Limit(interval.Seconds())
}

// Bucket is a token bucket. Conceptually it holds up to burst tokens and is
// refilled at limit tokens per second; an event that needs n tokens may happen
// once n tokens are in the bucket, and takes them. A full bucket allows burst
// events at once; after that, events are spaced at the limit.
//
// The API mirrors golang.org/x/time/rate.Limiter, in three families:
//
//   - Allow/AllowN take tokens if they are there now and report whether they
//     did. They never wait; use them to drop or defer work.
//   - Wait/WaitN block until the tokens are granted, the context ends, or it
//     is clear at once that they cannot be granted in time.
//   - Reserve/ReserveN take the tokens now and say how long the caller must
//     wait before acting; the caller does the waiting (or cancels).
//
// Each has a variant that takes the current time (AllowNAt, ReserveNAt,
// TokensAt, SetLimitAt, SetBurstAt) for callers with their own clock and for
// tests; the plain methods read the monotonic clock.
//
// Waiters are served in arrival order: once a WaitN or ReserveN has to wait,
// the tokens it needs are set aside for it, so a stream of later small
// requests cannot starve a large one. Each waiter sleeps on its own timer and
// wakes once, when its turn comes. When the limit, the burst or a pause
// changes while callers wait (SetLimit, SetBurst, PauseUntil), or a waiter
// gives up, the waiters still queued are re-planned in order at the new rate;
// none is lost or served twice. A Reservation already handed out keeps its
// time: it is a promise to the caller who holds it.
//
// Edge cases, decided as x/time/rate's issue history suggests:
//
//   - Limit Inf allows everything, whatever the burst (a pause still holds).
//   - Limit 0 never refills: a bucket created with burst b allows b tokens in
//     total and then nothing; Reserve says not OK and Wait fails at once.
//   - Burst 0 allows nothing unless the limit is Inf.
//   - n = 0 is always allowed and changes nothing; n < 0 is never allowed
//     (Allow reports false, Reserve is not OK, Wait returns an error).
//   - n > burst is never allowed (unless the limit is Inf): Wait fails at
//     once instead of waiting forever.
//   - A NaN or negative limit, or a negative burst, is a programming error:
//     NewBucket, SetLimit and SetBurst panic naming the value.
//
// Time is kept as whole nanoseconds on the monotonic clock. Each grant costs
// its token count divided by the limit, rounded up to a nanosecond, so the
// bucket never runs faster than its limit and never drifts (no floating-point
// state accumulates); at very high limits the rounding makes it slightly
// slower: single-token grants above 10⁹ per second are paced at 10⁹ per
// second. Waits, delays and the bucket's depth are capped at 2⁶¹ ns (about 73
// years): a grant further away than that is treated as never.
//
// The zero Bucket is valid and rejects every event, like a bucket with limit
// 0 and burst 0. A Bucket is safe for concurrent use. Allow, AllowN and a
// Reserve, Wait or WaitN that is granted at once take no lock: the bucket's
// state is a single atomic word (a GCRA theoretical arrival time).
type Bucket struct {
	st atomic.Pointer[state]
	_  [56]byte // keeps the hot pointer off the cache line the slow path writes

	mu     sync.Mutex
	queue  []*entry // reservations whose time has not come, in arrival order
	pause  int64    // no grant before this time (ns on the bucket clock) if paused; guarded by mu
	paused bool     // a pause was ever set; guarded by mu
}

// The bucket clock counts nanoseconds since epoch on the monotonic clock.
// time.Since(epoch) reads only the monotonic clock, about half the cost of
// time.Now.
var epoch = time.Now()

const (
	// maxSpan caps every duration the bucket computes: waits, delays, costs
	// and the bucket's depth. 2⁶¹ ns is about 73 years.
	maxSpan = int64(1) << 61
	// minTime and maxTime bound the bucket clock so that adding maxSpan to a
	// time can never overflow.
	minTime = -int64(1) << 61
	maxTime = int64(1) << 61
	// sealed marks the state a re-plan is replacing: no fast path may
	// commit against it.
	sealed = math.MinInt64
	// noLimit is the latest acceptable grant time of a waiter without a
	// deadline.
	noLimit = math.MaxInt64
	// useClock asks a locked operation to read the clock itself, after it
	// holds the lock.
	useClock = math.MinInt64
)

func nanotime() int64 { return clampTime(int64(time.Since(epoch))) }

func toNanos(t time.Time) int64 { return clampTime(int64(t.Sub(epoch))) }

func clampTime(ns int64) int64 { return min(max(ns, minTime), maxTime) }

// fromNanos converts a bucket-clock time to a time.Time, taking the wall
// clock from ref, a time read at refNs.
func fromNanos(ns int64, ref time.Time, refNs int64) time.Time {
	return ref.Add(time.Duration(ns - refNs))
}

// params is an immutable setting of limit and burst, precomputed for the
// fast path.
type params struct {
	limit    Limit
	burst    int
	inf      bool    // limit is Inf: tokens cost nothing, only a pause holds requests back
	frozen   bool    // limit is 0: the bucket never refills; time does not count
	interval float64 // nanoseconds per token
	step     int64   // interval rounded up: the depth one token occupies
	capacity int64   // the bucket's depth in nanoseconds: burst tokens' worth
	cost1    int64   // cost(1), for the common case
}

func newParams(limit Limit, burst int) params {
	p := params{limit: limit, burst: burst}
	switch {
	case limit >= Inf: // also +Inf
		p.inf = true
	case limit == 0:
		// Time does not refill a frozen bucket, so its unit is arbitrary:
		// one nanosecond per token.
		p.frozen, p.interval, p.step = true, 1, 1
		p.capacity = int64(min(burst, int(maxSpan)))
	default:
		iv := 1e9 / float64(limit)
		// Limits built from decimal fractions (Every(3*time.Millisecond))
		// land a hair off a whole number of nanoseconds; snap them so that
		// rounding up does not add a nanosecond per token.
		if r := math.Round(iv); math.Abs(iv-r) <= 1e-12*iv {
			iv = r
		}
		p.interval = iv
		p.step = maxSpan
		if iv < float64(maxSpan) {
			p.step = max(1, int64(math.Ceil(iv)))
		}
		p.capacity = maxSpan
		if burst <= int(maxSpan/p.step) {
			p.capacity = int64(burst) * p.step
		}
	}
	p.cost1 = p.cost(1)
	return p
}

// eff maps a time to the instant that counts for refilling: frozen buckets
// live at a fixed instant, 0.
func (p *params) eff(now int64) int64 {
	if p.frozen {
		return 0
	}
	return now
}

// cost is the depth n tokens occupy, rounded up to a nanosecond; more than
// maxSpan means never.
func (p *params) cost(n int) int64 {
	switch {
	case p.inf:
		return 0
	case p.frozen:
		return int64(min(n, int(maxSpan)+1))
	}
	c := math.Ceil(float64(n) * p.interval)
	// At limits so low that step was capped, n tokens still fit in n steps,
	// so a full bucket always grants its burst.
	c = min(c, float64(n)*float64(p.step))
	if c > float64(maxSpan) {
		return maxSpan + 1
	}
	return int64(c)
}

// level is the number of tokens in the bucket at now, given its theoretical
// arrival time tat: between 0 and burst, +Inf for an unlimited bucket.
func (p *params) level(tat, now int64) float64 {
	if p.inf {
		if tat > now {
			return 0
		}
		return math.Inf(1)
	}
	e := p.eff(now)
	depth := p.capacity - (max(tat, e) - e)
	if depth <= 0 {
		return 0
	}
	return min(float64(depth)/float64(p.step), float64(p.burst))
}

// tatFor is the theoretical arrival time that leaves level tokens in the
// bucket at now.
func (p *params) tatFor(level float64, now int64) int64 {
	e := p.eff(now)
	if p.inf || level >= float64(p.burst) {
		return e
	}
	return e + p.capacity - min(int64(level*float64(p.step)), p.capacity)
}

// state pairs params with the theoretical arrival time (tat) computed under
// them: the bucket is full when tat <= now, and an event needing cost c is
// allowed at now when max(tat, now) + c <= now + capacity. Changing params
// replaces the whole state, so a fast path can never combine a tat with the
// wrong params.
//
// floor is the earliest time anything new may be granted: the time of the
// last queued grant when a re-plan left promises in the queue, so that
// arrival order holds even where the bucket has room earlier.
type state struct {
	tat   atomic.Int64
	floor int64
	params
}

func newState(limit Limit, burst int) *state {
	s := &state{params: newParams(limit, burst), floor: minTime}
	s.tat.Store(minTime) // full
	return s
}

// plan is what taking n tokens at now would do, given tat.
type plan struct {
	start, end int64 // the slot the tokens occupy: tat before and after
	cost       int64
	at         int64 // when the tokens are granted
	tooBig     bool  // n > burst: never, whatever happens
	never      bool  // not within maxSpan (or, for limit 0, not ever)
}

func (s *state) plan(tat, now int64, n int) (pl plan) {
	p := &s.params
	if !p.inf && n > p.burst {
		pl.tooBig = true
		return pl
	}
	e := p.eff(now)
	pl.cost = p.cost(n)
	pl.start = max(tat, e)
	pl.end = pl.start + pl.cost
	switch {
	case p.inf:
		pl.at = max(pl.end, s.floor)
	case p.frozen:
		pl.at = max(now, s.floor)
		pl.never = pl.end > p.capacity
	default:
		pl.at = max(now, pl.end-p.capacity, s.floor)
		pl.never = pl.end-e > maxSpan
	}
	return pl
}

// entry is one reservation in the queue of those whose time has not come.
// Its fields are guarded by Bucket.mu, except at of a Reservation's entry,
// which never changes once handed out.
type entry struct {
	n     int
	done  bool // granted (its time came) or withdrawn
	st    *state
	start int64 // the slot the tokens occupy, under st
	end   int64
	cost  int64
	at    int64   // grant time
	wt    *waiter // nil for a Reservation: its at is a promise and never moves
}

// waiter is an entry of a blocked WaitN.
type waiter struct {
	entry
	err     error       // a re-plan found the wait impossible; WaitN returns this
	limitAt int64       // latest acceptable grant time (deadline, maxWait)
	dlAt    int64       // the context's deadline, or noLimit
	wake    *time.Timer // fires at at
}

// NewBucket returns a bucket that refills at limit tokens per second and holds
// at most burst tokens. It starts full.
//
// It panics if limit is NaN or negative or burst is negative.
func NewBucket(limit Limit, burst int) *Bucket {
	checkLimit("NewBucket", limit)
	checkBurst("NewBucket", burst)
	b := &Bucket{}
	b.st.Store(newState(limit, burst))
	return b
}

func checkLimit(fn string, limit Limit) {
	if math.IsNaN(float64(limit)) || limit < 0 {
		panic(fmt.Sprintf("pacer: %s: limit %v is not a rate: it must be a non-negative number of events per second, or Inf", fn, float64(limit)))
	}
}

func checkBurst(fn string, burst int) {
	if burst < 0 {
		panic(fmt.Sprintf("pacer: %s: burst %d is negative", fn, burst))
	}
}

// state returns the current state, creating the zero Bucket's on first use.
func (b *Bucket) state() *state {
	if s := b.st.Load(); s != nil {
		return s
	}
	b.st.CompareAndSwap(nil, newState(0, 0))
	return b.st.Load()
}

// load returns the current state and its tat, waiting out a re-plan that is
// replacing it.
func (b *Bucket) load() (*state, int64) {
	if s := b.st.Load(); s != nil {
		if t := s.tat.Load(); t != sealed {
			return s, t
		}
	}
	return b.loadSlow()
}

func (b *Bucket) loadSlow() (*state, int64) {
	for {
		s := b.state()
		if t := s.tat.Load(); t != sealed {
			return s, t
		}
		// A re-plan holds mu while the state is sealed.
		b.mu.Lock()
		b.mu.Unlock() //lint:ignore SA2001 the empty critical section waits for the re-plan
	}
}

// Limit returns the current limit.
func (b *Bucket) Limit() Limit { return b.state().limit }

// Burst returns the current burst: the most tokens the bucket holds.
func (b *Bucket) Burst() int { return b.state().burst }

// Tokens returns the number of tokens available now. It is never negative: it
// is 0 while waiters or reservations are owed tokens or a pause holds, and +Inf
// when the limit is Inf and no pause holds.
func (b *Bucket) Tokens() float64 { return b.tokensAt(nanotime()) }

// TokensAt returns the number of tokens available at t, as [Bucket.Tokens].
func (b *Bucket) TokensAt(t time.Time) float64 { return b.tokensAt(toNanos(t)) }

func (b *Bucket) tokensAt(now int64) float64 {
	s, tat := b.load()
	if now < s.floor {
		return 0
	}
	return s.level(tat, now)
}

// Allow reports whether one event may happen now, and if so takes its token.
func (b *Bucket) Allow() bool { return b.allowAt(nanotime(), 1) }

// AllowN reports whether n events may happen now, and if so takes their
// tokens. It never waits and never takes tokens set aside for waiters.
// AllowN(0) is always true; a negative n is never allowed.
func (b *Bucket) AllowN(n int) bool { return b.allowAt(nanotime(), n) }

// AllowNAt is AllowN at time t, for callers with their own clock.
func (b *Bucket) AllowNAt(t time.Time, n int) bool { return b.allowAt(toNanos(t), n) }

func (b *Bucket) allowAt(now int64, n int) bool {
	if n <= 0 {
		return n == 0
	}
	for {
		// b.load, by hand: this is the hottest path.
		s := b.st.Load()
		if s == nil {
			s = b.state()
		}
		tat := s.tat.Load()
		if tat == sealed {
			b.loadSlow()
			continue
		}
		p := &s.params
		if now < s.floor {
			return false
		}
		if p.inf {
			return tat <= now
		}
		if n > p.burst {
			return false
		}
		c := p.cost1
		if n != 1 {
			c = p.cost(n)
		}
		e := p.eff(now)
		end := max(tat, e) + c
		if end-e > p.capacity {
			return false
		}
		if s.tat.CompareAndSwap(tat, end) {
			return true
		}
	}
}

// Reservation holds tokens taken by [Bucket.ReserveN] for an event that may
// happen after [Reservation.Delay]. Its time does not move once it is handed
// out, even if the bucket's limit changes. Its methods are safe for concurrent
// use.
type Reservation struct {
	b        *Bucket
	ok       bool
	canceled bool // guarded by b.mu
	e        entry
}

// Reserve is ReserveN(1).
func (b *Bucket) Reserve() *Reservation { return b.reserveAt(useClock, 1) }

// ReserveN takes n tokens now, for an event that may happen after the
// returned Reservation's Delay. The caller must wait that long before acting,
// or Cancel the reservation to give the tokens back. Later reservations and
// waiters queue behind it; Allow cannot take the tokens it set aside.
//
// The reservation is not OK (and took nothing) when the tokens can never be
// had: n > burst, n < 0, or a limit of 0 with too few tokens left.
// ReserveN(0) is OK with no delay and takes nothing.
func (b *Bucket) ReserveN(n int) *Reservation { return b.reserveAt(useClock, n) }

// ReserveNAt is ReserveN at time t, for callers with their own clock.
func (b *Bucket) ReserveNAt(t time.Time, n int) *Reservation { return b.reserveAt(toNanos(t), n) }

func (b *Bucket) reserveAt(now int64, n int) *Reservation {
	r := &Reservation{b: b, e: entry{n: n, done: true}}
	if n < 0 {
		return r
	}
	clock := now == useClock
	if clock {
		now = nanotime()
	}
	if n == 0 {
		r.ok, r.e.at = true, now
		return r
	}
	// Fast path: the tokens are there now.
	for {
		s, tat := b.load()
		pl := s.plan(tat, now, n)
		if pl.tooBig || pl.never {
			return r
		}
		if pl.at > now {
			break
		}
		if pl.cost == 0 || s.tat.CompareAndSwap(tat, pl.end) {
			r.grant(s, pl)
			return r
		}
	}
	// Slow path: the reservation waits, so it joins the queue.
	b.mu.Lock()
	defer b.mu.Unlock()
	if clock {
		now = nanotime()
	}
	b.popDueLocked(now)
	for {
		s := b.state()
		tat := s.tat.Load()
		pl := s.plan(tat, now, n)
		if pl.tooBig || pl.never {
			return r
		}
		if pl.cost != 0 && !s.tat.CompareAndSwap(tat, pl.end) {
			continue
		}
		r.grant(s, pl)
		if pl.at > now {
			r.e.done = false
			b.queue = append(b.queue, &r.e)
		}
		return r
	}
}

func (r *Reservation) grant(s *state, pl plan) {
	r.ok = true
	r.e.st, r.e.start, r.e.end, r.e.cost, r.e.at = s, pl.start, pl.end, pl.cost, pl.at
}

// OK reports whether the reservation holds its tokens. A reservation that is
// not OK can never be fulfilled (see [Bucket.ReserveN]) and took nothing.
func (r *Reservation) OK() bool { return r.ok }

// Delay is how long the holder must wait before acting: 0 if it may act now,
// [InfDuration] if the reservation is not OK.
func (r *Reservation) Delay() time.Duration { return r.DelayFrom(time.Now()) }

// DelayFrom is Delay measured from t.
func (r *Reservation) DelayFrom(t time.Time) time.Duration {
	if !r.ok {
		return InfDuration
	}
	return time.Duration(max(0, r.e.at-toNanos(t)))
}

// Cancel tells the bucket the holder will not act: its tokens are given back
// as far as no later grant depends on them. A reservation still waiting for
// its time leaves the queue, and the waiters behind it move up. Once its time
// has passed, Cancel does nothing (the holder may have acted). Cancel is
// idempotent.
func (r *Reservation) Cancel() { r.cancelAt(useClock) }

// CancelAt is Cancel at time t.
func (r *Reservation) CancelAt(t time.Time) { r.cancelAt(toNanos(t)) }

func (r *Reservation) cancelAt(now int64) {
	if !r.ok || r.e.n == 0 {
		return
	}
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.canceled {
		return
	}
	r.canceled = true
	if now == useClock {
		now = nanotime()
	}
	if r.e.at < now {
		return
	}
	b.withdrawLocked(&r.e, now)
}

// withdrawLocked gives back e's tokens. If e is still queued it leaves the
// queue and the rest is re-planned. If it was already granted, its tokens
// come back only if no grant came after it.
func (b *Bucket) withdrawLocked(e *entry, now int64) {
	b.popDueLocked(now)
	if !e.done {
		// Still queued: the re-plan drops it (done) but starts from where
		// it started, so its slot goes to those behind it.
		e.done = true
		b.replanLocked(now, nil)
		return
	}
	if s := b.state(); e.st == s && e.cost > 0 {
		s.tat.CompareAndSwap(e.end, e.start)
	}
}

// popDueLocked drops the entries whose time has come from the queue: they
// are granted. (Grant times never decrease along the queue.)
func (b *Bucket) popDueLocked(now int64) {
	q := b.queue
	i := 0
	for i < len(q) && q[i].at <= now {
		q[i].done = true
		i++
	}
	if i > 0 {
		k := copy(q, q[i:])
		clear(q[k:])
		b.queue = q[:k]
	}
}

// SetLimit changes the limit. The tokens in the bucket stay (the level, not
// the time to refill), and waiters are re-planned at the new rate in arrival
// order. It panics if limit is NaN or negative.
func (b *Bucket) SetLimit(limit Limit) {
	checkLimit("SetLimit", limit)
	b.setAt(useClock, limit, keepBurst)
}

// SetLimitAt is SetLimit at time t.
func (b *Bucket) SetLimitAt(t time.Time, limit Limit) {
	checkLimit("SetLimitAt", limit)
	b.setAt(toNanos(t), limit, keepBurst)
}

// SetBurst changes the burst. The tokens in the bucket stay, capped at the
// new burst, and waiters are re-planned; a waiter asking for more than the new
// burst fails with an error. It panics if burst is negative.
func (b *Bucket) SetBurst(burst int) {
	checkBurst("SetBurst", burst)
	b.setAt(useClock, keepLimit, burst)
}

// SetBurstAt is SetBurst at time t.
func (b *Bucket) SetBurstAt(t time.Time, burst int) {
	checkBurst("SetBurstAt", burst)
	b.setAt(toNanos(t), keepLimit, burst)
}

// keepLimit and keepBurst tell setAt to leave the limit or the burst as is.
const (
	keepLimit = Limit(-1)
	keepBurst = -1
)

func (b *Bucket) setAt(now int64, limit Limit, burst int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now == useClock {
		now = nanotime()
	}
	old := &b.state().params
	if limit == keepLimit {
		limit = old.limit
	}
	if burst == keepBurst {
		burst = old.burst
	}
	if limit == old.limit && burst == old.burst {
		return
	}
	np := newParams(limit, burst)
	b.replanLocked(now, &np)
}

// PauseUntil holds the bucket until t: no tokens are granted before t, and at
// t the bucket is empty, so waiters released then are paced at the limit from
// t on rather than fired at once. Waiters are re-planned. A pause never
// shortens an earlier one, and a t not after now changes nothing. With limit
// Inf, everything held is released at t.
func (b *Bucket) PauseUntil(t time.Time) { b.pauseAt(useClock, toNanos(t)) }

func (b *Bucket) pauseAt(now, until int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now == useClock {
		now = nanotime()
	}
	if until <= now || b.paused && until <= b.pause {
		return
	}
	b.pause, b.paused = until, true
	b.replanLocked(now, nil)
}

// replanLocked recomputes, in arrival order, when each queued entry is
// granted, under params np (nil: unchanged) and the current pause. It seals
// the current state so no fast path commits against it, and publishes a new
// one. Waiters whose time moved get their timer reset; waiters that can no
// longer be served in time fail.
func (b *Bucket) replanLocked(now int64, np *params) {
	old := b.state()
	tat := old.tat.Swap(sealed)
	b.popDueLocked(now)
	q := b.queue
	if len(q) > 0 && tat != q[len(q)-1].end {
		// A fast-path grant came after the queue, which it can only do once
		// every queued entry's time has come.
		for _, e := range q {
			e.done = true
		}
		clear(q)
		q = q[:0]
	}
	base := tat
	if len(q) > 0 {
		base = q[0].start
	}

	ns := &state{params: old.params, floor: minTime}
	if np != nil {
		ns.params = *np
	}
	p := &ns.params
	pausing := b.paused && b.pause > now
	switch {
	case np == nil:
		if pausing {
			base = max(base, p.eff(b.pause)+p.capacity)
		}
	case pausing:
		base = p.eff(b.pause) + p.capacity
	default:
		base = p.tatFor(old.level(base, now), now)
	}

	e := p.eff(now)
	end, prevAt := base, int64(minTime)
	kept := q[:0]
	for _, en := range q {
		if en.done { // withdrawn
			continue
		}
		cost := p.cost(en.n)
		var start, at int64
		var err error
		if en.wt == nil {
			start = max(end, p.eff(en.at))
			at = en.at
		} else {
			start = max(end, e)
			switch stop := start + cost; {
			case !p.inf && en.n > p.burst:
				err = errTooBig(en.n, p.burst)
			case p.inf:
				at = max(stop, now, prevAt)
			case p.frozen:
				if stop > p.capacity {
					err = errNever(en.n)
				}
				at = max(now, prevAt)
			default:
				if stop-e > maxSpan {
					err = errNever(en.n)
				}
				at = max(now, stop-p.capacity, prevAt)
			}
			if err == nil && at > en.wt.limitAt {
				err = tooLate(at, time.Now(), nanotime(), en.wt.dlAt)
			}
		}
		if err != nil {
			en.wt.err, en.done = err, true
			en.wt.wake.Reset(0)
			continue
		}
		en.st, en.start, en.end, en.cost = ns, start, min(start+cost, e+maxSpan+1), cost
		if en.wt != nil && at != en.at {
			en.at = at
			en.wt.wake.Reset(time.Duration(at - now))
		}
		end, prevAt = en.end, at
		kept = append(kept, en)
	}
	if len(kept) > 0 {
		// A promise (a fixed entry) can make a grant later than its slot
		// needs; newcomers must still not be granted before it.
		ns.floor = prevAt
	}
	clear(q[len(kept):])
	b.queue = kept
	ns.tat.Store(end)
	b.st.Store(ns)
}

// tooLate is the error for a wait that would end at at, past the waiter's
// context deadline dlAt or its maxWait; ref is a time read at now.
func tooLate(at int64, ref time.Time, now, dlAt int64) error {
	rle := &RateLimitError{RetryAt: fromNanos(at, ref, now)}
	if at >= dlAt {
		rle.Err = context.DeadlineExceeded
	}
	return rle
}

func errTooBig(n, burst int) error {
	return fmt.Errorf("pacer: wait for %d tokens exceeds the bucket's burst of %d", n, burst)
}

func errNever(n int) error {
	return fmt.Errorf("pacer: wait for %d tokens would never end: the limit is 0 (or the wait is longer than 73 years)", n)
}

var errNegative = errors.New("pacer: wait for a negative number of tokens")

// Wait is WaitN(ctx, 1).
func (b *Bucket) Wait(ctx context.Context) error {
	_, err := b.wait(ctx, 1, 0)
	return err
}

// WaitN blocks until n tokens are granted, then takes them. Waiters are
// served in arrival order; each sleeps on its own timer and wakes when its turn
// comes (or earlier if a SetLimit, SetBurst or PauseUntil re-plans it).
//
// It returns an error at once, taking nothing, when n > burst (unless the
// limit is Inf), when n < 0, when the limit is 0 and too few tokens are left,
// or when the tokens would not be granted before ctx's deadline; the last is a
// [*RateLimitError] whose RetryAt says when they would have been and whose Err
// is [context.DeadlineExceeded]. If ctx ends while waiting, WaitN returns
// ctx's error promptly and gives the tokens back to the waiters behind it. A
// re-plan that pushes the grant past ctx's deadline fails the wait the same
// way, at once.
//
// WaitN(ctx, 0) returns nil at once unless ctx is already done.
func (b *Bucket) WaitN(ctx context.Context, n int) error {
	_, err := b.wait(ctx, n, 0)
	return err
}

// waitN is WaitN with a cap: when the tokens would not be granted within
// maxWait (if maxWait > 0) or before ctx's deadline, it returns at once,
// taking nothing, a *RateLimitError whose RetryAt is when the n tokens would
// be granted and whose Err is context.DeadlineExceeded when the deadline was
// the reason, nil when maxWait was (Endpoint and Info are left for the caller
// to fill). The same holds if a re-plan later pushes the grant past either
// bound. On success it returns the time the tokens were granted.
func (b *Bucket) waitN(ctx context.Context, n int, maxWait time.Duration) (time.Time, error) {
	at, err := b.wait(ctx, n, maxWait)
	if err != nil {
		return time.Time{}, err
	}
	now := time.Now()
	return fromNanos(at, now, toNanos(now)), nil
}

// nextAt reports when n tokens could be granted if asked for now, without
// taking them: now if at once. When they never could be (n > burst, limit 0
// with too few tokens), it returns a time about 73 years away.
func (b *Bucket) nextAt(n int) time.Time {
	ref := time.Now()
	now := toNanos(ref)
	if n <= 0 {
		return ref
	}
	s, tat := b.load()
	pl := s.plan(tat, now, n)
	if pl.tooBig || pl.never {
		return fromNanos(now+maxSpan, ref, now)
	}
	return fromNanos(max(pl.at, now), ref, now)
}

// wait is the core of WaitN and waitN; it returns the grant time.
func (b *Bucket) wait(ctx context.Context, n int, maxWait time.Duration) (int64, error) {
	if n < 0 {
		return 0, errNegative
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	now := nanotime()
	if n == 0 {
		return now, nil
	}
	// Fast path: the tokens are there now.
	for {
		s, tat := b.load()
		pl := s.plan(tat, now, n)
		if pl.tooBig {
			return 0, errTooBig(n, s.burst)
		}
		if pl.never || pl.at > now {
			break
		}
		if pl.cost == 0 || s.tat.CompareAndSwap(tat, pl.end) {
			return now, nil
		}
	}
	e, at, err := b.enqueue(ctx, n, maxWait)
	if err != nil {
		return 0, err
	}
	if e == nil {
		return at, nil
	}
	defer e.wake.Stop()
	for {
		select {
		case <-ctx.Done():
			b.mu.Lock()
			if e.err == nil {
				b.withdrawLocked(&e.entry, nanotime())
			}
			err := e.err
			b.mu.Unlock()
			if err != nil {
				return 0, err
			}
			return 0, ctx.Err()
		case <-e.wake.C:
			b.mu.Lock()
			if e.err != nil {
				b.mu.Unlock()
				return 0, e.err
			}
			now := nanotime()
			b.popDueLocked(now)
			if e.done {
				b.mu.Unlock()
				return e.at, nil
			}
			// A re-plan moved the grant later (and reset the timer already;
			// resetting it again to the same time is harmless).
			e.wake.Reset(time.Duration(e.at - now))
			b.mu.Unlock()
		}
	}
}

// enqueue is the slow path of wait: under the lock it plans the wait, fails
// it at once if it cannot end in time, and otherwise queues a waiter. It
// returns a nil entry and the grant time when the tokens were granted at once.
func (b *Bucket) enqueue(ctx context.Context, n int, maxWait time.Duration) (*waiter, int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ref := time.Now()
	now := toNanos(ref)
	b.popDueLocked(now)
	dlAt, limitAt := int64(noLimit), int64(noLimit)
	if dl, ok := ctx.Deadline(); ok {
		// A grant at the deadline itself is useless: the request would go
		// out with an expired context.
		dlAt = toNanos(dl)
		limitAt = dlAt - 1
	}
	if maxWait > 0 {
		limitAt = min(limitAt, now+int64(min(maxWait, time.Duration(maxSpan))))
	}
	for {
		s := b.state()
		tat := s.tat.Load()
		pl := s.plan(tat, now, n)
		switch {
		case pl.tooBig:
			return nil, 0, errTooBig(n, s.burst)
		case pl.never:
			return nil, 0, errNever(n)
		case pl.at > limitAt:
			return nil, 0, tooLate(pl.at, ref, now, dlAt)
		}
		if pl.cost != 0 && !s.tat.CompareAndSwap(tat, pl.end) {
			continue
		}
		if pl.at <= now {
			return nil, now, nil
		}
		w := &waiter{
			entry:   entry{n: n, st: s, start: pl.start, end: pl.end, cost: pl.cost, at: pl.at},
			limitAt: limitAt, dlAt: dlAt,
			wake: time.NewTimer(time.Duration(pl.at - now)),
		}
		w.wt = w
		b.queue = append(b.queue, &w.entry)
		return w, 0, nil
	}
}
