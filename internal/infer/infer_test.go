package infer

import (
	"testing"
	"time"

	"github.com/pacer-go/pacer/internal/quota"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInferredCountsAWindowFromItsSuccessesAndItsRefusal(t *testing.T) {
	var m Model
	t0 := time.Unix(1000, 0)
	for i := range 10 {
		_, ok := m.Observe(t0.Add(time.Duration(i)*time.Millisecond), 200, 0)
		assert.False(t, ok, "nothing known before the first refusal")
	}
	q, ok := m.Observe(t0.Add(20*time.Millisecond), 429, 5*time.Second)
	require.True(t, ok)
	assert.Equal(t, quota.Report{Limit: 10, Reset: t0.Add(5020 * time.Millisecond)}, q)

	// Answers to requests the closed window counted, arriving late.
	q, _ = m.Observe(t0.Add(25*time.Millisecond), 200, 0)
	assert.Equal(t, 11.0, q.Limit, "a late success was the closed window's")
	assert.Zero(t, q.Remaining, "closed until the stated end")
	q, _ = m.Observe(t0.Add(30*time.Millisecond), 429, 6*time.Second)
	assert.Equal(t, t0.Add(5020*time.Millisecond), q.Reset, "the earliest stated end of one spell")

	// The next window: counted down from the limit, to a predicted end.
	q, ok = m.Observe(t0.Add(5100*time.Millisecond), 200, 0)
	require.True(t, ok)
	assert.Equal(t, 10.0, q.Remaining)
	assert.True(t, q.Reset.After(t0.Add(5100*time.Millisecond)))
}

func TestInferredLearnsTheWindowLengthInWholeSeconds(t *testing.T) {
	m := Model{whole: true, stated: time.Unix(0, 0)}
	m.learnWindow(60*time.Second+700*time.Millisecond, false, 0)
	assert.Equal(t, 61*time.Second, m.window, "rounded: both ends are whole seconds late")
	m.learnWindow(122*time.Second, false, 0)
	assert.Equal(t, 61*time.Second, m.window, "two windows, one ended without a refusal")
	m.learnWindow(30*time.Second, false, 0)
	assert.Equal(t, 30*time.Second, m.window, "a new length")

	sub := Model{}
	sub.learnWindow(1500*time.Millisecond, false, 0)
	assert.Equal(t, 1500*time.Millisecond, sub.window, "sub-second Retry-After: not rounded")
}

func TestInferredRefusalOfAPredictedWindowKeepsTheLimit(t *testing.T) {
	m := Model{limit: 100, whole: true, start: time.Unix(0, 0), stated: time.Unix(10, 0), reset: time.Unix(10, 0), guess: 9 * time.Second}
	now := time.Unix(19, 100)
	_, ok := m.Observe(now, 200, 0) // the predicted window (at 19 s) begins
	require.True(t, ok)
	require.True(t, m.predicted)
	q, ok := m.Observe(now, 429, time.Second)
	require.True(t, ok)
	assert.Equal(t, 100.0, q.Limit, "the prediction was early, not the limit wrong")
	assert.Equal(t, 10*time.Second, m.window, "and the length is learned from it")
	assert.False(t, m.off)
}

func TestInferredGivesUpOnAWindowThatHoldsLessThanHalf(t *testing.T) {
	m := Model{limit: 100, whole: true, start: time.Unix(0, 0), stated: time.Unix(5, 0), reset: time.Unix(5, 0), guess: 5 * time.Second}
	now := time.Unix(5, 10)
	m.Observe(now, 200, 0)
	_, ok := m.Observe(now, 429, time.Second)
	assert.False(t, ok)
	assert.True(t, m.off, "a window after a stated end that held 1 of 100 is not a fixed window")
}

// A 1 s window of 5, its Retry-After in whole seconds (rounded up): the
// first guess (0.5 s) ends early, and its refusal states an end 1.51 s
// after the first. That is one window, not three of the guess: the guess
// was just shown short. Learned as 0.5 s, every other window refused its
// look until the model gave the server up (TestZeroConfigPacesEachHostSeparately
// lost a request to four refusals in a row, about once in 150 runs).
func TestInferredEarlyRefusalOfAGuessedWindowIsOneWindow(t *testing.T) {
	var m Model
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	for range 5 {
		m.Observe(at(0), 200, 0)
	}
	_, ok := m.Observe(at(0), 429, time.Second)
	require.True(t, ok)
	require.Equal(t, 500*time.Millisecond, m.guess, "the first guess: half the time to the end")

	// The window that began at the stated end (1 s), looked at late.
	for range 5 {
		q, ok := m.Observe(at(1410*time.Millisecond), 200, 0)
		require.True(t, ok)
		assert.Equal(t, at(1500*time.Millisecond), q.Reset, "predicted by the guess")
	}
	// The guess's end was early: the server's window runs to 2 s, and
	// says so rounded up to a whole second.
	q, ok := m.Observe(at(1510*time.Millisecond), 429, time.Second)
	require.True(t, ok)
	assert.False(t, m.off)
	assert.Equal(t, time.Second, q.Window, "one window between the two stated ends, "+
		"1.51 s apart in whole seconds rounded up: a window of one second")
	assert.Equal(t, 5.0, q.Limit, "the prediction was early, not the limit wrong")

	// Each later window is spent at its predicted start, with no refusal.
	for _, start := range []time.Duration{2520 * time.Millisecond, 3520 * time.Millisecond, 4520 * time.Millisecond} {
		for i := range 5 {
			q, ok := m.Observe(at(start), 200, 0)
			require.True(t, ok)
			assert.Equal(t, float64(4-i), q.Remaining)
		}
	}
	assert.False(t, m.off)
}

// A server whose windows hold between half and all of what the last one
// held (one that frees its quota as it goes, read as fixed windows) refuses
// early in every other window. No single window is a misfit, so the model
// gives the server up to the probe once such surprises pass maxSurprises
// and come in more than a quarter of the windows. A fixed window refused
// at its limit every time is no surprise.
func TestInferredGivesUpOnWindowsThatKeepRefusingEarly(t *testing.T) {
	for _, c := range []struct {
		held []int
		off  bool
	}{
		{held: []int{10, 7, 10, 7, 10, 7, 10}, off: true},
		{held: []int{10, 10, 10, 10, 10, 10, 10}, off: false},
	} {
		var m Model
		t0 := time.Unix(1000, 0)
		for w, n := range c.held {
			at := t0.Add(time.Duration(w) * 10 * time.Second)
			for range n {
				m.Observe(at, 200, 0)
			}
			m.Observe(at, 429, 10*time.Second) // the window ends as the next begins
		}
		assert.Equal(t, c.off, m.Off(), "windows holding %v", c.held)
		if c.off {
			assert.Equal(t, maxSurprises, m.surprises, "given up at the third early refusal")
		}
	}
}
