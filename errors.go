package pacer

import (
	"fmt"
	"time"
)

// RateLimitError reports that a request was not sent because the wait the
// limiter needed would have passed the caller's deadline or the transport's
// MaxWait. It is returned at once, before any sleeping, so a caller can decide
// to come back later instead of holding a goroutine.
//
// Use [errors.As] to get at it:
//
//	var rle *pacer.RateLimitError
//	if errors.As(err, &rle) {
//		retryLater(rle.RetryAt)
//	}
type RateLimitError struct {
	// Endpoint is the key of the endpoint whose limit applied
	// (for example "https://api.github.com").
	Endpoint string
	// RetryAt is the earliest time a request to Endpoint may start.
	RetryAt time.Time
	// Info is the last rate-limit information the server sent for Endpoint;
	// its zero value when the server sent none.
	Info Info
	// Err, when non-nil, is the cause: the context's error when its deadline is
	// earlier than RetryAt, or a store failure when the store fails closed.
	Err error
}

func (e *RateLimitError) Error() string {
	wait := time.Until(e.RetryAt).Round(time.Millisecond)
	if wait < 0 {
		wait = 0
	}
	msg := fmt.Sprintf("pacer: rate limit for %s: next request allowed in %v", e.Endpoint, wait)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause, so errors.Is(err, context.DeadlineExceeded) holds
// when the deadline was what made the wait impossible.
func (e *RateLimitError) Unwrap() error { return e.Err }
