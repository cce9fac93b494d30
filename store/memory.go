package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// errInvalidLimit reports a reservation with a limit that admits nothing.
var errInvalidLimit = errors.New("store: reservation needs a limit > 0")

// storeMaxWait is the wait bound a store applies to r: r.MaxWait, shortened
// to what is left until ctx's deadline, so that nothing is booked for a caller
// that could not wait for it. The boolean is false when neither bounds the
// wait.
func storeMaxWait(ctx context.Context, r Request) (time.Duration, bool) {
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

// validateRequest returns an error for requests no bucket can serve (a
// limit that is zero, negative or NaN) and normalizes the rest: negative,
// infinite or NaN tokens become 0, a burst below 1 becomes 1.
func validateRequest(r Request) (Request, error) {
	if !(r.Limit > 0) { // also catches NaN
		return r, fmt.Errorf("%w, got %v", errInvalidLimit, r.Limit)
	}
	if !(r.Tokens > 0) || math.IsInf(r.Tokens, 0) {
		r.Tokens = 0
	}
	if r.Burst < 1 {
		r.Burst = 1
	}
	return r, nil
}

// Memory is the in-process [Store]: limiters in one process that use the
// same Memory share its buckets, for example several pacer Transports that
// call one API with one key. It is also the reference semantics the
// storetest suite holds every Store implementation to.
//
// Its clock is the monotonic clock. Keys nobody used for [DefaultIdleTTL]
// are dropped. A Memory needs no closing.
type Memory struct {
	epoch time.Time // monotonic origin of all times below

	mu        sync.Mutex
	keys      map[string]*memoryKey
	lastSweep float64
}

// memoryKey is one key's state; times are seconds since the store's epoch.
type memoryKey struct {
	gcra      gcraState
	limit     float64 // learned, 0 if none
	burst     int
	learnedAt float64
	touched   float64
	budgets   map[string]*budgetState // by quota name (Budgeter)
}

// NewMemory returns an empty in-process store.
func NewMemory() *Memory {
	return &Memory{epoch: time.Now(), keys: make(map[string]*memoryKey)}
}

func (s *Memory) now() float64 { return time.Since(s.epoch).Seconds() }

// Reserve implements [Store].
func (s *Memory) Reserve(ctx context.Context, key string, r Request) (Grant, error) {
	if err := ctx.Err(); err != nil {
		return Grant{}, err
	}
	r, err := validateRequest(r)
	if err != nil {
		return Grant{}, err
	}
	maxWait, bounded := storeMaxWait(ctx, r)
	wait := -1.0
	if bounded {
		wait = maxWait.Seconds()
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	k, now := s.touch(key)
	res := k.gcra.reserve(now, gcraArgs{
		tokens:   r.Tokens,
		interval: limitInterval(r.Limit),
		burst:    float64(r.Burst),
		maxWait:  wait,
		first:    r.Tokens,
	})
	return Grant{
		OK:     res.ok,
		Delay:  secondsToDuration(res.delay(r.Tokens, limitInterval(r.Limit))),
		Shared: k.shared(now),
	}, nil
}

// Cancel implements [Store].
func (s *Memory) Cancel(key string, r Request) {
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
func (s *Memory) Publish(ctx context.Context, key string, st State) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k, now := s.touch(key)
	if st.Limit > 0 {
		k.limit, k.burst, k.learnedAt = st.Limit, max(st.Burst, 1), now
	}
	if st.Pause > 0 {
		k.gcra.pause(now + st.Pause.Seconds())
	}
	return nil
}

// touch returns key's state, creating it, and now, after dropping idle
// keys; s.mu is held.
func (s *Memory) touch(key string) (*memoryKey, float64) {
	now := s.now()
	s.sweep(now)
	k := s.keys[key]
	if k == nil {
		k = &memoryKey{gcra: gcraState{tat: now}}
		s.keys[key] = k
	}
	k.touched = now
	return k, now
}

func (k *memoryKey) shared(now float64) State {
	st := State{Pause: secondsToDuration(k.gcra.pausedUntil - now)}
	if k.limit > 0 {
		st.Limit, st.Burst, st.Age = k.limit, k.burst, secondsToDuration(now-k.learnedAt)
	}
	return st
}

// sweep drops idle keys, at most once per tenth of the idle TTL so the cost
// stays proportional to the traffic.
func (s *Memory) sweep(now float64) {
	ttl := DefaultIdleTTL.Seconds()
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

// limitInterval is the seconds per token of limit; 0 for Unlimited and +Inf.
func limitInterval(limit float64) float64 {
	if limit >= Unlimited {
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
