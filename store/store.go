// Package store is the interface between pacer's limiters and the place
// their rate-limit state lives, for those who implement such a place (as
// database/sql/driver is for database drivers). Users of pacer's Transport
// need it at most to create a [Memory] for pacer.WithStore.
//
// A [Store] keeps the rate-limit state that several limiters share: the token
// buckets themselves and what each limiter learned about the server's quota.
// Limiters that use one Store for one key pace against one bucket and one
// picture of the quota, whether they live in one process ([Memory]) or in
// many (pacer's redisstore package).
//
// The bucket behind a key is a GCRA token bucket: it refills at the limit
// given with each request, holds at most the burst given with it, and books
// tokens in arrival order, also into the future. All times are measured by the
// store's own clock (Redis TIME for redisstore) and handed to callers as
// durations from the moment the store answered, so processes never compare
// their clocks with each other.
//
// Limits are float64 tokens (requests) per second. [Unlimited] is pacer.Inf
// as a float64, so a limiter's limit crosses to the store and back unchanged;
// +Inf means the same.
//
// Implementations must be safe for concurrent use, and no method may block
// longer than its context allows. The storetest subpackage checks these
// promises: an implementation proves itself by passing storetest.Run.
package store

import (
	"context"
	"math"
	"time"
)

// Store keeps the buckets and learned limits that limiters sharing it use
// for each key; the package documentation describes the semantics every
// implementation keeps.
type Store interface {
	// Reserve books r.Tokens tokens of the bucket key and says when they may be
	// used. It never sleeps: the caller waits Grant.Delay, then proceeds, or
	// calls Cancel if it gives up. When the tokens would come later than
	// r.MaxWait or ctx's deadline, nothing is booked and the grant has OK
	// false; Delay then says when they would have come. An [Unlimited] limit
	// books nothing and only reports pauses and the shared state.
	//
	// The error is ctx's error when ctx ended first, or a store failure
	// (possibly a *pacer.RateLimitError when the store fails closed, so that
	// the Transport refuses the request as it would over its own limit).
	Reserve(ctx context.Context, key string, r Request) (Grant, error)

	// Cancel returns the tokens of a granted reservation that will not be
	// used, so others may use them; r must be the request that was granted
	// (its limit says how much time the tokens stand for). It must not
	// block: implementations backed by a server return the tokens in the
	// background.
	Cancel(key string, r Request)

	// Publish shares what a limiter learned about key with every limiter using
	// the store: a learned limit (when s.Limit > 0, replacing older ones) and a
	// pause (when s.Pause > 0: no tokens of key are handed out until s.Pause
	// from now, extending but never shortening a pause in force). Age is
	// ignored. Limiters call it on the request path, with their own lock
	// held: it must not wait for a server. Implementations backed by one send
	// the update in the background, and make it visible to the publishing
	// process at once.
	Publish(ctx context.Context, key string, s State) error
}

// Unlimited is the limit that books nothing: every request is allowed, and
// only a pause holds it back. It equals float64(pacer.Inf); a Store treats
// +Inf alike.
const Unlimited = math.MaxFloat64

// Request describes a reservation in a [Store] bucket.
type Request struct {
	// Tokens is how many tokens to book; fractional values are allowed, and
	// zero or less books nothing. It may exceed Burst: the booking then ends
	// further in the future.
	Tokens float64
	// Limit is the refill rate in tokens per second; [Unlimited] (or +Inf)
	// books nothing, and zero, negative or NaN limits are an error.
	// Limiters sharing a key may pass different limits: bookings already
	// made keep their times, and each new one is spaced at its own limit
	// after them. (Re-timing the whole debt at each caller's limit would let
	// one limiter's passing misjudgement stall or flood all the others.)
	Limit float64
	// Burst is the bucket's capacity in tokens; values below 1 count as 1.
	Burst int
	// MaxWait bounds the acceptable Delay; zero or less means only ctx's
	// deadline bounds it.
	MaxWait time.Duration
}

// Grant is a [Store]'s answer to a reservation.
type Grant struct {
	// OK is false when the tokens would have come too late for MaxWait or the
	// context's deadline; nothing was booked then.
	OK bool
	// Delay is how long after the answer the tokens may be used: zero for
	// now. It includes any pause in force.
	Delay time.Duration
	// Shared is the key's shared state as the store saw it.
	Shared State
}

// State is what limiters sharing a key through a [Store] tell each other:
// the limit one of them learned from the server and the pause one of them
// was told to keep. (The bucket's level is not part of it: a limiter sees
// that only through the delays it is granted.)
type State struct {
	// Limit is the most recently published learned request rate in requests
	// per second; 0 when nothing was learned (or it expired).
	Limit float64
	// Burst goes with Limit.
	Burst int
	// Age is how long ago, by the store's clock, Limit was published.
	Age time.Duration
	// Pause is how long from now no tokens of the key are handed out; zero
	// when not paused.
	Pause time.Duration
}

// DefaultIdleTTL is how long a [Store] keeps the state of a key nobody
// uses: its bucket, learned limit and pause are forgotten this long after
// the bucket refilled, the pause ended and the last call touched them.
const DefaultIdleTTL = 10 * time.Minute
