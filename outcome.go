package pacer

import (
	"fmt"
	"time"
)

// Signal is what a finished request tells its endpoint's limiter about the
// rate limit, decided once per response by the Transport's classifier and
// acted on by both the limiter ([Permit.Done]) and the retry decision, so
// the two never disagree about what "throttled" means.
type Signal uint8

const (
	// SignalNone: nothing about the rate limit went wrong. Success, and also
	// errors that say nothing about rate (404, 400, 500 with quota room, …).
	SignalNone Signal = iota
	// SignalQuotaSpent: a quota the server states is exhausted (Remaining 0
	// on a throttled response); the endpoint waits for that quota's reset.
	SignalQuotaSpent
	// SignalSlowDown: the server throttled (429, or 403/429 with
	// Retry-After) while no stated quota explains it: an unstated limit
	// (GitHub's secondary limits, a per-second cap under a per-minute quota).
	// The endpoint pauses for Retry-After and lowers its rate, so it does
	// not trip again at once.
	SignalSlowDown
	// SignalBodyLimit: the limit is stated only in the response body
	// (GitHub's "You have exceeded a secondary rate limit" on a 403 or 429,
	// GraphQL RATE_LIMITED errors) with no Retry-After; handled like
	// SignalSlowDown with GitHub's documented wait (at least 60 s, then
	// exponential backoff).
	SignalBodyLimit
	// SignalGone: the quota is gone for good (OpenAI's insufficient_quota,
	// a billing hard limit): waiting cannot help. No retry, no pause; the
	// caller gets the response at once.
	SignalGone
	// SignalOverload: the server shed load (503, 529, or another 5xx) with no
	// quota signal. Retried with backoff under a retry budget; it never cuts
	// the rate below what the quota headers allow.
	SignalOverload
)

var signalNames = [...]string{"none", "quota-spent", "slow-down", "body-limit", "gone", "overload"}

func (s Signal) String() string {
	if int(s) < len(signalNames) {
		return signalNames[s]
	}
	return fmt.Sprintf("Signal(%d)", uint8(s))
}

// Throttled reports whether s says the server refused the request for
// rate-limiting reasons it may lift later (everything but SignalNone and
// SignalGone).
func (s Signal) Throttled() bool {
	return s != SignalNone && s != SignalGone
}

// Outcome is what one finished request reports to its limiter through
// [Permit.Done].
type Outcome struct {
	// Status is the HTTP status code; 0 when no response was obtained (a
	// transport error after the request may have reached the server).
	Status int
	// Info is what the response's rate-limit headers said, with absolute
	// resets corrected for the server's clock offset.
	Info Info
	// Signal is what the response means for the rate limit.
	Signal Signal
	// RetryAt is when the server allows the next request on this endpoint
	// (Retry-After, an exhausted quota's reset, or the classifier's wait for
	// a body-stated limit); zero when it said nothing.
	RetryAt time.Time
}
