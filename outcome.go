package pacer

import (
	"net/http"
	"time"

	"github.com/pacer-go/pacer/internal/response"
)

// signal is what a response's body says about the rate limit, beyond its
// headers (response.Classify): what the limiter and the retry decision
// make of each is said where they read it (Adaptive.bodyLimitLocked,
// throttledBy).
type signal = response.Signal

const (
	signalNone      = response.None      // nothing about the rate limit
	signalBodyLimit = response.BodyLimit // a limit stated only in the body: waited out as GitHub documents
	signalGone      = response.Gone      // the quota is gone for good: no retry, no pause; the response at once
)

// outcome is what one finished request means for the rate limit, read once
// per response (readResponse) and consumed by everyone: the limiter
// (Permit.Done), the retry decision, Stats and Attempt.
type outcome struct {
	// Status is the HTTP status code; 0 when no response was obtained (a
	// transport error after the request may have reached the server).
	Status int
	// Info is what the response's rate-limit headers said, with absolute
	// resets corrected for the server's clock offset.
	Info Info
	// signal is what the response's body said.
	signal signal
	// throttled reports that the server refused the request for
	// rate-limiting reasons it may lift later (throttledBy).
	throttled bool
}

// throttledBy is the one rule for "throttled": a 429, a 503 or Anthropic's
// 529; a 403 with a Retry-After or a stated quota with nothing left
// (GitHub's primary and secondary limits); or a limit the body states.
// Never a quota gone for good, which no wait lifts. retryAfter and quotas
// are the response's Info's, the quotas apart (see quotaBuf).
func throttledBy(status int, retryAfter time.Duration, quotas []Quota, sig signal) bool {
	switch sig {
	case signalBodyLimit:
		return true
	case signalGone:
		return false
	}
	switch status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, statusOverloaded:
		return true
	case http.StatusForbidden:
		if retryAfter > 0 {
			return true
		}
		for _, q := range quotas {
			if q.drained() {
				return true
			}
		}
	}
	return false
}
