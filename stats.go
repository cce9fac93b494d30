package pacer

import (
	"cmp"
	"slices"
	"time"

	"github.com/pacer-go/pacer/observe"
)

// Stats is a snapshot of one rate-limited endpoint, for observability: an
// [Adaptive]'s ([Adaptive.Stats]) or one of a [Transport]'s endpoints
// ([Transport.Stats]), which adds what only the Transport counts. Fields are
// read one after another, not atomically together.
type Stats struct {
	// Key is the limiter's key: [AdaptiveConfig.Key]; for a Transport's
	// endpoint, a pattern, a key function's result, scheme://host, or
	// "scope#bucket" for a server-named bucket.
	Key string

	Limit       Limit        // current request rate; Inf when nothing limits it
	Burst       int          // current request burst
	Tokens      float64      // request tokens available now: 0 while callers are owed some or a pause holds, +Inf when unlimited
	Waiting     int          // callers waiting in Acquire
	InFlight    int          // admitted, not yet settled
	Throttled   int64        // 429 and 503 responses (and 403s with an exhausted quota)
	Requests    int64        // settled requests that got a response
	PausedUntil time.Time    // no request starts before this (Retry-After, or a spent quota's reset); zero when none
	LastInfo    Info         // last non-empty Info observed
	Mode        observe.Mode // how the limit is decided: observe.ModeSlowStart, ModeHeaders, ModeProbing or ModeStatic

	// Interactive and Batch break the waiting callers and the admitted
	// requests down by class of work (see [work.Class]).
	Interactive, Batch ClassStats

	// Costs is, per quota the server counts in tokens, what a request with
	// no stated cost (no [work.WithCost]) was learnt to cost from the quota's
	// own figures; empty until one is learnt.
	Costs []observe.Cost

	// Counted by a Transport; zero in Adaptive.Stats.

	// Retries counts attempts of this endpoint that were retried (throttled
	// responses, or what a [WithRetry] policy asked to retry).
	Retries int64
	// Refused counts requests refused at once with a [*RateLimitError].
	Refused int64
	// Errors counts attempts the base transport failed (no response).
	Errors int64
}

// Stats returns a snapshot of every endpoint the transport tracks, sorted
// by key. Each endpoint's figures are read separately, not at one instant.
func (t *Transport) Stats() []Stats {
	t.init()
	eps := t.eps.snapshot()
	out := make([]Stats, 0, len(eps))
	for _, ep := range eps {
		st := ep.lim.Stats()
		st.Key = ep.key
		st.Retries, st.Refused, st.Errors = ep.retries.Load(), ep.refused.Load(), ep.failures.Load()
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b Stats) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// ClassStats is one class of work's part of an endpoint's [Stats].
type ClassStats struct {
	Waiting  int   // callers of this class waiting in Acquire
	Admitted int64 // requests of this class admitted, ever
}

// LongWait is a wait [WithLongWaits] reports.
type LongWait struct {
	Endpoint string    // the endpoint's key (see Stats.Key)
	Method   string    // the request's method
	Until    time.Time // when the request expects to go
	Info     Info      // what the endpoint's last response said
}

type longWaitHook struct {
	threshold time.Duration
	fn        func(LongWait)
}

// report calls the hook if lim would hold a request from now for at least
// the threshold. The limiter's state is read, not changed.
func (h longWaitHook) report(lim *endpoint, method string, now time.Time) {
	if h.fn == nil {
		return
	}
	if at := lim.lim.nextAllowed(); at.Sub(now) >= h.threshold {
		h.fn(LongWait{Endpoint: lim.key, Method: method, Until: at, Info: lim.lim.Stats().LastInfo})
	}
}

// Stats returns a snapshot for observability. It has no side effects: it
// reports the state as the last response or admission left it.
func (a *Adaptive) Stats() Stats {
	now := time.Now()
	a.mu.Lock()
	st := Stats{
		Key:       a.cfg.Key,
		Throttled: a.throttled,
		Requests:  a.requests,
		LastInfo:  a.lastInfoLocked(),
		Mode:      a.mode,
	}
	if at := a.heldUntilLocked(); at.After(now) {
		st.PausedUntil = at
	}
	for _, c := range a.book.Costs(nil) {
		st.Costs = append(st.Costs, observe.Cost{Quota: c.Quota, Mean: c.Mean, Charged: c.Charged})
	}
	a.unlock()
	st.Limit, st.Burst, st.Tokens = a.req.Limit(), a.req.Burst(), a.req.Tokens()
	st.Waiting = int(a.waiting.Load())
	st.InFlight = int(a.inflight.Load())
	st.Batch = ClassStats{Waiting: int(a.batchWaiting.Load()), Admitted: a.batchAdmits.Load()}
	st.Interactive = ClassStats{Waiting: max(st.Waiting-st.Batch.Waiting, 0), Admitted: max(a.admissions.Load()-st.Batch.Admitted, 0)}
	return st
}

// lastInfoLocked is the Info of the last response that stated anything,
// its quotas in a slice of their own; called with a.mu held.
func (a *Adaptive) lastInfoLocked() Info { return infoOf(a.lastInfo, &a.lastQuotas) }
