package pacer

import "github.com/pacer-go/pacer/internal/header"

// Defaults of the options, and the bounds that hold whatever the options
// say. Each says where its value comes from.
const (
	// DefaultSlowStart is how many requests may be in flight to an endpoint
	// before its first response (AdaptiveConfig.SlowStart's default, and
	// the Transport's): the first request to an endpoint nobody knows goes
	// alone, and its answer states the quota the rest are admitted by. That
	// costs one round trip, once per endpoint per process (2× the unpaced
	// time of a job of one round, within 1.25× from four rounds on), and
	// buys the first contact with a quota someone else has spent: a
	// fan-out of thousands meets one 429, not one per request in flight
	// (16 with the old default of 16), and an unseen client's spending
	// shows in the books of our first burst, which no request of ours was
	// in flight at the start of. A Transport whose server's quota is known
	// states it with [WithEndpoint] instead (a limiter of one's own: a
	// wider AdaptiveConfig.SlowStart).
	DefaultSlowStart = 1

	// DefaultMaxDelay is the cap [ParseHeaders] puts
	// on every wait a server asks for: a Retry-After or a reset further
	// away than this is clamped to it, so a wrong or hostile header can
	// hold a client for an hour at most. A longer [WithMaxWait] raises it.
	DefaultMaxDelay = header.DefaultWait

	// MaxResetHorizon is the farthest reset [ParseHeaders] reports: a month
	// and a day, so that monthly quotas (billing periods) are read as
	// stated. A farther one is a misread unit or a broken clock and is
	// clamped to it.
	MaxResetHorizon = header.ResetHorizon

	// DefaultMaxEndpoints caps the endpoints a Transport tracks at once
	// ([WithMaxEndpoints]): beyond it the least recently used idle one is
	// evicted, so a key function or a server inventing names per path
	// cannot grow memory without bound.
	DefaultMaxEndpoints = 10000

	// DefaultMaxConcurrency is the number of calls an [Executor] runs at once when
	// [WithMaxConcurrency] is not given.
	//
	// The bound is on network work, not CPU work, so it does not follow
	// GOMAXPROCS. Sixteen open requests hide round-trip latency well (at 100 ms
	// per request they sustain 160 requests per second, more than most API quotas
	// grant), stay far below HTTP/2's usual 100 concurrent streams, and keep a
	// misconfigured fan-out from looking like an attack. Rate limits, not this
	// number, are meant to be what paces a client.
	DefaultMaxConcurrency = 16
)
