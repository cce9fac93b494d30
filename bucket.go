package pacer

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Limit is a rate of events per second. It mirrors golang.org/x/time/rate's
// Limit so code can switch without relearning.
type Limit float64

const (
	// Inf is the infinite rate limit: every request is allowed, bursts
	// included.
	Inf = Limit(math.MaxFloat64)

	// InfDuration is the delay a [Reservation] reports when it is not OK:
	// the tokens it asked for can never be had.
	InfDuration = time.Duration(math.MaxInt64)
)

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
// Its API follows golang.org/x/time/rate.Limiter, in three families:
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
// none is lost or served twice, and one the change makes impossible (more
// tokens than the new burst, a limit of 0, a grant past its deadline) fails
// at once with an error. A Reservation already handed out keeps its time: it
// is a promise to the caller who holds it, and nothing that comes after it is
// granted before it. A Reservation cancelled (or a wait given up) before its
// time, or at it, leaves the bucket as if the reservation had never been
// made, every other reservation keeping its time; so the order of several
// cancels does not matter.
//
// Edge cases, decided as x/time/rate's issue history suggests:
//
//   - Limit Inf allows everything, whatever the burst (a pause still holds);
//     Tokens is +Inf when the limit is Inf and no pause holds.
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
// # Differences from x/time/rate
//
// Code written for rate.Limiter switches by renaming, except where the
// behaviour differs on purpose (internal/ratespec checks each case against
// both libraries):
//
//   - Names. x/time/rate's AllowN(t, n) and ReserveN(t, n) take the time;
//     here AllowN(n) and ReserveN(n) read the clock, like Allow and Reserve,
//     and the time-taking forms are AllowNAt(t, n) and ReserveNAt(t, n).
//     lim.AllowN(time.Now(), n) becomes b.AllowN(n). NewLimiter(r, b) is
//     NewBucket(r, b); TokensAt, SetLimitAt, SetBurstAt, Wait, WaitN and the
//     Reservation's methods have the same names and signatures.
//   - Stale times. A call with a time earlier than one the bucket has
//     already granted at (AllowNAt, ReserveNAt, TokensAt with an earlier t)
//     sees the bucket that grant left, moved back to t: it is told and given
//     never more than it could grant, so the limit holds in every window
//     whatever order the times come in. x/time/rate answers an earlier time
//     from its tokens as of the latest call and moves its clock back, so it
//     counts the refill in between twice: it can report more tokens at t and
//     then grant more than burst at one instant (golang/go #65508, #71360).
//     Here a stale call may instead be told fewer tokens than a replay in
//     time order would have had.
//   - Limits and bursts changed with reservations outstanding. Reservations
//     granted after a SetLimit or SetBurst respect the new limit and the
//     reservations already made, and so do waiters, which are re-planned.
//     x/time/rate's new reservations may exceed the rate while earlier
//     ones are outstanding (its SetLimitAt says so), and its waiters keep the
//     times computed when they started.
//   - Cancel gives back exactly what the bucket would have without the
//     reservation (above). x/time/rate gives back the reservation's tokens
//     less every token reserved after it, counted from its time: less than
//     that whenever a later reservation had room of its own, and, for
//     several cancels, an amount that depends on their order.
//   - Limit 0, or a limit so low that the tokens are more than 73 years
//     away: Reserve says not OK (x/time/rate: OK, with an infinite delay,
//     taking the tokens; golang/go #47221).
//   - n < 0: never allowed (x/time/rate allows it and adds -n tokens).
//   - Tokens with limit Inf: +Inf (x/time/rate: the stored level, at most
//     the burst).
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
// Wait or WaitN that is granted at once take no lock: the bucket's state is a
// single atomic word (a GCRA theoretical arrival time). Reserve takes the
// lock, so that the grant is on record for Cancel.
type Bucket struct {
	st atomic.Pointer[state]
	_  [56]byte // keeps the hot pointer off the cache line the slow path writes

	mu     sync.Mutex
	queue  []*entry // reservations whose time has not come, in arrival order
	pause  int64    // no grant before this time (ns on the bucket clock) if paused; guarded by mu
	paused bool     // a pause was ever set; guarded by mu
}

const (
	// maxSpan caps every duration the bucket computes: waits, delays, costs
	// and the bucket's depth. 2⁶¹ ns is about 73 years.
	maxSpan = int64(1) << 61
	// minTime and maxTime bound the package clock (clockNow) so that adding
	// maxSpan to a time can never overflow.
	minTime = -int64(1) << 61
	maxTime = int64(1) << 61
	// noFloor is the floor of a state with nothing on record: before
	// every time the bucket clock can show.
	noFloor = minTime - 1
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
// arrival order holds even where the bucket has room earlier (noFloor when
// none did).
//
// rec is the time of the last grant recorded in the queue (noFloor if none),
// never below floor, so that the fast path needs one comparison, now > rec,
// to know it is clear of both. A fast path at exactly rec or floor takes the
// lock instead, so that its grant is recorded too and a grant withdrawn at
// that instant is replayed with it (see bucket_queue.go). Only the holder of
// Bucket.mu raises rec, before it commits the grant's slot: a fast path that
// sees the new tat sees the new rec.
type state struct {
	tat   atomic.Int64
	rec   atomic.Int64
	floor int64
	params
}

func newState(limit Limit, burst int) *state {
	s := &state{params: newParams(limit, burst), floor: noFloor}
	s.tat.Store(minTime) // full
	s.rec.Store(noFloor)
	return s
}

// plan is what taking n tokens at now would do, given tat and the floor.
type plan struct {
	start, end int64 // the slot the tokens occupy: tat before and after
	cost       int64
	at         int64 // when the tokens are granted
	tooBig     bool  // n > burst: never, whatever happens
	never      bool  // not within maxSpan (or, for limit 0, not ever)
}

// plan sets pl to what taking n tokens at tat and now would do. (Into pl:
// returned, a plan was stored byte and word by word and copied whole, and
// the copy stalled on store forwarding on every request.)
func (s *state) plan(pl *plan, tat, now int64, n int) {
	*pl = plan{}
	p := &s.params
	floor := s.floor
	if !p.inf && n > p.burst {
		pl.tooBig = true
		return
	}
	e := p.eff(now)
	pl.cost = p.cost(n)
	pl.start = max(tat, e)
	pl.end = pl.start + pl.cost
	switch {
	case p.inf:
		pl.at = max(pl.end, floor)
	case p.frozen:
		pl.at = max(now, floor)
		pl.never = pl.end > p.capacity
	default:
		pl.at = max(now, pl.end-p.capacity, floor)
		pl.never = pl.end-e > maxSpan
	}
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
func (b *Bucket) Tokens() float64 { return b.tokensAt(clockNow()) }

// TokensAt returns the number of tokens available at t, as [Bucket.Tokens].
// For a t earlier than a grant already made it is what the bucket could
// grant at t after that grant: never more (see Stale times in the Bucket doc).
func (b *Bucket) TokensAt(t time.Time) float64 { return b.tokensAt(clockOf(t)) }

func (b *Bucket) tokensAt(now int64) float64 {
	s, tat := b.load()
	if now < s.floor {
		return 0
	}
	return s.level(tat, now)
}

// Allow reports whether one event may happen now, and if so takes its token.
func (b *Bucket) Allow() bool { return b.allowAt(clockNow(), 1) }

// AllowN reports whether n events may happen now, and if so takes their
// tokens. It never waits and never takes tokens set aside for waiters.
// AllowN(0) is always true; a negative n is never allowed.
func (b *Bucket) AllowN(n int) bool { return b.allowAt(clockNow(), n) }

// AllowNAt is AllowN at time t, for callers with their own clock: x/time/rate's
// AllowN(t, n). For a t earlier than a grant already made, see Stale times in
// the Bucket doc.
func (b *Bucket) AllowNAt(t time.Time, n int) bool { return b.allowAt(clockOf(t), n) }

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
		if rec := s.rec.Load(); now <= rec {
			if now < s.floor {
				return false
			}
			if now == s.floor || now == rec {
				// A grant at the time of the last one on record is
				// recorded too (rare: the same nanosecond).
				return b.allowSlow(now, n)
			}
			// A time before the last recorded grant's (stale): served
			// here, off the record; a grant on record that is withdrawn
			// later then gives nothing back (replanLocked).
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

// take is wait's fast path: it takes n > 0 tokens if they are there at
// now (package clock) without a wait, and reports whether it did. false
// leaves the rest to the locked path (enqueue), which also reports a wait
// that could never end. It never blocks and takes no lock: the adaptive
// limiter calls it under its own.
func (b *Bucket) take(n int, now int64) bool {
	for {
		s, tat := b.load()
		var pl plan
		s.plan(&pl, tat, now, n)
		if pl.tooBig || pl.never || pl.at > now || now == s.floor || now == s.rec.Load() {
			return false // at the floor, a grant is recorded: take the lock
		}
		if pl.cost == 0 || s.tat.CompareAndSwap(tat, pl.end) {
			return true
		}
	}
}

// SetLimit changes the limit. The tokens in the bucket stay (the level, not
// the time to refill), and waiters are re-planned at the new rate in arrival
// order. Tokens owed stay owed: when reservations kept across a slower limit
// have overdrawn the bucket, or t is earlier than a grant already made, the
// level is taken where the debt is paid off at the old rate. It panics if
// limit is NaN or negative.
func (b *Bucket) SetLimit(limit Limit) {
	checkLimit("SetLimit", limit)
	b.setAt(useClock, limit, keepBurst)
}

// SetLimitAt is SetLimit at time t.
func (b *Bucket) SetLimitAt(t time.Time, limit Limit) {
	checkLimit("SetLimitAt", limit)
	b.setAt(clockOf(t), limit, keepBurst)
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
	b.setAt(clockOf(t), keepLimit, burst)
}

// keepLimit and keepBurst tell setAt to leave the limit or the burst as is.
const (
	keepLimit = Limit(-1)
	keepBurst = -1
)

func (b *Bucket) setAt(now int64, limit Limit, burst int) { b.setFillAt(now, limit, burst, 0) }

// setFillAt is setAt leaving at least fill tokens in the bucket at now
// (see replanFillLocked); with nothing to change but the level, it only
// raises the level.
func (b *Bucket) setFillAt(now int64, limit Limit, burst int, fill float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now == useClock {
		now = clockNow()
	}
	old := &b.state().params
	if limit == keepLimit {
		limit = old.limit
	}
	if burst == keepBurst {
		burst = old.burst
	}
	if limit == old.limit && burst == old.burst && (fill <= 0 || b.tokensAt(now) >= fill) {
		return
	}
	np := newParams(limit, burst)
	b.replanFillLocked(now, &np, fill)
}

// PauseUntil holds the bucket until t: no tokens are granted before t, and at
// t the bucket is empty, so waiters released then are paced at the limit from
// t on rather than fired at once. Waiters are re-planned. A pause never
// shortens an earlier one, and a t not after now changes nothing. With limit
// Inf, everything held is released at t.
func (b *Bucket) PauseUntil(t time.Time) { b.pauseAt(useClock, clockOf(t)) }

func (b *Bucket) pauseAt(now, until int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now == useClock {
		now = clockNow()
	}
	if until <= now || b.paused && until <= b.pause {
		return
	}
	b.pause, b.paused = until, true
	b.replanLocked(now, nil)
}

// The package clock: nanoseconds since an epoch on the monotonic clock, for
// the buckets, the adaptive limiters' admissions and the endpoint table's
// idle stamps, and handed to the quota model with each response (explicit
// time: the model never reads a clock). time.Since(epoch) reads only the
// monotonic clock, about half the cost of time.Now, and cannot jump with
// the wall clock. Times before the epoch (a testing/synctest bubble starts
// in 2000) are negative, which every comparison allows.
var epoch = time.Now()

// clockNow is now on the package clock, clamped (clockClamp).
func clockNow() int64 { return clockClamp(int64(time.Since(epoch))) }

// clockOf converts a time read with time.Now (so carrying a monotonic
// reading) to the package clock without reading the clock again.
func clockOf(t time.Time) int64 { return clockClamp(int64(t.Sub(epoch))) }

// clockTime converts a time on the package clock to a time.Time, taking
// the wall clock from ref, a time read at refNs.
func clockTime(ns int64, ref time.Time, refNs int64) time.Time {
	return ref.Add(time.Duration(ns - refNs))
}

// clockClamp bounds a time on the package clock so that adding maxSpan to
// it can never overflow.
func clockClamp(ns int64) int64 { return min(max(ns, minTime), maxTime) }

// earlierTime returns the earlier of a and b.
func earlierTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// laterTime returns the later of a and b.
func laterTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// sleepUntil sleeps until t, or until ctx ends: it returns ctx's error then
// (also when t has passed but ctx has ended, so a caller never goes on with
// an ended context).
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
