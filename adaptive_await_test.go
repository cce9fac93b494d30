package pacer

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAwaitChangeNeverArmsANearZeroTimer: an Acquire loop told the budget frees
// "now" (or in the past) still sleeps minAwait, so it cannot busy-loop.
func TestAwaitChangeNeverArmsANearZeroTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{})
		for _, d := range []time.Duration{-time.Second, 0, time.Nanosecond} {
			start := time.Now()
			require.NoError(t, a.awaitChange(context.Background(), d, a.changes.Load()))
			assert.Equal(t, minAwait, time.Since(start), "d=%v", d)
		}
	})
}

// TestAwaitChangeSeesAChangeMadeBeforeItWaits: a response applied between
// a caller's look at the budgets and its wait (its wake-up found nobody
// waiting) ends the wait at once; missed, the caller slept until the
// reset although the response had given the budget back.
func TestAwaitChangeSeesAChangeMadeBeforeItWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{})
		change := func() { // as a response applied does
			a.mu.Lock()
			a.changedLocked()
			a.unlock()
		}
		seen := a.changes.Load() // the caller reads the budgets: spent
		change()                 // a response gives a unit back; nobody waits yet
		start := time.Now()
		require.NoError(t, a.awaitChange(context.Background(), time.Minute, seen))
		assert.Zero(t, time.Since(start), "the change was seen: no wait")
		a.mu.Lock()
		assert.Zero(t, a.respWaiters, "and no waiter left registered")
		a.mu.Unlock()

		// With nothing new, it waits for the next change, or d.
		seen = a.changes.Load()
		go func() {
			time.Sleep(time.Second)
			change()
		}()
		start = time.Now()
		require.NoError(t, a.awaitChange(context.Background(), time.Minute, seen))
		assert.Equal(t, time.Second, time.Since(start), "woken by the next change")
	})
}
