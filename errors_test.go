package pacer

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// The message states RetryAt, not the time left until it: printed or logged
// later, it says the same, and what it says is still true.
func TestRateLimitErrorMessageIsStable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		at := time.Now().Add(90 * time.Second) // synctest's clock starts at 2000-01-01 00:00 UTC
		err := &RateLimitError{Endpoint: "https://api.example.com", RetryAt: at, Err: context.DeadlineExceeded}
		first := err.Error()
		time.Sleep(time.Minute)
		assert.Equal(t, first, err.Error())
		assert.Equal(t, "pacer: rate limit for https://api.example.com: next request allowed at "+
			at.Format("2006-01-02T15:04:05.000Z07:00")+": context deadline exceeded", first)
		assert.Contains(t, first, "00:01:30.000")
	})
	assert.Equal(t, "pacer: rate limit", (&RateLimitError{}).Error(), "a Bucket's error has no endpoint; nothing is invented")
}
