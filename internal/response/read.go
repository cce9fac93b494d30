package response

import (
	"net/http"
	"strings"
	"sync/atomic"
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
	// For a refusal inside a stream (Watch), the status its error stands
	// for.
	Status int
	// Info is what the headers state besides the quotas, with two
	// differences: a 1xx's or 2xx's Retry-After is no wait (RFC 9110
	// section 10.2.3 defines it for 503 and 3xx responses, RFC 6585 for
	// 429), and a refusal's body's wait counts (the larger of the two),
	// clamped as a header's is.
	header.Info
	// Quotas are the quotas the headers state, then those a refusal's
	// body states that the headers do not, absolute resets read in our
	// clock (see Clock).
	Quotas header.Quotas
	// Body is what a 403's or 429's body (or a stream's first event) says
	// of the limit.
	Body Signal
	// Throttled reports that the server refused the request for a reason
	// it may lift later, by the one rule for it: a 429, a 503 or
	// Anthropic's 529; a 403 with a wait or a stated quota with nothing
	// left (GitHub's primary and secondary limits); a limit the body
	// states. Never a refusal no wait lifts: a quota gone for good (Body
	// Gone), a request larger than the limit (Body TooLarge).
	Throttled bool
}

// Read sets m to what resp, which arrived at now, means: its headers under
// caps, absolute resets corrected by the server's clock as clk bounds it
// (nil: the server's clock is taken for ours; else the response's Date is
// folded into clk first), and for a 403 or 429 what its body states, whose
// bytes are put back (Peek). resp.Body must not be nil. A stream's first
// event is read later, as the caller reads it (Watch).
//
// m is written in place, field by field, and read in place by its
// consumers: a Meaning built apart and copied whole was read with wide
// loads right after narrow stores wrote it (store-forwarding stalls, 3% of
// a GitHub-style response's CPU time through the Transport).
func Read(m *Meaning, resp *http.Response, now time.Time, caps header.Caps, clk *Clock) {
	m.Status, m.Body = resp.StatusCode, None
	var body []byte
	if refusal(m.Status) { // (Peek reads no other body: nearly every response is spared three calls)
		body = Peek(resp)
	}
	var skew header.Skew
	if clk != nil {
		skew = clk
	}
	m.Info, _ = header.Parse(resp.Header, now, caps, skew, &m.Quotas)
	if m.Status < 300 {
		m.RetryAfter = 0 // no wait on a success (see Meaning.Info)
	}
	if len(body) > 0 {
		var f bodyFacts
		f.read(body)
		readBody(m, body, &f, now, caps, clk)
	}
	m.Throttled = throttled(m)
}

// refusal reports whether a response of this status is one whose body
// Peek reads: a 403 or a 429, the refusals whose bodies state limits.
func refusal(status int) bool {
	return status == http.StatusForbidden || status == http.StatusTooManyRequests
}

// throttled is Meaning.Throttled's rule, for m read but for it.
func throttled(m *Meaning) bool {
	switch m.Body {
	case BodyLimit:
		return true
	case Gone, TooLarge:
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
// load rather than enforcing a rate limit: a 5xx, or an upstream's refusal
// a gateway relays (Body Upstream), with no wait asked for and no quota
// stated as spent until a reset. A retry of one draws on a retry budget; a
// retry of a rate limit waits for the limit instead.
func (m *Meaning) Overloaded() bool {
	if m.Status < 500 && m.Body != Upstream || m.RetryAfter > 0 {
		return false
	}
	for i := range m.Quotas.Len() {
		if q := m.Quotas.At(i); drained(q) && !q.Reset.IsZero() {
			return false
		}
	}
	return true
}

// Counted reports whether the server counted the request against its
// quotas: every response but a 429 or a 503, refusals that spend nothing
// (a request that read as spent would read as a refill once the server's
// figures show it was not).
func (m *Meaning) Counted() bool {
	return m.Status != http.StatusTooManyRequests && m.Status != http.StatusServiceUnavailable
}

// drained reports whether the server said less than one unit of q is left;
// never when it did not say (Remaining -1).
func drained(q *header.Quota) bool { return 0 <= q.Remaining && q.Remaining < 1 }

// Clock bounds how far a server's clock is ahead of this one (negative:
// behind), from the Date header every HTTP response carries, so that resets
// stated in the server's clock (epoch seconds, HTTP-dates, RFC 3339) are read
// in ours. A server 3 s behind states a reset 3 s before its window ends by
// our clock: believed as stated, each window would open with requests the
// server still counts against the old one.
//
// Date has one-second resolution and was written at some instant between the
// request's sending and the response's arrival, so one response only bounds
// the offset: server − local ≥ Date − arrival. The estimate is the highest
// such lower bound seen. Applied to resets, a lower bound of the offset
// makes them late, never early: by the second's fraction at first, by about
// half a round trip once responses at many sub-second phases have been seen.
// It decays slowly (skewDecay) so that a server whose clock is set back is
// followed eventually.
type Clock struct {
	lo   atomic.Int64           // ns, the lower bound; valid when at != 0
	at   atomic.Int64           // when lo was set, ns on the local clock (Unix)
	last atomic.Pointer[string] // the last Date seen
}

// skewDecay is how fast the bound forgets, per hour: a second. Slow,
// because the bound must be steady: resets moved by a wandering estimate
// teach a wrong window length (a minute window's cadence tolerates 20 ms),
// and a window taken too short ends early. A clock set back by s seconds
// is followed after s hours; until then resets are read late (safe).
const skewDecay = time.Second

// maxSkew bounds a believed offset: a Date further off than a day is a
// broken header, not a clock.
const maxSkew = 24 * time.Hour

// A Clock is the Skew the grammar reads a response's resets with: it
// hands over the response's Date, found in its pass over the fields.
var _ header.Skew = (*Clock)(nil)

// Observe folds in the Date header of a response that arrived at recv.
func (c *Clock) Observe(date string, recv time.Time) {
	if date == "" {
		return
	}
	// A Date seen before bounds the offset less tightly than it did the
	// first time (the same second, a later arrival): nothing to parse. So
	// only about one response a second pays for parsing.
	if last := c.last.Load(); last != nil && *last == date {
		return
	}
	seen := date // a copy, so that only this path allocates
	c.last.Store(&seen)
	d, ok := parseDate(date)
	if !ok {
		return
	}
	sample := d.Sub(recv)
	if sample > maxSkew || sample < -maxSkew {
		return
	}
	now := recv.UnixNano()
	if at := c.at.Load(); at != 0 && int64(sample) <= c.decayed(now) {
		return
	}
	c.lo.Store(int64(sample))
	c.at.Store(now)
}

// parseDate reads a Date: an HTTP-date in any of RFC 9110's three forms, or
// its IMF-fixdate with "UTC" where "GMT" belongs, as X (api.twitter.com)
// sends it ("Mon, 15 Nov 2021 23:40:31 UTC"). UTC is GMT: RFC 9110 section
// 5.6.7 says an HTTP-date is in UTC, its "GMT" a name for it; no other zone
// name is read (a time.Parse of any would take it for an offset of 0).
func parseDate(date string) (time.Time, bool) {
	if t, err := http.ParseTime(date); err == nil {
		return t, true
	}
	if !strings.HasSuffix(date, " UTC") {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC1123, date)
	return t, err == nil && t.Location() == time.UTC
}

// decayed is the bound at now (ns), lowered by skewDecay per hour since it
// was set.
func (c *Clock) decayed(now int64) int64 {
	elapsed := max(now-c.at.Load(), 0)
	return c.lo.Load() - int64(float64(elapsed)/float64(time.Hour)*float64(skewDecay))
}

// Offset is the server's clock minus ours, a lower bound; 0 before any Date.
func (c *Clock) Offset(now time.Time) time.Duration {
	if c.at.Load() == 0 {
		return 0
	}
	return time.Duration(c.decayed(now.UnixNano()))
}
