package pacer

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/pacer-go/pacer/internal/concurrency"
	"github.com/pacer-go/pacer/internal/header"
	"github.com/pacer-go/pacer/internal/mark"
	"github.com/pacer-go/pacer/internal/response"
	"github.com/pacer-go/pacer/observe"
)

// WithAdaptiveConcurrency is an [Executor] option: the bound adapts to what
// the server sustains, between min and max slots, instead of staying fixed.
// It starts at [DefaultMaxConcurrency] (kept within [min, max]), so a job is
// never slower at the start than under the fixed default.
//
// The bound rises while the server's latency stays near its floor and the
// calls fill the bound; it falls when latency climbs (the server queues the
// work: more concurrency buys latency, not throughput), at once when the
// server sheds load (503, Anthropic's 529), and to any concurrency quota the
// server states (an IETF RateLimit-Policy with qu="concurrent-requests"),
// which it then never exceeds. 429s are rate limits, the Transport's
// business: they do not move the bound. Nor does demand: a bound the calls
// do not fill does not rise, and one whose requests wait in a rate limiter
// (a pacer [Transport] pacing them) does not either: the rate, not the
// server, binds. The algorithm (a Vegas-style latency gradient with a slow
// start, AIMD on shedding) is in the package doc of internal/concurrency.
//
// Latency is the server's part of each request: from when the request was
// written (the last attempt's, when the transport retried) to its response,
// read with an [httptrace.ClientTrace] that net/http's transport reports to.
// Time spent waiting for a slot or in a rate limiter is not server latency.
// With a transport that reports no trace, it is the whole of client.Do.
//
// The bound is in [ExecutorStats] (MaxConcurrency, with Adaptive set, the
// last move's reason and the count of moves by reason).
//
// The default is a fixed bound, [DefaultMaxConcurrency]: an Executor may
// serve several hosts, whose latencies one bound cannot tell apart, and
// its bound is a promise of load that a caller sets knowingly (GitHub asks
// for no more than 100 concurrent requests). Choose this option for a job
// against one API whose capacity is unknown. WithMaxConcurrency after it
// fixes the bound again; the last of the two wins.
//
// It panics if min < 1 or max < min, naming the option and the values.
func WithAdaptiveConcurrency(min, max int) ExecutorOption {
	if min < 1 {
		panic(fmt.Sprintf("pacer: WithAdaptiveConcurrency(%d, %d): min must be ≥ 1", min, max))
	}
	if max < min {
		panic(fmt.Sprintf("pacer: WithAdaptiveConcurrency(%d, %d): max must be ≥ min", min, max))
	}
	return func(c *executorConfig) { c.adaptMin, c.max = min, max }
}

// countMove counts one move of reason r in m.
func countMove(m *observe.BoundMoves, r observe.BoundReason) {
	switch r {
	case observe.BoundHeadroom:
		m.Headroom++
	case observe.BoundLatency:
		m.Latency++
	case observe.BoundOverload:
		m.Overload++
	case observe.BoundQuota:
		m.Quota++
	case observe.BoundRate:
		m.Rate++
	case observe.BoundProbe:
		m.Probe++
	}
}

// boundReasonOf maps the limit's reasons to the public ones.
var boundReasonOf = [concurrency.NumReasons]observe.BoundReason{
	concurrency.None:     observe.BoundUnmoved,
	concurrency.Headroom: observe.BoundHeadroom,
	concurrency.Latency:  observe.BoundLatency,
	concurrency.Overload: observe.BoundOverload,
	concurrency.Quota:    observe.BoundQuota,
	concurrency.Rate:     observe.BoundRate,
	concurrency.Probe:    observe.BoundProbe,
}

// sendProbe is how a pacer [Transport] tells an adaptive Executor's call
// when it let each attempt of the request go, past its rate limiter and any
// retry's backoff: the time before it is the rate limit's, which the server
// never saw. It rides in the request context's marks, which the Transport
// reads anyway. at is nanoseconds since base, plus 1 (0: not yet).
type sendProbe struct {
	base time.Time
	at   atomic.Int64
}

// sent records that an attempt went at now. A nil probe records nothing.
func (p *sendProbe) sent(now time.Time) {
	if p != nil {
		p.at.Store(int64(now.Sub(p.base)) + 1)
	}
}

// when is the last attempt's time, or zero.
func (p *sendProbe) when() time.Time {
	if d := p.at.Load(); d > 0 {
		return p.base.Add(time.Duration(d - 1))
	}
	return time.Time{}
}

// traced returns the call's context with the probe in its marks and a trace
// that records when the request was (last) written, both relative to start.
func (c *execCall) traced(start time.Time) context.Context {
	c.probe.base = start
	m := mark.Of(c.ctx)
	m.Probe = &c.probe
	ctx := mark.With(c.ctx, m)
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) {
			// +1: 0 means not written; virtual time may not have moved.
			c.sent.Store(int64(time.Since(start)) + 1)
		},
	})
}

// sample is what the call's answer says to an adaptive bound.
func (c *execCall) sample(start time.Time, resp *http.Response) concurrency.Sample {
	s := concurrency.Sample{Start: start, Admitted: start, Sent: start, Done: time.Now(), InUse: c.inUse}
	if at := c.probe.when(); !at.IsZero() && !at.After(s.Done) {
		s.Admitted, s.Sent = at, at
	}
	if d := c.sent.Load(); d > 0 {
		// Not before the last admission: a retry's first attempt was
		// written before the Transport held its second.
		if at := start.Add(time.Duration(d - 1)); !at.After(s.Done) && !at.Before(s.Admitted) {
			s.Sent = at
		}
	}
	switch code := resp.StatusCode; {
	case code == http.StatusServiceUnavailable || code == response.StatusOverloaded:
		s.Outcome = concurrency.Shed
	case code < http.StatusBadRequest:
		s.Outcome = concurrency.Served
	default:
		// A 429 is a rate limit, the Transport's business; other errors
		// are often answered without the work a success takes, and
		// their latency would read as a floor too low.
		s.Outcome = concurrency.Ignored
	}
	if q, ok := header.Concurrency(resp.Header); ok {
		s.Quota = q
	}
	return s
}

// observeLocked hands a call's sample to the adaptive bound and applies the
// move, if any: the slots take the new limit (a rise grants queued calls at
// once). e.mu must be held.
func (e *Executor) observeLocked(s *concurrency.Sample) {
	s.Answered = e.slots.held // the call's own slot still among them
	limit, r := e.adapt.Observe(*s)
	if limit != e.slots.limit {
		e.slots.setLimit(limit)
	}
	if r != concurrency.None {
		e.lastMove = boundReasonOf[r]
		countMove(&e.moves, e.lastMove)
	}
}
