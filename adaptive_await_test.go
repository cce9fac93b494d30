package pacer

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAwaitChangeNeverArmsANearZeroTimer: a Wait loop told the budget frees
// "now" (or in the past) still sleeps minAwait, so it cannot busy-loop.
func TestAwaitChangeNeverArmsANearZeroTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{})
		for _, d := range []time.Duration{-time.Second, 0, time.Nanosecond} {
			start := time.Now()
			require.NoError(t, a.awaitChange(context.Background(), d))
			assert.Equal(t, minAwait, time.Since(start), "d=%v", d)
		}
	})
}
