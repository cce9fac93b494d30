package cubic

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// meter sends n successes spread over d from start.
func meter(p *Probe, start time.Time, d time.Duration, n int) time.Time {
	for i := range n {
		p.Meter(start.Add(d*time.Duration(i)/time.Duration(n)), true)
	}
	return start.Add(d)
}

func TestAProbeDoesNotLimitUntilTheFirstThrottle(t *testing.T) {
	p := New(0.5, 0.9)
	meter(p, t0, 10*time.Second, 1000)
	if !math.IsInf(p.Grow(t0.Add(10*time.Second)), 1) || p.Engaged() {
		t.Fatal("a server that never throttles is never slowed")
	}
}

func TestAThrottleCutsToBetaOfWhatWasSentOnceAnEvent(t *testing.T) {
	p := New(0.5, 0.9)
	now := meter(p, t0, 10*time.Second, 200) // 20 a second
	p.Throttle(now, 0, 50*time.Millisecond)
	p.Meter(now.Add(200*time.Millisecond), true) // the server accepts again
	cut := p.Grow(now.Add(200 * time.Millisecond))
	if cut > 20*beta+1e-9 || cut < 0.5 {
		t.Fatalf("after a throttle at 20/s the rate is %v, want at most β·20 = %v", cut, 20*beta)
	}
	// Requests in flight when the event began are of the same event.
	p.Throttle(now.Add(10*time.Millisecond), 4, 50*time.Millisecond)
	if again := p.Grow(now.Add(200 * time.Millisecond)); again < cut-1e-9 {
		t.Errorf("a second 429 of one event cut again: %v after %v", again, cut)
	}
}

func TestTheRateClimbsBackAlongTheCubic(t *testing.T) {
	p := New(0.5, 0.9)
	now := meter(p, t0, 10*time.Second, 200)
	p.Throttle(now, 0, 50*time.Millisecond)
	// The client sends at the rate it is allowed: new rates are capped at
	// twice the send rate measured.
	prev := p.Grow(now)
	for s := 1; s <= 60; s++ {
		at := meter(p, now.Add(time.Duration(s-1)*time.Second), time.Second, int(math.Ceil(prev)))
		r := p.Grow(at)
		if r+1e-9 < prev {
			t.Fatalf("the rate fell from %v to %v at %d s without a throttle", prev, r, s)
		}
		prev = r
	}
	if prev < 0.5 {
		t.Errorf("the rate never rose above the floor: %v", prev)
	}
}

func TestTheRateNeverFallsBelowTheFloor(t *testing.T) {
	p := New(2, 0.9)
	now := t0
	for range 20 {
		now = now.Add(5 * time.Second)
		p.Meter(now, true)
		p.Throttle(now, 0, 10*time.Millisecond)
	}
	if r := p.Grow(now); r < 2 {
		t.Errorf("rate %v below the floor 2", r)
	}
}

// beta is the cut, AWS's β.
const beta = probeBeta

// A limit the server punishes tripping (GitHub's secondary limits), as the
// limiter reports it: a burst of n successes in the first 0.1 s trips it
// (Punished, a minute's wait); the looks at looks (from the trip) are
// refused, and the server accepts again at reopen. Then the client sends
// at the rate it is allowed, in steps of 100 ms, until end; pace returns
// the highest and the last rate it was allowed after climb (from reopen).
type punishedCase struct {
	name          string
	n             int
	paced         float64 // > 0: before the burst, paced at this rate for 5 minutes instead
	looks         []time.Duration
	reopen        time.Duration
	climb, end    time.Duration
	wantMax       float64 // the rate never goes above it (below · what the server admitted)
	wantLast      float64 // and is at least this at the end
	wantMaxBeyond float64 // > 0: the highest rate in the 10 s after the memory ran out, at most
}

const (
	punishBelow  = 0.9 // the safety factor run gives New
	punishCycle  = 5 * time.Minute
	punishMemory = time.Hour
)

func (c punishedCase) run(t *testing.T) (highest, last, beyond float64) {
	p := New(0.5, 0.9)
	start := t0
	if c.paced > 0 {
		start = meter(p, t0, 5*time.Minute, int(c.paced*300))
	}
	burst := meter(p, start, 100*time.Millisecond, c.n)
	trip := burst.Add(50 * time.Millisecond)
	p.Meter(trip, false)
	p.Punished(trip, trip.Add(time.Minute), 0, 50*time.Millisecond, punishCycle, punishMemory)
	for _, d := range c.looks {
		at := trip.Add(d)
		p.Meter(at, false)
		p.Punished(at, at.Add(2*time.Minute), 0, 50*time.Millisecond, punishCycle, punishMemory)
	}
	now := trip.Add(c.reopen)
	p.Meter(now, true)
	from := now
	var acc float64
	for ; now.Before(trip.Add(c.end)); now = now.Add(100 * time.Millisecond) {
		r := p.Grow(now)
		if now.Sub(from) >= c.climb {
			highest = max(highest, r)
		}
		if d := now.Sub(from); d >= punishMemory && d < punishMemory+10*time.Second {
			beyond = max(beyond, r)
		}
		last = r
		for acc += r / 10; acc >= 1; acc-- {
			p.Meter(now, true)
		}
	}
	return highest, last, beyond
}

// A punished limit is paced below what the server admitted: its limit,
// measured, which a rate at it trips on a trailing window; however slow
// (below the floor); measured by the trip that began the event, not by
// the refused looks after it; remembered from when the server accepted
// again; and probed beyond, after that, from the flat of the cubic.
func TestAPunishedLimitIsPacedBelowWhatTheServerAdmitted(t *testing.T) {
	for _, c := range []punishedCase{
		{
			// 61 successes from the first to the one that reopened, over
			// 60.15 s: 1.01 a second, the limit itself.
			name: "60 a minute, reopened after the wait",
			n:    60, reopen: time.Minute, end: 20 * time.Minute,
			wantMax: punishBelow * 61 / 60.15, wantLast: 0.85 * 61 / 60.15,
		},
		{
			// 501 over an hour: 0.14 a second, a quarter of the floor.
			name: "500 an hour, looks refused until the window ends",
			n:    500, looks: []time.Duration{time.Minute, 3 * time.Minute, 7 * time.Minute, 15 * time.Minute, 30 * time.Minute, 45 * time.Minute},
			reopen: time.Hour, end: time.Hour + 59*time.Minute, // the memory counts from reopen
			wantMax: punishBelow * 501 / 3600.15, wantLast: 0.85 * 501 / 3600.15,
		},
		{
			// 10 a second for 5 minutes, then refused for 7: 3,002
			// successes over 720.15 s, 4.2 a second. The looks, at 1 and 3
			// minutes, find the minute's goodput decayed to a tenth and to
			// a thousandth: read as the limit, the floor.
			name:  "paced at 10 a second, looks refused for 7 minutes",
			paced: 10, n: 1, looks: []time.Duration{time.Minute, 3 * time.Minute},
			reopen: 7 * time.Minute, end: 20 * time.Minute,
			wantMax: punishBelow * 3002 / 720.15, wantLast: 0.85 * 3002 / 720.15,
		},
		{
			// An hour after the server accepted again, the probe looks
			// beyond: from lastMax, slowly, not at twice the send rate.
			name: "60 a minute, the memory runs out",
			n:    60, reopen: time.Minute, climb: 0, end: time.Minute + punishMemory + 10*time.Second,
			wantMax: 1.05 * 61 / 60.15, wantLast: 0.85 * 61 / 60.15, wantMaxBeyond: 1.05 * 61 / 60.15,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			highest, last, beyond := c.run(t)
			if highest > c.wantMax+1e-9 {
				t.Errorf("highest rate %.4f/s, want at most %.4f/s", highest, c.wantMax)
			}
			if last < c.wantLast {
				t.Errorf("rate at the end %.4f/s, want at least %.4f/s", last, c.wantLast)
			}
			if c.wantMaxBeyond > 0 && beyond > c.wantMaxBeyond {
				t.Errorf("rate once the memory ran out %.4f/s, want at most %.4f/s", beyond, c.wantMaxBeyond)
			}
		})
	}
}

// A quota spent before the client came refuses its first request, and
// admits nothing until its window ends: that cycle measured the wait, not
// a capacity. Taken as one, the floor was the remembered rate, climbed back
// to over two minutes (a fan-out of 200 onto a spent window of 300 got 68
// through in three minutes); the probe is unlimited again, and the next
// throttle starts the first event afresh, from its own burst.
func TestACycleThatAdmittedNothingMeasuresNoCapacity(t *testing.T) {
	p := New(0.5, 0.9)
	p.Meter(t0, false) // the first response: refused
	p.Throttle(t0, 0, 50*time.Millisecond)
	reopened := t0.Add(45 * time.Second)
	p.Meter(reopened, true) // the window ended: the look is accepted
	if r := p.Grow(reopened.Add(time.Second)); !math.IsInf(r, 1) || p.Engaged() {
		t.Fatalf("after a cycle that admitted nothing the rate is %v (engaged %v), want unlimited", r, p.Engaged())
	}
	// The next throttle, after a burst of 300 in a second, remembers what
	// that burst measured.
	now := meter(p, reopened, time.Second, 300)
	p.Throttle(now, 0, 50*time.Millisecond)
	p.Meter(now.Add(time.Minute), true)
	if r := p.Grow(now.Add(time.Minute)); r <= 1 {
		t.Errorf("after a burst of 300 a second, the probe climbs from %v a second, want more than the floor", r)
	}
}

// One request the server admitted in the cycle is a measurement: the
// probe keeps it.
func TestACycleThatAdmittedSomethingIsMeasured(t *testing.T) {
	p := New(0.5, 0.9)
	p.Meter(t0, true)
	p.Meter(t0.Add(time.Millisecond), false)
	p.Throttle(t0.Add(time.Millisecond), 0, 50*time.Millisecond)
	reopened := t0.Add(45 * time.Second)
	p.Meter(reopened, true)
	if !p.Engaged() || math.IsInf(p.Grow(reopened), 1) {
		t.Fatal("a cycle with a success was forgotten")
	}
}

// The successes between two ends a server's refusals stated, over the time
// between those ends, are what it frees per second: each case is a history
// of answers (a success, or a refusal stating a wait) and the refill read
// from it.
func TestRefusalsStatingWaitsMeasureTheRefill(t *testing.T) {
	type answer struct {
		at   time.Duration // from t0
		wait time.Duration // 0: a success
	}
	refused := func(at, wait time.Duration) answer { return answer{at, wait} }
	ok := func(at time.Duration) answer { return answer{at: at} }
	oks := func(from, every time.Duration, n int) []answer {
		var as []answer
		for i := range n {
			as = append(as, ok(from+time.Duration(i)*every))
		}
		return as
	}
	seq := func(parts ...[]answer) []answer {
		var as []answer
		for _, p := range parts {
			as = append(as, p...)
		}
		return as
	}
	// oneAtEachEnd: refused at 0 until first, then n successes, each
	// right after the end the refusal before it stated and followed by a
	// refusal stating the next end, every apart.
	oneAtEachEnd := func(first, every time.Duration, n int) []answer {
		as := []answer{refused(0, first)}
		for i := range n {
			end := first + time.Duration(i)*every
			as = append(as, ok(end+100*time.Millisecond), refused(end+200*time.Millisecond, every-200*time.Millisecond))
		}
		return as
	}
	for _, c := range []struct {
		name    string
		answers []answer
		want    float64
	}{{
		name:    "none before two ends",
		answers: seq([]answer{refused(0, 86*time.Second)}, oks(86*time.Second, 86*time.Second, 8)),
		want:    0,
	}, {
		// A daily window of 1,000 frees one every 86.4 s: each taken by
		// the request sent when the last refusal's pause ends, the next
		// one refused with the wait for the one after. Eight of them
		// between the end at 86 s and the end stated after the eighth.
		name:    "a slow refill",
		answers: oneAtEachEnd(86*time.Second, 86400*time.Millisecond, 8),
		want:    8 / (86 + 8*86.4 - 86),
	}, {
		// A client that went idle between two ends: its eight requests
		// over four hours succeed, and say nothing of the server.
		name: "idle between ends",
		answers: seq([]answer{refused(0, 10*time.Second), ok(11 * time.Second)},
			oks(30*time.Minute, 30*time.Minute, 8), []answer{refused(5*time.Hour, 10*time.Second)}),
		want: 0,
	}, {
		// The refusals of one spell state the same end, rounded up to a
		// whole second by each: the earliest is kept.
		name: "a spell's earliest end",
		answers: seq([]answer{refused(0, 11*time.Second), refused(10*time.Millisecond, 10*time.Second), refused(20*time.Millisecond, 11*time.Second)},
			oks(10*time.Second, time.Second, 10), []answer{refused(20*time.Second, time.Second)}),
		want: 10 / (21.0 - 10.01),
	}, {
		// Answers arrive in any order: a success read between two
		// refusals of one spell, their ends 10 ms apart, read as a
		// hundred a second. Too few successes over too short a time
		// measure nothing; they count towards the next measure.
		name: "too short to measure",
		answers: seq([]answer{refused(0, time.Second), ok(5 * time.Millisecond), refused(10*time.Millisecond, time.Second)},
			oks(time.Second, 100*time.Millisecond, 7), []answer{refused(1700*time.Millisecond, 5*time.Second)}),
		want: 0,
	}, {
		name: "measured once long enough",
		answers: seq([]answer{refused(0, time.Second), ok(5 * time.Millisecond), refused(10*time.Millisecond, time.Second)},
			oks(time.Second, time.Second, 9), []answer{refused(10*time.Second, 2*time.Second)}),
		want: 10 / (12.0 - 1),
	}} {
		t.Run(c.name, func(t *testing.T) {
			p := New(0.5, 0.9)
			for _, a := range c.answers {
				now := t0.Add(a.at)
				if a.wait == 0 {
					p.Meter(now, true)
					continue
				}
				p.Meter(now, false)
				p.Refused(now, a.wait)
			}
			if math.Abs(p.refill-c.want) > 1e-9 {
				t.Errorf("refill %.6f a second, want %.6f", p.refill, c.want)
			}
		})
	}
}

// Below a refill the server's stated waits measured, the cut is to 0.9 of
// it and the climb back takes probeCycleFactor requests at it, however
// slow: a daily window's cycle of two minutes probed past its refill (one
// request every 86 s) every cycle. A server that punishes trips keeps its
// own measure (Punished).
func TestAStatedRefillBoundsTheRateAndItsCycle(t *testing.T) {
	p := New(0.5, 0.9)
	p.refill = 1000 / 86400.0
	now := meter(p, t0, time.Second, 30)
	p.Throttle(now, 0, 50*time.Millisecond)
	if want := 0.9 * p.refill; math.Abs(p.limit-want) > 1e-9 {
		t.Errorf("cut to %v a second, want %v (the safety factor 0.9 of the refill, below the floor of 0.5)", p.limit, want)
	}
	longest := func() float64 { // K stretched for more throttles than any cycle holds
		p.k = 0
		p.stretch(1e9, math.Inf(1))
		return p.k
	}
	if k := longest(); k != probeCycleFactor/p.refill {
		t.Errorf("longest cycle %v s, want %v", k, probeCycleFactor/p.refill)
	}
	p.punished = true
	if _, _, r := p.bounds(); r != 0 || longest() != probeMaxCycle.Seconds() {
		t.Error("a punished server's limit is its own measure")
	}
}

// The cut below a refill the server's waits state is the limiter's safety
// factor, not a constant: a client that spends 0.8 of a stated quota keeps
// to 0.8 of a stated refill too.
func TestTheRefillCutFollowsTheSafetyFactor(t *testing.T) {
	p := New(0.5, 0.8)
	p.refill = 1000 / 86400.0
	p.Throttle(meter(p, t0, time.Second, 30), 0, 50*time.Millisecond)
	if want := 0.8 * p.refill; math.Abs(p.limit-want) > 1e-9 {
		t.Errorf("cut to %v a second, want %v", p.limit, want)
	}
}
