package pacer

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/pacer-go/pacer/internal/clock"
	"github.com/pacer-go/pacer/internal/header"
)

// bodyPeek is how much of a candidate response's body the classifier reads:
// GitHub's and OpenAI's error objects state their kind in the first few
// hundred bytes. 4 KiB bounds what a hostile or huge body can cost.
const bodyPeek = 4 << 10

// peekBody returns the first bytes of a 403's or 429's body, where it may
// say what no header does: a limit (GitHub's secondary rate limits, abuse
// detection), a quota gone for good (OpenAI's insufficient_quota and
// billing limits), a wait (Google's RetryInfo). It reads at most bodyPeek
// bytes and puts them back: the caller gets the body byte for byte. Other
// statuses, and empty bodies, give nil, unread.
func peekBody(resp *http.Response) []byte {
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
		return nil
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	prefix, err := io.ReadAll(io.LimitReader(resp.Body, bodyPeek))
	resp.Body = &peekedBody{Reader: io.MultiReader(bytes.NewReader(prefix), errReader{err}, resp.Body), closer: resp.Body}
	return prefix
}

// readResponse is what a response arriving at now means for the rate
// limit, read once: its headers, absolute resets corrected by the server's
// clock as clock bounds it (the response's Date is taken into that bound
// first), for a 403 or 429 what its body states, and whether it is
// throttled (throttledBy). The Transport (per host) and Permit.Done (per
// limiter) read responses this one way, and everything after reads the
// outcome. The quotas go to qs, not to Info.Quotas (see quotaBuf).
//
// A wait the body states (bodyRetryDelay) is the response's RetryAfter
// when its headers ask for none, clamped to maxDelay as a Retry-After is.
func readResponse(co *clockOffset, resp *http.Response, now time.Time, maxDelay time.Duration, qs *quotaBuf) outcome {
	co.observe(dateOf(resp.Header), now)
	body := peekBody(resp)
	o := outcome{Status: resp.StatusCode, signal: classifyBody(body)}
	o.Info, _ = parseHeadersInto(resp.Header, now, maxDelay, co.offset(now), qs)
	if o.Info.RetryAfter == 0 {
		if s, ok := bodyRetryDelay(body); ok {
			o.Info.RetryAfter = header.ClampSeconds(s, delayCap(maxDelay))
		}
	}
	info := o.Info
	info.Quotas = qs.slice()
	o.throttled = throttledBy(resp.StatusCode, &info, o.signal)
	return o
}

// classifyBody is what a body's peeked prefix (peekBody) says of the limit.
func classifyBody(b []byte) signal {
	lower := bytes.ToLower(b)
	for _, gone := range [...]string{"insufficient_quota", "billing_hard_limit_reached", "billing_not_active"} {
		if bytes.Contains(lower, []byte(gone)) {
			return signalGone
		}
	}
	for _, limit := range [...]string{"secondary rate limit", "abuse detection", "rate_limited"} {
		if bytes.Contains(lower, []byte(limit)) {
			return signalBodyLimit
		}
	}
	return signalNone
}

// bodyRetryDelay finds the wait a Google API error (Gemini's 429
// RESOURCE_EXHAUSTED) states only in its body, in seconds: the retryDelay
// of a google.rpc.RetryInfo detail, a protobuf Duration in its JSON form,
// decimal seconds and an "s" ("37s", "1.5s"):
//
//	{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[
//	  {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}
//
// b is the body's peeked prefix; false when it holds no RetryInfo, or a
// retryDelay that is not such a duration (a negative one, a number).
func bodyRetryDelay(b []byte) (float64, bool) {
	if !bytes.Contains(b, []byte("google.rpc.RetryInfo")) {
		return 0, false
	}
	const key = `"retryDelay"`
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0, false
	}
	v, ok := bytes.CutPrefix(bytes.TrimLeft(b[i+len(key):], jsonSpace), []byte(":"))
	if !ok {
		return 0, false
	}
	if v, ok = bytes.CutPrefix(bytes.TrimLeft(v, jsonSpace), []byte(`"`)); !ok {
		return 0, false
	}
	end := bytes.IndexByte(v, '"')
	if end < 0 {
		return 0, false
	}
	secs, ok := bytes.CutSuffix(v[:end], []byte("s"))
	if !ok {
		return 0, false
	}
	return header.ParseDecimal(string(secs))
}

// jsonSpace is the whitespace JSON allows before a token.
const jsonSpace = " \t\n\r"

// peekedBody is a response body whose first bytes were read by the
// classifier and are served again before the rest.
type peekedBody struct {
	io.Reader
	closer io.Closer
}

func (b *peekedBody) Close() error { return b.closer.Close() }

// errReader returns err once the peeked bytes are served (nil: read on).
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	return 0, io.EOF
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
	// over bodyLimitCycle, never beyond it while the trip is remembered: a
	// second trip within 20 minutes was the rule, not the exception, with
	// the cubic left to climb.
	a.probe.Punished(now, until, others, a.rtt(), bodyLimitCycle, bodyLimitMemory)
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
