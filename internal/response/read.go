package response

import (
	"net/http"
	"time"

	"github.com/pacer-go/pacer/internal/header"
)

// StatusOverloaded is Anthropic's 529 overloaded_error: the server is too
// loaded to start the request, which is shed as a 503 is.
const StatusOverloaded = 529

// Meaning is what one response means for the rate limit, read once (Read)
// and consumed by everyone after: the limiter, the retry decision and the
// metrics. The zero Meaning is "no response obtained" (Status 0).
type Meaning struct {
	// Status is the HTTP status code; 0 when no response was obtained.
	Status int
	// Info is what the headers state besides the quotas, with one
	// difference: a wait stated only in the body (RetryDelay) is its
	// RetryAfter when the headers ask for none, clamped as a header's is.
	header.Info
	// Quotas are the quotas the headers state, absolute resets read in
	// our clock (see Clock).
	Quotas header.Quotas
	// Body is what a 403's or 429's body says of the limit.
	Body Signal
	// Throttled reports that the server refused the request for a reason
	// it may lift later (see Throttled).
	Throttled bool
}

// Read sets m to what resp, which arrived at now, means: its headers under
// caps, absolute resets corrected by the server's clock as clk bounds it
// (nil: the server's clock is taken for ours; else the response's Date is
// folded into clk first), and for a 403 or 429 what its body states, whose
// bytes are put back (Peek). resp.Body must not be nil.
//
// m is written in place, field by field, and read in place by its
// consumers: a Meaning built apart and copied whole was read with wide
// loads right after narrow stores wrote it (store-forwarding stalls, 3% of
// a GitHub-style response's CPU time through the Transport).
func Read(m *Meaning, resp *http.Response, now time.Time, caps header.Caps, clk *Clock) {
	body := Peek(resp)
	m.Status, m.Body = resp.StatusCode, Classify(body)
	var skew header.Skew
	if clk != nil {
		skew = clk
	}
	m.Info, _ = header.Parse(resp.Header, now, caps, skew, &m.Quotas)
	if m.RetryAfter == 0 {
		if s, ok := RetryDelay(body); ok {
			m.RetryAfter = header.ClampSeconds(s, caps.Wait)
		}
	}
	m.Throttled = throttled(m)
}

// throttled is the one rule for "throttled": a 429, a 503 or Anthropic's
// 529; a 403 with a Retry-After or a stated quota with nothing left
// (GitHub's primary and secondary limits); or a limit the body states.
// Never a quota gone for good, which no wait lifts.
func throttled(m *Meaning) bool {
	switch m.Body {
	case BodyLimit:
		return true
	case Gone:
		return false
	}
	switch m.Status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, StatusOverloaded:
		return true
	case http.StatusForbidden:
		if m.RetryAfter > 0 {
			return true
		}
		for i := range m.Quotas.Len() {
			if drained(m.Quotas.At(i)) {
				return true
			}
		}
	}
	return false
}

// Overloaded reports whether a throttled response is the server shedding
// load rather than enforcing a rate limit: a 5xx with no wait asked for and
// no quota stated as spent until a reset. A retry of one draws on a retry
// budget; a retry of a rate limit waits for the limit instead.
func (m *Meaning) Overloaded() bool {
	if m.Status < 500 || m.RetryAfter > 0 {
		return false
	}
	for i := range m.Quotas.Len() {
		if q := m.Quotas.At(i); drained(q) && !q.Reset.IsZero() {
			return false
		}
	}
	return true
}

// drained reports whether the server said less than one unit of q is left;
// never when it did not say (Remaining -1).
func drained(q *header.Quota) bool { return 0 <= q.Remaining && q.Remaining < 1 }
