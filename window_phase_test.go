package pacer

import (
	"fmt"
	"testing"
	"time"

	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/stretchr/testify/assert"
)

// TestAdaptiveLearnsWindowPhaseBehindWholeSecondResets runs the real-time
// adaptation benchmark's workload (100 requests per 5 s fixed window, 32
// callers, 20 ms latency, 15 s) against servers that state resets in whole
// seconds, rounded up, with the window's phase at several offsets from the
// whole second. Believing the stated reset, the limiter is never early into
// the next window, and a second's rounding costs a 5 s window no goodput.
func TestAdaptiveKeepsUpBehindWholeSecondResets(t *testing.T) {
	for _, style := range []apisim.Style{apisim.StyleGitHub, apisim.StyleAnthropic} {
		for _, offset := range []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 500 * time.Millisecond, 700 * time.Millisecond, 900 * time.Millisecond} {
			t.Run(fmt.Sprintf("%s/offset=%v", style, offset), func(t *testing.T) {
				t.Parallel()
				sc := scenario{
					server:  apisim.Config{Style: style, Window: 5 * time.Second, Limit: 100, Latency: 20 * time.Millisecond},
					run:     15 * time.Second,
					callers: 32,
					offset:  offset,
				}
				o := drive(t, sc, AdaptiveConfig{Key: "sim", SafetyFactor: 0.9})
				t.Logf("%v", o)
				assert.Zero(t, o.lateThrottled, "429s after the first response")
				assert.GreaterOrEqual(t, o.goodput, 0.85, "goodput / capacity")
			})
		}
	}
}
