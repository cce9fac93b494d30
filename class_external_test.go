package pacer_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/pacer-go/pacer/work"
)

// A batch request held back by the reserve goes once interactive work has
// been idle for work.Reserve.Idle, down to the floor; and a batch caller
// cancelled while it waits returns at once, having taken nothing.
func TestBatchTakesTheReserveOnceInteractiveWorkIsIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &apisim.Fixed{Limit: 100, Reset: time.Now().Add(time.Hour)}
		tr := pacer.NewTransport(api)
		client := &http.Client{Transport: tr}
		get := func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.test/x", nil)
			require.NoError(t, err)
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		require.NoError(t, get(context.Background())) // interactive work came
		batch := work.WithClass(context.Background(), work.Batch)
		for range 89 {
			require.NoError(t, get(batch))
		}
		assert.Equal(t, 90, api.Spent(), "batch stops at the reserve: a tenth of 100")

		ctx, cancel := context.WithCancel(batch)
		done := make(chan error, 1)
		go func() { done <- get(ctx) }()
		synctest.Wait()
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled, "a cancelled wait returns at once")
		assert.Equal(t, 90, api.Spent(), "and sent nothing")

		start := time.Now()
		require.NoError(t, get(batch))
		assert.InDelta(t, time.Minute, time.Since(start), float64(time.Second), "it waited for interactive work to go idle")
		for range 7 {
			require.NoError(t, get(batch))
		}
		assert.Equal(t, 98, api.Spent(), "down to the floor: two hundredths")
	})
}
