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
	p := New(0.5)
	meter(p, t0, 10*time.Second, 1000)
	if !math.IsInf(p.Grow(t0.Add(10*time.Second)), 1) || p.Engaged() {
		t.Fatal("a server that never throttles is never slowed")
	}
}

func TestAThrottleCutsToBetaOfWhatWasSentOnceAnEvent(t *testing.T) {
	p := New(0.5)
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
	p := New(0.5)
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
	p := New(2)
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
