// Package cubic is the fallback limiter for servers that state no quota and
// only answer 429 or 503 once it is exceeded: CUBIC (RFC 9438) as the AWS
// SDK's adaptive retry mode applies it to a request rate, with its β = 0.7,
// C = 0.4 and send rate (half-second slots smoothed by 0.8). Unlimited until
// the first throttle, it then records lastMax, the smaller of its limit and
// the send rate, cuts to β·lastMax and climbs along a cubic that flattens at
// lastMax K seconds later and probes beyond, at most twice the send rate and
// at least a floor (MinLimit). Three changes:
//
//  1. One cut per event: a throttle of a request sent before the last cut
//     took effect (in flight then, or within a round trip), or while the
//     server is closed (it refused all sent since the event began), cuts no
//     more. While closed, one request at a time looks, after a round trip
//     (100 ms at least) doubling to a second or a quarter of the time closed,
//     at most MaxLook.
//  2. K holds 300 requests per 429 the last event cost, at most two minutes:
//     under 1% 429s once settled. The first event's lastMax, after an
//     unlimited burst, is what the server admitted until it accepted again.
//  3. A refill the server's waits state ([Probe.Refused]) below the floor
//     bounds lastMax and replaces the floor, cut by the safety factor, not β.
//
// A limit the server punishes tripping ([Probe.Punished]) is learnt as a
// quota whose window is the wait: what it admitted, spread evenly, never
// probed beyond while remembered. A Probe takes the time as an argument; it
// takes no lock and reads no clock.
package cubic

import (
	"math"
	"time"
)

// Probe is the CUBIC fallback's state for one endpoint.
type Probe struct {
	minLimit, safety  float64   // the floor; the safety factor (change 3, Punished)
	engaged           bool      // a throttle was seen; before it the limit is Inf
	limit, lastMax, k float64   // requests per second; K in seconds
	since             time.Time // the climb's start

	// Events (change 1): a throttle is the current event's while closed, or
	// until observed (requests completed) passes closeAt.
	events, eventCount  int
	observed, closeAt   int64
	eventAt, firstEvent time.Time
	closed              bool
	backoff             time.Duration // between looks while closed

	// The cycle since the server last accepted again (change 2); fromBurst:
	// the first event's lastMax awaits its measure.
	cycleFrom time.Time
	cycleOK   float64
	fromBurst bool

	// The send rate (measured) over slots; the goodput over about a minute.
	slot                                 time.Time
	slotCount, slotOK, measured, goodput float64

	// A punished limit: at most safety·lastMax until atMaxUntil, a climb of
	// at least cycle, the trip remembered for memory.
	punished      bool
	atMaxUntil    time.Time
	cycle, memory time.Duration

	// The stated refill (change 3): freeOK successes since freeAt, the
	// earliest end the last spell of refusals stated; lastOK the last of
	// them, lastEnd the earliest end stated since; refill, 0 until measured.
	freeAt, lastOK, lastEnd time.Time
	freeOK, refill          float64
}

// New returns a Probe whose floor is minLimit requests per second; safety,
// in (0, 1], is the limiter's safety factor.
func New(minLimit, safety float64) *Probe { return &Probe{minLimit: minLimit, safety: safety} }

// Engaged reports whether a throttle was seen: before one, nothing is limited.
func (p *Probe) Engaged() bool { return p.engaged }

// Closed reports whether the server refused all sent since the event began.
func (p *Probe) Closed() bool { return p.closed }

// Tuning: β, C and the slot are the AWS SDK's; the rest serve the package doc's changes.
const (
	probeBeta        = 0.7
	probeC           = 0.4
	probeSlot        = 500 * time.Millisecond
	probeCycleFactor = 300                    // requests per 429 in a cycle: under 1% 429s
	probeMaxCycle    = 2 * time.Minute        // the longest cycle, but at a stated refill
	probeGoodputSpan = time.Minute            // what a fixed window admits over several windows
	probeMinBackoff  = 100 * time.Millisecond // the least look backoff, a round trip if longer
	probeMaxBackoff  = time.Second            // the doubling's cap, or a quarter of the time closed
	refillSpan       = 10 * time.Second       // a refill's least span: ten Retry-Afters' rounding
	refillSample     = 8                      // its least successes: one more or less, an eighth
	refillSlack      = 5 * time.Second        // a pause within it: a Retry-After's rounding and a trip,
	refillGaps       = 3                      // or this many of the probe's intervals
)

// MaxLook caps the wait between looks at a server that keeps refusing:
// GitHub documents a minute for its secondary limits.
const MaxLook = time.Minute

// Meter counts one completed request at now; ok: the server accepted it.
func (p *Probe) Meter(now time.Time, ok bool) {
	p.observed++
	if p.cycleFrom.IsZero() {
		p.cycleFrom = now
	}
	if ok {
		p.countFree(now)
		p.cycleOK++
		if p.closed && p.observed > p.closeAt { // not in flight when the event began
			p.reopen(now)
		}
	}
	switch {
	case p.slot.IsZero():
		p.slot = now
	case now.Sub(p.slot) >= probeSlot:
		dt := now.Sub(p.slot).Seconds()
		rate := p.slotCount / dt
		if p.measured == 0 {
			p.measured, p.goodput = rate, p.slotOK/dt
		} else {
			p.measured = 0.8*rate + 0.2*p.measured
			p.goodput += (1 - math.Exp(-dt/probeGoodputSpan.Seconds())) * (p.slotOK/dt - p.goodput)
		}
		p.slot, p.slotCount, p.slotOK = now, 0, 0
	}
	p.slotCount++
	if ok {
		p.slotOK++
	}
}

// countFree counts a success at now towards the refill if the client asked
// all along: at an end a refusal stated since the last success, or within a
// few intervals of it. Otherwise the measure restarts at the next end.
func (p *Probe) countFree(now time.Time) {
	last, end := p.lastOK, p.lastEnd
	p.lastOK, p.lastEnd = now, time.Time{}
	if p.freeAt.IsZero() {
		return
	}
	if p.freeOK == 0 || last.Before(p.freeAt) {
		last = p.freeAt
	}
	var interval time.Duration // between requests at the probe's rate
	if p.engaged && p.limit > 0 {
		interval = time.Duration(float64(time.Second) / p.limit)
	}
	atEnd := !end.IsZero() && now.Sub(end) >= -refillSlack && now.Sub(end) <= interval+refillSlack
	if !atEnd && now.Sub(last) > refillGaps*interval+refillSlack {
		p.freeAt, p.freeOK = time.Time{}, 0
		return
	}
	p.freeOK++
}

// Refused takes a refusal at now whose Retry-After said to wait: the
// successes between two such ends, over the time between them, are what the
// server frees per second (change 3), from a spell's earliest end (the
// others are its rounding).
func (p *Probe) Refused(now time.Time, wait time.Duration) {
	if wait <= 0 {
		return
	}
	end := now.Add(wait)
	if p.lastEnd.IsZero() || end.Before(p.lastEnd) {
		p.lastEnd = end
	}
	switch span := end.Sub(p.freeAt); {
	case p.freeOK == 0 && (p.freeAt.IsZero() || span < 0):
		p.freeAt = end
	case p.freeOK >= refillSample && span >= refillSpan:
		p.refill = p.freeOK / span.Seconds()
		p.freeAt, p.freeOK = end, 0
	}
}

// bounds are the cut a throttle makes, the least rate, and the refill the
// server's waits state when it bounds the rate (0: none): β and minLimit;
// below a stated refill (change 3) the safety factor and its share of the
// refill; for a punished limit, no stated refill and a floor of one request
// per MaxLook (GitHub documents 500 content-creating requests an hour).
func (p *Probe) bounds() (beta, floor, stated float64) {
	switch {
	case p.punished:
		return probeBeta, min(p.minLimit, 1/MaxLook.Seconds()), 0
	case p.refill > 0 && p.refill < p.minLimit:
		return p.safety, p.safety * p.refill, p.refill
	}
	return probeBeta, p.minLimit, 0
}

// stretch makes K long enough for probeCycleFactor requests per throttle at
// lastMax, up to bound seconds and the longest cycle: probeMaxCycle, or the
// time probeCycleFactor requests take at a stated refill (change 2).
func (p *Probe) stretch(throttles, bound float64) {
	longest := probeMaxCycle.Seconds()
	if _, _, r := p.bounds(); r > 0 {
		longest = max(longest, probeCycleFactor/r)
	}
	p.k = max(p.k, min(probeCycleFactor*throttles/p.lastMax, bound, longest))
}

// setMax sets lastMax, the cut below it and its K.
func (p *Probe) setMax(rate float64) {
	beta, floor, _ := p.bounds()
	p.lastMax = max(rate, floor)
	p.k = math.Cbrt(p.lastMax * (1 - beta) / probeC)
	p.limit = math.Max(beta*p.lastMax, floor)
}

// sendRate is the measured send rate, counting the slot in progress so that
// a burst before the first full slot is not read as zero.
func (p *Probe) sendRate(now time.Time) float64 {
	return max(p.measured, p.slotCount/max(now.Sub(p.slot).Seconds(), probeSlot.Seconds()))
}

// reopen ends a closed spell and starts the climb. A first event's lastMax
// is what the server admitted over the cycle, its K as after an event of
// one 429, up to three cycles (a lower bound if it held time closed).
func (p *Probe) reopen(now time.Time) {
	p.closed = false
	if p.fromBurst {
		p.fromBurst = false
		if p.cycleOK <= 1 && !p.punished {
			// Nothing admitted since the first response: the cycle measured
			// a quota spent before we came. Unlimited again.
			p.engaged, p.events = false, 0
			p.limit, p.lastMax, p.k = 0, 0, 0
			p.cycleFrom, p.cycleOK = now, 1
			return
		}
		span := now.Sub(p.cycleFrom).Seconds()
		if g := p.cycleOK / span; span > 0 && g < p.lastMax {
			p.setMax(g)
		}
		p.stretch(1, 3*span)
	}
	if now.Before(p.atMaxUntil) {
		// A punished limit keeps its climb, remembered from here.
		p.k = max(p.k, p.cycle.Seconds())
		p.atMaxUntil = now.Add(p.memory)
	}
	beta, floor, _ := p.bounds()
	p.since = now
	p.limit = math.Max(beta*p.lastMax, floor)
	// The looks' send rate must not cap the climb.
	p.measured = max(p.measured, p.limit)
	p.cycleFrom, p.cycleOK = now, 1
}

// Adopt takes over, just after the throttle, from a model of the server's
// window (package infer) that gave up having measured it admit rate per
// second over span: the climb starts as after a measured first cycle.
func (p *Probe) Adopt(rate float64, span time.Duration, now time.Time) {
	if rate <= 0 {
		return
	}
	if _, _, r := p.bounds(); r > 0 {
		rate = r // the server's own stated ends, not a model that failed to fit
	}
	p.firstEvent, p.fromBurst = now.Add(-span), false // the goodput over span is measured
	p.setMax(rate)
	p.stretch(1, 3*span.Seconds())
}

// Throttle reacts to a 429 or 503 at now, with inflight requests out and
// rtt the round trip, and returns when the next request may start (zero:
// no change): it begins an event (change 1), or backs a refused look off.
func (p *Probe) Throttle(now time.Time, inflight int64, rtt time.Duration) time.Time {
	if p.engaged {
		gap := max(rtt, time.Duration(float64(time.Second)/p.limit))
		if p.closed || p.observed <= p.closeAt || now.Sub(p.eventAt) < gap {
			if p.events > 1 { // the first event's 429s, an unlimited burst's, do not count
				p.eventCount++
			}
			if p.closed && p.observed > p.closeAt {
				p.backoff = min(2*p.backoff, max(probeMaxBackoff, now.Sub(p.eventAt)/4), MaxLook)
				return now.Add(p.backoff)
			}
			return time.Time{}
		}
	}
	p.events++
	rate := p.sendRate(now)
	if !p.engaged {
		p.engaged, p.firstEvent, p.fromBurst = true, now, true
	} else {
		if rate == 0 || p.limit < rate {
			rate = p.limit
		}
		if _, floor, _ := p.bounds(); p.goodput > 0 && now.Sub(p.firstEvent) >= probeGoodputSpan {
			// Never much more than the server admitted over the last minute.
			rate = min(rate, max(p.goodput*1.5, floor))
		}
	}
	if _, _, r := p.bounds(); r > 0 {
		rate = min(rate, r)
	}
	p.setMax(rate) // a rate of 0, nothing sent yet, is the floor
	if p.events > 1 {
		p.stretch(float64(p.eventCount), math.Inf(1))
	}
	p.since, p.eventAt, p.closed = now, now, true
	p.closeAt, p.eventCount = p.observed+inflight, 1
	// A round trip, capped: Little's law reads a long pause with a caller
	// holding its slot as a long round trip.
	p.backoff = min(max(rtt, probeMinBackoff), probeMaxBackoff)
	return now.Add(p.backoff)
}

// Punished reacts to a limit the server punishes tripping (GitHub's
// secondary limits), met at now and pausing requests until until: a throttle
// to below what the server admitted (its goodput over about a minute, if the
// trip begins an event), climbing back over at least cycle from the pause's
// end, at most safety·lastMax for memory from the trip and the reopening.
func (p *Probe) Punished(now, until time.Time, inflight int64, rtt time.Duration, cycle, memory time.Duration) {
	fresh := !p.engaged || !p.closed
	p.punished = true
	p.Throttle(now, inflight, rtt)
	if g := p.goodput; fresh && g > 0 && g < p.lastMax {
		p.setMax(g)
	}
	p.cycle, p.memory = max(p.cycle, cycle), memory
	p.k = max(p.k, cycle.Seconds())
	p.atMaxUntil = now.Add(memory)
	if until.After(p.since) {
		p.since = until
	}
}

// Grow advances the cubic to now and returns the limit (Inf until engaged).
func (p *Probe) Grow(now time.Time) float64 {
	if !p.engaged {
		return math.Inf(1)
	}
	if !p.atMaxUntil.IsZero() && !now.Before(p.atMaxUntil) {
		// The trip is forgotten: probing starts from the flat of the cubic.
		if at := p.atMaxUntil.Add(-time.Duration(p.k * float64(time.Second))); at.After(p.since) {
			p.since = at
		}
		p.atMaxUntil = time.Time{}
	}
	if !now.After(p.since) {
		return p.limit
	}
	beta, floor, _ := p.bounds()
	t := now.Sub(p.since).Seconds() - p.k
	c := p.lastMax * (1 - beta) / (p.k * p.k * p.k) // from β·lastMax to lastMax in K
	rate := p.lastMax + c*t*t*t
	if now.Before(p.atMaxUntil) {
		rate = math.Min(rate, max(p.safety, 0.1)*p.lastMax)
	}
	if m := p.sendRate(now); m > 0 {
		rate = math.Min(rate, 2*m)
	}
	p.limit = math.Max(rate, floor)
	return p.limit
}
