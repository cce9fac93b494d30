package response

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/pacer-go/pacer/internal/header"
)

// Clock bounds how far a server's clock is ahead of this one (negative:
// behind), from the Date header every HTTP response carries, so that resets
// stated in the server's clock (epoch seconds, HTTP-dates, RFC 3339) are read
// in ours. A server 3 s behind states a reset 3 s before its window ends by
// our clock: believed as stated, each window would open with requests the
// server still counts against the old one.
//
// Date has one-second resolution and was written at some instant between the
// request's sending and the response's arrival, so one response only bounds
// the offset: server − local ≥ Date − arrival. The estimate is the highest
// such lower bound seen. Applied to resets, a lower bound of the offset
// makes them late, never early: by the second's fraction at first, by about
// half a round trip once responses at many sub-second phases have been seen.
// It decays slowly (skewDecay) so that a server whose clock is set back is
// followed eventually.
type Clock struct {
	lo   atomic.Int64           // ns, the lower bound; valid when at != 0
	at   atomic.Int64           // when lo was set, ns on the local clock (Unix)
	last atomic.Pointer[string] // the last Date seen
}

// skewDecay is how fast the bound forgets, per hour: a second. Slow,
// because the bound must be steady: resets moved by a wandering estimate
// teach a wrong window length (a minute window's cadence tolerates 20 ms),
// and a window taken too short ends early. A clock set back by s seconds
// is followed after s hours; until then resets are read late (safe).
const skewDecay = time.Second

// maxSkew bounds a believed offset: a Date further off than a day is a
// broken header, not a clock.
const maxSkew = 24 * time.Hour

// A Clock is the Skew the grammar reads a response's resets with: it
// hands over the response's Date, found in its pass over the fields.
var _ header.Skew = (*Clock)(nil)

// Observe folds in the Date header of a response that arrived at recv.
func (c *Clock) Observe(date string, recv time.Time) {
	if date == "" {
		return
	}
	// A Date seen before bounds the offset less tightly than it did the
	// first time (the same second, a later arrival): nothing to parse. So
	// only about one response a second pays for parsing.
	if last := c.last.Load(); last != nil && *last == date {
		return
	}
	seen := date // a copy, so that only this path allocates
	c.last.Store(&seen)
	d, err := http.ParseTime(date)
	if err != nil {
		return
	}
	sample := d.Sub(recv)
	if sample > maxSkew || sample < -maxSkew {
		return
	}
	now := recv.UnixNano()
	if at := c.at.Load(); at != 0 && int64(sample) <= c.decayed(now) {
		return
	}
	c.lo.Store(int64(sample))
	c.at.Store(now)
}

// decayed is the bound at now (ns), lowered by skewDecay per hour since it
// was set.
func (c *Clock) decayed(now int64) int64 {
	elapsed := max(now-c.at.Load(), 0)
	return c.lo.Load() - int64(float64(elapsed)/float64(time.Hour)*float64(skewDecay))
}

// Offset is the server's clock minus ours, a lower bound; 0 before any Date.
func (c *Clock) Offset(now time.Time) time.Duration {
	if c.at.Load() == 0 {
		return 0
	}
	return time.Duration(c.decayed(now.UnixNano()))
}
