package bench

import (
	"slices"
	"testing"
	"time"

	"github.com/pacer-go/pacer/internal/ratespec"
	"golang.org/x/time/rate"
)

// TestConformanceXTimeRateReportsTheSuiteFigures runs pacer's conformance suite
// (internal/ratespec) against x/time/rate itself: every figure the suite
// says is x/time/rate's is what x/time/rate reports. The root package checks
// pacer's Bucket against the same suite.
func TestConformanceXTimeRateReportsTheSuiteFigures(t *testing.T) {
	for _, c := range ratespec.Cases {
		t.Run(c.Name, func(t *testing.T) {
			got := ratespec.Run(specLimiter{rate.NewLimiter(rate.Limit(c.Limit), c.Burst)}, c)
			if want := c.Expected(false); !slices.Equal(got, want) {
				t.Errorf("x/time/rate reports\n%q\nthe suite says\n%q", got, want)
			}
		})
	}
}

type specLimiter struct{ l *rate.Limiter }

func (s specLimiter) AllowN(t time.Time, n int) bool { return s.l.AllowN(t, n) }
func (s specLimiter) ReserveN(t time.Time, n int) ratespec.Reservation {
	return s.l.ReserveN(t, n)
}
func (s specLimiter) TokensAt(t time.Time) float64          { return s.l.TokensAt(t) }
func (s specLimiter) SetLimitAt(t time.Time, limit float64) { s.l.SetLimitAt(t, rate.Limit(limit)) }
func (s specLimiter) SetBurstAt(t time.Time, burst int)     { s.l.SetBurstAt(t, burst) }
