package pacer

import (
	"net/http"
	"time"

	"github.com/pacer-go/pacer/internal/clock"
	"github.com/pacer-go/pacer/internal/header"
	"github.com/pacer-go/pacer/internal/response"
)

// readResponse is what a response arriving at now means for the rate
// limit, read once: its headers, absolute resets corrected by the server's
// clock as co bounds it (the grammar takes the response's Date into that
// bound first), for a 403 or 429 what its body states, and whether it is
// throttled (throttledBy). The Transport (per host) and Permit.Done (per
// limiter) read responses this one way, and everything after reads the
// outcome, which goes to o. The quotas go to qs, not to Info.Quotas (see
// quotaBuf).
//
// A wait the body states (response.RetryDelay) is the response's RetryAfter
// when its headers ask for none, clamped to maxDelay as a Retry-After is.
//
// The outcome is written into its place, field by field: returned, it was
// stored word by word and copied whole, and the copy's wide loads waited
// for the narrow stores (a store-forwarding stall, 3% of a GitHub-style
// response's CPU time through the Transport).
func readResponse(o *outcome, co *clockOffset, resp *http.Response, now time.Time, maxDelay time.Duration, qs *quotaBuf) {
	body := response.Peek(resp)
	*o = outcome{Status: resp.StatusCode, signal: response.Classify(body)}
	// The grammar is called here, not through a helper of headers.go: a
	// call fewer was 5% of reading a response that states nothing.
	var hq header.Quotas
	hi, _ := header.Parse(resp.Header, now, capsOf(maxDelay), co, &hq)
	qs.set(&hq)
	o.Info.RetryAfter, o.Info.Bucket, o.Info.Global = hi.RetryAfter, hi.Bucket, hi.Global
	if o.Info.RetryAfter == 0 {
		if s, ok := response.RetryDelay(body); ok {
			o.Info.RetryAfter = header.ClampSeconds(s, delayCap(maxDelay))
		}
	}
	o.throttled = throttledBy(resp.StatusCode, o.Info.RetryAfter, qs.slice(), o.signal)
}

// bodyLimitLocked applies a limit a response stated only in its body
// (GitHub's secondary rate limits) as GitHub documents it: wait for its
// Retry-After if it sent one; else, if a quota is spent, for its reset
// (the budget holds that); else at least bodyLimitWait, doubling for each
// such limit within bodyLimitMemory of the last, up to bodyLimitMaxWait
// (and MaxDelay). The endpoint also slows down (the probing fallback cuts
// its rate) so that it does not trip again as it resumes. Called with
// a.mu held.
func (a *Adaptive) bodyLimitLocked(now time.Time, info Info, exhausted bool, others int64) {
	if !a.lastBodyLimit.IsZero() && now.Sub(a.lastBodyLimit) > bodyLimitMemory {
		a.bodyStrikes = 0
	}
	a.lastBodyLimit = now
	// Answers to requests that were in flight when the first of a trip
	// arrived belong to that trip: counted as trips of their own, one burst
	// of 20 such answers doubled the wait to its 15-minute cap and kept
	// 0.19 of what the limit allows (bench/SITUATIONS.md).
	sameTrip := now.Before(a.bodyLimitUntil)
	wait := info.RetryAfter
	if wait <= 0 && !exhausted && !sameTrip {
		wait = min(bodyLimitWait<<min(a.bodyStrikes, 10), bodyLimitMaxWait)
		a.bodyStrikes++
	}
	until := now
	if wait > 0 {
		until = now.Add(min(wait, a.cfg.MaxDelay))
		a.pauseLocked(until)
		a.bodyLimitUntil = clock.Later(a.bodyLimitUntil, until)
	}
	a.throttled++
	// Resume below what the server admitted before it objected, climb back
	// over bodyLimitCycle to the safety factor's share of it, never beyond
	// while the trip is remembered: a second trip within 20 minutes was
	// the rule, not the exception, with the cubic left to climb, and at
	// the whole of it (issue 24).
	a.probe.Punished(now, until, others, a.rtt(), a.safety, bodyLimitCycle, bodyLimitMemory)
}

const (
	// bodyLimitWait is the least wait after a body-stated limit with no
	// Retry-After: GitHub's documentation says to wait at least a minute
	// before retrying after a secondary rate limit.
	bodyLimitWait = time.Minute
	// bodyLimitMaxWait caps the doubling that follows repeated ones (15
	// minutes: four doublings), so a wait stays bounded however often the
	// server keeps refusing; MaxDelay bounds it too.
	bodyLimitMaxWait = 15 * time.Minute
	// bodyLimitMemory is how long a body-stated limit counts towards the
	// doubling: one an hour apart is a fresh start.
	bodyLimitMemory = time.Hour
	// bodyLimitCycle is how long the rate takes to climb back to what the
	// server admitted before a body-stated limit: 5 minutes. Each trip
	// costs a pause of a minute or more (GitHub's rule), so probing for the
	// limit slowly costs less than finding it again.
	bodyLimitCycle = 5 * time.Minute
)
