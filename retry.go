package pacer

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/pacer-go/pacer/internal/response"
)

// This file is the Transport's retry policy: which attempts are retried
// (DefaultRetryPolicy, or the user's WithRetryPolicy, within the bounds that
// make a retry safe and cheap), when (decide), and how a replay is made.
// RoundTrip (transport.go) carries it out.

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

// WithRetries sets how many times a request is retried when the retry
// policy asks for it (by default, when it is throttled: 429, 503, 529, or
// 403 with an exhausted quota or a Retry-After; see [DefaultRetryPolicy]);
// 0 disables retries. The default is [DefaultRetries].
//
// A request is retried only when its body can be replayed (no body, or
// Request.GetBody set, as http.NewRequest does for in-memory bodies). Which
// methods are safe to send again is the policy's judgement, made on the
// response: DefaultRetryPolicy retries a non-idempotent request (POST,
// PATCH without an idempotency key) only when the response says the server
// refused it without acting on it. After a transport error, when the
// request may have been acted on and no response says otherwise, only an
// idempotent request is sent again (GET, HEAD, OPTIONS, TRACE, PUT, DELETE,
// or any method with an Idempotency-Key or X-Idempotency-Key header),
// whatever the policy says.
//
// Every retry waits for the endpoint's limiter again, at least as long as
// the response's Retry-After. A retry that could not start before MaxWait
// or the context's deadline is not made: the response is returned at once,
// body intact. Retries of load shed by the server (a 5xx without a
// Retry-After or a spent quota, or a gateway's relay of its upstream's
// refusal: OpenRouter's "Provider returned error") and of transport errors
// draw on a retry budget, a tenth of the endpoint's traffic, so they never
// multiply an overloaded server's load.
func WithRetries(n int) Option {
	if n < 0 {
		panic(fmt.Sprintf("pacer: WithRetries(%d): negative count", n))
	}
	return func(c *config) { c.retries = n }
}

// WithRetryPolicy replaces [DefaultRetryPolicy] as the judge of whether an
// attempt is worth retrying. policy has the signature of go-retryablehttp's
// CheckRetry, and its meaning, so a policy written for one works with the
// other: it is called after every attempt that was sent, with the response
// (resp non-nil, err nil) or the base transport's error (resp nil); ctx is
// the request's context. It is not called for requests that were not sent
// (the limiter refused, the context ended while waiting): there is nothing
// to judge.
//
// Returning true asks for a retry, which is made within the bounds that
// keep it safe and bounded (see [WithRetries]: the count, a replayable
// request, an idempotent one after a transport error, the retry budget,
// MaxWait and the deadline); when it is not made, the caller gets what the
// attempt obtained. For a response, the policy is the judge of whether the
// request may be sent twice: returning true retries a POST (resp.Request
// is the request sent, when the base transport sets it, as net/http's
// does). Returning a non-nil error ends the request with that error unless
// a retry is made, as in go-retryablehttp: the response, if any, is
// drained and closed, and the caller gets the error alone.
//
// Call DefaultRetryPolicy from policy to change only some decisions (see
// the example). policy runs on the request's goroutine; it must be safe for
// concurrent use and must not close or consume resp.Body unless it returns
// an error.
//
// A policy is a function rather than an interface, as go-retryablehttp's
// CheckRetry is and failsafe-go's HandleIf is: the decision needs nothing
// but the attempt's result, and a function value composes by wrapping.
func WithRetryPolicy(policy func(ctx context.Context, resp *http.Response, err error) (bool, error)) Option {
	if policy == nil {
		panic("pacer: WithRetryPolicy(nil)")
	}
	return func(c *config) { c.retryPolicy = policy }
}

// WithPrepareRetry calls prepare on every retry's request before it is
// sent, as go-retryablehttp's PrepareRetry: to sign it again (AWS SigV4,
// HMAC schemes with a timestamp or nonce), refresh a token or set a header
// that counts attempts. The default is none: a retry is an exact copy of
// the request.
//
// r is a clone of the caller's request with a fresh body from GetBody, made
// once the endpoint's limiter has admitted the retry, just before it is
// sent: a signature's timestamp is as fresh as it can be. prepare may
// change r's headers and URL; if it replaces r.Body it closes the body it
// replaces. The caller's request is never touched. An error ends the request
// with that error, unsent, and r's body is closed.
func WithPrepareRetry(prepare func(r *http.Request) error) Option {
	if prepare == nil {
		panic("pacer: WithPrepareRetry(nil)")
	}
	return func(c *config) { c.prepareRetry = prepare }
}

// DefaultRetryPolicy is the Transport's retry policy unless
// [WithRetryPolicy] replaces it: it asks for a retry of a throttled
// response (429, 503, Anthropic's 529, a 403 with an exhausted
// X-RateLimit-Remaining or a Retry-After, a 403 or 429 whose body states a
// secondary rate limit) unless the server says x-should-retry: false or
// Stripe-Should-Retry: false. It never retries a transport error (the
// request may have reached the server, and the limiter learnt nothing), a
// quota gone for good (OpenAI's insufficient_quota and billing errors), nor
// a request larger than the whole limit that refused it (an OpenAI-style
// message's "Requested" beyond its "Limit", as Groq sends it): waiting
// cannot help either. It never returns an error.
//
// A request that is not idempotent (a POST, a PATCH without an idempotency
// key) is retried only when the response says the server did not act on it:
// a rate-limit refusal (429, 529 or a rate-limited 403: a limiter answers
// before the request's work starts, which is why OpenAI's, Anthropic's and
// GitHub's clients retry them), or x-should-retry: true. A 503 may come from
// a proxy after the work began, so a POST that meets one is returned, not
// sent again.
//
// Within a Transport's policy, it reuses the Transport's reading of the
// response; called elsewhere, it reads the headers and, for a 403 or 429,
// up to 4 KiB of the body, which it puts back byte for byte.
func DefaultRetryPolicy(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if err != nil || resp == nil {
		return false, nil
	}
	v, ok := ctx.Value(verdictKey{}).(verdict)
	if !ok || v.resp != resp {
		var m response.Meaning
		response.Read(&m, resp, time.Now(), capsOf(DefaultMaxDelay), nil)
		v = verdict{req: resp.Request, resp: resp, throttled: m.Throttled}
	}
	return retryThrottled(v.req, resp, v.throttled), nil
}

// refusedUnacted reports whether a throttled response with this status says
// the server refused the request before acting on it: a rate limiter's
// answer (429, a rate-limited 403) or Anthropic's 529, which the API sends
// when it is too overloaded to start.
func refusedUnacted(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusForbidden || status == response.StatusOverloaded
}

// The server's word on a retry: OpenAI's and Anthropic's x-should-retry,
// Stripe's Stripe-Should-Retry.
const (
	serverSaysNothing = iota
	serverSaysNo
	serverSaysYes
)

// serverSays returns the server's word on retrying resp's request, if any.
func serverSays(resp *http.Response) int {
	if resp == nil {
		return serverSaysNothing
	}
	for _, h := range [...]string{"X-Should-Retry", "Stripe-Should-Retry"} {
		switch v := strings.TrimSpace(resp.Header.Get(h)); {
		case strings.EqualFold(v, "false"):
			return serverSaysNo
		case strings.EqualFold(v, "true"):
			return serverSaysYes
		}
	}
	return serverSaysNothing
}

// mayReplay reports whether req may be sent again after the attempt that
// got resp (nil after a transport error), once the policy asked for it: its
// body can be replayed, and after a transport error, which no response
// explains and the policy cannot see the method of, it is idempotent.
func mayReplay(req *http.Request, resp *http.Response) bool {
	return replayable(req) && (resp != nil || idempotent(req))
}

// replayable reports whether req's body can be sent again.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// idempotent reports whether sending req twice has the effect of sending it
// once (RFC 9110 section 9.2.2), by method or by an idempotency key.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return req.Header.Get("Idempotency-Key") != "" || req.Header.Get("X-Idempotency-Key") != ""
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
