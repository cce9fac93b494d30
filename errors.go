package pacer

import "time"

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

// Error states the endpoint and RetryAt as an absolute time, to the
// millisecond with its zone offset: the message is the same however late it
// is printed or logged (a relative "in 3s" would be wrong by then).
func (e *RateLimitError) Error() string {
	msg := "pacer: rate limit"
	if e.Endpoint != "" {
		msg += " for " + e.Endpoint
	}
	if !e.RetryAt.IsZero() {
		msg += ": next request allowed at " + e.RetryAt.Round(time.Millisecond).Format(retryAtLayout)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// retryAtLayout is RFC 3339 to the millisecond: a limit's reset is stated
// to the second or finer, and a date keeps a daily quota's reset unambiguous.
const retryAtLayout = "2006-01-02T15:04:05.000Z07:00"

// Unwrap returns the cause, so errors.Is(err, context.DeadlineExceeded) holds
// when the deadline was what made the wait impossible.
func (e *RateLimitError) Unwrap() error { return e.Err }
