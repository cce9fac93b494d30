package pacer

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/internal/apisim"
)

// A server that states no quota and answers 429 with a Retry-After when its
// fixed window is spent: after the first window (whose refusals are the
// requests in flight when it ran out), the model spends each window to the
// last request and meets at most a few refusals while it learns the
// windows' length, on minute and ten-second windows, at any latency.
func TestAdaptiveLearnsAFixedWindowFromRetryAfterAlone(t *testing.T) {
	for _, w := range []struct {
		window time.Duration
		limit  int
	}{{time.Minute, 600}, {10 * time.Second, 50}, {5 * time.Second, 100}} {
		for _, latency := range []time.Duration{0, 20 * time.Millisecond, 200 * time.Millisecond} {
			t.Run(fmt.Sprintf("window=%v/latency=%v", w.window, latency), func(t *testing.T) {
				t.Parallel()
				sc := scenario{
					server: apisim.Config{Style: apisim.StyleRetryAfter, Window: w.window, Limit: w.limit, Latency: latency},
					run:    10 * time.Minute, callers: 32,
				}
				o := drive(t, sc, AdaptiveConfig{Key: "sim"})
				t.Logf("%v", o)
				assert.LessOrEqual(t, o.throttled, sc.callers+3, "429s: the first window's requests in flight, and a few while learning")
				assert.GreaterOrEqual(t, o.goodput, 0.97, "goodput / capacity")
				assert.Equal(t, ModeHeaders.String(), o.mode, "the inferred quota paces it")
			})
		}
	}
}

// Servers that free their quota as they go (a token bucket answering with
// the time to its next token, a sliding window still weighed down by the
// last one) do not fit the model: it gives up and the probe paces them,
// within the probe's targets. (The sliding window lost 0.98 -> 0.70 of its
// quota when the probe's first look after the hand-over waited a "round
// trip" estimated over the long pause before it: 40 s.)
func TestAdaptiveHandsAServerThatRefillsAsItGoesToTheProbe(t *testing.T) {
	for _, sv := range []apisim.Config{
		{Algorithm: apisim.TokenBucket, Window: 10 * time.Second, Limit: 50},
		{Algorithm: apisim.SlidingWindow, Window: time.Minute, Limit: 600},
	} {
		for _, latency := range []time.Duration{0, 20 * time.Millisecond, 200 * time.Millisecond} {
			t.Run(fmt.Sprintf("%s/window=%v/latency=%v", sv.Algorithm, sv.Window, latency), func(t *testing.T) {
				t.Parallel()
				server := sv // each subtest its own copy: they run in parallel
				server.Style, server.Latency = apisim.StyleRetryAfter, latency
				sc := scenario{server: server, run: 10 * time.Minute, callers: 32}
				o := drive(t, sc, AdaptiveConfig{Key: "sim"})
				t.Logf("%v", o)
				assert.Equal(t, ModeProbing.String(), o.mode)
				assert.LessOrEqual(t, float64(o.throttled), 0.02*float64(o.requests), "share of 429s")
				assert.GreaterOrEqual(t, o.goodput, 0.9, "goodput / capacity")
			})
		}
	}
}

func TestInferredCountsAWindowFromItsSuccessesAndItsRefusal(t *testing.T) {
	var m inferred
	t0 := time.Unix(1000, 0)
	for i := range 10 {
		_, ok := m.observe(t0.Add(time.Duration(i)*time.Millisecond), 200, 0)
		assert.False(t, ok, "nothing known before the first refusal")
	}
	q, ok := m.observe(t0.Add(20*time.Millisecond), 429, 5*time.Second)
	require.True(t, ok)
	assert.Equal(t, Quota{Name: inferredQuota, Limit: 10, Reset: t0.Add(5020 * time.Millisecond)}, q)

	// Answers to requests the closed window counted, arriving late.
	q, _ = m.observe(t0.Add(25*time.Millisecond), 200, 0)
	assert.Equal(t, 11.0, q.Limit, "a late success was the closed window's")
	assert.Zero(t, q.Remaining, "closed until the stated end")
	q, _ = m.observe(t0.Add(30*time.Millisecond), 429, 6*time.Second)
	assert.Equal(t, t0.Add(5020*time.Millisecond), q.Reset, "the earliest stated end of one spell")

	// The next window: counted down from the limit, to a predicted end.
	q, ok = m.observe(t0.Add(5100*time.Millisecond), 200, 0)
	require.True(t, ok)
	assert.Equal(t, 10.0, q.Remaining)
	assert.True(t, q.Reset.After(t0.Add(5100*time.Millisecond)))
}

func TestInferredLearnsTheWindowLengthInWholeSeconds(t *testing.T) {
	m := inferred{whole: true, stated: time.Unix(0, 0)}
	m.learnWindow(60*time.Second + 700*time.Millisecond)
	assert.Equal(t, 61*time.Second, m.window, "rounded: both ends are whole seconds late")
	m.learnWindow(122 * time.Second)
	assert.Equal(t, 61*time.Second, m.window, "two windows, one ended without a refusal")
	m.learnWindow(30 * time.Second)
	assert.Equal(t, 30*time.Second, m.window, "a new length")

	sub := inferred{}
	sub.learnWindow(1500 * time.Millisecond)
	assert.Equal(t, 1500*time.Millisecond, sub.window, "sub-second Retry-After: not rounded")
}

func TestInferredRefusalOfAPredictedWindowKeepsTheLimit(t *testing.T) {
	m := inferred{limit: 100, whole: true, start: time.Unix(0, 0), stated: time.Unix(10, 0), reset: time.Unix(10, 0), guess: 9 * time.Second}
	now := time.Unix(19, 100)
	_, ok := m.observe(now, 200, 0) // the predicted window (at 19 s) begins
	require.True(t, ok)
	require.True(t, m.predicted)
	q, ok := m.observe(now, 429, time.Second)
	require.True(t, ok)
	assert.Equal(t, 100.0, q.Limit, "the prediction was early, not the limit wrong")
	assert.Equal(t, 10*time.Second, m.window, "and the length is learned from it")
	assert.False(t, m.off)
}

func TestInferredGivesUpOnAWindowThatHoldsLessThanHalf(t *testing.T) {
	m := inferred{limit: 100, whole: true, start: time.Unix(0, 0), stated: time.Unix(5, 0), reset: time.Unix(5, 0), guess: 5 * time.Second}
	now := time.Unix(5, 10)
	m.observe(now, 200, 0)
	_, ok := m.observe(now, 429, time.Second)
	assert.False(t, ok)
	assert.True(t, m.off, "a window after a stated end that held 1 of 100 is not a fixed window")
}

func TestAdaptiveDropsTheInferredQuotaWhenTheServerStatesOne(t *testing.T) {
	a := NewAdaptive(AdaptiveConfig{Key: "k"})
	admit(t, a, 0)
	a.observe(200, Info{})
	admit(t, a, 0)
	a.observe(429, Info{RetryAfter: time.Second})
	require.NotNil(t, a.book.Find(inferredQuota), "a refusal with a Retry-After and no quota: the model's window")
	a.observe(200, quotaInfo(10, 5, time.Minute))
	assert.Nil(t, a.book.Find(inferredQuota), "a stated quota replaces it")
	assert.True(t, a.infer.off)
}
