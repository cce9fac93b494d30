package quota

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A quota read as one that refills, refused with nothing left and its reset
// 40 s ahead, waits for that reset rather than looking every second: the
// refusal says when it has room, whatever the kind read (R46). A fixed
// window that others empty at its start reads as no jump, and a look a
// second into it would meet a refusal each time.
func TestARefusalsResetHoldsAQuotaThatRefills(t *testing.T) {
	w := New(Config{Name: "requests", Safety: 0.9, MaxDelay: time.Hour})
	w.Observe(Report{Limit: 600, Remaining: 10, Reset: reset(30 * time.Second)}, t0, Seen{Horizon: horizon})
	w.kind = Sliding
	now := t0.Add(5 * time.Second)
	w.Observe(Report{Limit: 600, Remaining: 0, Reset: reset(45 * time.Second)}, now, Seen{Horizon: horizon, Refused: true})
	st, ok := w.Advance(now, 0, 1)
	require.True(t, ok)
	assert.Equal(t, reset(45*time.Second).Add(RollGuard), st.Next, "the refusal's reset")
}

// At a boundary that leaves room to tell, a look answered with nothing left
// and no jump says nothing of the kind: others may have emptied the new
// window before it (R19). Something left and no jump is a sliding window.
func TestNothingLeftAtAResetIsNoSlidingWindow(t *testing.T) {
	for _, c := range []struct {
		remaining float64
		want      Kind
	}{{0, Unknown}, {5, Sliding}} {
		w := New(Config{Name: "requests", Safety: 0.9, MaxDelay: time.Hour})
		w.Observe(Report{Limit: 600, Remaining: 100, Reset: reset(time.Minute)}, t0, Seen{Horizon: horizon})
		now := reset(time.Minute).Add(2 * RollGuard)
		st, ok := w.Advance(now, 0, 1)
		require.True(t, ok)
		require.True(t, st.Rolled)
		w.Observe(Report{Limit: 600, Remaining: c.remaining, Reset: reset(2 * time.Minute)}, now.Add(horizon), Seen{Horizon: horizon, Admitted: 1, Admissions: 1, Seq: 1})
		assert.Equal(t, c.want, w.kind, "a look answered %v at the reset", c.remaining)
	}
}
