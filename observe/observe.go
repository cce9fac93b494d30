// Package observe holds what pacer reports about its own decisions, for
// metrics, logs and dashboards: each attempt of a request ([Attempt], given
// to the function set with pacer.WithObserver), and the reasons and
// learnt figures behind a snapshot's numbers: the [Mode] an endpoint's
// limit is decided in and the [Cost] a request was seen to take of a token
// quota (pacer.Stats), and why an adaptive Executor's bound moved
// ([BoundReason], [BoundMoves]; pacer.ExecutorStats).
//
// The otel module (github.com/pacer-go/pacer/otel) turns them into
// OpenTelemetry metrics.
package observe

import (
	"fmt"
	"time"

	"github.com/pacer-go/pacer/work"
)

// Attempt describes one attempt of a request, for pacer.WithObserver.
type Attempt struct {
	// Endpoint is the key of the limiter the attempt waited on: a pattern, a
	// key, scheme://host, or "scope#bucket" for a server-named bucket.
	Endpoint string
	// Method is the request's method.
	Method string
	// Class is the request's class of work (see [work.WithClass]).
	Class work.Class
	// Retry is 0 for a request's first attempt and n for its n-th retry.
	Retry int
	// Wait is how long the attempt waited before being sent: the retry
	// backoff, if any, plus the limiter's wait.
	Wait time.Duration
	// Latency is how long the base transport took to return; 0 when the
	// attempt was not sent.
	Latency time.Duration
	// Status is the response's status code; 0 when there was no response.
	Status int
	// Throttled reports a response saying the rate limit was hit: a 429, a
	// 503, or a 403 with an exhausted quota or a Retry-After.
	Throttled bool
	// Err is why there was no response: a *pacer.RateLimitError when the
	// limiter refused at once, the context's error, or the base transport's.
	Err error
}

// Mode is how an endpoint's limit is decided, reported in pacer.Stats.Mode.
type Mode string

// String returns the mode's name, as logs and metrics show it.
func (m Mode) String() string { return string(m) }

// The modes.
const (
	// ModeSlowStart: no response yet; at most SlowStart requests in flight.
	ModeSlowStart Mode = "slow-start"
	// ModeHeaders: the limit follows the quotas the server's headers
	// describe (see pacer.Adaptive for the rule).
	ModeHeaders Mode = "headers"
	// ModeProbing: no usable quota headers; the CUBIC fallback sets the rate
	// (Inf until the first 429 or 503).
	ModeProbing Mode = "probing"
	// ModeStatic: no usable quota headers and no throttle seen; the
	// configured Ceiling is the limit.
	ModeStatic Mode = "static"
)

// Cost is what a request with no stated cost (no [work.WithCost]) takes of
// one token quota, as learnt from the quota's figures: how far Remaining
// fell between responses (plus what the quota says it refilled), less the
// stated costs of the requests that had one, over the requests that had
// none. pacer.Stats.Costs lists one per token quota.
type Cost struct {
	Quota string // the quota's name, as the server states it
	// Mean is the learnt average cost of such a request, in tokens.
	Mean float64
	// Charged is what such a request is charged at admission: the mean
	// plus a margin for the requests that cost more than most (two
	// standard deviations of one request's cost). A response's figures
	// true the charge up once it comes.
	Charged float64
}

// BoundReason is why an adaptive pacer Executor's bound last moved,
// reported in pacer.ExecutorStats.LastMove.
type BoundReason uint8

const (
	// BoundUnmoved: the bound has not moved (or is fixed).
	BoundUnmoved BoundReason = iota
	// BoundHeadroom: latency stayed near its floor while the calls filled
	// the bound, so it rose.
	BoundHeadroom
	// BoundLatency: latency climbed above its floor (the server queues),
	// so it fell to the concurrency the server serves without queueing.
	BoundLatency
	// BoundOverload: the server shed a request (503, 529), so it fell.
	BoundOverload
	// BoundQuota: the server stated a concurrency quota below it.
	BoundQuota
	// BoundRate: a pacer Transport held the requests for their rate
	// limit before sending them, so it fell toward what the rate lets
	// reach the server and as many again, by a tenth at most per step.
	BoundRate
	// BoundProbe: it dipped to three quarters for one window to read the
	// server's latency floor again (once after the first fall, then every
	// 128 calm windows), or came back.
	BoundProbe
)

var boundReasons = [...]string{"unmoved", "headroom", "latency", "overload", "quota", "rate", "probe"}

// String returns the reason's name: "unmoved", "headroom", "latency",
// "overload", "quota", "rate" or "probe".
func (r BoundReason) String() string {
	if int(r) < len(boundReasons) {
		return boundReasons[r]
	}
	return fmt.Sprintf("BoundReason(%d)", uint8(r))
}

// BoundMoves counts an adaptive pacer Executor's bound moves by reason,
// reported in pacer.ExecutorStats.Moves.
type BoundMoves struct {
	// Headroom counts rises; Latency, Overload, Quota and Rate count
	// falls; Probe counts the dips to read the latency floor again, and
	// the returns from them.
	Headroom, Latency, Overload, Quota, Rate, Probe int64
}
