package concurrency

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

var cfg = Config{Min: 1, Max: 256, Initial: 16}

const ms = time.Millisecond

// window is a window of answers at load inUse, whose medians are median
// (the loaded half) and least (the other), each known to within err.
func window(inUse float64, median, least, err time.Duration) Window {
	return Window{Served: 64, Median: median, Least: least, MedianErr: err, LeastErr: err, MeanInUse: inUse, Peak: int(inUse)}
}

func TestDecide(t *testing.T) {
	steady := State{Limit: 32, Floor: 100 * ms, Knee: 20}
	tests := []struct {
		why        string
		st         State
		w          Window
		wantLimit  float64
		wantReason Reason
	}{
		{why: "rule 5: at the floor with every slot in use, slow start doubles",
			st: State{Limit: 16, Floor: 100 * ms, SlowStart: true}, w: window(16, 100*ms, 100*ms, ms), wantLimit: 32, wantReason: Headroom},
		{why: "rule 5: with nothing learnt that bounds it, it doubles",
			st: State{Limit: 16, Floor: 100 * ms}, w: window(16, 100*ms, 100*ms, ms), wantLimit: 32, wantReason: Headroom},
		{why: "rule 5: after slow start, well past the knee a cut found, it grows by a tenth",
			st: steady, w: window(32, 100*ms, 100*ms, ms), wantLimit: 32 * 1.1, wantReason: Headroom},
		{why: "rule 5: a latency above the floor's upper bound within one standard error of its own raises it",
			st: steady, w: window(32, 101*ms, 100*ms, ms), wantLimit: 32 * 1.1, wantReason: Headroom},
		{why: "rule 5: one more than a standard error above the floor's upper bound does not",
			st: steady, w: window(32, 102*ms, 100*ms, ms), wantLimit: 32},
		{why: "rule 5: just past the knee a cut found it grows a slot at a time",
			st: State{Limit: 33, Floor: 100 * ms, Knee: 32}, w: window(33, 100*ms, 100*ms, ms), wantLimit: 34, wantReason: Headroom},
		{why: "rule 5: demand that does not fill the limit does not raise it",
			st: steady, w: Window{Served: 64, Median: 100 * ms, Least: 100 * ms, MeanInUse: 20, Peak: 20}, wantLimit: 32},
		{why: "rule 6: between the bands it holds",
			st: steady, w: window(32, 105*ms, 100*ms, ms), wantLimit: 32},
		{why: "rule 4: twice the floor at 32 in use: the knee is 16, and a little above it",
			st: steady, w: window(32, 200*ms, 200*ms, ms), wantLimit: 16 * (1 + queueSlack), wantReason: Latency},
		{why: "rule 4: a cut goes at most to half the limit in one window",
			st: steady, w: window(32, 800*ms, 800*ms, ms), wantLimit: 16, wantReason: Latency},
		{why: "rule 4: a rise within the median's noise is no queue",
			st: steady, w: window(32, 112*ms, 100*ms, 3*ms), wantLimit: 32},
		{why: "rule 5b: requests a rate limiter held for three quarters of their time: a quarter of the load reaches the server, and the limit falls toward twice that by a tenth of itself",
			st: steady, w: Window{Served: 64, Median: 100 * ms, Least: 100 * ms, MeanInUse: 32, Peak: 32, Held: 0.75}, wantLimit: 32 * (1 - growth), wantReason: Rate},
		{why: "rule 5b: in slow start it falls by up to half, undoing the doubling whose excess the rate limiter held",
			st: State{Limit: 128, Floor: 100 * ms, SlowStart: true}, w: Window{Served: 128, Median: 100 * ms, Least: 100 * ms, MeanInUse: 128, Peak: 128, Held: 0.7}, wantLimit: 128 * 0.3 * 2, wantReason: Rate},
		{why: "rule 5b: but not below half the limit, the window before the doubling's",
			st: State{Limit: 128, Floor: 100 * ms, SlowStart: true}, w: Window{Served: 128, Median: 100 * ms, Least: 100 * ms, MeanInUse: 128, Peak: 128, Held: 0.9}, wantLimit: 64, wantReason: Rate},
		{why: "rule 5b: the server's share and as many again are within a tenth of the limit: it holds",
			st: steady, w: Window{Served: 64, Median: 100 * ms, Least: 100 * ms, MeanInUse: 32, Peak: 32, Held: 0.5}, wantLimit: 32},
		{why: "rule 5: requests a rate limiter held a little do not raise it",
			st: steady, w: Window{Served: 64, Median: 100 * ms, Least: 100 * ms, MeanInUse: 32, Peak: 32, Held: heldMost}, wantLimit: 32},
		{why: "the limit stays within Max",
			st: State{Limit: 200, Floor: 100 * ms, SlowStart: true}, w: window(200, 100*ms, 100*ms, ms), wantLimit: 256, wantReason: Headroom},
		{why: "and within a stated quota",
			st: State{Limit: 20, Floor: 100 * ms, SlowStart: true, Quota: 24}, w: window(20, 100*ms, 100*ms, ms), wantLimit: 24, wantReason: Headroom},
		{why: "a ceiling a shed taught caps growth",
			st: State{Limit: 30, Floor: 100 * ms, Ceiling: 31}, w: window(30, 100*ms, 100*ms, ms), wantLimit: 31, wantReason: Headroom},
	}
	for _, tc := range tests {
		got, r := Decide(tc.st, tc.w, cfg)
		assert.InDelta(t, tc.wantLimit, got.Limit, 1e-9, tc.why)
		assert.Equal(t, tc.wantReason, r, tc.why)
	}
}

func TestDecideLearnsTheFloorFromTheLeastLoadedAnswers(t *testing.T) {
	st, _ := Decide(State{Limit: 16, SlowStart: true}, window(12, 150*ms, 100*ms, 2*ms), cfg)
	assert.Equal(t, 104*ms, st.Floor, "the first window's least loaded median, two standard errors high like any other")
	st, _ = Decide(st, window(12, 150*ms, 90*ms, 2*ms), cfg)
	assert.Equal(t, 94*ms, st.Floor, "a lower one, two standard errors high")
	st2, _ := Decide(st, window(12, 150*ms, 95*ms, 2*ms), cfg)
	assert.Equal(t, 94*ms, st2.Floor, "a higher one does not raise it")
}

// Rule 4a: a cut that took load away without taking latency with it shows
// the floor was read too low; the floor is read again and the cut undone.
func TestALatencyCutThatLeftTheLatencyReadsTheFloorAgain(t *testing.T) {
	st := State{Limit: 32, Floor: 90 * ms}
	st, r := Decide(st, window(32, 110*ms, 110*ms, ms), cfg)
	assert.Equal(t, Latency, r)
	assert.Less(t, st.Limit, 32.0)
	cut := st.Limit
	st, r = Decide(st, window(cut, 110*ms, 109*ms, ms), cfg)
	assert.Equal(t, Headroom, r, "no second cut: the first is undone")
	assert.Equal(t, 32.0, st.Limit)
	assert.Equal(t, 111*ms, st.Floor, "the floor is read again, two standard errors high")
	assert.Zero(t, st.Knee, "the knee it found is forgotten")
}

func TestAShedCutsToBelowTheLoadItMetAndTeachesACeiling(t *testing.T) {
	st, r := OnShed(State{Limit: 64, SlowStart: true}, 41, cfg)
	assert.Equal(t, Overload, r)
	assert.Equal(t, 40.0, st.Limit, "the server had no room for the 41st")
	assert.Equal(t, 40.0, st.Ceiling)
	assert.False(t, st.SlowStart)

	st, _ = OnShed(State{Limit: 20}, 30, cfg)
	assert.Equal(t, 18.0, st.Limit, "at least the multiplicative decrease")

	st, _ = OnShed(State{Limit: 16}, 3, cfg)
	assert.Equal(t, 8.0, st.Limit, "at most halved by one shed")

	// At the ceiling the limit grows past it one slot per ceilingProbe windows.
	st = State{Limit: 40, Floor: 100 * ms, Ceiling: 40}
	for range ceilingProbe - 1 {
		st, r = Decide(st, window(40, 100*ms, 100*ms, ms), cfg)
		assert.Equal(t, None, r)
	}
	st, r = Decide(st, window(40, 100*ms, 100*ms, ms), cfg)
	assert.Equal(t, Headroom, r)
	assert.Equal(t, 41.0, st.Limit)
}

func TestAStatedQuotaCapsTheLimitAtOnce(t *testing.T) {
	st, r := OnQuota(State{Limit: 30}, 12, cfg)
	assert.Equal(t, Quota, r)
	assert.Equal(t, 12.0, st.Limit)
	st, r = OnQuota(State{Limit: 8}, 12, cfg)
	assert.Equal(t, None, r, "a quota above the limit moves nothing")
	assert.Equal(t, 8.0, st.Limit)
}

// sample is an answer to a request sent at sent (ms from t0) with inUse
// slots in use, served in rtt.
func sample(t0 time.Time, sent, rtt time.Duration, inUse int, o Outcome) Sample {
	return Sample{Start: t0.Add(sent), Sent: t0.Add(sent), Done: t0.Add(sent + rtt), InUse: inUse, Outcome: o}
}

func TestLimitJudgesTheFirstRoundAloneAndCutsAnOvershoot(t *testing.T) {
	l := New(cfg)
	t0 := time.Unix(0, 0)
	// The initial 16 fill one at a time from a server whose knee is 8:
	// the i-th takes 100ms·max(1, i/8).
	var limit int
	var r Reason
	for i := 1; i <= 16; i++ {
		rtt := time.Duration(float64(100*ms) * max(1, float64(i)/8))
		limit, r = l.Observe(sample(t0, 0, rtt, i, Served))
	}
	assert.Equal(t, Latency, r, "the first round shows the queue")
	assert.InDelta(t, 8, limit, 1.5, "near the knee")
}

func TestLimitIgnoresAnswersOfAnOlderLimitAndShedsAlreadyAnswered(t *testing.T) {
	l := New(cfg)
	t0 := time.Unix(0, 0)
	limit, r := l.Observe(sample(t0, 0, 10*ms, 20, Shed))
	assert.Equal(t, Overload, r)
	assert.Equal(t, 14, limit, "min(16·0.9, 20−1)")
	limit, r = l.Observe(sample(t0, 5*ms, 10*ms, 20, Shed))
	assert.Equal(t, None, r, "sent before the cut: already answered")
	assert.Equal(t, 14, limit, "unchanged")
	_, r = l.Observe(sample(t0, 0, 10*ms, 1, Ignored))
	assert.Equal(t, None, r)
}

func TestNewPanicsOnAnInvalidConfig(t *testing.T) {
	assert.Panics(t, func() { New(Config{Min: 0, Max: 1, Initial: 1}) })
	assert.Panics(t, func() { New(Config{Min: 2, Max: 1, Initial: 1}) })
	assert.Panics(t, func() { New(Config{Min: 1, Max: 4, Initial: 5}) })
}

func TestReasonNames(t *testing.T) {
	for r, want := range map[Reason]string{None: "none", Headroom: "headroom", Latency: "latency", Overload: "overload", Quota: "quota", Rate: "rate"} {
		assert.Equal(t, want, r.String())
	}
}

// Rule 7: after floorProbe calm windows one window runs at probeShare of
// the limit, and its reading replaces the floor, higher or lower.
func TestAFloorProbeDipsForOneWindowAndReadsTheFloorAgain(t *testing.T) {
	st := State{Limit: 40, Floor: 90 * ms, Knee: 40, Calm: floorProbe - 1}
	st, r := Decide(st, window(40, 95*ms, 95*ms, ms), cfg)
	assert.Equal(t, Probe, r)
	assert.Equal(t, 40*probeShare, st.Limit)
	st, r = Decide(st, window(30, 100*ms, 100*ms, ms), cfg)
	assert.Equal(t, Probe, r, "back")
	assert.Equal(t, 40.0, st.Limit)
	assert.Equal(t, 102*ms, st.Floor, "the probe's reading, two standard errors high, though higher than the floor")
	assert.Zero(t, st.Calm)

	st = State{Limit: 256, Floor: 90 * ms, Calm: floorProbe - 1}
	_, r = Decide(st, window(256, 95*ms, 95*ms, ms), cfg)
	assert.NotEqual(t, Probe, r, "no probe at Max")
}

// Rule 7 at slow start's end: the floor slow start read (the first round's,
// loosely bounded) is read again at the next calm window, at probeShare of
// the limit, and the reading only lowers it.
func TestSlowStartsEndReadsTheFloorAgainBelowTheKnee(t *testing.T) {
	st := State{Limit: 32, Floor: 120 * ms, SlowStart: true}
	st, r := Decide(st, window(32, 240*ms, 240*ms, ms), cfg)
	assert.Equal(t, Latency, r)
	assert.True(t, st.Reread, "slow start ended on a latency cut")
	cut := st.Limit
	st, r = Decide(st, window(cut, 125*ms, 125*ms, ms), cfg)
	assert.Equal(t, Probe, r, "the next calm window dips")
	assert.InDelta(t, cut*probeShare, st.Limit, 1e-9)
	st, r = Decide(st, window(cut*probeShare, 100*ms, 100*ms, ms), cfg)
	assert.Equal(t, Probe, r, "back")
	assert.Equal(t, 102*ms, st.Floor, "the reading below the knee, two standard errors high")
	assert.InDelta(t, 16*102.0/120, st.Knee, 1e-9, "the knee found against the floor read high, down in proportion")
	assert.InDelta(t, st.Knee*(1+queueSlack), st.Limit, 1e-9, "back, to that knee")
	assert.False(t, st.Reread)

	st = State{Limit: 20, Floor: 100 * ms, Reread: true}
	st, _ = Decide(st, window(20, 101*ms, 101*ms, ms), cfg)
	st, _ = Decide(st, window(15, 130*ms, 130*ms, ms), cfg)
	assert.Equal(t, 100*ms, st.Floor, "a reread reading higher does not raise the floor: the limit it dipped from may be past the knee")

	st, _ = OnShed(State{Limit: 64, SlowStart: true}, 50, cfg)
	assert.True(t, st.Reread, "slow start ended on a shed")
}

// Rule 3: the first window's reading is an upper bound like any other's, so
// a first round read low by chance does not hold the limit under the knee.
func TestAFirstRoundReadLowDoesNotHoldTheLimitUnderTheKnee(t *testing.T) {
	// The first round reads the floor 8% low, give or take 4%: its upper
	// bound is above the true 100 ms, and windows at the knee read as such
	// are not queued.
	st, _ := Decide(State{Limit: 16, SlowStart: true}, window(16, 92*ms, 92*ms, 4*ms), cfg)
	assert.Equal(t, 100*ms, st.Floor)
	st.SlowStart = false
	_, r := Decide(st, window(st.Limit, 104*ms, 104*ms, 2*ms), cfg)
	assert.NotEqual(t, Latency, r, "4% over the floor, within the noise, at the knee")
}

// A look at a window before it is full allows earlyConfidence standard
// errors: with up to maxSamples/(2·minSamples) looks, two would close one
// window in ten on noise alone.
func TestAnEarlyLookAllowsMoreNoise(t *testing.T) {
	w := window(24, 1200*ms, 1200*ms, 50*ms) // F·(1+2·queueHigh) = 1160 ms plus 0.8 errors
	assert.True(t, queued(w, 1000*ms, 0, confidence))
	assert.False(t, queued(w, 1000*ms, 2*queueHigh, earlyConfidence))
	w.Median = 1400 * ms // 4.8 errors above it
	assert.True(t, queued(w, 1000*ms, 2*queueHigh, earlyConfidence))
}

// Rule 2: calls granted together reach the server in any order, so a shed
// counts the slots in use when its refusal came if they are more than when
// its call started.
func TestAShedCountsTheSlotsInUseWhenItsRefusalCame(t *testing.T) {
	l := New(Config{Min: 1, Max: 256, Initial: 64})
	t0 := time.Unix(0, 0)
	s := sample(t0, 0, 5*ms, 33, Shed)
	s.Answered = 50
	limit, r := l.Observe(s)
	assert.Equal(t, Overload, r)
	assert.Equal(t, 49, limit, "the server had 49 in progress at most, not 32")
	assert.Equal(t, 49.0, l.State().Ceiling)
}
