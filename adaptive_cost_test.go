package pacer

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// The largest cost seen sizes the token bucket's burst: a request whose
// cost the burst cannot hold would wait forever. Callers that raise it at
// once must leave the largest of theirs, not whichever stored last.
func TestLargestCostSeenIsKeptUnderConcurrentCallers(t *testing.T) {
	for round := range 2000 {
		a := NewAdaptive(AdaptiveConfig{})
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 8 {
			wg.Go(func() {
				<-start
				a.noteCost(float64(1000 + i))
			})
		}
		close(start)
		wg.Wait()
		require.Equal(t, thousandths(1007), a.maxCost.Load(), "round %d", round)
	}
}
