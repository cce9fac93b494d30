package pacer

import (
	"fmt"
	"testing"
	"time"

	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/stretchr/testify/assert"
)

// TestAdaptiveAtTheAdaptationBenchmarksSettings runs the adaptation
// benchmark's workload (bench/adapt: a fixed window of 100 requests per 5 s,
// 32 callers, 20 ms latency) for two simulated minutes. Whole-second resets
// (IETF t=, draft-07 reset=) are upper bounds of the true one: the limiter
// must still reach 0.9 × safety of the quota with no 429 after the first
// response. Without quota headers (bare 429s, or Retry-After only) the
// probing must settle at 80% of the quota or more, paying for the first
// burst (about one 429 per caller) and little more.
func TestAdaptiveAtTheAdaptationBenchmarksSettings(t *testing.T) {
	const (
		safety  = 0.9
		callers = 32
	)
	for _, tc := range []struct {
		style   apisim.Style
		probing bool
	}{
		{apisim.StyleIETF, false},
		{apisim.StyleIETF07, false},
		{apisim.StyleBare, true},
		{apisim.StyleRetryAfter, true},
	} {
		for _, window := range []time.Duration{5 * time.Second, 10 * time.Second} {
			sc := scenario{
				server:  apisim.Config{Style: tc.style, Limit: 100, Window: window, Latency: 20 * time.Millisecond},
				run:     2 * time.Minute,
				callers: callers,
			}
			t.Run(fmt.Sprintf("%s/window=%v", tc.style, window), func(t *testing.T) {
				t.Parallel()
				o := drive(t, sc, AdaptiveConfig{Key: "bench", SafetyFactor: safety})
				t.Logf("%v", o)
				if tc.probing {
					assert.GreaterOrEqual(t, o.goodput, 0.8, "goodput / capacity")
					// The first burst, all in flight when the quota runs
					// out, then at most one 429 per 100 requests.
					assert.LessOrEqual(t, o.throttled, callers+o.requests/100, "429s")
					return
				}
				assert.Zero(t, o.lateThrottled, "429s after the first response")
				assert.GreaterOrEqual(t, o.goodput, 0.9*safety, "goodput / capacity")
			})
		}
	}
}

// TestAdaptiveRollsAOneSecondWindowOnlyWhenSureOfItsEnd: with whole-second
// resets a 1 s window's stated resets wander by as much as the window itself,
// so responses of consecutive windows look alike. A response whose remaining
// went back up is of a new window: its reset must not be folded into the old
// one's (rolling there would refill a budget the server has half spent).
func TestAdaptiveRollsAOneSecondWindowOnlyWhenSureOfItsEnd(t *testing.T) {
	for run := range 10 { // the restarts' jitter differs from run to run
		t.Run(fmt.Sprintf("run=%d", run), func(t *testing.T) {
			t.Parallel()
			sc := scenario{
				server:  apisim.Config{Style: apisim.StyleIETF, Limit: 10, Window: time.Second},
				run:     30 * time.Second,
				callers: 4,
			}
			o := drive(t, sc, AdaptiveConfig{Key: "sim"})
			assert.Zero(t, o.lateThrottled, "429s after the first response: %v", o)
		})
	}
}
