package pacer

import (
	"fmt"
	"time"
)

// signal is what a finished request tells its endpoint's limiter about the
// rate limit, decided once per response by the Transport's classifier and
// acted on by both the limiter ([Permit.Done]) and the retry decision, so
// the two never disagree about what "throttled" means.
type signal uint8

const (
	// signalNone: nothing about the rate limit went wrong. Success, and also
	// errors that say nothing about rate (404, 400, 500 with quota room, …).
	signalNone signal = iota
	// signalQuotaSpent: a quota the server states is exhausted (Remaining 0
	// on a throttled response); the endpoint waits for that quota's reset.
	signalQuotaSpent
	// signalSlowDown: the server throttled (429, or 403/429 with
	// Retry-After) while no stated quota explains it: an unstated limit
	// (GitHub's secondary limits, a per-second cap under a per-minute quota).
	// The endpoint pauses for Retry-After and lowers its rate, so it does
	// not trip again at once.
	signalSlowDown
	// signalBodyLimit: the limit is stated only in the response body
	// (GitHub's "You have exceeded a secondary rate limit" on a 403 or 429,
	// GraphQL RATE_LIMITED errors) with no Retry-After; handled like
	// signalSlowDown with GitHub's documented wait (at least 60 s, then
	// exponential backoff).
	signalBodyLimit
	// signalGone: the quota is gone for good (OpenAI's insufficient_quota,
	// a billing hard limit): waiting cannot help. No retry, no pause; the
	// caller gets the response at once.
	signalGone
	// signalOverload: the server shed load (503, 529, or another 5xx) with no
	// quota signal. Retried with backoff under a retry budget; it never cuts
	// the rate below what the quota headers allow.
	signalOverload
)

var signalNames = [...]string{"none", "quota-spent", "slow-down", "body-limit", "gone", "overload"}

func (s signal) String() string {
	if int(s) < len(signalNames) {
		return signalNames[s]
	}
	return fmt.Sprintf("signal(%d)", uint8(s))
}

// Throttled reports whether s says the server refused the request for
// rate-limiting reasons it may lift later (everything but signalNone and
// signalGone).
func (s signal) Throttled() bool {
	return s != signalNone && s != signalGone
}

// outcome is what one finished request reports to its limiter through
// [Permit.Done].
type outcome struct {
	// Status is the HTTP status code; 0 when no response was obtained (a
	// transport error after the request may have reached the server).
	Status int
	// Info is what the response's rate-limit headers said, with absolute
	// resets corrected for the server's clock offset.
	Info Info
	// signal is what the response means for the rate limit.
	signal signal
	// RetryAt is when the server allows the next request on this endpoint
	// (Retry-After, an exhausted quota's reset, or the classifier's wait for
	// a body-stated limit); zero when it said nothing.
	RetryAt time.Time
}
