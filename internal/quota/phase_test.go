package quota

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A server whose fixed windows of 5 s start 0.7 s past the whole second
// states each window's reset rounded up to the second, read with a clock
// offset bounded from Date headers: late by the second's fraction at first
// (0.72 s), by the round trip once a response arrives just past a whole
// second (0.03 s). Across that tightening, consecutive windows' resets read
// 4.31 s apart. A length learnt from that one advance bounded the window's
// end 0.33 s early (learnPhase: its first response + the length), and the
// look at the roll met a 429; the length must be confirmed by a second
// advance first, and until then the stated reset stands.
func TestPhaseWaitsForAConfirmedWindowLength(t *testing.T) {
	w := requests()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	obs := func(now, rem, reset float64) {
		w.Observe(Report{Limit: 100, Remaining: rem, Reset: at(reset)}, at(now), Seen{Horizon: horizon})
	}
	// Window [0.7, 5.7): reset 6, read late by 0.72 s, by 100 responses
	// (their resets agree: the jitter assumed at first decays).
	for i := range 100 {
		obs(0.72+float64(i)/1000, float64(99-i), 6.72)
	}
	w.roll(at(6.73), 0, 1, 100)
	// Window [5.7, 10.7): reset 11, read late by 0.72 s, then by 0.03 s.
	obs(6.87, 99, 11.72)
	obs(7.03, 0, 11.03)
	w.roll(at(11.04), 0, 1, 200)
	// Window [10.7, 15.7): reset 16, read late by 0.03 s.
	obs(11.06, 99, 16.03)
	assert.False(t, w.win.reset.Before(at(15.7)), "the window ends at 15.7 s; believed to end at %v",
		w.win.reset.Sub(t0))
	// Window [15.7, 20.7): reset 21, read late by 0.03 s. 5 s on from the
	// last does not confirm 4.31 s: the stated reset stands, and the
	// length is learnt again.
	obs(15.73, 0, 16.03) // the last response of the window before
	w.roll(at(16.04), 0, 1, 300)
	obs(16.06, 99, 21.03)
	assert.Equal(t, at(21.03), w.win.reset)
	assert.Equal(t, 5*time.Second, w.win.length)
	assert.False(t, w.win.cadenced)
	// Window [20.7, 25.7): 5 s on again confirms it.
	w.roll(at(21.04), 0, 1, 400)
	obs(21.06, 99, 26.03)
	assert.True(t, w.win.cadenced)
	assert.Equal(t, at(26.03), w.win.reset, "bounded by the first response (26.06 s), the stated is earlier")
}
