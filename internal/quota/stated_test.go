package quota

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A stated quota reports what a server counting the client's requests in
// fixed windows from the first would say.
func TestStatedCountsInFixedWindowsFromTheStart(t *testing.T) {
	t0 := time.Date(2025, 8, 21, 12, 0, 0, 0, time.UTC)
	s := Stated{Limit: 3, Window: time.Minute}
	type step struct {
		at      time.Duration // after t0
		counted bool
		want    Report
		why     string
	}
	at := func(remaining float64, reset time.Duration) Report {
		return Report{Limit: 3, Remaining: remaining, Reset: t0.Add(reset), Window: time.Minute}
	}
	assert.Equal(t, at(3, time.Minute), s.Start(t0), "the whole quota, the first window ending a window after the start")
	for _, st := range []step{
		{at: time.Second, counted: true, want: at(2, time.Minute), why: "one counted"},
		{at: 2 * time.Second, counted: false, want: at(2, time.Minute), why: "a refusal the server did not count"},
		{at: 3 * time.Second, counted: true, want: at(1, time.Minute), why: "two counted"},
		{at: 4 * time.Second, counted: true, want: at(0, time.Minute), why: "spent"},
		{at: 5 * time.Second, counted: true, want: at(0, time.Minute), why: "never below nothing"},
		{at: time.Minute, counted: true, want: at(2, 2*time.Minute), why: "the next window opens at the reset"},
		{at: 3*time.Minute + 30*time.Second, counted: true, want: at(2, 4*time.Minute), why: "windows nobody spent from pass unseen; the phase stays"},
	} {
		assert.Equal(t, st.want, s.Answered(t0.Add(st.at), st.counted), st.why)
	}
}
