package pacer

import (
	"math"
	"time"
)

// Limit is a rate of events per second. It mirrors golang.org/x/time/rate's
// Limit so code can switch without relearning.
type Limit float64

// Inf is the infinite rate limit: every request is allowed, bursts included.
const Inf = Limit(math.MaxFloat64)

// Every converts a minimum time between events to a Limit. A zero or negative
// interval means no limit (Inf).
func Every(interval time.Duration) Limit {
	if interval <= 0 {
		return Inf
	}
	return 1 / Limit(interval.Seconds())
}
