package pacer

import (
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/pacer-go/pacer/internal/retryrule"
	"github.com/pacer-go/pacer/retry"
)

// This file is the Transport's side of its retry policy (package retry):
// the option that sets it, the bounds that make a retry safe and cheap,
// and how a replay is made. RoundTrip (transport.go) decides when.

// maxDrain bounds how much of a throttled response's body is read before it
// is closed: enough for the usual JSON error so the connection can be
// reused, not so much that a large body costs more than a new connection.
const maxDrain = 4 << 10

// Backoff floor for throttled responses that say nothing about when to come
// back (no Retry-After, no exhausted quota with a reset time): the limiter has
// already slowed down, this keeps a retry from following the 429 at once. It
// doubles per retry, with jitter so clients throttled together do not retry
// together.
const (
	minRetryBackoff = 200 * time.Millisecond
	maxRetryBackoff = 5 * time.Second
)

// WithRetry sets how the Transport retries a request: how many times,
// which attempts are worth it and how a retry's request is made ready (see
// package [retry], which states the bounds every retry keeps). Its zero
// fields mean the defaults: [retry.DefaultMax] retries of what
// [retry.DefaultCheck] asks to retry. A Max of [retry.None] leaves retries
// to a client that makes its own.
func WithRetry(p retry.Policy) Option {
	n := p.Max
	switch {
	case n == 0:
		n = retry.DefaultMax
	case n < 0:
		n = 0
	}
	return func(c *config) { c.retries, c.retryPolicy, c.prepareRetry = n, p.Check, p.Prepare }
}

// mayReplay reports whether req may be sent again after the attempt that
// got resp (nil after a transport error), once the policy asked for it: its
// body can be replayed, and after a transport error, which no response
// explains and the policy cannot see the method of, it is idempotent.
func mayReplay(req *http.Request, resp *http.Response) bool {
	return replayable(req) && (resp != nil || retryrule.Idempotent(req))
}

// replayable reports whether req's body can be sent again.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// replay returns a copy of req to send again, with a fresh body: the
// caller's request is never modified.
func replay(req *http.Request) (*http.Request, error) {
	r := req.Clone(req.Context())
	if req.Body != nil && req.Body != http.NoBody {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = body
	}
	return r, nil
}

// drain reads what is left of a body, up to maxDrain bytes, and closes it.
func drain(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, maxDrain)
	body.Close()
}

func nextBackoff(prev time.Duration) time.Duration {
	if prev == 0 {
		return minRetryBackoff
	}
	return min(2*prev, maxRetryBackoff)
}

// retryJitter returns a duration in [d/2, d).
func retryJitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2)
}
