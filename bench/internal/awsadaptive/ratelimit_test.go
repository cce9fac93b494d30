package awsadaptive

import (
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a manual clock starting on a whole second, so the half-second
// measurement buckets fall where the tests expect.
type clock struct{ t time.Time }

func newClock() *clock                   { return &clock{time.Unix(1_700_000_000, 0)} }
func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// fastClock runs 1000 times faster than real time, so the limiter's waits
// (real sleeps in Transport) take milliseconds.
func fastClock() func() time.Time {
	start := time.Now()
	return func() time.Time { return start.Add(1000 * time.Since(start)) }
}

// send records n successful attempts spread evenly over d.
func send(a *RateLimit, c *clock, n int, d time.Duration, throttled bool) {
	for range n {
		c.advance(d / time.Duration(n))
		a.Update(throttled)
	}
}

func TestTokenBucketIsOffUntilTheFirstThrottle(t *testing.T) {
	c := newClock()
	a := NewRateLimit(c.now)
	send(a, c, 100, time.Second, false)
	for range 1000 {
		ok, _ := a.AcquireToken(1)
		if !ok {
			t.Fatal("AcquireToken refused before any throttle; want no limit")
		}
	}
	if a.State().Enabled {
		t.Error("token bucket enabled without a throttle")
	}
}

func TestThrottleCutsTheRateToBetaTimesTheMeasuredRate(t *testing.T) {
	c := newClock()
	a := NewRateLimit(c.now)
	// 10 attempts per half second: the EWMA converges on 20/s.
	send(a, c, 200, 10*time.Second, false)
	measured := a.State().Measured
	near(t, "measured rate", measured, 20, 0.5)

	c.advance(10 * time.Millisecond)
	a.Update(true)
	st := a.State()
	if !st.Enabled {
		t.Error("the throttle did not enable the token bucket")
	}
	near(t, "lastMax (= measured: the bucket was off)", st.LastMax, measured, 1e-9)
	near(t, "fill rate", st.FillRate, 0.7*measured, 1e-9)

	// A second throttle uses min(measured, fill rate).
	c.advance(10 * time.Millisecond)
	a.Update(true)
	near(t, "fill rate after a second throttle", a.State().FillRate, 0.7*0.7*measured, 1e-9)
}

func TestSuccessFollowsTheCubicCurveBackToLastMax(t *testing.T) {
	c := newClock()
	a := NewRateLimit(c.now)
	send(a, c, 400, 10*time.Second, false) // measured ≈ 40/s
	a.Update(true)
	st := a.State()
	w := math.Cbrt(st.LastMax * (1 - beta) / scaleConstant)

	// Sending on at 40/s, at t = W after the throttle the curve is back at
	// lastMax (the 2× measured cap, ~80/s, is above it).
	n := int(40 * w)
	send(a, c, n, time.Duration(w*float64(time.Second)), false)
	near(t, "fill rate at t = W", a.State().FillRate, st.LastMax, 0.5)
	// Right after the throttle it was below: C·(0−W)³ + lastMax = β·lastMax.
	near(t, "cubic at t = 0", scaleConstant*math.Pow(-w, 3)+st.LastMax, beta*st.LastMax, 1e-9)
}

func TestNewRateIsCappedAtTwiceTheMeasuredRate(t *testing.T) {
	c := newClock()
	a := NewRateLimit(c.now)
	send(a, c, 40, 10*time.Second, false) // 2/s
	a.Update(true)
	c.advance(time.Minute) // the cubic term alone would allow ~86 000/s
	a.Update(false)
	st := a.State()
	near(t, "fill rate", st.FillRate, 2*st.Measured, 1e-9)
}

func TestFillRateNeverDropsBelowTheFloorAndABucketStillHoldsOneToken(t *testing.T) {
	c := newClock()
	a := NewRateLimit(c.now)
	send(a, c, 4, 2*time.Second, false)
	for range 20 {
		a.Update(true)
	}
	near(t, "fill rate", a.State().FillRate, minFillRate, 0)
	// At 0.5/s a token takes two seconds, and it can be held.
	ok, wait := a.AcquireToken(1)
	for !ok {
		c.advance(wait)
		ok, wait = a.AcquireToken(1)
	}
	ok, wait = a.AcquireToken(1)
	if ok || wait != 2*time.Second {
		t.Errorf("AcquireToken on an empty bucket at the floor = %v, %v; want false, 2s", ok, wait)
	}
}

func TestTransportRetriesThrottlesAndSlowsDown(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "3600") // ignored, as by the SDK
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	tr := NewTransport(srv.Client().Transport)
	tr.MaxBackoff = time.Millisecond
	tr.Limit = NewRateLimit(fastClock())
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || calls.Load() != 2 {
		t.Errorf("status %d after %d calls; want 200 after 2 (one retry)", resp.StatusCode, calls.Load())
	}
	if !tr.Limit.State().Enabled {
		t.Error("the throttle did not switch the token bucket on")
	}
}

func TestTransportGivesUpAfterMaxAttempts(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	tr := NewTransport(srv.Client().Transport)
	tr.MaxBackoff = time.Millisecond
	tr.Limit = NewRateLimit(fastClock()) // the 0.5/s floor would make each retry wait 2 s
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || calls.Load() != DefaultMaxAttempts {
		t.Errorf("status %d after %d calls; want the last 429 handed back after %d", resp.StatusCode, calls.Load(), DefaultMaxAttempts)
	}
}

func near(t *testing.T, what string, got, want, delta float64) {
	t.Helper()
	if math.Abs(got-want) > delta {
		t.Errorf("%s = %v, want %v ± %v", what, got, want, delta)
	}
}

// A deficit smaller than a nanosecond's refill still asks for a wait: with a
// clock that moves only when the caller sleeps, "wait 0" would spin.
func TestAcquireTokenNeverSaysWaitZeroWhenItRefuses(t *testing.T) {
	c := newClock()
	a := NewRateLimit(c.now)
	send(a, c, 4, 2*time.Second, false)
	a.Update(true)
	a.AcquireToken(0) // refill now
	a.tokens = 1 - 1e-12
	ok, wait := a.AcquireToken(1)
	if ok || wait <= 0 {
		t.Fatalf("AcquireToken with a tiny deficit = %v, %v; want false and a positive wait", ok, wait)
	}
	c.advance(wait)
	if ok, _ := a.AcquireToken(1); !ok {
		t.Errorf("after waiting %v the token is still not there", wait)
	}
}
