// Package cubic is the fallback limiter for servers that say nothing about
// their quota and only answer 429 or 503 when it is exceeded: CUBIC, as in
// the AWS SDK's adaptive retry mode, with one cut per throttling event and a
// cycle long enough that a settled client meets well under 1% 429s.
//
// A [Probe] is a state machine with explicit time: the caller reports each
// completed request ([Probe.Meter]) and each throttle ([Probe.Throttle]) with
// the time it happened, and asks for the rate at a time ([Probe.Grow]). It
// takes no lock and reads no clock; the caller owns both.
package cubic

import (
	"math"
	"time"
)

// Probe is the fallback for servers that say nothing about their quota and
// only answer 429 or 503 when it is exceeded. It is CUBIC, as in the AWS SDK's
// adaptive retry mode (β = 0.7, C = 0.4, new rates capped at twice the
// measured send rate, floor MinLimit), with two changes that matter for slow
// APIs and concurrent callers.
//
// Before the first throttle it does not limit at all: a server that never
// throttles is never slowed. On a throttle it remembers the rate it was sending
// at (lastMax: the smaller of its limit and the measured send rate) and drops
// to β·lastMax. It then climbs back along a cubic: fast at first, flattening
// as it nears lastMax, where the server last pushed back, then probing beyond
// it, slowly at first.
//
// Change 1: one cut per event. 429s of requests sent before the last cut took
// effect (those in flight then, or within a round trip) do not cut again; the
// AWS SDK cuts on every throttle, so 32 concurrent callers meeting one empty
// bucket would divide the rate by 0.7³². Nor do throttles while the server
// is closed (it has accepted nothing sent since the event began: a fixed
// window spent until its end): the rate was not the reason, the window was.
// While closed, one request at a time looks whether the server accepts
// again, at a backoff growing from a round trip (100 ms at least) to 1 s (or a quarter of the
// time closed), so a closed spell costs a few 429s, not one per caller per
// round trip, and the climb starts when the server reopens.
//
// Change 2: the length of a cycle. AWS's cubic is back at lastMax after
// K = ∛(lastMax·(1-β)/C) seconds, about 2 s at 10 requests/s: with one 429 per
// cycle that is 5% of all requests throttled. Here K is also long enough for a
// cycle to hold about 300 requests per 429 the last event cost (at most two
// minutes), so the share of 429s stays well under 1% once settled, whatever
// the rate, and whatever the latency (a high rate × round trip means many
// requests in flight, hence many 429s per event). The first event
// follows an unlimited burst, whose send rate says nothing: its lastMax is
// what the server admitted per second from the first response until it
// accepted again (a fixed window's quota over its window), and its cycle is
// that of an event that cost one 429. The rate averages
// about 1 - (1-β)/4 ≈ 92% of lastMax over a cycle, and lastMax tracks the
// server's capacity.
//
// Change 3: what the server's waits state. A refusal with a Retry-After
// says when the server will have something to give; the successes between
// two such ends, over the time between them, are what it frees per second
// (Refused). A server that frees its quota as it goes admits no more than
// that. Where that is below the floor (minLimit: a daily window of 1,000
// frees one request every 86 s), lastMax never goes above it, the floor
// gives way to it, the cut below it is shallow (refillBeta: the refill is
// measured, not a burst's overshoot) and the cycle holds probeCycleFactor
// requests at it however long that takes.
type Probe struct {
	minLimit float64

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

	// Send-rate meter: completed requests per half-second slot, smoothed
	// (EWMA 0.8 on the newest slot, as the AWS SDK does).
	slot      time.Time
	slotCount float64
	measured  float64
	// Long-run goodput: successes per second, smoothed over about a minute.
	// A server with a fixed window lets a burst through at each window
	// start, so the send rate when it throttles says little; what it
	// admits over several windows is its capacity.
	slotOK       float64
	goodput      float64
	firstEventAt time.Time

	// Closed: the server has throttled every request sent since the event
	// began (a fixed window spent until its end, a token bucket empty until
	// its next refill). More throttles then say nothing about the rate, so
	// they do not cut it again; one request at a time looks whether the
	// server accepts again, after a backoff that grows with the time closed.
	closed   bool
	closedAt time.Time
	backoff  time.Duration
	// The cycle since the server last accepted again after being closed (or
	// since the first response): its successes per second are what the
	// server admitted, the capacity measured directly. The first event
	// follows an unlimited burst, whose send rate says nothing: lastMax is
	// taken from the first cycle instead (fromBurst).
	cycleFrom time.Time
	cycleOK   float64
	fromBurst bool

	// atMaxUntil stops the cubic at below·lastMax until then: after a
	// limit the server punishes tripping (GitHub's secondary limits),
	// probing beyond what it admitted costs more than the headroom it
	// finds, and lastMax is that limit measured (what the server admitted
	// while it was saturated), so a rate at it trips a trailing window on
	// the first bunched pair of requests. cycle is the least climb back
	// to it (Punished's).
	atMaxUntil time.Time
	below      float64
	cycle      time.Duration
	memory     time.Duration
	// punished: the server has punished a trip; its limit is what it
	// was measured to admit, however slow (floor).
	punished bool

	// The refill the server's stated waits show (Refused): freeAt is when
	// the last spell of refusals said it would accept again (the earliest
	// end a refusal of the spell stated), freeOK the successes since that
	// spell; refill, what the server freed per second between the ends of
	// the last two spells (0: not known). A server that frees its quota as
	// it goes (a token bucket, a sliding-window counter) admits no more than
	// that however fast it is asked, so the rate never climbs past it for
	// long: a daily sliding window of 1,000 frees one request every 86 s,
	// and a probe at its floor (0.5 a second) met one refusal per success.
	// lastOK: the last success; lastEnd: the earliest end a refusal stated
	// since (see countFree).
	freeAt  time.Time
	freeOK  float64
	refill  float64
	lastOK  time.Time
	lastEnd time.Time
}

// New returns a Probe that does not limit until the first throttle, and
// never limits below minLimit requests per second after it.
func New(minLimit float64) *Probe { return &Probe{minLimit: minLimit} }

// Engaged reports whether a throttle has been seen: before it the rate is
// unlimited.
func (p *Probe) Engaged() bool { return p.engaged }

// Closed reports whether the server has refused everything sent since the
// current throttling event began.
func (p *Probe) Closed() bool { return p.closed }

// Punished reacts to a limit the server punishes tripping (GitHub's
// secondary rate limits), met at now with requests paused until until: a
// throttle, after which the rate resumes below what the server admitted
// before it objected (its goodput over about a minute), not at a fraction
// of the burst that tripped it; climbs back to that over at least cycle,
// since a limit the server keeps to itself is found again slowly; never
// probes beyond it for memory (counted from the trip, then from when the
// server accepts again), since each probe past the limit is a trip the
// server counts; and climbs from the end of the pause, not through it.
//
// A hidden limit is thus learnt as a quota whose window is the wait: what
// the server admitted from the first response (or over the minute before
// the trip) until it accepted again, spread evenly. Paced evenly, a
// window of any length is a rate, and a trip at an even rate is one
// refusal (a round trip's requests), not a burst's.
//
// The rate stays below below·lastMax (below in (0, 1], the limiter's
// safety factor) while the trip is remembered: lastMax is the hidden limit
// itself, measured, and a client paced evenly at a window's limit trips it
// once in a few windows (issue 24: every run re-tripped GitHub's hidden 60
// a minute at 190 s, paced at 1.003 a second).
//
// Only a trip that begins an event measures: the refusals of requests in
// flight when it began, and those of the looks after a pause the server
// still refuses (a window longer than the pause), keep what the event
// measured. Re-measured at each look, the goodput, decayed over the pause
// to nearly nothing, set lastMax to the floor.
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
// slot and its 0.8 smoothing) and from this package's measurements (the
// cycle of 300 requests per 429, the looks while closed).
const (
	probeBeta = 0.7
	// refillBeta is the cut below a refill measured from stated waits:
	// the default safety factor's share, what pacer spends of a stated
	// quota.
	refillBeta       = 0.9
	probeC           = 0.4
	probeSlot        = 500 * time.Millisecond
	probeCycleFactor = 300 // requests per throttle in one cycle
	probeMaxCycle    = 2 * time.Minute
	probeGoodputSpan = time.Minute
	probeMinBackoff  = 100 * time.Millisecond
	probeMaxBackoff  = time.Second // or a quarter of the time closed, if longer, up to MaxLook
	// MaxLook caps the wait between looks at an endpoint that keeps
	// refusing with nothing saying until when: one request a minute. A
	// minute is what GitHub documents for its secondary limits (wait at
	// least a minute), one look a minute costs a server nothing, and a
	// longer wait only delays noticing that it recovered: without the cap
	// the waits doubled without bound (calls took 20 minutes after eight
	// refusals, hours after twelve).
	MaxLook = time.Minute
	// refillSpan is the least time between two stated ends that measures
	// a refill (Refused): Retry-After is whole seconds, rounded up, so an
	// end is known within a second, and ten of them hold that error to a
	// tenth. (Answers arrive in any order: ends a few milliseconds apart,
	// with a success read between them, measured a hundred a second.)
	refillSpan = 10 * time.Second
	// refillSample is the least successes a refill is measured over: a
	// success more or less at either end is then an eighth at most (the
	// first measure of a daily window, over two, read 0.66 of its refill,
	// and the cut below it held for hours).
	refillSample = 8
	// refillSlack and refillGaps bound a pause in the successes a refill is
	// measured over (countFree): a request goes when the pause a refusal
	// asked for ends, late by a Retry-After's rounding (a second) and a
	// round trip, so 5 s; a paced one within a few of the probe's
	// intervals (the rate moves between two successes, by a cut at most
	// to refillBeta of it).
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

// countFree counts a success at now towards the refill being measured, if
// the client was asking all along: a success at an end a refusal since the
// last success stated (within one of the probe's own intervals after it:
// the pause the refusal asked for), or no later after the last one than a
// few of those intervals. Otherwise the client
// went idle, and what it took says nothing of what the server frees: a
// client that sent eight requests over five hours between two refusals
// measured a refill of one every 37 minutes, and held to it, a burst of
// work would go at that pace. The measure starts again at the next stated
// end.
func (p *Probe) countFree(now time.Time) {
	if p.freeAt.IsZero() {
		// Nothing measured (every answer of a server that refuses
		// nothing): lastOK matters only from an end on (see below).
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
	// (An end is rounded up to the second: a success may come before it;
	// and the request that takes it goes at the probe's pace.)
	atEnd := !end.IsZero() && now.Sub(end) >= -refillSlack && now.Sub(end) <= interval+refillSlack
	if !atEnd && now.Sub(last) > refillGaps*interval+refillSlack {
		p.freeAt, p.freeOK = time.Time{}, 0
		return
	}
	p.freeOK++
}

// Refused takes a refusal at now that stated the server would accept again
// after wait (a Retry-After). At each end a refusal states, the server has
// nothing to give until then: the successes between two such ends, over
// the time between them, are what it freed per second (refill), taken
// once they span refillSpan and refillSample successes (see countFree for
// which successes count). Until the first success after an end, the
// earliest end stated is the one kept: later ones are the same end, or
// its rounding.
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

// stated is the refill the server's stated waits show, when it bounds the
// rate: known, below the floor (minLimit), and the server not one that
// punishes trips (whose limit is measured by Punished). Above the floor,
// CUBIC's own cycle finds the limit: held to a measured refill there, a
// token bucket of 60 a minute gave up its burst (0.99 of capacity -> 0.93)
// for a point fewer refusals.
func (p *Probe) stated() float64 {
	if p.punished || p.refill >= p.minLimit {
		return 0
	}
	return p.refill
}

// beta is the cut a throttle makes: AWS's β, or, below a refill the
// server's stated waits measured, refillBeta. β is deep because a send rate
// measured in a burst overshoots the capacity it cuts from; a refill read
// from stated ends does not, and a cut to 0.7 of it spent 0.925 of it over
// a cycle.
func (p *Probe) beta() float64 {
	if p.stated() > 0 {
		return refillBeta
	}
	return probeBeta
}

// maxCycle is the longest a climb back to lastMax may take: two minutes,
// or, for a server whose stated waits show its refill, long enough for
// probeCycleFactor requests at it (a refill measured from stated ends is
// not a guess a shorter cycle must soon correct, and each climb past it
// costs a refusal).
func (p *Probe) maxCycle() float64 {
	c := probeMaxCycle.Seconds()
	if r := p.stated(); r > 0 {
		c = max(c, probeCycleFactor/r)
	}
	return c
}

// reopen ends a closed spell: the server accepted a request sent during it.
// The climb starts here (the time closed was no time at the new rate), and
// a lastMax taken from the first, unlimited burst is replaced by what the
// server admitted over the cycle.
func (p *Probe) reopen(now time.Time) {
	p.closed = false
	if p.fromBurst && p.cycleOK <= 1 && !p.punished {
		// The server admitted nothing from our first response until now
		// (this answer is the first it accepted): its quota was spent
		// before we came, and the cycle measured no capacity, only the
		// wait. Taken as one, the floor (0.5 a second) was lastMax,
		// climbed back to over two minutes: a fan-out of 200 onto a
		// spent window of 300 got 68 through in three minutes. As before
		// any throttle: unlimited, and the next throttle's burst is the
		// first event's.
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
		// Measured, not guessed: climb back as slowly as after an event
		// that cost one 429, or over three such cycles if shorter (the
		// figure is a lower bound when the cycle held time spent closed).
		p.k = max(p.k, min(probeCycleFactor/p.lastMax, 3*span, p.maxCycle()))
	}
	if now.Before(p.atMaxUntil) {
		// A punished limit's climb keeps its length (setMax shortened it),
		// and the limit is remembered from here: the server held it until
		// now (a window longer than the wait refuses the looks; the memory
		// counted from the last of them ran out 45 minutes after a window
		// of an hour reopened, and the probe beyond it tripped it again).
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
		// Measured from the server's own stated ends, not estimated by a
		// model that has just failed to fit it (a sliding window's
		// capacity read from its first burst was a tenth of its refill).
		rate = r
	}
	// The server's history began with the model's, not at this throttle:
	// its goodput over the span is already measured (see throttle).
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

// Throttle reacts to a 429/503 observed at now, with inflight requests still
// out and rtt the estimated round trip. It returns the time before which no
// new request should start (zero: no change). A throttle begins a new event,
// and cuts the rate, unless the request may have been sent before the last
// cut took effect, judged by count (the requests then in flight) and by time
// (a round trip, and at least one interval at the cut rate), or the server
// has not accepted anything since (closed): then it is one more throttle of
// the same event, and if it answered a request sent while closed, the next
// one waits longer.
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
	// The first event follows an unlimited burst: neither it nor its 429
	// count says anything about a probing cycle, so the climb back after it
	// is AWS's, and the next event's cycle does not count its 429s.
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
		// Never remember much more than the server admitted over the last
		// minute (once there is a minute of it): see goodput.
		rate = min(rate, max(p.goodput*1.5, p.floor()))
	}
	if r := p.stated(); r > 0 {
		// What the server frees is all it admits: asked faster, it
		// refuses the rest.
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
	// A round trip, but never more than the backoff's usual cap: the
	// estimate (Little's law over in-flight counts) reads a long pause with
	// a caller holding its slot as a long round trip, and a first look 40 s
	// late cost a sliding window 0.98 -> 0.70 of its quota.
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
		// the flat of the cubic, not from where its clock ran on to while
		// held (an hour past k, the next rate was twice the send rate,
		// slot after slot: 126 requests in 10 s into a hidden 500 an hour).
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

// floor is the least rate: minLimit, or for a server that punishes
// tripping (Punished) what it was measured to admit, down to one request
// per MaxLook. Such a server's limits are counted, not guessed from a
// burst, and a floor above one (GitHub documents 500 content-creating
// requests an hour, 0.14 a second, under the default floor of 0.5) paced
// it into a trip every quarter hour.
func (p *Probe) floor() float64 {
	if p.punished {
		return min(p.minLimit, 1/MaxLook.Seconds())
	}
	if r := p.stated(); r > 0 {
		// Nor is a floor above what the server's stated waits show it
		// frees (see Refused): the cut goes below it, as any cut does.
		return refillBeta * r
	}
	return p.minLimit
}
