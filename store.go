package pacer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Store keeps the rate-limit state that several limiters share: the token
// buckets themselves and what each limiter learned about the server's quota.
// Limiters that use one Store for one key pace against one bucket and one
// picture of the quota, whether they live in one process ([NewMemoryStore])
// or in many (the redisstore subpackage).
//
// The bucket behind a key is a GCRA token bucket: it refills at the limit
// given with each request, holds at most the burst given with it, and books
// tokens in arrival order, also into the future. All times are measured by the
// store's own clock (Redis TIME for redisstore) and handed to callers as
// durations from the moment the store answered, so processes never compare
// their clocks with each other.
//
// Implementations must be safe for concurrent use, and no method may block
// longer than its context allows. The storetest package checks these
// promises: an implementation proves itself by passing storetest.Run.
type Store interface {
	// Reserve books r.Tokens tokens of the bucket key and says when they may be
	// used. It never sleeps: the caller waits Grant.Delay, then proceeds, or
	// calls Cancel if it gives up. When the tokens would come later than
	// r.MaxWait or ctx's deadline, nothing is booked and the grant has OK
	// false; Delay then says when they would have come. A limit of Inf books
	// nothing and only reports pauses and the shared state.
	//
	// The error is ctx's error when ctx ended first, or a store failure
	// (possibly a *RateLimitError when the store fails closed).
	Reserve(ctx context.Context, key string, r StoreRequest) (StoreGrant, error)

	// Cancel returns the tokens of a granted reservation that will not be
	// used, so others may use them; r must be the request that was granted
	// (its limit says how much time the tokens stand for). It must not
	// block: implementations backed by a server return the tokens in the
	// background.
	Cancel(key string, r StoreRequest)

	// Publish shares what a limiter learned about key with every limiter using
	// the store: a learned limit (when s.Limit > 0, replacing older ones) and a
	// pause (when s.Pause > 0: no tokens of key are handed out until s.Pause
	// from now, extending but never shortening a pause in force). Age is
	// ignored. Limiters call it on the request path, with their own lock
	// held: it must not wait for a server. Implementations backed by one send
	// the update in the background, and make it visible to the publishing
	// process at once.
	Publish(ctx context.Context, key string, s SharedState) error
}

// StoreRequest describes a reservation in a [Store] bucket.
type StoreRequest struct {
	// Tokens is how many tokens to book; fractional values are allowed, and
	// zero or less books nothing. It may exceed Burst: the booking then ends
	// further in the future.
	Tokens float64
	// Limit is the refill rate in tokens per second; Inf books nothing.
	// Limiters sharing a key may pass different limits: bookings already
	// made keep their times, and each new one is spaced at its own limit
	// after them. (Re-timing the whole debt at each caller's limit would let
	// one limiter's passing misjudgement stall or flood all the others.)
	Limit Limit
	// Burst is the bucket's capacity in tokens; values below 1 count as 1.
	Burst int
	// MaxWait bounds the acceptable Delay; zero or less means only ctx's
	// deadline bounds it.
	MaxWait time.Duration
}

// StoreGrant is a [Store]'s answer to a reservation.
type StoreGrant struct {
	// OK is false when the tokens would have come too late for MaxWait or the
	// context's deadline; nothing was booked then.
	OK bool
	// Delay is how long after the answer the tokens may be used: zero for
	// now. It includes any pause in force.
	Delay time.Duration
	// Shared is the key's shared state as the store saw it.
	Shared SharedState
}

// SharedState is what limiters sharing a key through a [Store] tell each
// other.
type SharedState struct {
	// Limit is the most recently published learned request rate in events per
	// second; 0 when nothing was learned (or it expired).
	Limit Limit
	// Burst goes with Limit.
	Burst int
	// Age is how long ago, by the store's clock, Limit was published.
	Age time.Duration
	// Pause is how long from now no tokens of the key are handed out; zero
	// when not paused.
	Pause time.Duration
}

// DefaultStoreIdleTTL is how long a [Store] keeps the state of a key nobody
// uses: its bucket, learned limit and pause are forgotten this long after
// the bucket refilled, the pause ended and the last call touched them.
const DefaultStoreIdleTTL = 10 * time.Minute

// errInvalidLimit reports a reservation with a limit that admits nothing.
var errInvalidLimit = errors.New("pacer: store reservation needs a limit > 0")

// storeMaxWait is the wait bound a store applies to r: r.MaxWait, shortened
// to what is left until ctx's deadline, so that nothing is booked for a caller
// that could not wait for it. The boolean is false when neither bounds the
// wait.
func storeMaxWait(ctx context.Context, r StoreRequest) (time.Duration, bool) {
	limit, bounded := r.MaxWait, r.MaxWait > 0
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left < 0 {
			left = 0
		}
		if !bounded || left < limit {
			limit, bounded = left, true
		}
	}
	return limit, bounded
}

// validateStoreRequest returns an error for requests no bucket can serve (a
// limit that is zero, negative or NaN) and normalizes the rest: negative,
// infinite or NaN tokens become 0, a burst below 1 becomes 1.
func validateStoreRequest(r StoreRequest) (StoreRequest, error) {
	if !(r.Limit > 0) { // also catches NaN
		return r, fmt.Errorf("%w, got %v", errInvalidLimit, float64(r.Limit))
	}
	if !(r.Tokens > 0) || math.IsInf(r.Tokens, 0) {
		r.Tokens = 0
	}
	if r.Burst < 1 {
		r.Burst = 1
	}
	return r, nil
}

// MemoryStore is the in-process [Store]: limiters in one process that use
// the same MemoryStore share its buckets, for example several Transports
// that call one API with one key. It is also the reference semantics the
// storetest suite holds every Store implementation to.
//
// Its clock is the monotonic clock. Keys nobody used for
// [DefaultStoreIdleTTL] are dropped. A MemoryStore needs no closing.
type MemoryStore struct {
	epoch time.Time // monotonic origin of all times below

	mu        sync.Mutex
	keys      map[string]*memoryKey
	lastSweep float64
}

// memoryKey is one key's state; times are seconds since the store's epoch.
type memoryKey struct {
	gcra      gcraState
	limit     Limit // learned, 0 if none
	burst     int
	learnedAt float64
	touched   float64
}

// NewMemoryStore returns an empty in-process store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{epoch: time.Now(), keys: make(map[string]*memoryKey)}
}

func (s *MemoryStore) now() float64 { return time.Since(s.epoch).Seconds() }

// Reserve implements [Store].
func (s *MemoryStore) Reserve(ctx context.Context, key string, r StoreRequest) (StoreGrant, error) {
	if err := ctx.Err(); err != nil {
		return StoreGrant{}, err
	}
	r, err := validateStoreRequest(r)
	if err != nil {
		return StoreGrant{}, err
	}
	maxWait, bounded := storeMaxWait(ctx, r)
	wait := -1.0
	if bounded {
		wait = maxWait.Seconds()
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.sweep(now)
	k := s.keys[key]
	if k == nil {
		k = &memoryKey{gcra: gcraState{tat: now}}
		s.keys[key] = k
	}
	k.touched = now
	res := k.gcra.reserve(now, gcraArgs{
		tokens:   r.Tokens,
		interval: limitInterval(r.Limit),
		burst:    float64(r.Burst),
		maxWait:  wait,
		first:    r.Tokens,
	})
	return StoreGrant{
		OK:     res.ok,
		Delay:  secondsToDuration(res.delay(r.Tokens, limitInterval(r.Limit))),
		Shared: k.shared(now),
	}, nil
}

// Cancel implements [Store].
func (s *MemoryStore) Cancel(key string, r StoreRequest) {
	if !(r.Tokens > 0) || math.IsInf(r.Tokens, 0) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.keys[key]; k != nil {
		k.gcra.refund(r.Tokens * limitInterval(r.Limit))
	}
}

// Publish implements [Store]. It applies the update at once.
func (s *MemoryStore) Publish(ctx context.Context, key string, st SharedState) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	k := s.keys[key]
	if k == nil {
		k = &memoryKey{gcra: gcraState{tat: now}}
		s.keys[key] = k
	}
	k.touched = now
	if st.Limit > 0 {
		k.limit, k.burst, k.learnedAt = st.Limit, max(st.Burst, 1), now
	}
	if st.Pause > 0 {
		k.gcra.pause(now + st.Pause.Seconds())
	}
	return nil
}

func (k *memoryKey) shared(now float64) SharedState {
	st := SharedState{Pause: secondsToDuration(k.gcra.pausedUntil - now)}
	if k.limit > 0 {
		st.Limit, st.Burst, st.Age = k.limit, k.burst, secondsToDuration(now-k.learnedAt)
	}
	return st
}

// sweep drops idle keys, at most once per tenth of the idle TTL so the cost
// stays proportional to the traffic.
func (s *MemoryStore) sweep(now float64) {
	ttl := DefaultStoreIdleTTL.Seconds()
	if now-s.lastSweep < ttl/10 {
		return
	}
	s.lastSweep = now
	for key, k := range s.keys {
		if max(k.touched, k.gcra.tat, k.gcra.pausedUntil)+ttl < now {
			delete(s.keys, key)
		}
	}
}

// gcraState is a GCRA bucket: tat is the theoretical arrival time of the next
// token, in seconds on some clock. At a limit of one token per interval the
// bucket holds burst - max(0, tat-now)/interval tokens: it is full once tat
// is not after now. redisstore's Lua script implements the same arithmetic.
type gcraState struct {
	tat         float64
	pausedUntil float64
}

type gcraArgs struct {
	tokens   float64 // to book
	interval float64 // seconds per token; 0 = infinite rate, nothing is booked
	burst    float64
	maxWait  float64 // seconds; < 0 unbounded
	first    float64 // tokens the caller needs first; the maxWait check applies to them
}

// gcraResult locates the booked tokens: the j-th of them (cumulative,
// 1-based) may be used max(pause, base + j*interval) seconds after now.
type gcraResult struct {
	ok    bool
	base  float64
	pause float64
}

// delay is when the first n booked tokens may be used, in seconds from now.
func (r gcraResult) delay(n, interval float64) float64 {
	return max(r.pause, r.base+n*interval, 0)
}

func (g *gcraState) reserve(now float64, a gcraArgs) gcraResult {
	start := max(now, g.pausedUntil)
	res := gcraResult{ok: true, pause: start - now}
	if a.interval <= 0 || a.tokens <= 0 {
		res.ok = a.maxWait < 0 || res.pause <= a.maxWait
		return res
	}
	from := max(g.tat, start)
	res.base = from - a.burst*a.interval - now
	if a.maxWait >= 0 && res.delay(a.first, a.interval) > a.maxWait {
		res.ok = false
		return res
	}
	g.tat = from + a.tokens*a.interval
	return res
}

// refund gives back the time of unused tokens, in seconds.
func (g *gcraState) refund(secs float64) {
	g.tat -= secs
}

func (g *gcraState) pause(until float64) {
	g.pausedUntil = max(g.pausedUntil, until)
}

// limitInterval is the seconds per token of limit; 0 for Inf.
func limitInterval(limit Limit) float64 {
	if limit == Inf || math.IsInf(float64(limit), 1) {
		return 0
	}
	return 1 / float64(limit)
}

// secondsToDuration converts a number of seconds to the nearest nanosecond
// (float arithmetic leaves the last one uncertain anyway); negative values
// give 0, huge ones saturate.
func secondsToDuration(s float64) time.Duration {
	if !(s > 0) {
		return 0
	}
	ns := math.Round(s * 1e9)
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}
