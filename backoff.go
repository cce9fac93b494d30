package pacer

import (
	"math"
	"net/http"
	"time"
)

// defaultBackoffMax caps Transport.Backoff when its caller passes no
// positive maximum; it is go-retryablehttp's default RetryWaitMax.
const defaultBackoffMax = 30 * time.Second

// Backoff tells a retrying client how long to wait before the next attempt,
// from what the transport knows about the endpoint: the time its limiter
// will next admit a request (which includes any Retry-After or quota reset
// the server announced), or else exponential backoff from min. The result is
// always at most max (30 s, go-retryablehttp's default RetryWaitMax, when max <= 0): a server asking for
// a longer pause cannot park the client, and the transport's limiter still
// holds the retry until it is allowed.
//
// Its signature is go-retryablehttp's Backoff, so it plugs in without this
// package importing that one:
//
//	client := retryablehttp.NewClient()
//	pt := pacer.NewTransport(nil, pacer.WithRetry(retry.Policy{Max: retry.None})) // let one layer retry
//	client.HTTPClient.Transport = pt
//	client.Backoff = pt.Backoff
//
// attemptNum counts from 0; resp may be nil (the attempt failed without a
// response). Backoff is safe for concurrent use.
func (t *Transport) Backoff(min, max time.Duration, attemptNum int, resp *http.Response) time.Duration {
	t.init()
	if max <= 0 {
		max = defaultBackoffMax
	}
	min = clampDuration(min, 0, max)
	d := max
	if f := float64(min) * math.Pow(2, float64(attemptNum)); attemptNum >= 0 && f < float64(max) {
		d = time.Duration(f)
	}
	if attemptNum < 0 {
		d = min
	}
	if resp == nil {
		return d
	}
	now := time.Now()
	if resp.Request != nil && resp.Request.URL != nil {
		if ep := t.peekLimiter(resp.Request); ep != nil {
			if w := ep.lim.nextAllowed().Sub(now); w > d {
				d = w
			}
		}
	}
	// The response may name a bucket whose limiter has not seen it yet, or
	// may not have come through this transport at all.
	if info, ok := parseHeaders(resp.Header, now, t.maxDelay); ok && info.RetryAfter > d {
		d = info.RetryAfter
	}
	return clampDuration(d, 0, max)
}

func clampDuration(d, lo, hi time.Duration) time.Duration {
	return min(max(d, lo), hi)
}
