package response

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The offset is the highest lower bound the Dates seen give (server −
// arrival), forgotten at skewDecay an hour, a Date off by more than
// maxSkew ignored.
func TestClockBoundsTheServersOffsetFromBelow(t *testing.T) {
	t0 := time.Date(2025, 8, 21, 12, 0, 0, 0, time.UTC)
	date := func(d time.Duration) string { return t0.Add(d).Format(http.TimeFormat) }
	for _, tc := range []struct {
		why   string
		dates []string
		recv  []time.Duration // arrival of each, after t0
		at    time.Duration   // when the offset is read, after t0
		want  time.Duration
	}{
		{why: "no Date: no offset", at: 0, want: 0},
		{why: "a server 3 s ahead, read at the second's start", dates: []string{date(3 * time.Second)}, recv: []time.Duration{0}, want: 3 * time.Second},
		{why: "a later arrival of the same second bounds less tightly: the first stands",
			dates: []string{date(3 * time.Second), date(3 * time.Second)}, recv: []time.Duration{0, 400 * time.Millisecond}, want: 3 * time.Second},
		{why: "the highest bound wins", dates: []string{date(2 * time.Second), date(4 * time.Second)},
			recv: []time.Duration{time.Second, time.Second + 500*time.Millisecond}, at: time.Second + 500*time.Millisecond, want: 2500 * time.Millisecond},
		{why: "a server behind", dates: []string{date(-3 * time.Second)}, recv: []time.Duration{0}, want: -3 * time.Second},
		{why: "the bound decays a second an hour", dates: []string{date(3 * time.Second)}, recv: []time.Duration{0}, at: 2 * time.Hour, want: time.Second},
		{why: "a Date further off than a day is a broken header", dates: []string{date(25 * time.Hour)}, recv: []time.Duration{0}, want: 0},
		{why: "a Date that does not parse is ignored", dates: []string{"yesterday"}, recv: []time.Duration{0}, want: 0},
	} {
		var c Clock
		for i, d := range tc.dates {
			c.Observe(d, t0.Add(tc.recv[i]))
		}
		assert.Equal(t, tc.want, c.Offset(t0.Add(tc.at)), tc.why)
	}
}
