// Package cubic is the fallback limiter for servers that say nothing about
// their quota and only answer 429 or 503 when it is exceeded: CUBIC, as in
// the AWS SDK's adaptive retry mode (β = 0.7, C = 0.4, new rates capped at
// twice the measured send rate, a floor of MinLimit), with three changes.
//
// Before the first throttle it does not limit at all. On a throttle it
// remembers the rate it was sending at (lastMax: the smaller of its limit
// and the send rate) and drops to β·lastMax; it then climbs back along a
// cubic, flattening near lastMax, then probing beyond it.
//
//  1. One cut per event: throttles of requests sent before the last cut took
//     effect (in flight then, or within a round trip) do not cut again, nor
//     do throttles while the server is closed (it accepted nothing sent since
//     the event began). While closed, one request at a time looks, at a
//     backoff from a round trip (100 ms at least) to a second, or a quarter
//     of the time closed, at most MaxLook: a closed spell costs a few 429s.
//  2. The length of a cycle: long enough to hold about 300 requests per 429
//     the last event cost (at most two minutes), so a settled client meets
//     well under 1% 429s at any rate and latency. The first event follows an
//     unlimited burst, whose send rate says nothing: its lastMax is what the
//     server admitted from the first response until it accepted again.
//  3. What the server's waits state: the successes between two ends that
//     refusals' Retry-Afters state, over the time between them, are what a
//     server that frees its quota as it goes frees per second (Refused).
//     Below the floor, lastMax never climbs above it, the floor gives way to
//     it, and the cut below it is the safety factor's, not β (a measured
//     refill is no burst's overshoot).
//
// A limit the server punishes tripping (GitHub's secondary limits,
// Punished) is learnt as a quota whose window is the wait: what the server
// admitted, spread evenly, never probed beyond while the trip is
// remembered.
//
// A Probe is a state machine with explicit time: the caller reports each
// completed request (Meter) and each throttle (Throttle) with its time, and
// asks for the rate at a time (Grow). It takes no lock and reads no clock.
package cubic

import (
	"math"
	"time"
)

// Probe is the CUBIC fallback's state for one endpoint (see the package
// doc).
type Probe struct {
	minLimit  float64
	refillCut float64 // the cut below a refill the server's waits state: the safety factor

	engaged bool    // a throttle has been seen; before it the limit is Inf
	limit   float64 // current rate, requests per second
	lastMax float64 // rate at the last throttle
	since   time.Time
	k       float64 // seconds from a throttle back to lastMax

	// Throttles belong to the current event until the observation count
	// passes closeAt (the requests that were in flight when it began).
	closeAt     int64
	eventCount  int // throttles in the current event
	events      int // events so far
	observed    int64
	lastEventAt time.Time

	// The send rate: completed requests per half-second slot, smoothed as
	// the AWS SDK does; and the goodput, successes per second over about a
	// minute, what a fixed window admits over several windows.
	slot         time.Time
	slotCount    float64
	measured     float64
	slotOK       float64
	goodput      float64
	firstEventAt time.Time

	// closed: the server throttled every request sent since the event
	// began; one request at a time looks, after backoff.
	closed   bool
	closedAt time.Time
	backoff  time.Duration
	// The cycle since the server last accepted again after being closed:
	// its successes per second are the capacity measured. fromBurst: the
	// first event's lastMax, from a burst, awaits it.
	cycleFrom time.Time
	cycleOK   float64
	fromBurst bool

	// A limit the server punishes tripping (Punished): the cubic stops at
	// below·lastMax until atMaxUntil, climbs back over at least cycle, and
	// remembers the trip for memory.
	atMaxUntil time.Time
	below      float64
	cycle      time.Duration
	memory     time.Duration
	punished   bool

	// The refill the server's stated waits show (Refused): freeAt is the
	// earliest end the last spell of refusals stated, freeOK the successes
	// since; refill, what the server freed per second between the last two
	// spells' ends (0: not known); lastOK the last success, lastEnd the
	// earliest end stated since (countFree).
	freeAt  time.Time
	freeOK  float64
	refill  float64
	lastOK  time.Time
	lastEnd time.Time
}

// New returns a Probe that does not limit until the first throttle, and
// never limits below minLimit requests per second after it; safety, in
// (0, 1], is the share of a refill the server's waits state that it keeps to
// (the limiter's safety factor).
func New(minLimit, safety float64) *Probe { return &Probe{minLimit: minLimit, refillCut: safety} }

// Engaged reports whether a throttle has been seen: before it the rate is
// unlimited.
func (p *Probe) Engaged() bool { return p.engaged }

// Closed reports whether the server has refused everything sent since the
// current throttling event began.
func (p *Probe) Closed() bool { return p.closed }

// Punished reacts to a limit the server punishes tripping (GitHub's
// secondary rate limits), met at now with requests paused until until: a
// throttle, after which the rate resumes below what the server admitted
// before it objected (its goodput over about a minute), climbs back to that
// over at least cycle, from the end of the pause, and stays below
// below·lastMax for memory, counted from the trip and then from when the
// server accepts again: each probe past a limit the server keeps to itself
// is a trip it counts. Only a trip that begins an event measures: the
// refusals of requests in flight then, and of looks the server still
// refuses, keep what it measured.
func (p *Probe) Punished(now, until time.Time, inflight int64, rtt time.Duration, below float64, cycle, memory time.Duration) {
	fresh := !p.engaged || !p.closed
	p.punished = true
	p.Throttle(now, inflight, rtt)
	if g := p.goodput; fresh && g > 0 && g < p.lastMax {
		p.setMax(g)
	}
	p.cycle = max(p.cycle, cycle)
	p.k = max(p.k, cycle.Seconds())
	p.below = min(max(below, 0.1), 1)
	p.memory = memory
	p.atMaxUntil = now.Add(memory)
	if until.After(p.since) {
		p.since = until
	}
}

// Tuning, from the AWS SDK's adaptive retry mode (β, C, the half-second
// slot and its 0.8 smoothing) and from this package's (the cycle of 300
// requests per 429, the looks while closed).
const (
	probeBeta        = 0.7
	probeC           = 0.4
	probeSlot        = 500 * time.Millisecond
	probeCycleFactor = 300 // requests per throttle in one cycle: well under 1% 429s
	probeMaxCycle    = 2 * time.Minute
	probeGoodputSpan = time.Minute
	probeMinBackoff  = 100 * time.Millisecond
	probeMaxBackoff  = time.Second // or a quarter of the time closed, if longer, up to MaxLook
	// MaxLook caps the wait between looks at an endpoint that keeps
	// refusing with nothing saying until when, so it is looked at at least
	// once a minute: what GitHub documents for its secondary limits.
	MaxLook = time.Minute
	// refillSpan is the least time between two stated ends that measures
	// a refill: ten whole-second Retry-Afters hold their rounding to a tenth.
	refillSpan = 10 * time.Second
	// refillSample is the least successes a refill is measured over: one
	// more or less at either end is an eighth at most.
	refillSample = 8
	// refillSlack and refillGaps bound a pause in the successes a refill is
	// measured over (countFree): a Retry-After's rounding and a round trip,
	// or a few of the probe's own intervals.
	refillSlack = 5 * time.Second
	refillGaps  = 3
)

// Meter counts one completed request at now.
func (p *Probe) Meter(now time.Time, ok bool) {
	p.observed++
	if p.cycleFrom.IsZero() {
		p.cycleFrom = now
	}
	if ok {
		p.countFree(now)
		p.cycleOK++
		// Requests in flight when the event began do not reopen it.
		if p.closed && p.observed > p.closeAt {
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

// countFree counts a success at now towards the refill being measured if
// the client was asking all along: at an end a refusal since the last
// success stated, or within a few of the probe's intervals of the last one.
// Otherwise the client went idle, what it took says nothing of what the
// server frees, and the measure starts again at the next stated end.
func (p *Probe) countFree(now time.Time) {
	if p.freeAt.IsZero() {
		// Nothing measured: lastOK matters only from an end on.
		if !p.lastEnd.IsZero() {
			p.lastEnd = time.Time{}
		}
		return
	}
	last, end := p.lastOK, p.lastEnd
	p.lastOK, p.lastEnd = now, time.Time{}
	if p.freeOK == 0 || last.Before(p.freeAt) {
		last = p.freeAt
	}
	var interval time.Duration // between requests at the probe's rate
	if p.engaged && p.limit > 0 {
		interval = time.Duration(float64(time.Second) / p.limit)
	}
	// An end is rounded up to the second; the request that takes it goes
	// at the probe's pace.
	atEnd := !end.IsZero() && now.Sub(end) >= -refillSlack && now.Sub(end) <= interval+refillSlack
	if !atEnd && now.Sub(last) > refillGaps*interval+refillSlack {
		p.freeAt, p.freeOK = time.Time{}, 0
		return
	}
	p.freeOK++
}

// Refused takes a refusal at now whose Retry-After said the server would
// accept again after wait: the successes between two such ends, over the
// time between them, are what it frees per second, once they span
// refillSpan and refillSample successes. Until the first success after an
// end, the earliest end stated is kept: later ones are its rounding.
func (p *Probe) Refused(now time.Time, wait time.Duration) {
	if wait <= 0 {
		return
	}
	end := now.Add(wait)
	if p.lastEnd.IsZero() || end.Before(p.lastEnd) {
		p.lastEnd = end
	}
	if p.freeOK == 0 { // (no success counts without an end: countFree)
		if p.freeAt.IsZero() || end.Before(p.freeAt) {
			p.freeAt = end
		}
		return
	}
	if span := end.Sub(p.freeAt); span >= refillSpan && p.freeOK >= refillSample {
		p.refill = p.freeOK / span.Seconds()
		p.freeAt, p.freeOK = end, 0
	}
}

// stated is the refill the server's waits show when it bounds the rate:
// below the floor, and not a server that punishes trips. Above the floor,
// CUBIC's own cycle finds the limit.
func (p *Probe) stated() float64 {
	if p.punished || p.refill >= p.minLimit {
		return 0
	}
	return p.refill
}

// beta is the cut a throttle makes: β, deep because a send rate measured in
// a burst overshoots the capacity, or, below a refill the server's waits
// state, the safety factor's.
func (p *Probe) beta() float64 {
	if p.stated() > 0 {
		return p.refillCut
	}
	return probeBeta
}

// maxCycle is the longest a climb back to lastMax may take: two minutes, or,
// below a refill the server's waits state, probeCycleFactor requests at it.
func (p *Probe) maxCycle() float64 {
	c := probeMaxCycle.Seconds()
	if r := p.stated(); r > 0 {
		c = max(c, probeCycleFactor/r)
	}
	return c
}

// reopen ends a closed spell: the server accepted a request sent during it.
// The climb starts here, and a lastMax taken from the first, unlimited
// burst is replaced by what the server admitted over the cycle.
func (p *Probe) reopen(now time.Time) {
	p.closed = false
	if p.fromBurst && p.cycleOK <= 1 && !p.punished {
		// The server admitted nothing since our first response: its quota
		// was spent before we came, and the cycle measured only the wait.
		// Unlimited again, as before any throttle.
		p.engaged, p.events, p.fromBurst = false, 0, false
		p.limit, p.lastMax, p.k = 0, 0, 0
		p.cycleFrom, p.cycleOK = now, 1
		return
	}
	if p.fromBurst {
		p.fromBurst = false
		span := now.Sub(p.cycleFrom).Seconds()
		if span > 0 {
			if g := p.cycleOK / span; g < p.lastMax {
				p.setMax(g)
			}
		}
		// Measured: climb back as after an event that cost one 429, or over
		// three such cycles if shorter (a lower bound when it held time closed).
		p.k = max(p.k, min(probeCycleFactor/p.lastMax, 3*span, p.maxCycle()))
	}
	if now.Before(p.atMaxUntil) {
		// A punished limit's climb keeps its length, and the limit is
		// remembered from here: the server held it until now.
		p.k = max(p.k, p.cycle.Seconds())
		p.atMaxUntil = now.Add(p.memory)
	}
	p.since = now
	p.limit = math.Max(p.beta()*p.lastMax, p.floor())
	// The send rate while closed was one request at a time: it must not
	// hold the climb back (new rates are capped at twice the send rate).
	p.measured = max(p.measured, p.limit)
	p.cycleFrom, p.cycleOK = now, 1
}

// Adopt takes over from the model of a server's window (package infer) that
// measured the server admitting rate per second over span: the climb
// starts as after a measured first cycle, not from a burst's send rate.
// Called just after the throttle that made the model give up.
func (p *Probe) Adopt(rate float64, span time.Duration, now time.Time) {
	if rate <= 0 {
		return
	}
	if r := p.stated(); r > 0 {
		// The server's own stated ends, not a model that failed to fit it.
		rate = r
	}
	// Its goodput over the span is already measured.
	p.firstEventAt = now.Add(-span)
	p.fromBurst = false
	p.setMax(rate)
	p.k = max(p.k, min(probeCycleFactor/p.lastMax, 3*span.Seconds(), p.maxCycle()))
}

// setMax sets lastMax and the cycle length that goes with it (AWS's K).
func (p *Probe) setMax(rate float64) {
	p.lastMax = max(rate, p.floor())
	p.k = math.Cbrt(p.lastMax * (1 - p.beta()) / probeC)
	p.limit = math.Max(p.beta()*p.lastMax, p.floor())
}

// sendRate is the measured send rate, counting the slot in progress so that
// a burst before the first full slot is not read as zero.
func (p *Probe) sendRate(now time.Time) float64 {
	if p.slot.IsZero() {
		return 0
	}
	partial := p.slotCount / max(now.Sub(p.slot).Seconds(), probeSlot.Seconds())
	return max(p.measured, partial)
}

// Throttle reacts to a 429 or 503 at now, with inflight requests still out
// and rtt the round trip, and returns when the next request may start
// (zero: no change). It cuts the rate and begins an event, unless the
// request may have been sent before the last cut took effect (in flight
// then, or within a round trip and an interval at the cut rate) or the
// server is closed: then it is one more throttle of the event, and a look
// refused while closed backs off further.
func (p *Probe) Throttle(now time.Time, inflight int64, rtt time.Duration) time.Time {
	if p.engaged {
		gap := max(rtt, time.Duration(float64(time.Second)/p.limit))
		if p.closed || p.observed <= p.closeAt || now.Sub(p.lastEventAt) < gap {
			p.eventCount++
			if p.closed && p.observed > p.closeAt {
				p.backoff = min(2*p.backoff, max(probeMaxBackoff, now.Sub(p.closedAt)/4), MaxLook)
				return now.Add(p.backoff)
			}
			return time.Time{}
		}
	}
	// The first event follows an unlimited burst: its 429s say nothing of a
	// probing cycle, so the next event's cycle does not count them.
	prevCount := 0
	if p.events > 1 {
		prevCount = max(p.eventCount, 1)
	}
	p.events++
	rate := p.sendRate(now)
	if p.engaged && (rate == 0 || p.limit < rate) {
		rate = p.limit
	}
	if p.engaged && p.goodput > 0 && now.Sub(p.firstEventAt) >= probeGoodputSpan {
		// Never much more than the server admitted over the last minute.
		rate = min(rate, max(p.goodput*1.5, p.floor()))
	}
	if r := p.stated(); r > 0 {
		// What the server frees is all it admits.
		rate = min(rate, r)
	}
	if !p.engaged {
		p.firstEventAt = now
		p.fromBurst = true
	}
	if rate <= 0 || math.IsInf(rate, 0) {
		rate = p.floor()
	}
	p.engaged = true
	p.setMax(rate)
	if p.events > 1 {
		p.k = max(p.k, min(probeCycleFactor*float64(max(prevCount, 1))/p.lastMax, p.maxCycle()))
	}
	p.since, p.lastEventAt = now, now
	p.closeAt = p.observed + inflight
	p.eventCount = 1
	p.closed, p.closedAt = true, now
	// A round trip, at most the backoff's usual cap: Little's law reads a
	// long pause with a caller holding its slot as a long round trip.
	p.backoff = min(max(rtt, probeMinBackoff), probeMaxBackoff)
	return now.Add(p.backoff)
}

// Grow advances the cubic to now and returns the limit (Inf until engaged).
func (p *Probe) Grow(now time.Time) float64 {
	if !p.engaged {
		return math.Inf(1)
	}
	if !p.atMaxUntil.IsZero() && !now.Before(p.atMaxUntil) {
		// The trip is forgotten: probing beyond lastMax starts here, from
		// the flat of the cubic, not where its clock ran on to while held.
		if at := p.atMaxUntil.Add(-time.Duration(p.k * float64(time.Second))); at.After(p.since) {
			p.since = at
		}
		p.atMaxUntil = time.Time{}
	}
	if !now.After(p.since) {
		return p.limit
	}
	t := now.Sub(p.since).Seconds() - p.k
	// Scaled so the cubic climbs from β·lastMax to lastMax in k seconds.
	c := p.lastMax * (1 - p.beta()) / (p.k * p.k * p.k)
	rate := p.lastMax + c*t*t*t
	if now.Before(p.atMaxUntil) {
		rate = math.Min(rate, p.below*p.lastMax)
	}
	if m := p.sendRate(now); m > 0 {
		rate = math.Min(rate, 2*m)
	}
	p.limit = math.Max(rate, p.floor())
	return p.limit
}

// floor is the least rate: minLimit; for a server that punishes tripping,
// what it was measured to admit, down to one request per MaxLook (GitHub
// documents 500 content-creating requests an hour, under the default floor).
func (p *Probe) floor() float64 {
	if p.punished {
		return min(p.minLimit, 1/MaxLook.Seconds())
	}
	if r := p.stated(); r > 0 {
		// Nor above what the server's stated waits show it frees.
		return p.refillCut * r
	}
	return p.minLimit
}
